"""Decide whether a run is symmetric, so that one representative NPU can stand for all.

A run qualifies when (issue 8, "symmetry is the big lever"):
* every rank's graph is the same up to node ids (same node kinds, timing attributes and
  dependency structure, in the same issue order);
* it holds only compute and world-wide collectives (ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER,
  ALL_TO_ALL, BROADCAST): no sends, receives, remote memory, metadata or communicator groups;
* every collective runs a translation- or reflection-symmetric algorithm on per-dimension
  rings (ring, direct, halvingDoubling), not a double binary tree (ranks differ), a custom
  collective, or a ``one*`` ring that crosses dimensions of a multi-dimensional network;
* the backend is congestion-unaware (no shared link state), or congestion-aware on Ring, Switch
  and FullyConnected dimensions (network/analytical/symmetric_aware.py: rank x's traffic is rank
  0's mapped by x, per dimension a translation, or an XOR where halving-doubling runs on a Switch or
  FullyConnected dimension; halving-doubling pairs by XOR, which is no ring translation, so it
  is refused on a Ring dimension of more than 2 NPUs, and so is mixing it with ring or direct on
  one dimension);
* no per-node custom implementations are configured.
Anything else runs on the general path, one Sys per rank. The fast path's results are checked
against the general path in tests/system/test_symmetry.py.
"""
from __future__ import annotations

from typing import Any, Sequence

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from system.config import ImplType, SystemConfig

_SYMMETRIC_IMPLS = {ImplType.RING, ImplType.DIRECT, ImplType.HALVING_DOUBLING,
                    ImplType.ONE_RING, ImplType.ONE_DIRECT, ImplType.ONE_HALVING_DOUBLING}
#: the collectives that run on the network, by the names the system config gives their implementations
CONFIG_NAMES = {pb.ALL_REDUCE: "all-reduce", pb.ALL_GATHER: "all-gather",
              pb.REDUCE_SCATTER: "reduce-scatter", pb.ALL_TO_ALL: "all-to-all"}


def _canonical(graph: Any) -> tuple | None:
    """The graph's timing-relevant content with node ids replaced by issue-order positions."""
    order = graph.order
    pos = {nid: i for i, nid in enumerate(order)}
    out = []
    for nid in order:
        n = graph.nodes[nid]
        if n.type == pb.COMP_NODE:
            out.append((n.type, n.is_cpu_op, n.duration_ns, n.num_ops, n.tensor_size,
                        tuple(sorted(pos[p] for p in n.parents))))
        elif n.type == pb.COMM_COLL_NODE:
            if n.pg_name not in ("", "0"):
                return None
            inv = None if n.involved_dim is None else tuple(n.involved_dim)
            out.append((n.type, n.comm_type, n.comm_size, n.comm_priority, inv, n.duration_ns,
                        tuple(sorted(pos[p] for p in n.parents))))
        else:
            return None
    return tuple(out)


def symmetry_group(graphs: Sequence[Any], config: SystemConfig, dim_sizes: Sequence[int], backend_name: str,
                   dim_kinds: Sequence[str] | None = None) -> tuple[bool, ...] | None:
    """None when the run is not symmetric; else per dimension whether rank x maps rank 0's
    coordinate by XOR (halving-doubling) rather than by a translation (``dim_kinds``: the
    topology's "Ring" / "Switch" / "FullyConnected", needed for the congestion-aware backend)."""
    dims_count = len(dim_sizes)
    aware = backend_name == "congestion-aware" and dim_kinds is not None
    if not (aware or backend_name == "congestion-unaware") or config.per_node_custom or config.replay_only:
        return None
    first = graphs[0]
    canon = _canonical(first)
    if canon is None:
        return None
    seen = {id(first)}
    for g in graphs[1:]:
        if id(g) in seen:
            continue
        seen.add(id(g))
        if _canonical(g) != canon:
            return None
    xor: list[set[bool]] = [set() for _ in dim_sizes]
    used = {n.comm_type for n in first.nodes.values() if n.type == pb.COMM_COLL_NODE}
    for ct in used & set(CONFIG_NAMES):
        name = CONFIG_NAMES[ct]
        if name in config.custom_implementations:
            return None
        impls = config.impls_for(name)
        if not impls or any(i.type not in _SYMMETRIC_IMPLS for i in impls):
            return None
        if dims_count > 1 and any(i.type.is_one for i in impls):
            return None
        for d, i in enumerate(impls[:dims_count]):
            hd = i.type in (ImplType.HALVING_DOUBLING, ImplType.ONE_HALVING_DOUBLING)
            if hd and dim_sizes[d] & (dim_sizes[d] - 1):
                return None  # recursive halving pairs are only symmetric on powers of two
            xor[d].add(hd and dim_sizes[d] > 2)  # on 2 NPUs XOR and translation agree
    if not aware:
        return (False,) * dims_count
    for d, kinds in enumerate(xor):
        if len(kinds) > 1 or (True in kinds and dim_kinds[d] == "Ring"):
            return None
    return tuple(True in kinds for kinds in xor)
