"""The system layer of one NPU (ASTRA-sim: Sys).

``Sys`` turns a collective into chunks (streams), gives each chunk one phase per logical
dimension (system/generation.py), and keeps the ready list and the per-queue active lists
that the scheduler unit works on. It owns the NPU's view of time: events it registers are batched per tick exactly as
ASTRA-sim's ``Sys::try_register_event`` does, because the order of same-tick events decides
which stream a queue starts first.
"""
from __future__ import annotations

import math

from system.collective.algorithm import ComType
from system.config import SystemConfig
from system.divergence import Divergences
from system.errors import SystemConfigError
from system.generation import CollectiveGeneration
from system.logical_topology import LogicalTopology
from system.queue_levels import QueueLevels
from system.rendezvous import RendezvousMixin
from system.scheduler_unit import SchedulerUnit
from system.stream import CollectiveLabel, StreamBaseline
from system.sys_core import SYS_CORE

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

    from network.api import NetworkBackend

NATIVE_TAG_OFFSET = 0
COLLECTIVE_TAG_OFFSET = 500_000_000
_UNLIMITED = 100_000_000  # ASTRA-sim's hard-coded active_first_phase / max_running


def _noop(*_: object) -> None:
    pass


class Sys(RendezvousMixin, CollectiveGeneration):
    """One NPU's system layer. Time is integer ns (cycles at 1 GHz)."""

    def __init__(self, npu_id: int, backend: NetworkBackend, config: SystemConfig,
                 queues_per_dim: list[int] | None = None, custom_loader: Any = None,
                 rendezvous: bool = False) -> None:
        self.id = npu_id
        self.backend = backend
        self.config = config
        # the queue's own reader where the backend's time is its now and it has one (network/api.py):
        # a Python method less on every node's start, every stream's end and every registration
        self.now = getattr(getattr(backend, "clock_queue", None), "time", None) or backend.now
        self._schedule = backend.schedule
        dims = backend.topology.npus_count_per_dim
        self.physical_dims = dims
        self.queues_per_dim = list(queues_per_dim or [1] * len(dims))
        self.total_nodes = math.prod(d for d in dims if d >= 1)
        self.communication_delay = config.endpoint_delay_ns
        self.local_mem_bw = config.local_mem_bw_gb_s * 1_000_000_000  # bytes/s
        self.active_streams: dict[int, list[StreamBaseline]] = {}
        q = 0
        for n in self.queues_per_dim:
            for _ in range(n):
                self.active_streams[q] = []
                q += 1
        self.ready_list: list[StreamBaseline] = []
        concurrent = math.ceil(config.active_chunks_per_dimension / self.queues_per_dim[0])
        self.scheduler_unit = SchedulerUnit(self, self.queues_per_dim, _UNLIMITED, _UNLIMITED, concurrent)
        self.v_levels = QueueLevels(self.queues_per_dim)
        self.num_streams = 0
        self.priority_counter = 0
        self.first_phase_streams = 0
        self.total_running_streams = 0
        self._dataset_ids = 0
        self._logical_topologies: dict[ComType, LogicalTopology] = {}
        self._batches: dict[int, list[tuple[Callable[..., None], tuple]]] = {}
        self._collectives_on: dict[int | None, int] = {}  # group id → collectives issued on it
        self._phase_plans: dict[tuple, tuple[tuple, dict]] = {}  # (plan, pristine algorithms): generate_collective
        self._native_impls: dict[ComType, tuple] = {}  # the config's list, once checked
        self._exchange = backend.exchange
        self.custom_loader = custom_loader
        self.ring_batcher = None  # system/shortcuts/ring_batch.py, set by run_simulation where it applies
        self.divergences = Divergences()  # shared by the ranks of one run (system/divergence.py)
        # one CollectiveLabel object per collective, shared by the ranks of one run (run_simulation): the
        # network compares the labels of every message and its receive, equal labels being the same object
        self.labels: dict[CollectiveLabel, CollectiveLabel] = {}
        self.astra_streams = 0  # ASTRA-sim's per-rank stream counter, which group streams advance too
        self.world_first_tags: dict[int, int] = {}  # world collective number → ASTRA-sim's first tag
        self.rendezvous = rendezvous
        if rendezvous:
            self._net_send = self._rendezvous_send  # type: ignore[method-assign]
            self._net_recv = self._rendezvous_recv  # type: ignore[method-assign]
            self.collective_send_recv = self._collective_send_recv_via_net  # type: ignore[method-assign]
        elif SYS_CORE is not None and getattr(backend, "clock_queue", None) is not None \
                and type(self.communication_delay) is int:
            # a ring, direct or halving-doubling message's trip (memory bus, batch, step, exchange,
            # receipt) in C: the same steps on the same objects (system/_sys_core.c); the trees and
            # custom algorithms call these methods
            self._fast = SYS_CORE.SysFast(self, backend.clock_queue, self._schedule, self._exchange,
                                          self.id, self.communication_delay, self.local_mem_bw)
            self.mem_bus_transfer = self._fast.mem_bus_transfer  # type: ignore[method-assign]
            self.collective_send_recv = self._fast.collective_send_recv  # type: ignore[method-assign]
            # the per-tick batches are the C table's: every registration goes there, and C runs them
            self.register_event = self._fast.register_event  # type: ignore[method-assign]
            if type(self) is Sys and type(self.scheduler_unit) is SchedulerUnit:
                # a stream's moves between phases and queues too, for every algorithm: the same
                # steps as the methods below and SchedulerUnit's, on the same objects
                self._fast.enable_scheduling(self.scheduler_unit, Sys.proceed_to_next_vnet_baseline)
                self.proceed_to_next_vnet_baseline = self._fast.proceed  # type: ignore[method-assign]
                self.schedule = self._fast.schedule  # type: ignore[method-assign]
                self.insert_into_ready_list = self._fast.insert_into_ready_list  # type: ignore[method-assign]

    def collective_overhead_ns(self, size: int) -> int:
        """The once-per-collective cost of ``collective-fixed-delay`` and ``collective-copy-bw``
        (0 unless the system file asks): paid after the last chunk, so the network's traffic and
        every ASTRA-sim timing stay as they are and only the collective's completion moves."""
        cfg = self.config
        cost = cfg.collective_fixed_delay_ns
        if cfg.collective_copy_bw_gb_s > 0:
            cost += int(size / cfg.collective_copy_bw_gb_s)  # bytes / (10^9 B/s) = ns
        return cost

    # -- events ---------------------------------------------------------------------------
    def register_event(self, delay_ns: int, callback: Callable[..., None], *args: object) -> None:
        """Run ``callback(*args)`` after ``delay_ns``, batched per tick like ASTRA-sim's
        Sys::try_register_event: only the first event for a tick schedules a backend event;
        later ones join that batch, which runs in registration order."""
        t = self.now() + delay_ns
        batch = self._batches.get(t)
        if batch is None:
            self._batches[t] = [(callback, args)]
            self._schedule(delay_ns, self._call_events, t)
        else:
            batch.append((callback, args))

    def _call_events(self, t: int) -> None:
        batch = self._batches[t]
        for callback, args in batch:  # the iterator re-reads the length: late joiners run in this pass
            callback(*args)
        del self._batches[t]

    # -- memory bus: the per-packet endpoint delay and reduction (MemBus, PacketBundle) ----
    def mem_bus_transfer(self, stream: StreamBaseline, fast: bool, needs_processing: bool, size: int) -> None:
        delay = 10 if fast else self.communication_delay
        if not delay and not self.now():
            self.note_zero_delay()
        # register_event, inlined: this runs once per collective message
        t = self.now() + delay
        batch = self._batches.get(t)
        if batch is None:
            self._batches[t] = [(self._bundle_arrived, (stream, needs_processing, size))]
            self._schedule(delay, self._call_events, t)
        else:
            batch.append((self._bundle_arrived, (stream, needs_processing, size)))

    def _bundle_arrived(self, stream: StreamBaseline, needs_processing: bool, size: int) -> None:
        if needs_processing:
            if self.local_mem_bw <= 0:
                raise SystemConfigError(
                    self.config.path, "key 'local-mem-bw'",
                    "a reduction needs local-mem-bw > 0 (GB/s); ASTRA-sim divides by it",
                )
            # write + read + read, each truncated (PacketBundle::call)
            delay = 3 * int(size / self.local_mem_bw * 1e9)
            self.register_event(delay, self._bundle_arrived, stream, False, size)
            return
        stream.my_current_phase.algorithm.run_general()

    # -- messages -------------------------------------------------------------------------
    def collective_send_recv(self, stream: StreamBaseline, dst: int, src: int, size: int) -> None:
        """Send ``size`` bytes to ``dst`` and post the receive from ``src`` for one step."""
        if not size:
            self.note_zero_message(stream)
        tag = stream.stream_id % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + COLLECTIVE_TAG_OFFSET
        # the receive calls the posting algorithm itself: its phase is current until every
        # message it waits for has arrived (what _on_collective_packet would look up)
        algo = stream.my_current_phase.algorithm
        self._exchange(self.id, dst, src, size, tag, stream.dataset.label, type(algo).on_packet_received, algo)

    def _collective_send_recv_via_net(self, stream: StreamBaseline, dst: int, src: int, size: int) -> None:
        self.collective_send(stream, dst, size)
        self.collective_recv(stream, src, size)

    def collective_send(self, stream: StreamBaseline, dst: int, size: int) -> None:
        if not size:
            self.note_zero_message(stream)
        tag = stream.stream_id % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + COLLECTIVE_TAG_OFFSET
        self._net_send(dst, size, tag, stream.dataset.label, _noop)

    def collective_recv(self, stream: StreamBaseline, src: int, size: int) -> None:
        tag = stream.stream_id % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + COLLECTIVE_TAG_OFFSET
        self._net_recv(src, size, tag, stream.dataset.label, self._on_collective_packet, stream)

    def note_zero_delay(self, what: str | None = None) -> None:
        """An event at time 0 registered before the clock runs: ASTRA-sim's analytical event queue
        asserts that its first event lies after time 0 (EventQueue::proceed); later same-time
        events join the list being run and are fine."""
        if "zero-delay" not in self.divergences:
            what = what or (f"endpoint-delay 0 ({self.config.path or 'the system configuration'}, after "
                            "--injection-scale) puts a collective's first packet through the endpoint in 0 ns")
            self.divergences.note("zero-delay", (
                f"rank {self.id}: {what} at time 0; ASTRA-sim aborts on an event at time 0 (EventQueue.cpp "
                "assertion: the first event must lie after time 0, exit 134), dtsim runs it at time 0"))

    def note_zero_message(self, stream: StreamBaseline) -> None:
        if "zero-message" not in self.divergences:  # one note a run: the first such collective
            label = stream.dataset.label
            algo = type(stream.my_current_phase.algorithm).__name__
            self.divergences.note("zero-message", (
                f"{label or 'a collective'}: its {algo} phase sends 0-byte messages (the chunk divided "
                "among the ranks rounds down to 0 B); ASTRA-sim aborts on them (assertion 'chunk_size > 0' "
                "in its analytical frontend, exit 134); dtsim sends them at the link latency alone. Fewer "
                "preferred-dataset-splits or a larger collective avoid them"))

    def _net_send(self, dst: int, size: int, tag: int, label: object, callback: Callable[..., None],
                  *args: object) -> None:
        self.backend.send(self.id, dst, size, tag, callback, *args, label=label)

    def _net_recv(self, src: int, size: int, tag: int, label: object, callback: Callable[..., None],
                  *args: object) -> None:
        self.backend.recv(self.id, src, size, tag, callback, *args, label=label)

    @staticmethod
    def _on_collective_packet(stream: StreamBaseline) -> None:
        stream.my_current_phase.algorithm.on_packet_received()

    def native_send(self, dst: int, size: int, tag: int, callback: Callable[..., None], *args: object) -> None:
        tag = tag % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + NATIVE_TAG_OFFSET
        self._net_send(dst, size, tag, None, callback, *args)

    def native_recv(self, src: int, size: int, tag: int, callback: Callable[..., None], *args: object) -> None:
        tag = tag % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + NATIVE_TAG_OFFSET
        self._net_recv(src, size, tag, None, callback, *args)

    # -- scheduling -----------------------------------------------------------------------
    def insert_into_ready_list(self, stream: StreamBaseline) -> None:
        self.insert_stream(self.ready_list, stream)
        self.scheduler_unit.notify_stream_added_into_ready_list()

    @staticmethod
    def insert_stream(queue: list[StreamBaseline], stream: StreamBaseline) -> None:
        """Behind running streams and waiting ones of equal or higher priority (FIFO intra-dimension)."""
        i = 0
        n = len(queue)
        while i < n:
            s = queue[i]
            if s.initialized or s.priority >= stream.priority:
                i += 1
                continue
            break
        queue.insert(i, stream)

    def schedule(self, num: int) -> None:
        counter = min(num, len(self.ready_list))
        while counter > 0:
            stream = self.ready_list[0]
            self.proceed_to_next_vnet_baseline(stream)
            self.ready_list.remove(stream)
            counter -= 1
            self.first_phase_streams += 1
            self.total_running_streams += 1

    def proceed_to_next_vnet_baseline(self, stream: StreamBaseline) -> None:
        """Move a stream to its next phase's queue, or finish it (ASTRA-sim: same name)."""
        previous_vnet = stream.current_queue_id
        if stream.steps_finished == 1:
            self.first_phase_streams -= 1
        if not stream.phases_to_go:
            stream.dataset.notify_stream_finished(self.now())
        phase = stream.my_current_phase
        if previous_vnet >= 0 and phase.enabled:
            target = self.active_streams[phase.queue_id]
            for i, s in enumerate(target):
                if s.stream_id == stream.stream_id:
                    del target[i]
                    break
        if not stream.phases_to_go:
            self.total_running_streams -= 1
            # the last phase's algorithm points back at the stream: unlink it, so a finished
            # stream is freed by its reference count, not left for the cyclic collector
            stream.my_current_phase = None
            if previous_vnet >= 0:
                self.scheduler_unit.notify_stream_removed(previous_vnet)
            return
        stream.steps_finished += 1
        nxt = stream.phases_to_go.pop(0)
        if nxt.queue_id < 0:
            nxt.queue_id = -nxt.queue_id
        stream.current_queue_id = nxt.queue_id
        stream.current_com_type = nxt.comm_type
        stream.my_current_phase = nxt
        stream.initialized = False
        if nxt.enabled:
            self.insert_stream(self.active_streams[nxt.queue_id], stream)
        if previous_vnet >= 0:
            self.scheduler_unit.notify_stream_removed(previous_vnet)
        self.scheduler_unit.notify_stream_added(nxt.queue_id)
