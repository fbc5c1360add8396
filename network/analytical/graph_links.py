"""The analytical backends' hook onto a physical graph (network/graph_topology.py).

``graph_flows(backend)`` returns None for the built-in dimension networks, so they run exactly
as before. On a graph it returns a GraphFlows that the backend asks, per message, for

* ``route(src, dst, size)``: the congestion-aware Links of the pair's path, created on first use
  (one per directed graph link, with that link's latency and bandwidth, told its input link on
  the path: ``feed``), or
* ``delay_ns(src, dst, size)``: the congestion-unaware time on the pair's path.

One path per pair, whatever the message's tag: a pair's messages share one connection, as
ns-3's TCP connection (graph_wiring.py) and SimAI's per-pair flows do, so every backend sends a
message over the same links. It also counts the bytes of each pair, which ``stats(now)`` spreads
over the pair's links for the per-link-class report.
"""
from __future__ import annotations

from typing import Any, Callable

from network.graph_topology import GraphTopology, link_class_stats


class GraphFlows:
    def __init__(self, topology: GraphTopology, make_link: Callable[[int, int, int, float, float, dict], Any] | None) -> None:
        self.topology = topology
        self._routes = topology.routes
        self._make_link = make_link
        self._links: dict[int, Any] = {}
        self._delays: dict[tuple[float, float], dict] = {}  # shared by links of equal latency and bandwidth
        self._paths: dict[tuple[int, int], tuple] = {}
        self._flow_bytes: dict[tuple[int, int], int] = {}
        self._unaware: dict[tuple[int, int, int], int] = {}

    def route(self, src: int, dst: int, size_bytes: int) -> tuple:
        key = (src, dst)
        fb = self._flow_bytes
        fb[key] = fb.get(key, 0) + size_bytes
        route = self._paths.get(key)
        return route if route is not None else self.path(src, dst)

    def path(self, src: int, dst: int) -> tuple:
        """The pair's Links, without booking bytes."""
        key = (src, dst)
        route = self._paths.get(key)
        if route is None:
            route = self._paths[key] = tuple(self._link(lid) for lid in self._routes.path(src, dst, 0))
            prev = -1
            for link in route:  # each link learns its input links (aware.py's PacketLink)
                link.feed(prev)
                prev = link.dim
        return route

    def count(self, src: int, dst: int, size_bytes: int) -> None:
        """Bytes of a pair whose messages another part advanced (ns-3, a batched ring phase)."""
        key = (src, dst)
        self._flow_bytes[key] = self._flow_bytes.get(key, 0) + size_bytes

    def delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        key = (src, dst)
        fb = self._flow_bytes
        fb[key] = fb.get(key, 0) + size_bytes
        k = (src, dst, size_bytes)
        d = self._unaware.get(k)
        if d is None:
            d = self._unaware[k] = self.topology.path_delay_ns(src, dst, size_bytes)
        return d

    def _link(self, lid: int) -> Any:
        link = self._links.get(lid)
        if link is None:
            g = self.topology.graph
            a, b = g.directed_ends(lid)
            spec = g.links[lid >> 1]
            bpn = self.topology.link_bytes_per_ns[lid >> 1]
            delays = self._delays.setdefault((spec.latency_ns, bpn), {})
            link = self._links[lid] = self._make_link(a, b, lid, spec.latency_ns, bpn, delays)
        return link

    def bytes_per_link(self) -> dict[int, int]:
        out: dict[int, int] = {}
        paths = self._routes.path
        for (src, dst), b in self._flow_bytes.items():
            for lid in paths(src, dst, 0):
                out[lid] = out.get(lid, 0) + b
        return out

    def stats(self, now_ns: int) -> dict[str, Any]:
        out: dict[str, Any] = {"link_classes": link_class_stats(self.topology, self.bytes_per_link(), now_ns)}
        if self._make_link is not None:  # the congestion-aware backend's Links
            out["links_used"] = len(self._links)
            out["max_link_queue"] = max((link.peak_pending for link in self._links.values()), default=0)
        return out


def graph_flows(topology: Any, make_link: Callable[..., Any] | None = None) -> GraphFlows | None:
    """A GraphFlows for a graph topology, None for a built-in one."""
    return GraphFlows(topology, make_link) if isinstance(topology, GraphTopology) else None
