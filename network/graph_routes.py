"""Routes on a physical graph: shortest paths (in links) with ECMP, as the files' own
simulators route them.

Every backend asks this module for the path of a flow, so all of them send a message over the
same links: the backends ask with tag 0, one path per pair (the pair's one connection). The rules
are SimAI's ns-3 frontend's
(``CalculateRoute`` in astra-sim-alibabacloud/astra-sim/network_frontend/ns3/common.h, which
ASTRA-sim's ns-3 backend shares for the first two):

* only switches forward: an NPU is an endpoint, never a hop in between (the search from a
  destination goes on from switches and NVSwitches only). A graph with no switch at all (NPUs
  wired to each other) is the exception: neither reader routes it, and here its NPUs forward;
* at each node the next hop is one of the neighbours one link closer to the destination
  (parallel links count separately);
* if one of those is an NVSwitch, only NVSwitches are: traffic between two GPUs of a server goes
  over their NVSwitch even where a ToR is as few hops away (SimAI's DCN+ files put every GPU of
  a server on one ToR).

Which of the remaining next hops is a fixed 64-bit hash of the flow and the node, so runs are
reproducible and different flows spread over the equal-cost paths as ECMP switches spread them.

Distances to a destination come from a breadth-first search, cached per destination. An NPU
with a single link (the usual case) is reached through its one neighbour, so the search runs
from that neighbour and is shared by every NPU behind it: a 1,024-NPU fat-tree needs one
search per leaf, not per NPU.
"""
from __future__ import annotations

from network.errors import NetworkConfigError
from network.graph import PhysicalGraph

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a fixed, well-spread 64-bit hash of an integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def flow_hash(src: int, dst: int, tag: int) -> int:
    return _mix(_mix(_mix(src) ^ dst) ^ (tag & _MASK))


class RouteTable:
    """Paths of flows on one graph, as tuples of directed link ids (see network/graph.py)."""

    def __init__(self, graph: PhysicalGraph) -> None:
        self.graph = graph
        self._npus = graph.npus
        self._switches = graph.switches
        self._nvswitches = graph.nvswitches
        # a graph without any switch (NPUs wired to each other: a ring, a torus) has nothing else
        # to forward; neither ns-3 reader routes one at all, we let its NPUs forward
        self._npus_forward = not graph.switches
        self._adj = graph.adjacency
        self._anchor: dict[int, list[int]] = {}  # BFS distances, by root node

    def _distance(self, dst_node: int):
        """A function node → hops to ``dst_node``."""
        adj = self._adj[dst_node]
        if len(adj) == 1:  # reached only through its one neighbour
            via = adj[0][0]
            base = self._anchor.get(via)
            if base is None:
                base = self._anchor[via] = self.graph.bfs(via, through_npus=self._npus_forward)
            return lambda n: 0 if n == dst_node else (base[n] + 1 if base[n] >= 0 else -1)
        if not self._npus_forward and all(v in self._switches for v, _ in adj):
            # an NPU on several switches (a GPU on its NVSwitch and its rail): a path to it ends
            # with a hop from one of them, through which nothing else forwards it, so its
            # distance is one more than the nearest of theirs; those searches are shared by
            # every NPU on the same switches
            bases = []
            for via in {v for v, _ in adj}:
                base = self._anchor.get(via)
                if base is None:
                    base = self._anchor[via] = self.graph.bfs(via, through_npus=False)
                bases.append(base)

            def dist(n: int) -> int:
                if n == dst_node:
                    return 0
                best = -1
                for base in bases:
                    d = base[n]
                    if d >= 0 and (best < 0 or d < best):
                        best = d
                return best + 1 if best >= 0 else -1

            return dist
        base = self._anchor.get(dst_node)
        if base is None:
            base = self._anchor[dst_node] = self.graph.bfs(dst_node, through_npus=self._npus_forward)
        return base.__getitem__

    def path(self, src: int, dst: int, tag: int = 0) -> tuple[int, ...]:
        """Directed link ids from NPU rank ``src`` to NPU rank ``dst`` for the flow's tag."""
        return self.walk(src, dst, tag)[0]

    def walk(self, src: int, dst: int, tag: int = 0) -> tuple[tuple[int, ...], bool]:
        """The path, and whether it was the only shortest one (no equal-cost choice on the way)."""
        s, d = self._npus[src], self._npus[dst]
        if s == d:
            raise ValueError(f"ranks {src} and {dst} are the same NPU")
        dist = self._distance(d)
        h = flow_hash(src, dst, tag)
        links: list[int] = []
        unique = True
        u = s
        left = dist(u)
        if left < 0:
            # the topology's fault, not the workload's: the file (or generator) joins them by no
            # path through switches, and the run needs one
            raise NetworkConfigError(self.graph.path, "topology", (
                f"rank {src} cannot reach rank {dst}, which the workload sends to: no path joins them "
                f"through switches{' (NPUs forward no traffic here)' if not self._npus_forward else ''}; "
                "a rail-optimized cluster needs spines for traffic between rails of different servers"))
        switches, nv = self._switches, self._nvswitches
        while u != d:
            left -= 1
            choices = [(v, lid) for v, lid in self._adj[u]
                       if dist(v) == left and (v == d or v in switches or self._npus_forward)]
            if nv and len(choices) > 1 and any(v in nv for v, _ in choices):
                choices = [c for c in choices if c[0] in nv]
            if len(choices) > 1:
                unique = False
                v, lid = choices[_mix(h ^ u) % len(choices)]
            else:
                v, lid = choices[0]
            links.append(lid)
            u = v
        return tuple(links), unique

    def node_path(self, src: int, dst: int, tag: int = 0) -> list[int]:
        """The nodes the flow visits, both ends included."""
        nodes = [self._npus[src]]
        for lid in self.path(src, dst, tag):
            nodes.append(self.graph.directed_ends(lid)[1])
        return nodes
