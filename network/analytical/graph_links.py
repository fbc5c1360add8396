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

In an orbit run (system/shortcuts/orbits.py) only one rank per orbit of a group G of rank
permutations is simulated, and ``fold`` makes the links G's quotient: each directed link stands
for its orbit, whose links all carry the images of the same messages at the same times. A
message's hop over link l is served by l's orbit representative c = g(l) as the image under g
that it is, coming from g(previous link): on each representative the queue then holds exactly
the messages the real link c holds. That is the real run only where G is a symmetry of it,
which ``fold`` takes from its caller for the graph (automorphisms, network/graph_symmetry.py)
and checks for the rest as the run goes, raising FastPathConflict (the run is redone without
the shortcut) where

* a pair's route is not the image of its representative pair's (ECMP's hash need not be
  equivariant),
* a link is crossed that some element of G other than the identity maps onto itself: the
  message and its image would queue there together, or
* messages that reach a link in the same nanosecond from different inputs are served in an
  order (by input link id) that some element of G does not keep.
"""
from __future__ import annotations

from typing import Any, Callable

from network.errors import FastPathConflict
from network.graph_topology import GraphTopology, link_class_stats


#: the orbit-run group sizes up to which an ECMP route's images are each checked
_MAX_ROUTE_CHECKS = 4096


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
        self._fold: Any = None  # the orbit run's RotationGroup (network/graph_symmetry.py)
        self._canon: dict[int, tuple[int, int]] = {}  # link → (its orbit's representative, the element mapping it there)
        self._orbit_of: dict[int, list[int]] = {}  # link → g_j(link) for every j (repeats where not free)
        self._checked: set[tuple[int, int]] = set()  # pairs whose images are known to route as their images
        self._ties: set[tuple[int, ...]] = set()  # input sets whose order every element keeps
        self.ins: dict[tuple[int, int], tuple[int, ...]] = {}  # folded: per hop, the input link's image

    def fold(self, group: Any) -> None:
        """Serve G's quotient from now on: ``group`` (a RotationGroup, network/graph_symmetry.py)
        acts on ranks and directed links."""
        if self._links or self._paths:
            raise RuntimeError("fold() before the first message")
        self._fold = group

    def _canonical(self, lid: int) -> tuple[int, int]:
        """(representative of lid's orbit, the element that maps lid onto it); representative -1
        where some element other than the identity keeps a link of the orbit in place."""
        got = self._canon.get(lid)
        if got is None:
            group = self._fold
            images = group.link_orbit(lid)
            c = min(images)
            free = len(set(images)) == group.size
            rc = c if free else -1
            # x = g_j(lid) and c = g_jc(lid), so g_jc ∘ g_j^-1 maps x onto c
            for x, back in zip(images, group.differences(images.index(c))):
                self._canon[x] = (rc, back)
                self._orbit_of[x] = images
            got = self._canon[lid]
        return got

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
        if route is None and self._fold is not None:
            return self._folded_path(src, dst)
        if route is None:
            route = self._paths[key] = tuple(self._link(lid) for lid in self._routes.path(src, dst, 0))
            prev = -1
            for link in route:  # each link learns its input links (aware.py's PacketLink)
                link.feed(prev)
                prev = link.dim
        return route

    def _folded_path(self, src: int, dst: int) -> tuple:
        real = self._equivariant(src, dst)
        group = self._fold
        route, ins = [], []
        prev = -1
        for lid in real:
            c, j = self._canonical(lid)
            if c < 0:
                raise FastPathConflict(f"the flow {src} -> {dst} crosses link {lid >> 1}, which a symmetry of the "
                                       "orbit run maps onto itself: a message and its image would queue there together")
            inp = group.link(j, prev)
            link = self._link(c)
            link.feed(inp)
            route.append(link)
            ins.append(inp)
            prev = lid
        self.ins[(src, dst)] = tuple(ins)
        route = self._paths[(src, dst)] = tuple(route)
        return route

    def _equivariant(self, src: int, dst: int) -> tuple[int, ...]:
        """The pair's real route, after checking that every element of G maps it onto the route
        of the image pair. A route with no equal-cost choice on the way needs no check: an
        automorphism maps it onto a shortest path of the image pair, which is then its only one."""
        routes = self._routes
        real, unique = routes.walk(src, dst, 0)
        if not unique:
            group = self._fold
            if group.size > _MAX_ROUTE_CHECKS:
                raise FastPathConflict(f"the route {src} -> {dst} is one of several of equal length, and the orbit "
                                       f"run's {group.size} symmetries are too many to check that ECMP follows them")
            for j in range(1, group.size):
                a, b = group.rank(j, src), group.rank(j, dst)
                if routes.path(a, b, 0) != tuple(group.link(j, lid) for lid in real):
                    raise FastPathConflict(f"the route {a} -> {b} is not the image of the route {src} -> {dst} "
                                           "under the orbit run's symmetry (ECMP chooses otherwise)")
        self._checked.add((src, dst))
        return real

    def check_pair(self, src: int, dst: int) -> None:
        """Folded: raise FastPathConflict unless the pair's images route as its image."""
        if self._fold is not None and (src, dst) not in self._checked:
            self._equivariant(src, dst)

    def check_ties(self, inputs: list[int]) -> None:
        """Arrivals of one nanosecond from links ``inputs`` (sorted, their order of service): a
        folded link stands for its whole orbit only if every element of G keeps that order."""
        ids = tuple(sorted(set(inputs)))
        if self._fold is None or len(ids) < 2 or ids in self._ties:
            return
        group = self._fold
        for j in range(1, group.size):
            images = [group.link(j, i) for i in ids]
            if any(a >= b for a, b in zip(images, images[1:])):
                raise FastPathConflict("messages reaching a link in the same nanosecond are served in an order of "
                                       "their input links that a symmetry of the orbit run does not keep")
        self._ties.add(ids)

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
            self.check_pair(src, dst)
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
            if self._fold is not None:
                link.tie_check = self.check_ties
        return link

    def bytes_per_link(self) -> dict[int, int]:
        out: dict[int, int] = {}
        paths = self._routes.path
        for (src, dst), b in self._flow_bytes.items():
            for lid in paths(src, dst, 0):
                if self._fold is None:
                    out[lid] = out.get(lid, 0) + b
                    continue
                # folded: the pair stands for its |G| images, image j crossing g_j(lid)
                self._canonical(lid)
                for x in self._orbit_of[lid]:
                    out[x] = out.get(x, 0) + b
        return out

    def stats(self, now_ns: int) -> dict[str, Any]:
        out: dict[str, Any] = {"link_classes": link_class_stats(self.topology, self.bytes_per_link(), now_ns)}
        if self._make_link is not None:  # the congestion-aware backend's Links
            out["links_used"] = len(self._links) * (self._fold.size if self._fold is not None else 1)
            out["max_link_queue"] = max((link.peak_pending for link in self._links.values()), default=0)
        return out


def graph_flows(topology: Any, make_link: Callable[..., Any] | None = None) -> GraphFlows | None:
    """A GraphFlows for a graph topology, None for a built-in one."""
    return GraphFlows(topology, make_link) if isinstance(topology, GraphTopology) else None
