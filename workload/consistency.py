"""Checks across ranks, before simulation: the peers of a collective must agree on it.

Every rank of a communicator runs each of its collectives. When one rank's file has a
collective of another size or type, or one collective more, the run can only end stuck (exit
3) after simulating everything before it, or, where the messages happen to pair up (sizes
below the chunk minimum), finish with an answer that means nothing. Comparing what each rank
runs is cheap (one pass over each distinct file), so we compare up front and name both ranks,
both files and the nodes.

Only the multiset is compared: ranks may list the same collectives under other node ids, or in
another id order that their dependencies put right. BROADCAST is replayed locally (no messages),
so it is left out; so are groups defined only inside the ET (METADATA nodes).
"""
from __future__ import annotations

from collections import Counter

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from workload.errors import WorkloadError
from workload.graph import COLL_TYPES, Graph, Node

_WORLD = ("", "0")


def check_collectives_agree(graphs: list[Graph], groups: dict[int, list[int]] | None = None) -> None:
    """Raise WorkloadError if two members of a communicator (the world, or a group of ``groups``)
    run different collectives. ``graphs[r]`` is rank r's graph; ranks may share one object."""
    per_graph: dict[int, dict[str, list[Node]]] = {}
    for g in graphs:
        if id(g) not in per_graph:
            per_graph[id(g)] = _collectives_by_group(g)
    _check_membership(graphs, groups or {}, per_graph)
    if len(per_graph) <= 1:
        return  # every rank runs the same file
    communicators = [("world", "", list(range(len(graphs))))]
    for gid, members in sorted((groups or {}).items()):
        communicators.append((f"communicator group {gid}", str(gid), list(members)))
    for label, pg, members in communicators:
        _compare(label, pg, members, graphs, per_graph)


def _check_membership(graphs: list[Graph], groups: dict[int, list[int]],
                      per_graph: dict[int, dict[str, list[Node]]]) -> None:
    """A rank may run a group's collective only if the group lists it."""
    for r, g in enumerate(graphs):
        for pg, nodes in per_graph[id(g)].items():
            members = groups.get(int(pg)) if pg.isdigit() else None
            if members is not None and r not in members:
                raise WorkloadError(
                    g.path, nodes[0].describe(),
                    f"rank {r} runs a collective of communicator group {pg}, but the group's ranks are "
                    f"{_ranks(members)}; add rank {r} to the group or give the node another pg_name",
                )


def _ranks(members: list[int]) -> str:
    shown = ", ".join(map(str, members[:8]))
    return shown + (f" and {len(members) - 8} more" if len(members) > 8 else "")


def _collectives_by_group(g: Graph) -> dict[str, list[Node]]:
    """pg name ('' for the world) → the graph's networked collectives in node-id order."""
    out: dict[str, list[Node]] = {}
    for nid in g.order:
        n = g.nodes[nid]
        if n.type != pb.COMM_COLL_NODE or n.comm_type == pb.BROADCAST:
            continue
        pg = "" if n.pg_name in _WORLD else _normal(n.pg_name)
        out.setdefault(pg, []).append(n)
    return out


def _normal(pg_name: str) -> str:
    try:
        return str(int(pg_name))
    except ValueError:
        return pg_name


def _key(n: Node) -> tuple[int, int]:
    return n.comm_type, n.comm_size


def _compare(label: str, pg: str, members: list[int], graphs: list[Graph],
             per_graph: dict[int, dict[str, list[Node]]]) -> None:
    """Compare every member with the lowest rank of the majority, so the odd one is named."""
    signature: dict[int, frozenset] = {}  # graph id → multiset of (type, size)
    votes: Counter = Counter()
    for r in members:
        key = id(graphs[r])
        if key not in signature:
            signature[key] = frozenset(Counter(map(_key, per_graph[key].get(pg, []))).items())
        votes[signature[key]] += 1
    if len(votes) == 1:
        return
    top = max(votes.values())
    ref_rank = next(r for r in members if votes[signature[id(graphs[r])]] == top)
    ref_sig = signature[id(graphs[ref_rank])]
    ref = per_graph[id(graphs[ref_rank])].get(pg, [])
    for r in members:
        if signature[id(graphs[r])] != ref_sig:
            mine = per_graph[id(graphs[r])].get(pg, [])
            _disagree(label, ref_rank, ref, graphs[ref_rank], r, mine, graphs[r])


def _disagree(label: str, r0: int, ref: list[Node], g0: Graph, r: int, mine: list[Node], g: Graph) -> None:
    """Name the first position (in node-id order) where the two ranks' collectives differ."""
    for i, (a, b) in enumerate(zip(ref, mine)):
        if _key(a) != _key(b):
            raise WorkloadError(
                g.path, b.describe(),
                f"rank {r}'s {_ordinal(i + 1)} {label} collective is {_what(b)} but rank {r0}'s is {_what(a)} "
                f"({g0.path}, node {a.id}); every member of a collective must run it with the same type and size",
            )
    if len(mine) > len(ref):
        extra = mine[len(ref)]
        raise WorkloadError(
            g.path, extra.describe(),
            f"rank {r} runs {len(mine)} {label} collective(s) but rank {r0} ({g0.path}) runs {len(ref)}; "
            f"rank {r}'s {_ordinal(len(ref) + 1)} ({_what(extra)}) has no counterpart there",
        )
    missing = ref[len(mine)]
    raise WorkloadError(
        g.path, "",
        f"rank {r} runs {len(mine)} {label} collective(s) but rank {r0} ({g0.path}) runs {len(ref)}; "
        f"rank {r0}'s {_ordinal(len(mine) + 1)} (node {missing.id}: {_what(missing)}) has no counterpart here",
    )


def _what(n: Node) -> str:
    return f"{COLL_TYPES.get(n.comm_type, n.comm_type)} of {n.comm_size} B"


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"
