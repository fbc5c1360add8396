"""The physical plan of a topology: which nodes exist and which point-to-point links join them.

Pure Python (no ns-3), so it can be tested without the package. Nodes 0..N−1 are the NPUs
(ns-3 node id = rank); each Switch group adds one router node after them. For every dimension,
each group of NPUs that differ only in that coordinate is wired by the dimension's block:

* Ring: a link between ring neighbours i and i+1 (mod n); a ring of 2 is one link.
* FullyConnected: a link per pair.
* Switch: a router node with a link to each member.

Links are full duplex (ns-3 point-to-point), carry the dimension's bandwidth and latency, and
the order of the list is deterministic (dimension, group, member).
"""
from __future__ import annotations

from dataclasses import dataclass

from network.topology import Topology, TopologyKind

_GB = 1 << 30  # as on the analytical side (network/units.py)


def link_rate_bps(bandwidth_gb_s: float) -> int:
    """YAML GB/s → ns-3 DataRate in bits/s, with the analytical backends' GB = 2^30 bytes, so
    that a link serialises a byte in the same time on every backend."""
    return round(bandwidth_gb_s * _GB * 8)


@dataclass(frozen=True, slots=True)
class Link:
    """One full-duplex point-to-point link of dimension ``dim`` between nodes ``a`` and ``b``."""

    a: int
    b: int
    dim: int


@dataclass(frozen=True, slots=True)
class Wiring:
    nodes_count: int  # NPUs first, then one router per Switch group
    links: tuple[Link, ...]


def dimension_groups(topology: Topology, dim: int) -> list[list[int]]:
    """The NPU ranks of each group of dimension ``dim``, members in coordinate order."""
    stride = 1
    for d in topology.dims[:dim]:
        stride *= d.npus_count
    n = topology.dims[dim].npus_count
    return [
        [base + i * stride for i in range(n)]
        for base in range(topology.npus_count)
        if (base // stride) % n == 0
    ]


def wire(topology: Topology) -> Wiring:
    links: list[Link] = []
    next_node = topology.npus_count
    for dim, d in enumerate(topology.dims):
        for members in dimension_groups(topology, dim):
            n = len(members)
            if d.kind is TopologyKind.RING:
                pairs = [(members[i], members[(i + 1) % n]) for i in range(n if n > 2 else 1)]
            elif d.kind is TopologyKind.FULLY_CONNECTED:
                pairs = [(members[i], members[j]) for i in range(n) for j in range(i + 1, n)]
            else:  # SWITCH
                router, next_node = next_node, next_node + 1
                pairs = [(m, router) for m in members]
            links.extend(Link(a, b, dim) for a, b in pairs)
    return Wiring(next_node, tuple(links))
