"""A Topology whose NPUs sit on a physical graph (a topology file or a generated fat-tree).

The system layer sees only logical dimensions (``npus_count`` in the YAML, or ASTRA-sim's
``--logical-topology-configuration``): collectives run along them exactly as on the built-in
networks. The backends see the graph and send every message over the links that
network/graph_routes.py picks for it. The logical dimensions carry the NPU links' bandwidth and
latency for the report only.

Congestion-unaware time of a message on a graph: the latencies of its path's links plus size
over the path's slowest link, truncated once. For a one-switch star that is 2 × latency +
size / bandwidth, which is what a ``Switch`` dimension gives.
"""
from __future__ import annotations

import math

from network.topology import Dimension, Topology, TopologyKind
from network.units import bw_gb_s_to_bytes_per_ns

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:  # the analytical backends import this module on every run, graphs or not (start-up)
    from typing import Any
    from network.graph import PhysicalGraph


class GraphTopology(Topology):
    def __init__(self, graph: PhysicalGraph, logical_dims: list[int] | None = None) -> None:
        npus = len(graph.npus)
        sizes = list(logical_dims) if logical_dims else [npus]
        if math.prod(sizes) != npus:
            raise ValueError(f"logical dimensions {sizes} hold {math.prod(sizes)} NPUs; the graph has {npus}")
        first = next((link for link in graph.links if graph.npus[0] in (link.a, link.b)), None)
        bw = first.bandwidth_gb_s if first else 1.0
        lat = first.latency_ns if first else 0.0
        super().__init__([Dimension(TopologyKind.SWITCH, n, bw, lat) for n in sizes])
        from network.graph_routes import RouteTable

        self.graph = graph
        self.routes = RouteTable(graph)
        self.link_bytes_per_ns = tuple(bw_gb_s_to_bytes_per_ns(link.bandwidth_gb_s) for link in graph.links)

    def with_logical_dims(self, sizes: list[int]) -> "GraphTopology":
        return GraphTopology(self.graph, sizes)

    def path_delay_ns(self, src: int, dst: int, size_bytes: int, tag: int = 0) -> int:
        """Congestion-unaware: Σ link latency + size / slowest link bandwidth, truncated once."""
        links = self.graph.links
        path = self.routes.path(src, dst, 0)  # one path per pair on every backend (graph_links.py)
        lat = 0.0
        for lid in path:
            lat += links[lid >> 1].latency_ns
        slowest = min(self.link_bytes_per_ns[lid >> 1] for lid in path)
        return int(lat + size_bytes / slowest)

    def unaware_delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        return self.path_delay_ns(src, dst, size_bytes)

    def hops(self, src: int, dst: int) -> int:
        return len(self.routes.path(src, dst))

    def describe(self) -> str:
        dims = " x ".join(str(d.npus_count) for d in self.dims)
        return f"{self.graph.describe()}, logical dims {dims}"


def link_class_stats(topology: GraphTopology, bytes_per_link: dict[int, int] | list[int], end_ns: int) -> dict[str, Any]:
    """Per link class: links (both directions counted), bytes carried, and the utilisation of the
    busiest and the mean directed link (bytes / (bandwidth × run time))."""
    g = topology.graph
    classes = g.link_classes
    out: dict[str, dict[str, Any]] = {}
    for i, cls in enumerate(classes):
        e = out.setdefault(cls, {"directed_links": 0, "bytes": 0, "peak_utilisation": 0.0, "mean_utilisation": 0.0,
                                 "bandwidth_gb_s": g.links[i].bandwidth_gb_s})
        cap = topology.link_bytes_per_ns[i] * end_ns
        for lid in (2 * i, 2 * i + 1):
            b = bytes_per_link.get(lid, 0) if isinstance(bytes_per_link, dict) else bytes_per_link[lid]
            e["directed_links"] += 1
            e["bytes"] += b
            u = b / cap if cap > 0 else 0.0
            e["mean_utilisation"] += u
            e["peak_utilisation"] = max(e["peak_utilisation"], u)
    for e in out.values():
        e["mean_utilisation"] = e["mean_utilisation"] / e["directed_links"] if e["directed_links"] else 0.0
        e["peak_utilisation"] = round(e["peak_utilisation"], 6)
        e["mean_utilisation"] = round(e["mean_utilisation"], 6)
    return out
