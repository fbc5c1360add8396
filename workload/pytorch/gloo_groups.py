"""The process group of each gloo collective, from the threads that ran it and the ranks that ran it.

gloo records no process group: neither ``c10d::allreduce_`` (its group is an opaque ``<Object>``
argument) nor ``gloo:all_reduce`` nor Kineto's args name it. But every gloo process group runs
its collectives on worker threads of its own, started when the group is made, and groups are made
in order (the world first, then each ``new_group`` in its number order, on every rank that is a
member). So on one rank, ordered by thread id, the threads that ran collectives fall into
consecutive runs, one per group of the rank (a run may be empty: a group with no collective in
the step). And the ranks that ran a collective tell the rest: every member of a group runs the
group's collectives, the same kinds and sizes in the same order.

Each rank's possible splits of its threads are enumerated; a split survives while every group it
gives collectives to is matched, member by member, by a surviving split of every other member.
Threads with consecutive ids were started together, by one group, so no split separates them.
Where the ranks share a clock (one machine), the members' records of one collective must overlap in
time too: no member ends a collective before every other member has started it. (Two tensor-parallel
pairs each all-reducing once, on 4 ranks, are as consistent with one all-reduce of the world by
kinds and sizes; the pairs ran theirs 3 ms apart.)
Of the splits that survive, the one that uses the most groups is taken (the world alone is always
consistent when every rank runs the same collectives, which says nothing). Where no split
survives, or two that use as many groups disagree, the collectives stay the world's and the
converter's warning says so; the cross-rank check then refuses what cannot pair up.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from chakra_proto.attrs import attr_string
from workload.pytorch.groups import ProcessGroups
from workload.pytorch.rank_graph import RankGraph

_MAX_OPTIONS = 4096


#: how far apart two records may seem on one clock and still be one collective (Kineto's microseconds)
_CLOCK_SLACK_NS = 1_000


def assign_gloo_groups(rank_graphs: list[RankGraph], groups: ProcessGroups, one_clock: bool = False) -> int:
    """Give the collectives that name no group the group their thread belongs to (in place);
    ``one_clock``: the ranks' traces share a clock, so a collective's records must overlap.
    Returns how many collectives were placed in a group other than the world."""
    if not groups.non_world():
        return 0
    world = len(rank_graphs)
    order = ["__world__", *groups.non_world()]                     # creation order: ids 1, 2, ...
    members = {"__world__": list(range(world)), **{g: groups.members[g] for g in groups.non_world()}}
    options: dict[int, list[_Split]] = {}
    for rg in rank_graphs:
        recs = [c for c in rg.comms if c.group is None]
        if not recs or any(c.thread is None for c in recs):
            return 0                                  # not a host backend's trace throughout
        mine = [g for g in order if rg.rank in members[g]]
        threads = sorted({c.thread for c in recs}, key=_tid)
        opts = []
        for split in _splits(threads, len(mine)):
            if len(opts) >= _MAX_OPTIONS:
                break
            of_thread = {t: mine[i] for t, i in split.items()}
            seqs = {g: tuple((c.kind, c.size) for c in recs if of_thread[c.thread] == g) for g in mine}
            spans = {g: tuple(c.span if one_clock else None for c in recs if of_thread[c.thread] == g) for g in mine}
            opts.append(_Split(of_thread, seqs, spans))
        options[rg.rank] = opts
    changed = True
    while changed:
        changed = False
        for r, opts in options.items():
            kept = [o for o in opts if all(any(p.seqs.get(g) == seq and _together(o.spans[g], p.spans[g])
                                               for p in options[m])
                                           for g, seq in o.seqs.items() for m in members[g] if m != r)]
            if len(kept) != len(opts):
                options[r], changed = kept, True
    placed = 0
    chosen: dict[int, dict] = {}
    for r, opts in options.items():
        if not opts:
            return 0
        used = max(o.groups_used for o in opts)
        best = {tuple(sorted(o.of_thread.items())): o for o in opts if o.groups_used == used}
        if len(best) > 1:
            return 0
        chosen[r] = next(iter(best.values())).of_thread
    for rg in rank_graphs:
        for c in rg.comms:
            if c.group is not None:
                continue
            g = chosen[rg.rank][c.thread]
            if g == "__world__":
                continue
            c.group = g
            rg.b.nodes[c.node_id].attr.append(attr_string("pg_name", groups.pg_attr(g)))
            placed += 1
        rg.stats.no_group = 0           # every one is placed, the world's too
    return placed


@dataclass(frozen=True)
class _Split:
    """One way to give a rank's threads to its groups, and the collectives each group then runs."""

    of_thread: dict[tuple, str]
    seqs: dict[str, tuple]
    spans: dict[str, tuple]   # each collective's (start, end) on the shared clock, or None


    @property
    def groups_used(self) -> int:
        return sum(1 for seq in self.seqs.values() if seq)


def _together(mine: tuple, theirs: tuple) -> bool:
    """Whether each collective's records on two ranks overlap in time (as they must: neither rank
    ends it before the other starts it), where both were measured on one clock."""
    return all(a is None or b is None or (a[0] <= b[1] + _CLOCK_SLACK_NS and b[0] <= a[1] + _CLOCK_SLACK_NS)
               for a, b in zip(mine, theirs))


def _tid(thread: tuple) -> tuple:
    try:
        return (0, int(thread[-1]))
    except (TypeError, ValueError):
        return (1, str(thread))


def _splits(threads: list[tuple], groups: int):
    """Each way to cut the threads (in id order) into ``groups`` consecutive runs, some empty, never
    between two threads with consecutive ids; as {thread: run index}."""
    n = len(threads)
    for cuts in itertools.combinations_with_replacement(range(n + 1), groups - 1):
        if any(0 < c < n and _tid(threads[c])[0] == 0 and _tid(threads[c])[1] - _tid(threads[c - 1])[1] <= 1
               for c in cuts):
            continue
        bounds = (0, *cuts, n)
        yield {threads[k]: i for i in range(groups) for k in range(bounds[i], bounds[i + 1])}
