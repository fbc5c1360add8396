"""One collective across its ranks: the same instance on every rank, and what was measured of it.

Every member of a process group runs the group's collectives in the same order (each backend
queues them first in, first out), so the k-th collective of a kind in a group on one rank is the
k-th on every other member. Across ranks an instance gives:

* the size of a sparse all-reduce (sent as an all-gather, workload/sparse_tensors.py), which differs per rank:
  every rank gets the mean, so the simulated all-gather moves the bytes the ranks sent;
* the collective's time (collective_time): on one machine, whose ranks share a clock, from the
  moment the last rank joined it to the moment the last rank left it (what the step pays, the
  slowest rank's worker thread included); across machines, whose clocks differ, the shortest span
  over the ranks (the last to arrive waited for no one);
* the time of a broadcast, which the simulator replays locally (it sends no messages);
* the measurements that the network fit takes (network_fit.py): the dense collectives of the world
  and of every group whose members all measured them, with the last arrival on the shared clock
  (which collectives overlapped: busy periods). A
  sparse all-reduce is left out: gloo merges what it gathers on its worker thread (coalescing,
  sorting, summing), 10-30 times the time of a dense all-reduce of the same bytes on the traces we
  have, which is not the network's time.
"""
from __future__ import annotations

import math

from chakra_proto.attrs import attr_uint64
from workload.pytorch.groups import ProcessGroups
from workload.pytorch.network_fit import Measurement
from workload.pytorch.rank_graph import RECV, SEND, CommRecord, RankGraph

Instance = dict[int, CommRecord]      # rank -> its record of the collective
_FITTED = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")


def align_instances(rank_graphs: list[RankGraph]) -> list[Instance]:
    """The collectives of all ranks, each instance with every rank's record of it."""
    by_key: dict[tuple, Instance] = {}
    order: list[tuple] = []
    for rg in rank_graphs:
        seen: dict[tuple, int] = {}
        for rec in rg.comms:
            base = (rec.group or "", rec.kind)
            k = seen.get(base, 0)
            seen[base] = k + 1
            key = (*base, k)
            if key not in by_key:
                by_key[key] = {}
                order.append(key)
            by_key[key][rg.rank] = rec
    return [by_key[k] for k in order]


def harmonise_sparse(rank_graphs: list[RankGraph], instances: list[Instance]) -> None:
    for inst in instances:
        if not any(rec.sparse for rec in inst.values()):
            continue
        size = math.ceil(sum(rec.size for rec in inst.values()) / len(inst))
        for r, rec in inst.items():
            rec.size = size
            node = rank_graphs[r].b.nodes[rec.node_id]
            for a in node.attr:
                if a.name == "comm_size":
                    a.int64_val = size


def collective_time(inst: Instance, one_clock: bool) -> int | None:
    """How long the collective took once every rank had joined it: from the last rank's start to
    the last rank's end where the ranks share a clock (one machine), else the shortest span over
    the ranks (the last to arrive waited for no one); None unless every rank measured it."""
    recs = list(inst.values())
    if not recs or any(r.measured_ns is None for r in recs):
        return None
    if one_clock and all(r.span is not None for r in recs):
        return max(0, max(r.span[1] for r in recs) - max(r.span[0] for r in recs))
    return min(r.measured_ns for r in recs)


def replay_broadcasts(rank_graphs: list[RankGraph], instances: list[Instance], one_clock: bool) -> None:
    for inst in instances:
        ns = collective_time(inst, one_clock)
        if ns is None or next(iter(inst.values())).kind != "BROADCAST":
            continue
        for r, rec in inst.items():
            node = rank_graphs[r].b.nodes[rec.node_id]
            node.duration_micros = ns // 1000
            if ns % 1000:
                node.attr.append(attr_uint64("duration_ns", ns))


def world_measurements(rank_graphs: list[RankGraph], instances: list[Instance],
                       groups: ProcessGroups, one_clock: bool) -> list[Measurement]:
    """Each dense collective measured on every member of its group: its size, its group's ranks
    (None: the world) and its time (collective_time). A job whose only collectives are on groups
    (tensor- and data-parallel pairs) is fitted from those."""
    world = len(rank_graphs)
    out = []
    for inst in instances:
        rec = next(iter(inst.values()))
        members = None if groups.pg_attr(rec.group) is None else tuple(sorted(groups.members[rec.group]))
        if (rec.kind not in _FITTED or len(inst) != (world if members is None else len(members))
                or any(r.sparse for r in inst.values())):
            continue
        ns = collective_time(inst, one_clock)
        if ns and len({r.size for r in inst.values()}) == 1:
            spans = [r.span for r in inst.values()]
            start = max(sp[0] for sp in spans) if one_clock and None not in spans else None
            out.append(Measurement(rec.kind, rec.size, ns, start, members))
    return out


def p2p_measurements(rank_graphs: list[RankGraph], one_clock: bool) -> list[Measurement]:
    """Each send measured with its receive, where the ranks share a clock: the n-th send from s to
    d with a tag and size pairs with the n-th such receive on d (as the simulator pairs them), and
    the transfer runs from the later of the two records' starts to the receive's end. A pipeline
    passes its activations and gradients this way, with no collective to fit the network to."""
    if not one_clock:
        return []
    sends: dict[tuple, list] = {}
    recvs: dict[tuple, list] = {}
    for rg in rank_graphs:
        for rec in rg.p2p:
            (sends if rec.kind == SEND else recvs).setdefault((rec.src, rec.dst, rec.tag, rec.size), []).append(rec)
    out = []
    for key, mine in sends.items():
        for s, r in zip(mine, recvs.get(key, ())):
            if s.span is None or r.span is None:
                continue
            start = max(s.span[0], r.span[0])
            if r.span[1] > start:
                out.append(Measurement("SEND_RECV", key[3], r.span[1] - start, start, (key[0], key[1])))
    return out

