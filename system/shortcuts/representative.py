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

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from system.config import CONFIG_NAMES, ImplType, SystemConfig
from system.shortcuts.decline import Decline

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Sequence

_SYMMETRIC_IMPLS = {ImplType.RING, ImplType.DIRECT, ImplType.HALVING_DOUBLING,
                    ImplType.ONE_RING, ImplType.ONE_DIRECT, ImplType.ONE_HALVING_DOUBLING}


def _canonical(graph: Any) -> tuple:
    """The graph's timing-relevant content with node ids replaced by issue-order positions;
    Decline where the graph holds what one representative cannot stand for."""
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
                raise Decline(f"{graph.path}: node {nid} runs on communicator group {n.pg_name}")
            inv = None if n.involved_dim is None else tuple(n.involved_dim)
            out.append((n.type, n.comm_type, n.comm_size, n.comm_priority, inv, n.duration_ns,
                        tuple(sorted(pos[p] for p in n.parents))))
        else:
            raise Decline(f"{graph.path}: node {nid} is a {pb.NODE_TYPE_NAMES.get(n.type, n.type)}, which "
                          "one representative cannot stand for (only compute and world collectives)")
    return tuple(out)


def symmetry_group(graphs: Sequence[Any], config: SystemConfig, dim_sizes: Sequence[int], backend_name: str,
                   dim_kinds: Sequence[str] | None = None) -> tuple[bool, ...] | None:
    """None when the run is not symmetric; else what ``prove`` returns."""
    try:
        return prove(graphs, config, dim_sizes, backend_name, dim_kinds)
    except Decline:
        return None


def prove(graphs: Sequence[Any], config: SystemConfig, dim_sizes: Sequence[int], backend_name: str,
          dim_kinds: Sequence[str] | None = None) -> tuple[bool, ...]:
    """Per dimension whether rank x maps rank 0's coordinate by XOR (halving-doubling) rather
    than by a translation (``dim_kinds``: the topology's "Ring" / "Switch" / "FullyConnected",
    needed for the congestion-aware backend); Decline, with the reason, when the run is not
    symmetric."""
    dims_count = len(dim_sizes)
    aware = backend_name == "congestion-aware" and dim_kinds is not None
    if not (aware or backend_name == "congestion-unaware"):
        raise Decline(f"the {backend_name} backend has no representative-rank form")
    if config.per_node_custom or config.replay_only:
        raise Decline("per-node custom collectives or replay-only configuration")
    first = graphs[0]
    canon = _canonical(first)
    seen = {id(first)}
    for r, g in enumerate(graphs[1:], 1):
        if id(g) in seen:
            continue
        seen.add(id(g))
        if _canonical(g) != canon:
            raise Decline(f"rank {r}'s graph ({g.path}) differs from rank 0's")
    xor: list[set[bool]] = [set() for _ in dim_sizes]
    used = {n.comm_type for n in first.nodes.values() if n.type == pb.COMM_COLL_NODE}
    for ct in used & set(CONFIG_NAMES):
        name = CONFIG_NAMES[ct]
        if name in config.custom_implementations:
            raise Decline(f"{name} runs a custom collective")
        impls = config.impls_for(name)
        if not impls or any(i.type not in _SYMMETRIC_IMPLS for i in impls):
            raise Decline(f"'{name}-implementation' holds an algorithm whose ranks differ "
                          f"({', '.join(i.type.value for i in impls) or 'none'})")
        if dims_count > 1 and any(i.type.is_one for i in impls):
            raise Decline(f"'{name}-implementation' has a one* ring across the dimensions")
        for d, i in enumerate(impls[:dims_count]):
            hd = i.type in (ImplType.HALVING_DOUBLING, ImplType.ONE_HALVING_DOUBLING)
            if hd and dim_sizes[d] & (dim_sizes[d] - 1):
                raise Decline(f"halving-doubling on dimension {d} of {dim_sizes[d]} NPUs, not a power of two")
            xor[d].add(hd and dim_sizes[d] > 2)  # on 2 NPUs XOR and translation agree
    if not aware:
        return (False,) * dims_count
    for d, kinds in enumerate(xor):
        if len(kinds) > 1:
            raise Decline(f"dimension {d} mixes halving-doubling with translation-symmetric algorithms")
        if True in kinds and dim_kinds[d] == "Ring":
            raise Decline(f"halving-doubling on Ring dimension {d}: XOR pairs are no ring translation")
    return tuple(True in kinds for kinds in xor)
