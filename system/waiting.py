"""When a rank's communication really begins: waiting for a peer is not communication.

A receive is posted when its node is issued, but nothing can move before the matching send is
issued on the peer; a collective is entered when its node is issued, but it cannot progress
past the first step before the last member of its group has entered too. Until then the rank
waits (a pipeline bubble, a straggler), and the report counts that time as waiting, part of
idle, not as communication (docs/results.md).

Pairing mirrors the simulator's own: the n-th receive on rank d from rank s with a tag and a
size pairs with the n-th send from s to d with that tag and size (network/analytical/base.py;
tags folded as Sys.native_send folds them); the n-th collective a rank issues on a group
pairs with the n-th every other member issues on it (its peers: the communicator group, or
the ranks that differ from it only in the dimensions it involves).
"""
from __future__ import annotations

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from system.sys import COLLECTIVE_TAG_OFFSET, NATIVE_TAG_OFFSET

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

_TAG_SPAN = COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET


_KINDS = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.COMM_COLL_NODE)


def _issued(workload: Any) -> dict[int, list[Any]]:
    """The rank's send, receive and collective nodes, each in the order it issued them
    (``starts`` keeps that order); one pass over the rank's nodes."""
    nodes = workload.graph.nodes
    out: dict[int, list[Any]] = {k: [] for k in _KINDS}
    for nid in workload.starts:
        n = nodes[nid]
        lst = out.get(n.type)
        if lst is not None:
            lst.append(n)
    return out


def _same(x: Any) -> Any:
    return x


def _peer(workload: Any) -> Any:
    """Rank relabelling for a view of another rank's workload (simulation.RankView in an orbit run)."""
    return getattr(workload, "peer", _same)


def _peer_key(workload: Any, node: Any) -> tuple:
    """What names the set of ranks a collective runs among, the same on every member."""
    if node.pg_name not in (None, "", "0"):
        return ("pg", getattr(workload, "group", _same)(int(node.pg_name)))
    dims = workload.sys.physical_dims
    inv = node.involved_dim
    fixed = []
    rest = workload.rank
    for i, size in enumerate(dims):
        coord, rest = rest % size, rest // size
        if inv is not None and i < len(inv) and not inv[i]:
            fixed.append((i, coord))  # a dimension it does not involve: peers share this coordinate
    return ("dims", tuple(fixed))


def communication_starts(workloads: Sequence[Any], symmetric: bool = False) -> list[dict[int, int]]:
    """Per rank (in ``workloads`` order): node id → the time its communication began, for the
    receives and collectives that waited for a peer (the others began when issued). A symmetric
    run has every rank do the same at the same time, so nobody waits. (One pass over each rank's
    issued nodes gathers its sends, receives and collectives in issue order; a second pairs them.)"""
    out: list[dict[int, int]] = [{} for _ in workloads]
    if symmetric or len(workloads) < 2:
        return out
    coll, send, recv, broadcast = pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.BROADCAST
    sends: dict[tuple, list[int]] = {}  # (src, dst, tag, size) → the issue times of its sends, in order
    last: dict[tuple, int] = {}  # collective instance → its last member's entry time
    # per rank: its receives (node, issued) and its collectives (node id, issued, instance)
    mine: list[tuple[list, list]] = []
    for w in workloads:
        nodes, rank, peer = w.graph.nodes, w.rank, _peer(w)
        recvs: list[tuple[Any, int]] = []
        colls: list[tuple[int, int, tuple]] = []
        seq: dict[tuple, int] = {}
        keys: dict[tuple, tuple] = {}  # (pg, involved dims) → peer key: a few per rank
        for nid, t in w.starts.items():  # issue order
            n = nodes[nid]
            kind = n.type
            if kind == coll:
                if n.comm_type == broadcast:  # replayed for its duration: it couples nobody
                    continue
                inv = n.involved_dim
                where = (n.pg_name, None if inv is None else tuple(inv))
                key = keys.get(where)
                if key is None:
                    key = keys[where] = _peer_key(w, n)
                k = seq[key] = seq.get(key, -1) + 1
                inst = (key, k)
                if t > last.get(inst, -1):
                    last[inst] = t
                colls.append((nid, t, inst))
            elif kind == send:
                sends.setdefault((rank, peer(n.comm_dst), n.comm_tag % _TAG_SPAN, n.comm_size), []).append(t)
            elif kind == recv:
                recvs.append((n, t))
        mine.append((recvs, colls))
    for w, (recvs, colls), begun in zip(workloads, mine, out):
        ends: dict[int, int] | None = None  # node id → its end, made where a node waited
        peer, rank = _peer(w), w.rank
        seen: dict[tuple, int] = {}
        for n, t in recvs:
            key = (peer(n.comm_src), rank, n.comm_tag % _TAG_SPAN, n.comm_size)
            k = seen[key] = seen.get(key, -1) + 1
            times = sends.get(key, ())
            if k < len(times) and times[k] > t:
                if ends is None:
                    ends = {nid: e for nid, _, e in w.records}
                begun[n.id] = min(times[k], ends.get(n.id, times[k]))
        for nid, t, inst in colls:
            ready = last[inst]
            if ready > t:
                if ends is None:
                    ends = {i: e for i, _, e in w.records}
                begun[nid] = min(ready, ends.get(nid, ready))
    return out


def _later(starts: dict[int, int], nid: int, issued: int, ready: int, ends: dict[int, int]) -> None:
    if ready > issued:
        starts[nid] = min(ready, ends.get(nid, ready))


def orbit_communication_starts(workloads: Sequence[Any], orbits: Any) -> list[dict[int, int]]:
    """``communication_starts`` of an orbit run (system/shortcuts/orbits.py), from the
    representatives alone: rank x = g(r) waits as r does (one dict, shared), and a peer
    x = h(ρ) issues its sends and collectives when ρ issues their images under h^-1, so each
    pairing reads ρ's own times. Where every view would cost a pass over its nodes, this costs
    one per representative and one per member of a representative's groups."""
    reps = orbits.reps
    by_rank = {w.rank: w for w in workloads if getattr(w, "viewed", w) is w}
    issued = {r: _issued(by_rank[r]) for r in reps}
    sends: dict[int, dict[tuple, list[int]]] = {}
    colls: dict[int, dict[tuple[int, int], int]] = {}
    for r in reps:
        w = by_rank[r]
        mine: dict[tuple, list[int]] = {}
        for n in issued[r][pb.COMM_SEND_NODE]:
            mine.setdefault((n.comm_dst, n.comm_tag % _TAG_SPAN, n.comm_size), []).append(w.starts[n.id])
        sends[r] = mine
        seq: dict[int, int] = {}
        arr: dict[tuple[int, int], int] = {}
        for n in issued[r][pb.COMM_COLL_NODE]:
            if n.comm_type == pb.BROADCAST:
                continue
            g = int(n.pg_name)
            k = seq[g] = seq.get(g, -1) + 1
            arr[(g, k)] = w.starts[n.id]
        colls[r] = arr
    images: dict[int, set[tuple[int, int]]] = {}  # group → (representative, group) of its members' images

    def members_as_images(g: int) -> set[tuple[int, int]]:
        got = images.get(g)
        if got is None:
            got = images[g] = set()
            for y in orbits.members(g):
                back = orbits.inverse(orbits.power[y])
                got.add((orbits.rep_of[y], orbits.group_image(back, g)))
        return got

    own: dict[int, dict[int, int]] = {}
    for r in reps:
        w = by_rank[r]
        out: dict[int, int] = {}
        ends = {nid: e for nid, _, e in w.records}
        seen: dict[tuple, int] = {}
        for n in issued[r][pb.COMM_RECV_NODE]:
            s = n.comm_src
            rho = orbits.rep_of[s]
            back = orbits.inverse(orbits.power[s])
            key = (orbits.rank(back, r), n.comm_tag % _TAG_SPAN, n.comm_size)
            k = seen[(s,) + key[1:]] = seen.get((s,) + key[1:], -1) + 1
            times = sends[rho].get(key, ())
            if k < len(times):
                _later(out, n.id, w.starts[n.id], times[k], ends)
        seq: dict[int, int] = {}
        for n in issued[r][pb.COMM_COLL_NODE]:
            if n.comm_type == pb.BROADCAST:
                continue
            g = int(n.pg_name)
            k = seq[g] = seq.get(g, -1) + 1
            last = max(colls[rho].get((h, k), -1) for rho, h in members_as_images(g))
            _later(out, n.id, w.starts[n.id], last, ends)
        own[r] = out
    return [own[orbits.rep_of[w.rank]] for w in workloads]
