"""Analytical congestion-aware backend (ASTRA-sim: congestion_aware).

The topology becomes devices joined by directed links (docs/astra-sim-semantics.md §6.3):

* Ring: a link i → i±1 each way; a message takes the shorter way round, a tie clockwise (+1).
* FullyConnected: a link for every ordered pair of NPUs.
* Switch: one extra device (id N in a 1-D network); each NPU has an up-link and a down-link to
  it, and every message goes src → switch → dst.

A message is one chunk that is stored and forwarded hop by hop. A link carries one chunk at a
time and queues the others first in, first out. Starting a chunk on a link schedules two events,
in this order, as ASTRA-sim's ``Link::schedule_chunk_transmission`` does:

* arrival at the next device at ``now + int(latency + size / bw)``;
* the link free again at ``now + int(size / bw)``, when it starts its next queued chunk.

An uncontended message therefore costs Σ_hops int(latency + size / bw): the same as the
congestion-unaware backend for neighbours on a Ring or FullyConnected network, and
2 × (latency + size / bw) against 2·latency + size / bw on a Switch.

Multi-dimensional networks (our extension; ASTRA-sim's aware backend is 1-D only). Each
dimension has its own links and switches: a Ring or FullyConnected dimension joins the NPUs
that differ only in that coordinate, and a Switch dimension has one switch per such line of
NPUs, numbered after the NPUs (dimension by dimension, line by line). A message is routed in
dimension order: first along dimension 0 to the destination's dimension-0 coordinate, then
dimension 1, and so on. It is stored and forwarded at every intermediate NPU and switch, and
each hop uses that dimension's latency and bandwidth. For two ranks that differ in one
dimension only, which is all the native collectives send, this is the 1-D model of that
dimension. See docs/network-backends.md.

Nothing here is per byte: per hop there are two events; routes and per-size delays are
computed on first use and cached. Links are created when a route first uses them.
"""
from __future__ import annotations

from collections import deque

from network.analytical.base import AnalyticalBackend, Message, graph_flows
from network.config import NetworkConfig
from network.errors import FastPathConflict, NetworkConfigError
from network.event_queue import MAX_TIME_NS, _time_overflow_error, native_module
from network.topology import TopologyKind
from network.units import link_arrival_ns, link_serialization_ns

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from network.analytical.link_pipes import LinkPipes
    from network.analytical.list_pipes import ListPipes
    from network.analytical.ring_flows import RingFlows


class PyChunk:
    """A message on its way: its pairing key, its route as links, and the hop it is on
    (ASTRA-sim: Chunk, whose route holds devices; ours holds the links between them)."""

    __slots__ = ("full", "route", "hop", "size_bytes", "tail", "ins")

    def __init__(self, full: Message, route: tuple["PyLink", ...], size_bytes: int,
                 ins: tuple[int, ...] | None = None) -> None:
        self.full = full
        self.route = route
        self.hop = 0
        self.size_bytes = size_bytes
        self.tail = 0  # when its last byte reached the device it is on (PacketLink); the sender has it all
        self.ins = ins  # an orbit run's: per hop, the id of the input link (graph_links.GraphFlows.fold)


class PyLink:
    """A directed link that serves one chunk at a time, first in first out (ASTRA-sim: Link).
    Latency in ns, bandwidth in bytes/ns; ``delays`` maps a size to (arrival, busy) ns.

    The reference: ``Link`` is the same class in C (network/_aware_links.c) wherever the event
    queue is the C one, and this class where it is not (see the end of this module's header)."""

    __slots__ = ("src", "dst", "dim", "busy", "pending", "peak_pending", "chunks",
                 "latency_ns", "bytes_per_ns", "delays", "_schedule", "_on_arrived", "_queue",
                 "last_start", "free_at", "claim_until", "claim_last", "claim_recent", "_free_cb", "_two")

    def __init__(self, src: int, dst: int, dim: int, latency_ns: float, bytes_per_ns: float,
                 delays: dict[int, tuple[int, int]], schedule, on_arrived) -> None:
        self.src, self.dst, self.dim = src, dst, dim
        self.busy = False
        self.pending: deque[Chunk] = deque()  # ASTRA-sim: Link::pending_chunks
        self.peak_pending = 0
        self.chunks = 0
        self.latency_ns = latency_ns
        self.bytes_per_ns = bytes_per_ns
        self.delays = delays  # shared by the links of one dimension
        self._schedule = schedule
        self._on_arrived = on_arrived
        self._free_cb = self._on_free  # bound once: scheduled at every hop
        self._queue = getattr(schedule, "__self__", None)  # the EventQueue, for its clock
        self._two = getattr(self._queue, "schedule_two", None)  # both events of a hop in one call
        # what batched ring phases (link_pipes.py) need to know about the link's other traffic:
        # the last chunk it started and when it is free of it, and their own claim on it
        self.last_start = -1
        self.free_at = -1
        self.claim_until = -1  # a batched phase's last chunk is off the link then
        self.claim_last = -1  # ... and reached it then
        self.claim_recent = None  # starts of its latest chunks there (link_pipes.py)

    def send(self, chunk: PyChunk) -> None:
        if self.busy:
            pending = self.pending
            pending.append(chunk)
            if len(pending) > self.peak_pending:
                self.peak_pending = len(pending)
        else:
            self._transmit(chunk)

    def _transmit(self, chunk: PyChunk) -> None:
        self.busy = True
        self.chunks += 1
        size = chunk.size_bytes
        d = self.delays.get(size)
        if d is None:
            d = self.delays[size] = (link_arrival_ns(size, self.latency_ns, self.bytes_per_ns),
                                     link_serialization_ns(size, self.bytes_per_ns))
        # Arrival first, then link-free: ASTRA-sim inserts them in this order, and events at
        # one time run in insertion order (docs/astra-sim-semantics.md §6.3).
        queue = self._queue
        if queue is not None:
            now = self.last_start = queue.now
            self.free_at = now + d[1]
        if self._two is not None:
            self._two(d[0], self._on_arrived, (chunk,), d[1], self._free_cb, ())
        else:
            self._schedule(d[0], self._on_arrived, chunk)
            self._schedule(d[1], self._on_free)

    def _on_free(self) -> None:
        """ASTRA-sim: Link::link_become_free."""
        self.busy = False
        if self.pending:
            self._transmit(self.pending.popleft())


#: the C classes where the event queue is C (pip install compiled network/_event_core.c), with
#: their _on_chunk_arrived (ChunkArrival); the Python ones otherwise or with DTSIM_PURE_PYTHON=1
_native = native_module()
if _native is not None:
    Link, Chunk = _native.Link, _native.Chunk
else:
    Link, Chunk = PyLink, PyChunk  # type: ignore[misc]


class PacketLink(Link):  # type: ignore[valid-type,misc]
    """A topology file's link: a message crosses it as packets of ``packet_bytes``, as it does in
    the packet simulators those files are written for (SimAI's and ASTRA-sim's ns-3), so a
    message pipelines over its path instead of being stored and forwarded whole at every switch.

    Per hop, with S the message's bytes, p = min(packet_bytes, S), L the latency, B the rate:

    * it starts when its first packet is here and the link is free (FIFO, one message at a time);
    * its first packet reaches the next device at ``start + int(L + p / B)``, which starts the
      next hop there;
    * the link is busy until ``end = max(start + int(S / B), tail + int(p / B))``, ``tail`` being
      when the message's last packet reached this device: a link cannot send bytes it has not got;
    * the last packet reaches the next device at ``max(int(end + L), first packet's arrival)``;
      on the last hop that is the message's arrival.

    An uncontended message over H hops of one rate thus takes H·L + S/B + (H − 1)·p/B (packet
    pipelining), and with p = S, the Link's store and forward exactly.

    Messages that reach a link in the same nanosecond from different input links are served in
    the order of those links' ids (a switch port's fixed arbitration), not in the order the
    simulator happens to run their events: the answer then depends on times alone, which is what
    lets batched ring phases (ring_flows.py) reproduce it. A link knows its input links from
    the routes that use it (``feed``); with one input, messages cannot tie and start as they come.
    No event marks the end of a message on the link: FIFO order is arrival order, so a message's
    start is ``max(arrival, free_at)`` when it arrives. One event per hop."""

    __slots__ = ("packet_bytes", "inputs", "arrivals", "waiting", "last_arrival", "tie_check")

    def __init__(self, *args, packet_bytes: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.packet_bytes = packet_bytes
        self.inputs: set[int] = set()  # ids of the links that feed it (-1: its NPU's own sends)
        self.arrivals: list[Chunk] | None = None  # this tick's, once it has two inputs
        self.waiting: deque[int] = deque()  # starts still ahead of the clock (queue depth)
        self.last_arrival = -1  # when the latest message reached it (ring_flows.py)
        self.tie_check = None  # an orbit run's check that its symmetry keeps the order (graph_links.py)

    def feed(self, input_id: int) -> None:
        """A route reaches this link from link ``input_id`` (-1: it starts here)."""
        self.inputs.add(input_id)
        if len(self.inputs) > 1 and self.arrivals is None:
            self.arrivals = []

    def send(self, chunk: Chunk) -> None:
        arrivals = self.arrivals
        if arrivals is None:
            self._transmit(chunk)
        else:
            if not arrivals:  # the first of this tick: decide once every arrival of the tick is in
                self._schedule(0, self._arbitrate)
            arrivals.append(chunk)

    def _arbitrate(self) -> None:
        arrivals = self.arrivals
        self.arrivals = []
        if len(arrivals) > 1:
            # by input link; one input's messages keep their order there (a stable sort)
            arrivals.sort(key=_input_link_id)
            if self.tie_check is not None:
                self.tie_check([_input_link_id(c) for c in arrivals])
        for chunk in arrivals:
            self._transmit(chunk)

    def packet_delays(self, size: int) -> tuple[int, int, int]:
        """For a message of ``size`` bytes: its first packet's trip int(L + p/B), the whole
        message's int(S/B) and one packet's int(p/B) (cached per size for the links of one rate)."""
        d = self.delays.get(size)
        if d is None:
            p = min(size, self.packet_bytes)
            d = self.delays[size] = (link_arrival_ns(p, self.latency_ns, self.bytes_per_ns),
                                     link_serialization_ns(size, self.bytes_per_ns),
                                     link_serialization_ns(p, self.bytes_per_ns))
        return d

    def occupy(self, x: int, tail: int, d: tuple[int, int, int]) -> tuple[int, int]:
        """A message whose first packet arrives at ``x`` and last at ``tail`` crosses the link
        (``d``: packet_delays): it queues behind what is not yet off the link; returns when its
        first and its last packet reach the next device. The event path and the batched ring
        phases (ring_flows.py) both move messages through this."""
        start = self.free_at
        if start > x:  # it queues behind the messages not yet off the link
            waiting = self.waiting
            while waiting and waiting[0] <= x:
                waiting.popleft()
            waiting.append(start)
            if len(waiting) > self.peak_pending:
                self.peak_pending = len(waiting)
        else:
            start = x
        self.last_start = start
        self.last_arrival = x
        end = start + d[1]
        if tail + d[2] > end:
            end = tail + d[2]
        if end > MAX_TIME_NS:  # the link's clock (a C long long on the C path) ends there, as the queue's does
            raise _time_overflow_error(x, end - x)
        self.free_at = end
        head = start + d[0]
        # the last packet is never before the first: with p = S this is Link's int(L + S / B)
        # exactly (int(end + L) alone truncates the two fractions apart, a cycle short)
        last = int(end + self.latency_ns)
        return head, (last if last > head else head)

    def _transmit(self, chunk: Chunk) -> None:
        self.chunks += 1
        now = self._queue.now
        head, chunk.tail = self.occupy(now, chunk.tail, self.packet_delays(chunk.size_bytes))
        arrive = chunk.tail if chunk.hop == len(chunk.route) - 1 else head
        self._schedule(arrive - now, self._on_arrived, chunk)


def _chunk_meets_claim(link: Link) -> None:
    raise FastPathConflict(f"a chunk meets a batched ring phase on link {link.src}->{link.dst}")


def _input_link_id(chunk: Chunk) -> int:
    if chunk.ins is not None:
        return chunk.ins[chunk.hop]
    return chunk.route[chunk.hop - 1].dim if chunk.hop else -1


#: a topology file's packet: ns-3's default MTU here (network/ns3/settings.py), jumbo frames
DEFAULT_PACKET_BYTES = 9000


class CongestionAwareBackend(AnalyticalBackend):
    """Links with FIFO queues, store-and-forward per hop, dimension-order routing."""

    name = "congestion-aware"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        topo = self.topology
        packet_bytes = _packet_bytes(self.config, is_graph=graph_flows(topo) is not None)
        self._dims = topo.dims
        self._bytes_per_ns = tuple(d.bytes_per_ns for d in topo.dims)  # GB = 2^30 B (§6.1)
        self._delays: tuple[dict[int, tuple[int, int]], ...] = tuple({} for _ in topo.dims)
        strides, s = [], 1
        for d in topo.dims:
            strides.append(s)
            s *= d.npus_count
        self._strides = tuple(strides)
        # first switch id of each Switch dimension: switches come after the NPUs, one per line
        self._switch_base: list[int | None] = []
        nxt = topo.npus_count
        for d in topo.dims:
            if d.kind is TopologyKind.SWITCH:
                self._switch_base.append(nxt)
                nxt += topo.npus_count // d.npus_count
            else:
                self._switch_base.append(None)
        self.devices_count = nxt
        # keyed a * devices_count + b for the link a -> b: an int, not a tuple holding two ints,
        # for each of the N^2 links of a FullyConnected run (tests/network/test_memory_held.py)
        self._links: dict[int, Link] = {}
        self.time_zero_event: tuple[int, int, int] | None = None  # a message freeing its link at time 0
        # keyed src * npus + dst, as _links (network/_aware_links.c's PlainTransfer reads it so)
        self._routes: dict[int, tuple[Link, ...]] = {}
        self._rings: "RingFlows | None" = None
        if _native is not None:  # the C hop: no Python call between a chunk's links
            self._on_chunk_arrived = _native.ChunkArrival(self._on_arrival, _chunk_meets_claim)
        self._graph = graph_flows(topo, lambda a, b, lid, lat, bpn, delays: PacketLink(
            a, b, lid, lat, bpn, delays, self.schedule, self._on_chunk_arrived,
            packet_bytes=packet_bytes))  # None: no topology file
        self._folded = False
        if _native is not None and self._graph is None and type(self)._transfer is CongestionAwareBackend._transfer:
            # _transfer's common case in C (a cached route, a free clock); the rest calls the method
            self._transfer = _native.PlainTransfer(self._routes, self._transfer, topo.npus_count)

    def fold(self, group) -> None:
        """An orbit run's quotient of a topology file's links (graph_links.GraphFlows.fold)."""
        if self._graph is None:
            raise ValueError("an orbit run folds the links of a topology file only")
        self._graph.fold(group)
        self._folded = True

    # -- messages -----------------------------------------------------------------------
    def _transfer(self, src: int, dst: int, size_bytes: int, full: Message) -> None:
        ins = None
        if self._graph is not None:  # a topology file: one path per pair (graph_links.py)
            route = self._graph.route(src, dst, size_bytes)
            if self._folded:
                ins = self._graph.ins[(src, dst)]
        else:
            route = self._route(src, dst)
        link = route[0]
        if not self.queue.now and not self.time_zero_event and \
                not link_serialization_ns(size_bytes, link.bytes_per_ns):
            self.time_zero_event = (src, dst, size_bytes)  # see astra_sim_notes
        if link.claim_until > self.queue.now:
            raise FastPathConflict(f"a message {src} -> {dst} meets a batched ring phase on link {link.src}->{link.dst}")
        # Sent synchronously, as ASTRA-sim's sim_send → Topology::send → Link::send: a free
        # first link starts serialising now, before anything else at this time.
        link.send(Chunk(full, route, size_bytes, ins))

    def _on_chunk_arrived(self, chunk: Chunk) -> None:
        """ASTRA-sim: Chunk::chunk_arrived_next_device."""
        hop = chunk.hop + 1
        route = chunk.route
        if hop == len(route):
            self._on_arrival(chunk.full)
        else:
            chunk.hop = hop
            link = route[hop]
            if link.claim_until > self.queue.now:
                raise FastPathConflict(f"a chunk meets a batched ring phase on link {link.src}->{link.dst}")
            if type(link) is Link and not link.busy:
                link._transmit(chunk)  # Link.send's free-link case, one call less per hop
            else:
                link.send(chunk)

    # -- batched ring phases (system/shortcuts/ring_batch.py) ---------------------------------------
    def pipes_possible(self, pairs: list[tuple[int, int]]) -> bool:
        """Whether flows ``pairs`` can be advanced together (LinkPipes): routes of one length
        that share no link. Not on topology files, whose phases go to ring_flows()."""
        if self._graph is not None:
            return False
        routes = [self._route(a, b) for a, b in pairs]
        if len({len(r) for r in routes}) != 1:
            return False
        links = [link for r in routes for link in r]
        return len(set(map(id, links))) == len(links)

    def pipes(self, pairs: list[tuple[int, int]], size_bytes: int, vectorised: bool = True) -> "LinkPipes | ListPipes":
        """The flows' pipes: numpy's (link_pipes.py), or lists (list_pipes.py) where the caller
        would not pay numpy's import for the phase; the same times either way."""
        routes = [self._route(a, b) for a, b in pairs]
        if not vectorised:
            from network.analytical.list_pipes import ListPipes

            return ListPipes(routes, size_bytes)
        from network.analytical.link_pipes import LinkPipes  # numpy: only when a phase is batched

        return LinkPipes(routes, size_bytes)

    def ring_flows(self) -> "RingFlows | None":
        """On a topology file, the runner of batched ring phases (ring_flows.py); None elsewhere."""
        if self._graph is None:
            return None
        if self._rings is None:
            from network.analytical.ring_flows import RingFlows  # numpy: only when phases are batched

            self._rings = RingFlows(self._graph.path, self.queue.schedule, self.now, self.topology.npus_count)
        return self._rings

    def account_flows(self, flows: list[tuple[int, int]], size_bytes: int, count: int) -> None:
        super().account_flows(flows, size_bytes, count)
        if self._graph is not None:     # the per-link-class report spreads them over their paths
            for src, dst in flows:
                self._graph.count(src, dst, size_bytes * count)

    def _route(self, src: int, dst: int) -> tuple[Link, ...]:
        n = self.topology.npus_count
        if not (0 <= src < n and 0 <= dst < n):  # the key would name another pair
            self._hops(src, dst)  # raises
        key = src * n + dst
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = self._build_route(src, dst)
        return route

    # -- routing ------------------------------------------------------------------------
    def route(self, src: int, dst: int) -> list[int]:
        """The devices a message src → dst visits, src and dst included (ASTRA-sim:
        Topology::route). NPUs are 0..N-1; switches are numbered from N."""
        path = [src]
        for _, a, b in self._hops(src, dst):
            path.append(b)
        return path

    def link(self, src_device: int, dst_device: int) -> Link | None:
        """The link between two adjacent devices, if a message has used it."""
        if not (0 <= src_device < self.devices_count and 0 <= dst_device < self.devices_count):
            return None
        return self._links.get(src_device * self.devices_count + dst_device)

    def _build_route(self, src: int, dst: int) -> tuple[Link, ...]:
        links = []
        devices = self.devices_count
        for dim, a, b in self._hops(src, dst):
            link = self._links.get(a * devices + b)
            if link is None:
                d = self._dims[dim]
                link = self._links[a * devices + b] = Link(
                    a, b, dim, d.latency_ns, self._bytes_per_ns[dim], self._delays[dim],
                    self.schedule, self._on_chunk_arrived,  # one bound method for all links
                )
            links.append(link)
        return tuple(links)

    def _hops(self, src: int, dst: int) -> list[tuple[int, int, int]]:
        """(dimension, from device, to device) per hop, dimension 0 corrected first."""
        if not (0 <= src < self.topology.npus_count and 0 <= dst < self.topology.npus_count):
            raise ValueError(f"ranks {src} -> {dst} outside 0..{self.topology.npus_count - 1}")
        hops: list[tuple[int, int, int]] = []
        cur = src
        for dim, (st, d) in enumerate(zip(self._strides, self._dims)):
            n = d.npus_count
            a, b = (cur // st) % n, (dst // st) % n
            if a == b:
                continue
            base = cur - a * st  # this line's NPU with coordinate 0 in dimension `dim`
            nxt = base + b * st
            if d.kind is TopologyKind.RING:
                cw = (b - a) % n
                step = -1 if n - cw < cw else 1  # a tie goes clockwise (ASTRA-sim Ring::route)
                x = a
                while x != b:
                    y = (x + step) % n
                    hops.append((dim, base + x * st, base + y * st))
                    x = y
            elif d.kind is TopologyKind.SWITCH:
                line = base % st + (base // (st * n)) * st
                sw = self._switch_base[dim] + line
                hops.append((dim, cur, sw))
                hops.append((dim, sw, nxt))
            else:
                hops.append((dim, cur, nxt))
            cur = nxt
        if not hops:
            raise ValueError(f"ranks {src} and {dst} have the same address")
        return hops

    # -- reporting ----------------------------------------------------------------------
    def astra_sim_notes(self) -> list[str]:
        """Inputs of this run on which ASTRA-sim's congestion-aware binary gives no answer: a
        message sent at time 0 that leaves its first link in 0 ns (fewer bytes than the link moves
        in 1 ns) puts the link's release at time 0, and ASTRA-sim's event queue asserts that its
        first event lies after time 0; later, such an event joins the list being run."""
        if self.time_zero_event is None or self._graph is not None:
            return []
        src, dst, size = self.time_zero_event
        return [f"rank {src}'s message of {size} B to rank {dst} at time 0 leaves its first link in 0 ns; ASTRA-sim's "
                "congestion-aware backend aborts on the link's release at time 0 (EventQueue.cpp assertion: the "
                "first event must lie after time 0, exit 134), dtsim frees the link at time 0"]

    def stats(self) -> dict[str, object]:
        out = super().stats()
        links = self._links.values()
        out["links_used"] = len(self._links)
        out["max_link_queue"] = max((link.peak_pending for link in links), default=0)
        if self._graph is not None:  # its links, link classes (graph_links.py)
            if self._rings is not None:
                self._rings.flush()
            out.update(self._graph.stats(self.now()))
        return out


def _packet_bytes(config: NetworkConfig, *, is_graph: bool) -> int:
    """``congestion_aware: {packet_bytes: N}``, for topology files only: ASTRA-sim's own
    congestion-aware backend, which the built-in topologies reproduce, stores and forwards
    whole chunks."""
    settings = dict(config.extra.get("congestion_aware") or {})
    value = settings.pop("packet_bytes", None)
    if settings:
        raise NetworkConfigError(config.path, f"key 'congestion_aware', key {sorted(map(str, settings))[0]!r}",
                                 "unknown setting; the congestion-aware backend knows packet_bytes")
    if value is None:
        return DEFAULT_PACKET_BYTES
    if not is_graph:
        raise NetworkConfigError(config.path, "key 'congestion_aware', key 'packet_bytes'",
                                 "applies to a topology file only: on the built-in topologies the backend is "
                                 "ASTRA-sim's, which stores and forwards whole chunks")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NetworkConfigError(config.path, "key 'congestion_aware', key 'packet_bytes'",
                                 f"expected a whole number of bytes >= 1, got {value!r}")
    return value
