"""A physical network as a graph: nodes (NPUs and switches) joined by full-duplex links.

This is the one description every backend builds on when the network comes from a topology
file (network/topology_file.py) or a generator (network/topology_gen.py). Link ``i`` joins
``a`` and ``b``; its two directions are the directed links ``2i`` (a → b) and ``2i + 1``
(b → a). NPUs are the nodes that are not switches, rank r being the r-th of them in id order.

Link classes name where a link sits, so a report can say where the traffic goes: a node's tier
is its distance in links from the nearest NPU (NPUs 0, leaves 1, spines 2, cores 3), SimAI's
NVSwitches are their own kind, and a link's class joins its two ends' names, lower tier first:
``npu-leaf``, ``leaf-spine``, ``spine-core``, ``npu-nvswitch``, ``npu-npu``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cached_property

_TIER_NAMES = ("npu", "leaf", "spine", "core")


@dataclass(frozen=True, slots=True)
class GraphLink:
    a: int
    b: int
    bandwidth_gb_s: float  # the network YAML's unit: GB/s
    latency_ns: float
    error_rate: float = 0.0
    line: int = 0  # where it was read, for messages (0: generated)


@dataclass(frozen=True)
class PhysicalGraph:
    nodes_count: int
    switches: frozenset[int]
    nvswitches: frozenset[int] = frozenset()  # scale-up switches, a subset of ``switches``
    links: tuple[GraphLink, ...] = ()
    path: str | None = None

    @cached_property
    def npus(self) -> tuple[int, ...]:
        """Node id of each NPU rank."""
        return tuple(n for n in range(self.nodes_count) if n not in self.switches)

    @cached_property
    def adjacency(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per node: (neighbour, directed link id) for every link leaving it, in file order."""
        adj: list[list[tuple[int, int]]] = [[] for _ in range(self.nodes_count)]
        for i, link in enumerate(self.links):
            adj[link.a].append((link.b, 2 * i))
            adj[link.b].append((link.a, 2 * i + 1))
        return tuple(tuple(x) for x in adj)

    def directed_ends(self, directed: int) -> tuple[int, int]:
        link = self.links[directed >> 1]
        return (link.a, link.b) if directed % 2 == 0 else (link.b, link.a)

    def reachable_from(self, node: int) -> set[int]:
        return set(i for i, d in enumerate(self.bfs(node)) if d >= 0)

    def bfs(self, root: int, through_npus: bool = True) -> list[int]:
        """Hop distance from ``root`` to every node (-1: unreachable). Without ``through_npus``
        an NPU other than the root is reached but not gone through: NPUs are endpoints only, as
        in ASTRA-sim's and SimAI's ns-3 routing (only switches forward)."""
        dist = [-1] * self.nodes_count
        dist[root] = 0
        todo = deque([root])
        adj = self.adjacency
        switches = self.switches
        while todo:
            u = todo.popleft()
            if not through_npus and u != root and u not in switches:
                continue
            du = dist[u] + 1
            for v, _ in adj[u]:
                if dist[v] < 0:
                    dist[v] = du
                    todo.append(v)
        return dist

    @cached_property
    def tiers(self) -> tuple[int, ...]:
        """Distance of each node from the nearest NPU (NPUs 0)."""
        dist = [-1] * self.nodes_count
        todo = deque(self.npus)
        for n in self.npus:
            dist[n] = 0
        adj = self.adjacency
        while todo:
            u = todo.popleft()
            for v, _ in adj[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    todo.append(v)
        return tuple(dist)

    def node_kind(self, node: int) -> str:
        if node in self.nvswitches:
            return "nvswitch"
        t = self.tiers[node]
        return _TIER_NAMES[t] if 0 <= t < len(_TIER_NAMES) else f"tier{t}"

    @cached_property
    def link_classes(self) -> tuple[str, ...]:
        """The class of each (undirected) link, e.g. ``npu-leaf``."""
        out = []
        for link in self.links:
            a, b = sorted((link.a, link.b), key=lambda n: (self.tiers[n], n in self.nvswitches))
            out.append(f"{self.node_kind(a)}-{self.node_kind(b)}")
        return tuple(out)

    def describe(self) -> str:
        return (f"graph of {len(self.npus)} NPUs, {len(self.switches)} switches, {len(self.links)} links"
                + (f" ({self.path})" if self.path else ""))
