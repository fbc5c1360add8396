"""ns-3 backend: the topology as ns-3 nodes and point-to-point links, messages as real traffic.

ns-3's Simulator is the clock. ``schedule`` becomes an ns-3 event that calls back into Python;
``send`` hands the message to a persistent connection per (src, dst) pair (see fabric_cpp.py):

* TCP (default): one TCP connection per ordered pair, kept open, so later messages see a warm
  congestion window. With ``preconnect`` (default) the connections of every dimension group are
  opened before time 0, as NCCL does at communicator creation; otherwise a pair connects on its
  first message, which pays the handshake. A pair's messages travel back to back in send order.
  Framing is out of band: the receiver counts bytes against the sender's FIFO of message sizes.
* UDP: one flow per pair, datagrams of ``segment_size`` pushed into the stack at once. Nothing
  retransmits; a queue overflow loses the message, which then shows up in ``unmatched()`` with
  the drop count (raise ``ns3.queue_size``).

Per-packet work stays in C++; Python runs once per scheduled event and once per delivered
message. When no Python event is pending and no message is in flight, nothing can happen that
the system layer would see, so the backend stops ns-3 there (TCP timers may still be queued):
``now()`` after ``run()`` is the time of the last message or event, as on the analytical
backends.

Send/recv pairing is the analytical backends' (AnalyticalBackend: the n-th send of a
(tag, src, dst, size) key pairs with the n-th receive), reused by subclassing; only the clock
and ``_transfer`` differ.

ns-3 has one global simulator per process: creating an Ns3Backend destroys the previous one's
simulation (its methods then raise RuntimeError).
"""
from __future__ import annotations

import ctypes
import importlib.util
import time
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Iterable

from network.analytical.base import AnalyticalBackend, Message
from network.config import NetworkConfig
from network.errors import NetworkConfigError, SimulationLimitError
from network.analytical.graph_links import graph_flows
from network.ns3.graph_wiring import GraphWiring
from network.ns3.settings import Ns3Settings
from network.ns3.wiring import dimension_groups, link_rate_bps, wire

if TYPE_CHECKING:
    from network.analytical.base import Callback

if importlib.util.find_spec("ns") is None:  # cheap check; the real import (5–10 s) is lazy
    raise ImportError("No module named 'ns' (the ns3 package is not installed)")

_MAX_NPUS = 48_000  # a receiver listens on port 1000 + sender rank, below the ephemeral range
_MAX_PRECONNECT = 20_000
_MAX_LATENCY_NS = 1e12  # 1000 s per hop; ns-3's clock is an int64 of ns and TCP timers multiply it
_LONG_DELAY_NS, _MAX_TIME_NS = 2**40, 2**62
_TICK_CALLS = 1024  # Python calls between progress ticks: a tick reads the clock and ns-3's counter
_live: "weakref.ref[Ns3Backend] | None" = None
_Hook = ctypes.CFUNCTYPE(None, ctypes.c_uint64)  # fabric_cpp.API: Net::SetCallbacks


class _Ns3Queue:
    """Stands in for EventQueue inside AnalyticalBackend (recv's delay-0 callback, stats)."""

    __slots__ = ("schedule", "_backend", "wall_origin", "on_tick")

    def __init__(self, backend: "Ns3Backend") -> None:
        self.schedule = backend.schedule
        self._backend = backend
        #: a progress display's hook (system/progress.py): called every _TICK_CALLS Python calls
        self.on_tick: Any = None
        # time.monotonic() when the run's wall budget started (the run sets it: set-up counts)
        self.wall_origin: float | None = None

    @property
    def events_processed(self) -> int:
        return self._backend.ns3_events()

    @property
    def now(self) -> int:
        return self._backend.now()


class _Closed:
    """The fabric of a backend whose simulation was destroyed."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("this Ns3Backend's simulation was destroyed: a newer Ns3Backend owns ns-3 now")


class Ns3Backend(AnalyticalBackend):
    """The network as an ns-3 packet-level simulation (TCP or UDP over point-to-point links)."""

    name = "ns3"

    @classmethod
    def check_config(cls, config: NetworkConfig) -> Ns3Settings:
        """The network file's ns-3 settings, or NetworkConfigError where ns-3 cannot run it; the
        simulation calls this before its congestion-unaware dry run (the pairs to connect), which
        must not be the first to meet such a file."""
        settings = Ns3Settings.from_mapping(config.extra.get("ns3"), config.path).resolved(config.topology)
        if config.topology.npus_count > _MAX_NPUS:
            raise NetworkConfigError(
                config.path, "key 'npus_count'", f"the ns-3 backend supports at most {_MAX_NPUS} NPUs"
            )
        for i, d in enumerate(config.topology.dims):  # ns-3's DataRate is a uint64 of bit/s, its clock an int64 of ns
            if not 1 <= link_rate_bps(d.bandwidth_gb_s) < 2**64:
                raise NetworkConfigError(config.path, f"dimension {i}, key 'bandwidth'",
                                         f"{d.bandwidth_gb_s:g} GB/s is beyond the ns-3 backend's 1 to 2^64 bit/s per link")
            if d.latency_ns > _MAX_LATENCY_NS:
                raise NetworkConfigError(config.path, f"dimension {i}, key 'latency'",
                                         f"{d.latency_ns:g} ns is beyond the ns-3 backend's {_MAX_LATENCY_NS:g} ns per hop "
                                         "(round trips and timers would overflow ns-3's 64-bit clock)")
        return settings

    def __init__(self, config: NetworkConfig, max_events: int | None = None, wall_limit_s: float | None = None,
                 pairs: "Iterable[tuple[int, int]] | None" = None) -> None:
        """``pairs``: the (src, dst) pairs the run will send between (network/analytical/pair_recorder.py),
        the only connections ``preconnect`` opens; None: every pair of every dimension group."""
        super().__init__(config, max_events, wall_limit_s)  # pairing state; its EventQueue goes unused
        self._pairs_used = sorted(set(pairs)) if pairs is not None else None
        self.settings = self.check_config(config)
        self._graph = graph_flows(self.topology)  # a topology file: counts bytes per link
        self._wiring = GraphWiring(self.topology) if self._graph is not None else None
        from network.ns3.loader import load_ns

        self._fabric: Any = _Closed()  # until built: a half-built backend closes cleanly
        self._api = api = load_ns()
        self._take_simulator()
        self._configure_defaults()
        self._max_events = max_events
        self._wall_limit_s = wall_limit_s
        self._events: dict[int, tuple[Callback, tuple]] = {}  # ns-3 event id → Python callback
        self._messages: dict[int, Message] = {}  # message id → its send/recv pair
        self._next_event = self._next_message = 0
        self._python_calls = 0
        self._error: BaseException | None = None
        self._final_events = 0
        self._udp = self.settings.transport == "udp"
        self._stop = api.SimulatorStop
        self.schedule = self._schedule  # replaces the base's EventQueue.schedule, bound once
        self._fabric = self._build_fabric()
        # C function pointers (ctypes) rather than std::function: cppyy's conversion of a Python
        # callable costs a 0.4 s JIT compile, a ctypes callback none, and a call costs about the
        # same (0.26 us).
        # Keep them referenced for the whole run (formats.md §C.3, pitfalls).
        self._callbacks = (_Hook(self._on_event), _Hook(self._on_delivered))
        self._fabric.SetCallbacks(*(ctypes.cast(hook, ctypes.c_void_p).value for hook in self._callbacks))
        self.queue = _Ns3Queue(self)
        if self.settings.preconnect and not self._udp:
            self._preconnect()

    # -- ns-3 setup -----------------------------------------------------------------------
    def _take_simulator(self) -> None:
        global _live
        previous = _live() if _live is not None else None
        if previous is not None:
            previous.close()
        self._api.SimulatorDestroy()  # fresh clock and NodeList, whoever used ns-3 before
        _live = weakref.ref(self)

    def _configure_defaults(self) -> None:
        s = self.settings
        if not self._api.Configure(s.tcp_variant, s.payload_size, s.snd_buf_size, s.rcv_buf_size, s.initial_cwnd,
                                   s.delayed_ack_timeout_us, s.min_rto_us):
            raise NetworkConfigError(
                self.config.path, "key 'ns3.tcp_variant'",
                f"{s.tcp_variant!r} is not an ns-3 TCP congestion control (e.g. TcpNewReno, TcpCubic, TcpDctcp)",
            )

    def _build_fabric(self) -> Any:
        mtu, queue = self.settings.mtu, self.settings.queue_size
        if self._wiring is not None:  # a physical graph, with per-flow routes (graph_wiring.py)
            from network.ns3.loader import load_flow_routing

            load_flow_routing()
            fabric = self._api.Net(self._wiring.nodes_count)
            self._wiring.build(fabric, mtu, queue)
            fabric.Finish(False)  # every pair is routed before it sends (route_pair): no global routes
            fabric.UseFlowRoutes()
            self.links_count, self.nodes_count = len(self._wiring.links), self._wiring.nodes_count
        else:
            plan = wire(self.topology)
            fabric = self._api.Net(plan.nodes_count)
            rate = [link_rate_bps(d.bandwidth_gb_s) for d in self.topology.dims]
            delay = [round(d.latency_ns) for d in self.topology.dims]  # ns-3 time resolution: 1 ns
            for link in plan.links:
                fabric.AddLink(link.a, link.b, rate[link.dim], delay[link.dim], mtu, queue)
            fabric.Finish(True)
            self.links_count, self.nodes_count = len(plan.links), plan.nodes_count
        fabric.SetTransport(self.settings.transport == "udp", self.settings.payload_size)
        if fabric.TraceFailures():
            raise RuntimeError(f"ns-3 refused {fabric.TraceFailures()} drop-trace connections (trace source renamed?)")
        return fabric

    def _preconnect(self) -> None:
        """Open the TCP connections the run uses (else those of every dimension group), then call
        that moment time 0."""
        t = self.topology
        pairs = self._pairs_used
        if pairs is None:
            pairs = [(a, b) for d in range(t.dims_count) for g in dimension_groups(t, d) for a in g for b in g
                     if a != b]
        if len(pairs) > _MAX_PRECONNECT:
            warnings.warn(
                f"ns3.preconnect: {len(pairs)} connections are too many to open ahead; each pair connects "
                f"on its first message instead (set ns3.preconnect: false to silence this)",
                stacklevel=3,
            )
            return
        for a, b in pairs:
            if self._wiring is not None:
                self._wiring.route_pair(self._fabric, a, b)
            self._fabric.Warm(a, b)
        self._api.SimulatorRun()  # handshakes and one byte each; ns-3 runs dry once all are up
        if self._fabric.Warmed() != len(pairs):  # a handshake slower than TCP's retries allow
            raise NetworkConfigError(
                self.config.path, "key 'ns3'",
                f"ns-3 opened only {self._fabric.Warmed()} of {len(pairs)} TCP connections: on these links a "
                f"handshake takes longer than TCP's connection retries allow (ns3.min_rto_us "
                f"{self.settings.min_rto_us}); lower the latency, raise the bandwidth or ns3.min_rto_us, "
                "or use ns3.transport: udp")
        self._fabric.SetOrigin()

    def close(self) -> None:
        """Destroy this simulation (ns-3 is one per process); later calls raise RuntimeError."""
        if isinstance(self._fabric, _Closed):
            return
        self._final_events = self.ns3_events()
        self._api.SimulatorDestroy()
        self._fabric = _Closed()  # drops the C++ Fabric and with it the callbacks into Python
        self._callbacks = ()

    # -- the clock ------------------------------------------------------------------------
    def now(self) -> int:
        return self._fabric.Now()

    def _schedule(self, delay_ns: int, callback: Callback, *args: object) -> None:
        """``schedule``: ``callback(*args)`` as an ns-3 event ``delay_ns`` from now (FIFO on ties)."""
        # past ns-3's 64-bit clock ns-3 aborts the process; only long delays need the (C++) clock read
        if delay_ns >= _LONG_DELAY_NS and self.now() + delay_ns >= _MAX_TIME_NS:
            raise SimulationLimitError(
                f"an event {delay_ns} ns after {self.now()} ns is past the ns-3 backend's clock (2^62 ns); "
                "the analytical backends have no such limit")
        eid = self._next_event
        self._next_event = eid + 1
        self._events[eid] = (callback, args)
        self._fabric.Schedule(delay_ns, eid)

    def run(self) -> None:
        if not (self._events or self._messages):  # else ns-3 would only drain TCP timers
            return
        wall = self._wall_limit_s or 0.0
        origin = getattr(self.queue, "wall_origin", None)
        if wall and origin is not None:
            # one budget from the run's start: what set-up and earlier runs spent is gone
            wall = max(1e-6, wall - (time.monotonic() - origin))
        self._fabric.SetLimits(self._max_events or 0, wall)
        self._api.SimulatorRun()
        self._final_events = self.ns3_events()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        hit = self._fabric.LimitHit()
        if hit and (self._events or self._messages):
            pending = f"{len(self._events)} events and {len(self._messages)} messages pending"
            if hit == 1:
                raise SimulationLimitError(
                    f"event budget of {self._max_events} ns-3 events exhausted at simulated time "
                    f"{self.now()} ns with {pending} (raise --max-events)"
                )
            raise SimulationLimitError(
                f"wall-time budget of {self._wall_limit_s:g} s exhausted at simulated time {self.now()} ns "
                f"after {self._final_events} ns-3 events with {pending} (raise --max-wall-seconds)"
            )

    def ns3_events(self) -> int:
        """Events ns-3 has executed so far (packets, timers and ours)."""
        if isinstance(self._fabric, _Closed):
            return self._final_events
        return int(self._fabric.Events())

    # -- calls from C++ (never let an exception unwind through ns-3) ---------------------------
    # ctypes prints and drops an exception that leaves a callback, and ns-3 would run on: nothing
    # may leave these two (run() re-raises what _fail keeps once ns-3 has stopped)
    def _on_event(self, eid: int) -> None:
        try:
            callback, args = self._events.pop(eid)
            callback(*args)
            self._after_call()
        except BaseException as exc:
            self._fail(exc)

    def _on_delivered(self, mid: int) -> None:
        try:
            self._on_arrival(self._messages.pop(mid))
            self._after_call()
        except BaseException as exc:
            self._fail(exc)

    def _after_call(self) -> None:
        self._python_calls += 1
        if not self._python_calls % _TICK_CALLS:
            tick = self.queue.on_tick
            if tick is not None:
                tick(self.now(), self.ns3_events())
        if not self._events and not self._messages:
            self._stop()  # nothing left that Python could see

    def _fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._stop()

    # -- messages ---------------------------------------------------------------------------
    def _transfer(self, src: int, dst: int, size_bytes: int, full: Message) -> None:
        n = self.topology.npus_count
        if not (0 <= src < n and 0 <= dst < n):
            raise ValueError(f"message rank {src} -> rank {dst}: ranks are 0..{n - 1}")
        mid = self._next_message
        self._next_message = mid + 1
        self._messages[mid] = full
        if self._wiring is not None:
            self._wiring.route_pair(self._fabric, src, dst)
            self._graph.count(src, dst, size_bytes)
        # An empty message still crosses the network: one byte on the wire.
        self._fabric.Send(src, dst, size_bytes or 1, mid)

    # -- reporting --------------------------------------------------------------------------
    def _in_flight(self) -> list:
        return list(self._messages.values())

    def unmatched(self) -> list[str]:
        lines = super().unmatched()
        if lines and self._messages and not isinstance(self._fabric, _Closed):
            drops = self._fabric.Drops()
            if drops:
                lines.append(
                    f"ns-3 dropped {drops} packets in link queues; over UDP a message with a lost packet "
                    f"never completes (raise ns3.queue_size, now {self.settings.queue_size}, or use tcp)"
                )
        return lines

    def stats(self) -> dict[str, object]:
        out = super().stats()
        del out["core"]  # ns-3 keeps the time here; the analytical event queue goes unused
        out["python_calls"] = self._python_calls
        out["transport"] = self.settings.transport
        out["nodes"] = self.nodes_count
        out["links"] = self.links_count
        from network.ns3 import loader  # how our C++ got here (precompiled.py)

        out["cxx"] = "jit" if loader.precompiled_library is None else "precompiled"
        if not isinstance(self._fabric, _Closed):
            out["connections"] = int(self._fabric.Streams())
            out["packets_dropped"] = int(self._fabric.Drops())
        if self._graph is not None:
            out.update(self._graph.stats(self.now() if not isinstance(self._fabric, _Closed) else 0))
        return out
