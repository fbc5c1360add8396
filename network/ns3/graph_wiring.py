"""A physical graph (network/graph_topology.py) as ns-3 nodes, links and per-flow routes.

ns-3 node ids put the NPUs first, in rank order, then the switches in file order, so that the
Fabric's ``Send(src rank, dst rank)`` works as on the built-in networks. Link ``i`` of the graph
is the Fabric's link ``i``, at the link's rate (the YAML's GB/s conversion, wiring.link_rate_bps)
and latency. A message pair's TCP connection is one flow: it takes the path graph_routes.py
gives the pair with tag 0, its ACKs the path of the reverse pair; both are set in the
FlowRouting tables when the pair first carries traffic.
"""
from __future__ import annotations

from typing import Any

from network.errors import NetworkConfigError
from network.graph_topology import GraphTopology
from network.ns3.wiring import link_rate_bps


class GraphWiring:
    def __init__(self, topology: GraphTopology) -> None:
        g = topology.graph
        self.topology = topology
        order = list(g.npus) + sorted(g.switches)
        self.node_of = {node: i for i, node in enumerate(order)}  # graph id -> ns-3 id
        self.nodes_count = g.nodes_count
        self.links = [(self.node_of[link.a], self.node_of[link.b], link_rate_bps(link.bandwidth_gb_s),
                       round(link.latency_ns)) for link in g.links]
        for link, (_, _, bps, delay) in zip(g.links, self.links):  # ns-3: uint64 bit/s, int64 ns clock
            if not 1 <= bps < 2**64 or delay > 1e12:
                raise NetworkConfigError(g.path, f"line {link.line}" if link.line else "links", (
                    f"link {link.a}-{link.b} ({link.bandwidth_gb_s:g} GB/s, {link.latency_ns:g} ns) is beyond the "
                    "ns-3 backend's 1 to 2^64 bit/s and 1000 s per link"))
        self._routed: set[tuple[int, int]] = set()

    def build(self, fabric: Any, mtu: int, queue: int) -> None:
        for a, b, bps, delay in self.links:
            fabric.AddLink(a, b, bps, delay, mtu, queue)

    def route_pair(self, fabric: Any, src: int, dst: int) -> None:
        """Set the routes of src → dst and of its ACKs (dst → src), once."""
        for s, d in ((src, dst), (dst, src)):
            if (s, d) in self._routed:
                continue
            self._routed.add((s, d))
            g = self.topology.graph
            for lid in self.topology.routes.path(s, d, 0):
                fabric.SetHop(self.node_of[g.directed_ends(lid)[0]], s, d, lid >> 1)

    def max_rtt_ns(self, mtu: int) -> float:
        """An upper bound of a round trip: the longest shortest path there and back, each hop
        the slowest link's latency plus one packet's serialisation on the slowest link."""
        g = self.topology.graph
        hops = max(d for d in g.bfs(g.npus[0]) if d >= 0) * 2  # any two NPUs are this close
        lat = max((link.latency_ns for link in g.links), default=0.0)
        slow = min(self.topology.link_bytes_per_ns, default=1.0)
        return 2 * hops * (lat + mtu / slow)
