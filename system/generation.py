"""How a collective becomes streams and phases, as a part of Sys (ASTRA-sim: Sys::generate_collective,
generate_collective_phase, determine_chunk_size, CollectiveImplLookup).

A collective of ``size`` bytes is cut into ``preferred-dataset-splits`` chunks (streams); each
stream gets one phase per logical dimension it involves, each phase an algorithm on a queue.
Every stream of a collective has the same phases, so the plan of phases is made once per
(type, logical topology, implementations, involved dimensions) and reused; the queues and the
algorithms' state stay each stream's own.
"""
from __future__ import annotations

from network.errors import InputError
from system.collective.algorithm import CONFIG_NAMES, Algorithm, ComType
from system.collective.packet_algorithm import PacketAlgorithm
from system.collective.ring import Ring
from system.comm_group import CommunicatorGroup
from system.config import CollectiveImpl, CollectiveOptimization, ImplType, SchedulingPolicy
from system.errors import SystemConfigError
from system.logical_topology import Direction, LogicalTopology
from system.stream import CollectiveLabel, CollectivePhase, DataSet, StreamBaseline
from system.sys_core import SYS_CORE

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

# a slot-for-slot copy in C (system/_sys_core.c); without it every phase runs its constructors
_clone_slots = None if SYS_CORE is None else SYS_CORE.clone_slots
# the same with new empty containers in the slots an algorithm names (PacketAlgorithm.FRESH_SLOTS)
_clone_fresh = None if SYS_CORE is None else SYS_CORE.clone_fresh
# the per-stream loop below in C (system/_sys_core.c: generate_streams), where compiled
_generate_streams = None if SYS_CORE is None else SYS_CORE.generate_streams


def _pristine_slot_copy(phase: CollectivePhase) -> "tuple | bool":
    """``_pristine`` with the C slot copy: what generate_streams makes a new shape's entry with."""
    return _pristine(phase, _clone_slots)


def _pristine(phase: CollectivePhase, clone: Callable[[Any], Any]) -> "tuple | bool":
    """What later streams of the same shape copy, taken before the phase runs: (a copy of the
    phase, copier, argument), where copier(argument) is a fresh algorithm: the C slot copy of
    the pristine one itself where its class adds nothing to it, else its fresh_copy; False
    where the class does not copy (each stream runs the constructors)."""
    original = phase.algorithm.fresh_copy(clone)
    if original is None:
        return False
    copy = clone(phase)
    copy.algorithm = original
    if type(original).fresh_copy is PacketAlgorithm.fresh_copy:  # no Python call per stream
        fresh = original.FRESH_SLOTS
        return (copy, clone, original) if not fresh else (copy, _clone_fresh, (original, fresh))
    return copy, original.fresh_copy, clone


class CollectiveGeneration:
    """The collective-generation methods of Sys (system/sys.py), which sets the state they use."""

    def get_logical_topology(self, com_type: ComType) -> LogicalTopology:
        topo = self._logical_topologies.get(com_type)
        if topo is None:
            impls = self.native_impls(com_type)
            topo = LogicalTopology.general_complex(self.id, self.physical_dims, impls)
            self._logical_topologies[com_type] = topo
        return topo

    def native_impls(self, com_type: ComType) -> tuple[CollectiveImpl, ...]:
        impls = self._native_impls.get(com_type)
        if impls is not None:
            return impls
        impls = self.config.impls_for(com_type.config_name)
        if not impls:
            raise SystemConfigError(
                self.config.path, f"key '{com_type.config_name}-implementation'",
                f"the workload runs a {com_type.config_name} but no implementation is configured for it",
            )
        self.config.check_list_lengths(len(self.physical_dims))
        self._native_impls[com_type] = impls
        return impls

    def collective_impls(self, com_type: ComType, node_id: int) -> tuple[CollectiveImpl, ...]:
        """Priority: per-node custom > *-implementation-custom > native list (CollectiveImplLookup)."""
        config = self.config
        if config.per_node_custom or config.custom_implementations:
            c = config.per_node_custom.get(node_id)
            if c is not None:
                return (c,)
            c = config.custom_implementations.get(com_type.config_name)
            if c is not None:
                return (c,)
        return self.native_impls(com_type)

    def generate_collective_for_node(self, com_type: ComType, size: int, involved: list[bool] | None,
                                     group: CommunicatorGroup | None, explicit_priority: int,
                                     node_id: int) -> DataSet:
        config = self.config
        if config.per_node_custom or config.custom_implementations:
            impls = self.collective_impls(com_type, node_id)
        else:  # collective_impls' answer, without its call
            impls = self._native_impls.get(com_type) or self.native_impls(com_type)
        if group is None:
            if impls[0].type is ImplType.CUSTOM:
                topo = None
            else:
                topo = self.get_logical_topology(com_type)
            return self.generate_collective(size, topo, impls, involved, com_type, explicit_priority, None)
        plan = group.get_collective_plan(com_type, impls)
        return self.generate_collective(size, plan.topology, plan.implementation_per_dimension,
                                        plan.dimensions_involved, com_type, explicit_priority, group)

    def plan_collective(self, com_type: ComType, size: int, involved: list[bool] | None,
                        group: CommunicatorGroup | None) -> tuple | None:
        """What generate_collective_for_node derives from a collective's type, size, involved
        dimensions and group alone, for start_planned: (type name, size, group id, group, streams,
        chunk, plan of phases, pristine phases). None where such a collective takes the general
        path: per-node or custom implementations, zero-byte chunks (a divergence to note), nothing
        to move, no dimension taking part. A workload plans each shape once and starts every
        collective of it from the plan (3 M of a 64-rank run's 391 M instructions were the general
        path's lookups, made again for every collective)."""
        config = self.config
        if config.per_node_custom or config.custom_implementations:
            return None
        impls = self._native_impls.get(com_type) or self.native_impls(com_type)
        if group is None:
            if impls[0].type is ImplType.CUSTOM:
                return None
            topology = self.get_logical_topology(com_type)
        else:
            plan = group.get_collective_plan(com_type, impls)
            topology, impls, involved = plan.topology, plan.implementation_per_dimension, plan.dimensions_involved
        if impls[0].type is ImplType.CUSTOM:
            return None
        chunk, total = self.determine_chunk_size(size, com_type)
        if chunk <= 0 or total <= 0:
            return None
        phases, pristine = self._planned_phases(topology, impls, involved, com_type)
        if not phases:
            return None
        return (CONFIG_NAMES[com_type], size, None if group is None else group.id, group, -(-total // chunk), chunk,
                phases, pristine)

    def start_planned(self, recipe: tuple, explicit_priority: int) -> DataSet:
        """A collective started from plan_collective's recipe: what generate_collective does for
        it, without deriving the recipe again."""
        name, size, gid, group, count, chunk, phases, pristine = recipe
        label = self._next_label(name, size, gid)
        dataset = DataSet(self._dataset_ids, count, self.now(), label)
        self._dataset_ids += 1
        self._start_streams(dataset, count, chunk, phases, pristine, group, self.get_priority(explicit_priority),
                            label.seq)
        return dataset

    def _next_label(self, name: str, size: int, gid: int | None) -> CollectiveLabel:
        """The label of this rank's next collective on group ``gid`` (the world: None), the run's
        one object for it (Sys.labels, shared by the ranks: the network's label check on every
        message then stops at identity)."""
        seq = self._collectives_on[gid] = self._collectives_on.get(gid, 0) + 1
        label = CollectiveLabel(name, size, gid, seq)
        return self.labels.setdefault(label, label)

    def _planned_phases(self, topology: LogicalTopology, impls: tuple[CollectiveImpl, ...],
                        involved: list[bool] | None, com_type: ComType) -> tuple[tuple, dict]:
        """The plan of phases of a collective's streams and its pristine phases, made once per key."""
        key = (com_type, topology, impls, None if involved is None else tuple(involved))
        planned = self._phase_plans.get(key)
        if planned is None:
            planned = self._phase_plans[key] = (self._phase_plan(topology, impls, involved, com_type), {})
        return planned

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
        return self._reserve_stream_ids(group, 1)

    def _reserve_stream_ids(self, group: CommunicatorGroup | None, count: int) -> int:
        """The first of ``count`` consecutive stream ids (ASTRA-sim: ``num_streams++`` per stream, on
        the group's counter where there is one, and the rank's own counter always); C's
        generate_streams takes a collective's in one call."""
        self.astra_streams += count
        if group is not None:
            group.num_streams += count
            return group.num_streams - count
        self.num_streams += count
        return self.num_streams - count

    def generate_collective(self, size: int, topology: LogicalTopology | None,
                            impls: tuple[CollectiveImpl, ...], involved: list[bool] | None,
                            com_type: ComType, explicit_priority: int,
                            group: CommunicatorGroup | None) -> DataSet:
        gid = None if group is None else group.id
        label = self._next_label(CONFIG_NAMES[com_type], size, gid)
        chunk, size = self.determine_chunk_size(size, com_type)
        if chunk == 0 and size > 0:
            chunk = 1
            self.divergences.note(("zero-chunk", com_type, size), (
                f"{label}: {size} B split into preferred-dataset-splits={self.config.preferred_dataset_splits} "
                f"chunks gives 0-byte chunks; ASTRA-sim loops forever on them (Sys::generate_collective "
                f"never reduces the size left); dtsim runs {size} chunks of 1 B"))
        count = -(-size // chunk) if chunk else 0
        dataset = DataSet(self._dataset_ids, count, self.now(), label)
        self._dataset_ids += 1
        pri = self.get_priority(explicit_priority)
        if impls[0].type is ImplType.CUSTOM:
            return self._generate_custom(dataset, size, impls[0], com_type, pri, group)
        if size <= 0:
            dataset.total_streams = 0
            return dataset
        plan, pristine = self._planned_phases(topology, impls, involved, com_type)
        if not plan:  # no dimension takes part
            dataset.active = False
            return dataset
        self._start_streams(dataset, count, chunk, plan, pristine, group, pri, label.seq)
        return dataset

    def _start_streams(self, dataset: DataSet, count: int, chunk: int, plan: tuple, pristine: dict,
                       group: CommunicatorGroup | None, pri: int, seq: int) -> None:
        """The collective's ``count`` streams, each with its phases, into the ready list."""
        # every stream is a chunk of the same size and so has the same phases; only the queues
        # (the allocators rotate) and the algorithms' state are its own
        if group is None:
            self.world_first_tags[seq] = self.astra_streams  # see divergence.world_tag_disagreements
        generate_phase = self.generate_collective_phase
        clone = _clone_slots
        if _generate_streams is not None:
            _generate_streams(self, dataset, count, chunk, plan, pristine, group, pri, generate_phase,
                              _pristine_slot_copy)
            return
        for _ in range(count):
            phases: list[CollectivePhase] = []
            remain = chunk
            for i, (ctype, basic, next_queue, impl, fixed) in enumerate(plan):
                queue_id, direction = fixed or next_queue()
                # an algorithm's initial state depends on the phase, its size and its direction
                # only: copies of a pristine phase and algorithm replace the constructors
                shape = (i, remain, direction)
                proto = pristine.get(shape)
                if proto is None:
                    ph = generate_phase(ctype, basic, remain, queue_id, direction, impl)
                    if clone is not None:
                        pristine[shape] = _pristine(ph, clone)
                elif proto is False:
                    ph = generate_phase(ctype, basic, remain, queue_id, direction, impl)
                else:
                    pristine_phase, copier, argument = proto
                    ph = clone(pristine_phase)
                    ph.queue_id = queue_id
                    ph.algorithm = copier(argument)
                phases.append(ph)
                remain = ph.final_data_size
            self.insert_into_ready_list(StreamBaseline(self, dataset, self._next_stream_id(group), phases, pri))
        dataset.total_streams = count

    def _phase_plan(self, topology: LogicalTopology, impls: tuple[CollectiveImpl, ...],
                    involved: list[bool] | None, com_type: ComType) -> tuple[tuple, ...]:
        """The phases of each stream of a collective, in order: (phase type, logical dimension's
        topology, the queue allocator it takes its queue from, implementation, the allocator's
        answer where it is always the same, else None). localBWAware
        all-reduce is reduce-scatter up the dimensions, all-reduce on the last active one, and
        all-gather back down (ASTRA-sim: Sys::generate_collective)."""
        n_dims = topology.get_num_of_dimensions()
        dim_mapper = list(range(n_dims))
        if com_type is ComType.ALL_GATHER:
            dim_mapper.reverse()
        levels = self.v_levels.levels
        plan: list[tuple] = []

        def active(d: int) -> bool:
            return topology.get_num_of_nodes_in_dimension(d) != 1 and \
                (involved is None or d >= len(involved) or bool(involved[d]))

        def add(ctype: ComType, d: int, next_queue: Callable[[], tuple[int, Direction]]) -> None:
            # a level of one queue gives every phase the same (queue, direction): asked once
            fixed = None if levels[d].rotates else next_queue()
            plan.append((ctype, topology.get_basic_topology_at_dimension(d), next_queue, impls[d], fixed))

        if com_type is not ComType.ALL_REDUCE or \
                self.config.collective_optimization is CollectiveOptimization.BASELINE:
            for dim in range(n_dims):
                d = dim_mapper[dim]
                if active(d):
                    add(com_type, d, levels[d].get_next_queue_id)
            return tuple(plan)
        last_active = 0
        for dim in range(n_dims):
            if active(dim_mapper[dim]):
                last_active = dim
        for dim in range(last_active):
            d = dim_mapper[dim]
            if active(d):
                add(ComType.REDUCE_SCATTER, d, levels[d].get_next_queue_id_first)
        dim = last_active
        while dim > 0 and not active(dim_mapper[dim]):
            dim -= 1
        if active(dim_mapper[dim]):
            d = dim_mapper[dim]
            add(ComType.ALL_REDUCE, d, levels[d].get_next_queue_id_first)
        dim -= 1
        while dim >= 0:
            d = dim_mapper[dim]
            if active(d):
                add(ComType.ALL_GATHER, d, levels[d].get_next_queue_id_last)
            dim -= 1
        return tuple(plan)

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
        if group is None:
            self.world_first_tags[dataset.label.seq] = self.astra_streams
        stream = StreamBaseline(self, dataset, self._next_stream_id(group), [phase], pri)
        algo.position = pos
        self.insert_into_ready_list(stream)
        return dataset

    def generate_collective_phase(self, com_type: ComType, topology: Any, data_size: int, queue_id: int,
                                  direction: Direction, impl: CollectiveImpl) -> CollectivePhase:
        t = impl.type
        algo: Algorithm
        try:
            if t is ImplType.RING or t is ImplType.ONE_RING:
                algo = Ring(com_type, self.id, topology, data_size, direction)
            elif t is ImplType.DIRECT or t is ImplType.ONE_DIRECT:
                algo = _algorithm("all_to_all", "AllToAll")(com_type, impl.window, self.id, topology, data_size,
                                                            direction)
            elif t is ImplType.HALVING_DOUBLING or t is ImplType.ONE_HALVING_DOUBLING:
                algo = _algorithm("halving_doubling", "HalvingDoubling")(com_type, self.id, topology, data_size)
            elif t is ImplType.DOUBLE_BINARY_TREE:
                algo = _algorithm("double_binary_tree", "DoubleBinaryTreeAllReduce")(self.id, topology, data_size)
            else:
                raise SystemConfigError(self.config.path, "implementation", f"{t.value} cannot run as a phase")
        except InputError as e:
            if e.path is not None:
                raise
            # an algorithm refuses its shape: the choice came from the system config, so name it
            raise SystemConfigError(self.config.path, f"key '{com_type.config_name}-implementation' ({t.value})",
                                    e.problem) from None
        return CollectivePhase(queue_id, algo)


_ALGORITHMS: dict[str, type] = {}


def _algorithm(module: str, name: str) -> type:
    """system.collective.<module>.<name>, imported on first use (a run imports the algorithms it
    runs) and then found here: an import statement per phase cost a 256-rank halving-doubling
    layout 5 % of its wall."""
    cls = _ALGORITHMS.get(name)
    if cls is None:
        import importlib

        cls = _ALGORITHMS[name] = getattr(importlib.import_module(f"system.collective.{module}"), name)
    return cls
