"""The system layer of one NPU (ASTRA-sim: Sys).

``Sys`` turns a collective into chunks (streams), gives each chunk one phase per logical
dimension, and keeps the ready list and the per-queue active lists that the scheduler unit
works on. It owns the NPU's view of time: events it registers are batched per tick exactly as
ASTRA-sim's ``Sys::try_register_event`` does, because the order of same-tick events decides
which stream a queue starts first.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from network.api import NetworkBackend
from system.collective.algorithm import Algorithm, ComType
from system.collective.ring import Ring
from system.comm_group import CommunicatorGroup
from system.config import CollectiveImpl, CollectiveOptimization, ImplType, SchedulingPolicy, SystemConfig
from network.errors import InputError
from system.errors import SystemConfigError
from system.logical_topology import Direction, LogicalTopology
from system.queue_levels import QueueLevels
from system.rendezvous import RendezvousMixin
from system.scheduler_unit import SchedulerUnit
from system.stream import CollectiveLabel, CollectivePhase, DataSet, StreamBaseline

NATIVE_TAG_OFFSET = 0
COLLECTIVE_TAG_OFFSET = 500_000_000
_UNLIMITED = 100_000_000  # ASTRA-sim's hard-coded active_first_phase / max_running


def _noop(*_: object) -> None:
    pass


class Sys(RendezvousMixin):
    """One NPU's system layer. Time is integer ns (cycles at 1 GHz)."""

    def __init__(self, npu_id: int, backend: NetworkBackend, config: SystemConfig,
                 queues_per_dim: list[int] | None = None, custom_loader: Any = None,
                 rendezvous: bool = False) -> None:
        self.id = npu_id
        self.backend = backend
        self.config = config
        self.now = backend.now
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
        self._exchange = backend.exchange
        self.custom_loader = custom_loader
        self.ring_batcher = None  # system/ring_batch.py, set by run_simulation where it applies
        self.rendezvous = rendezvous
        if rendezvous:
            self._net_send = self._rendezvous_send  # type: ignore[method-assign]
            self._net_recv = self._rendezvous_recv  # type: ignore[method-assign]
            self.collective_send_recv = self._collective_send_recv_via_net  # type: ignore[method-assign]

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
        tag = stream.stream_id % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + COLLECTIVE_TAG_OFFSET
        # the receive calls the posting algorithm itself: its phase is current until every
        # message it waits for has arrived (what _on_collective_packet would look up)
        algo = stream.my_current_phase.algorithm
        self._exchange(self.id, dst, src, size, tag, stream.dataset.label, type(algo).on_packet_received, algo)

    def _collective_send_recv_via_net(self, stream: StreamBaseline, dst: int, src: int, size: int) -> None:
        self.collective_send(stream, dst, size)
        self.collective_recv(stream, src, size)

    def collective_send(self, stream: StreamBaseline, dst: int, size: int) -> None:
        tag = stream.stream_id % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + COLLECTIVE_TAG_OFFSET
        self._net_send(dst, size, tag, stream.dataset.label, _noop)

    def collective_recv(self, stream: StreamBaseline, src: int, size: int) -> None:
        tag = stream.stream_id % (COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET) + COLLECTIVE_TAG_OFFSET
        self._net_recv(src, size, tag, stream.dataset.label, self._on_collective_packet, stream)

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

    # -- collectives ----------------------------------------------------------------------
    def get_logical_topology(self, com_type: ComType) -> LogicalTopology:
        topo = self._logical_topologies.get(com_type)
        if topo is None:
            impls = self.native_impls(com_type)
            topo = LogicalTopology.general_complex(self.id, self.physical_dims, impls)
            self._logical_topologies[com_type] = topo
        return topo

    def native_impls(self, com_type: ComType) -> tuple[CollectiveImpl, ...]:
        impls = self.config.impls_for(com_type.config_name)
        if not impls:
            raise SystemConfigError(
                self.config.path, f"key '{com_type.config_name}-implementation'",
                f"the workload runs a {com_type.config_name} but no implementation is configured for it",
            )
        if len(impls) > len(self.physical_dims):
            raise SystemConfigError(
                self.config.path, f"key '{com_type.config_name}-implementation'",
                f"lists {len(impls)} implementations but the network has {len(self.physical_dims)} dimension(s)",
            )
        return impls

    def collective_impls(self, com_type: ComType, node_id: int) -> tuple[CollectiveImpl, ...]:
        """Priority: per-node custom > *-implementation-custom > native list (CollectiveImplLookup)."""
        c = self.config.per_node_custom.get(node_id)
        if c is not None:
            return (c,)
        c = self.config.custom_implementations.get(com_type.config_name)
        if c is not None:
            return (c,)
        return self.native_impls(com_type)

    def generate_collective_for_node(self, com_type: ComType, size: int, involved: list[bool] | None,
                                     group: CommunicatorGroup | None, explicit_priority: int,
                                     node_id: int) -> DataSet:
        impls = self.collective_impls(com_type, node_id)
        if group is None:
            if impls[0].type is ImplType.CUSTOM:
                topo = None
            else:
                topo = self.get_logical_topology(com_type)
            return self.generate_collective(size, topo, impls, involved, com_type, explicit_priority, None)
        plan = group.get_collective_plan(com_type, impls)
        return self.generate_collective(size, plan.topology, plan.implementation_per_dimension,
                                        plan.dimensions_involved, com_type, explicit_priority, group)

    def determine_chunk_size(self, size: int, com_type: ComType) -> tuple[int, int]:
        """(chunk, size): chunk = size / splits, at least total_nodes bytes except for
        all-gather, in which case the size grows to splits × chunk (semantics §7.1)."""
        splits = self.config.preferred_dataset_splits
        chunk = size // splits
        if com_type is not ComType.ALL_GATHER and self.total_nodes > chunk:
            chunk = self.total_nodes
            size = splits * chunk
        return chunk, size

    def get_priority(self, explicit_priority: int) -> int:
        policy = self.config.scheduling_policy
        if policy is SchedulingPolicy.LIFO:
            self.priority_counter += 1
            return self.priority_counter - 1
        if policy is SchedulingPolicy.FIFO:
            self.priority_counter -= 1
            return self.priority_counter + 1
        return explicit_priority

    def _next_stream_id(self, group: CommunicatorGroup | None) -> int:
        if group is not None:
            group.num_streams += 1
            return group.num_streams - 1
        self.num_streams += 1
        return self.num_streams - 1

    def generate_collective(self, size: int, topology: LogicalTopology | None,
                            impls: tuple[CollectiveImpl, ...], involved: list[bool] | None,
                            com_type: ComType, explicit_priority: int,
                            group: CommunicatorGroup | None) -> DataSet:
        gid = None if group is None else group.id
        seq = self._collectives_on[gid] = self._collectives_on.get(gid, 0) + 1
        label = CollectiveLabel(com_type.config_name, size, gid, seq)
        chunk, size = self.determine_chunk_size(size, com_type)
        if chunk == 0 and size > 0:
            chunk = 1  # ASTRA-sim loops forever here (all-gather smaller than the split count)
        streams = math.ceil(size / chunk) if chunk else 0
        dataset = DataSet(self._dataset_ids, streams, self.now(), label)
        self._dataset_ids += 1
        pri = self.get_priority(explicit_priority)
        if impls[0].type is ImplType.CUSTOM:
            return self._generate_custom(dataset, size, impls[0], com_type, pri, group)

        def involved_dim(d: int) -> bool:
            return involved is None or d >= len(involved) or bool(involved[d])

        n_dims = topology.get_num_of_dimensions()
        dim_mapper = list(range(n_dims))
        if com_type is ComType.ALL_GATHER:
            dim_mapper.reverse()
        count = 0
        while size > 0:
            count += 1
            size = 0 if chunk > size else size - chunk
            remain = chunk
            phases: list[CollectivePhase] = []

            def add(ctype: ComType, d: int, queue: tuple[int, Direction]) -> None:
                nonlocal remain
                ph = self.generate_collective_phase(ctype, topology.get_basic_topology_at_dimension(d),
                                                    remain, queue[0], queue[1], impls[d])
                phases.append(ph)
                remain = ph.final_data_size

            def active(d: int) -> bool:
                return topology.get_num_of_nodes_in_dimension(d) != 1 and involved_dim(d)

            if com_type is not ComType.ALL_REDUCE or \
                    self.config.collective_optimization is CollectiveOptimization.BASELINE:
                for dim in range(n_dims):
                    d = dim_mapper[dim]
                    if active(d):
                        add(com_type, d, self.v_levels.get_next_queue_at_level(d))
            else:
                last_active = 0
                for dim in range(n_dims):
                    if active(dim_mapper[dim]):
                        last_active = dim
                dim = 0
                for dim in range(last_active):
                    d = dim_mapper[dim]
                    if active(d):
                        add(ComType.REDUCE_SCATTER, d, self.v_levels.get_next_queue_at_level_first(d))
                dim = last_active
                while dim > 0 and not active(dim_mapper[dim]):
                    dim -= 1
                if active(dim_mapper[dim]):
                    d = dim_mapper[dim]
                    add(ComType.ALL_REDUCE, d, self.v_levels.get_next_queue_at_level_first(d))
                dim -= 1
                while dim >= 0:
                    d = dim_mapper[dim]
                    if active(d):
                        add(ComType.ALL_GATHER, d, self.v_levels.get_next_queue_at_level_last(d))
                    dim -= 1
            if phases:
                stream = StreamBaseline(self, dataset, self._next_stream_id(group), phases, pri)
                self.insert_into_ready_list(stream)
            else:
                dataset.active = False
                break
        if dataset.active:
            dataset.total_streams = count
        return dataset

    def _generate_custom(self, dataset: DataSet, size: int, impl: CollectiveImpl, com_type: ComType,
                         pri: int, group: CommunicatorGroup | None) -> DataSet:
        from system.collective.custom import CustomAlgorithm, resolve_custom_prefix

        if self.custom_loader is None:
            raise SystemConfigError(self.config.path, "custom implementation", "custom collectives are not available")
        pos = group.pos_in_group if group is not None else self.id
        # ASTRA-sim replays <prefix>.<position in the collective>.et (CustomAlgorithm.cc)
        prefix = resolve_custom_prefix(impl.filename, self.config.path, pos)
        algo = CustomAlgorithm(com_type, self.id, size, self.custom_loader(prefix, pos), group)
        phase = CollectivePhase(0, algo)
        dataset.total_streams = 1
        stream = StreamBaseline(self, dataset, self._next_stream_id(group), [phase], pri)
        algo.position = pos
        self.insert_into_ready_list(stream)
        return dataset

    def generate_collective_phase(self, com_type: ComType, topology: Any, data_size: int, queue_id: int,
                                  direction: Direction, impl: CollectiveImpl) -> CollectivePhase:
        t = impl.type
        algo: Algorithm
        try:
            if t in (ImplType.RING, ImplType.ONE_RING):
                algo = Ring(com_type, self.id, topology, data_size, direction)
            elif t in (ImplType.DIRECT, ImplType.ONE_DIRECT):
                from system.collective.all_to_all import AllToAll
                algo = AllToAll(com_type, impl.window, self.id, topology, data_size, direction)
            elif t in (ImplType.HALVING_DOUBLING, ImplType.ONE_HALVING_DOUBLING):
                from system.collective.halving_doubling import HalvingDoubling
                algo = HalvingDoubling(com_type, self.id, topology, data_size)
            elif t is ImplType.DOUBLE_BINARY_TREE:
                from system.collective.double_binary_tree import DoubleBinaryTreeAllReduce
                algo = DoubleBinaryTreeAllReduce(self.id, topology, data_size)
            else:
                raise SystemConfigError(self.config.path, "implementation", f"{t.value} cannot run as a phase")
        except InputError as e:
            if e.path is not None:
                raise
            # an algorithm refuses its shape: the choice came from the system config, so name it
            raise SystemConfigError(self.config.path, f"key '{com_type.config_name}-implementation' ({t.value})",
                                    e.problem) from None
        return CollectivePhase(queue_id, algo)

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
