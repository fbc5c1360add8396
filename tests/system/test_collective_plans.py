"""A collective started from its shape's plan (Sys.plan_collective, start_planned) is the one the
general path (generate_collective_for_node) starts: the same dataset, label, streams, stream ids,
priorities, phases and queues, and the same counters left behind, for any type, size, group,
involved dimensions, implementations and scheduling policy; shapes that have no plan (nothing
to move, zero-byte chunks, no dimension taking part) go the general path."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from system.collective.algorithm import ComType
from system.comm_group import CommunicatorGroup
from system.config import SystemConfig
from system.errors import SystemConfigError
from system.sys import Sys

IMPLS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")
TYPES = (ComType.ALL_REDUCE, ComType.ALL_GATHER, ComType.REDUCE_SCATTER, ComType.ALL_TO_ALL)


def _sys(dims: list[int], impls: list[str], policy: str, splits: int, rank: int) -> tuple[Sys, list[tuple]]:
    net = NetworkConfig.from_dict({"topology": ["Ring"] * len(dims), "npus_count": dims,
                                   "bandwidth": [50.0] * len(dims), "latency": [500.0] * len(dims)})
    cfg = SystemConfig.from_dict({
        "scheduling-policy": policy, "preferred-dataset-splits": splits, "endpoint-delay": 10,
        "active-chunks-per-dimension": 1, **{f"{t}-implementation": impls for t in
                                             ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    s = Sys(rank, CongestionUnawareBackend(net), cfg)
    started: list[tuple] = []

    def record(stream) -> None:  # the streams as generated, not run
        started.append((stream.dataset.my_id, stream.stream_id, stream.priority, [
            (ph.queue_id, ph.initial_data_size, ph.final_data_size, ph.comm_type, type(ph.algorithm).__name__)
            for ph in stream.phases_to_go]))

    s.insert_into_ready_list = record
    return s, started


def _state(s: Sys, datasets: list) -> tuple:
    return ([(d.my_id, d.total_streams, d.active, d.finished, d.creation_tick, d.label) for d in datasets],
            dict(s._collectives_on), s._dataset_ids, s.priority_counter, s.num_streams, s.astra_streams,
            dict(s.world_first_tags))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dims=st.sampled_from([[8], [4, 2], [2, 2, 2], [1, 8]]),
       impl=st.sampled_from(IMPLS), policy=st.sampled_from(["LIFO", "FIFO", "EXPLICIT"]),
       splits=st.sampled_from([1, 4, 16]), rank=st.integers(0, 7),
       calls=st.lists(st.tuples(st.sampled_from(TYPES), st.sampled_from([0, 1, 7, 64, 1000, 1 << 20]),
                                st.one_of(st.none(), st.lists(st.booleans(), min_size=1, max_size=3)),
                                st.booleans(), st.integers(0, 3)), min_size=1, max_size=6))
def test_a_planned_start_is_the_general_one(dims, impl, policy, splits, rank, calls) -> None:
    impls = [impl] * len(dims)
    general, general_streams = _sys(dims, impls, policy, splits, rank)
    planned, planned_streams = _sys(dims, impls, policy, splits, rank)
    members = [m for m in range(8) if m % 2 == rank % 2]  # a group of half the ranks, rank among them
    groups = {s: CommunicatorGroup(5, members, s) for s in (general, planned)}
    recipes: dict[tuple, tuple | None] = {}
    done_general, done_planned = [], []
    for com_type, size, involved, grouped, priority in calls:
        def start_planned() -> tuple:
            shape = (com_type, size, None if involved is None else tuple(involved), grouped)
            if shape not in recipes:
                recipes[shape] = planned.plan_collective(com_type, size, involved,
                                                         groups[planned] if grouped else None)
            recipe = recipes[shape]
            return recipe, (planned.start_planned(recipe, priority) if recipe is not None else
                            planned.generate_collective_for_node(com_type, size, involved,
                                                                 groups[planned] if grouped else None, priority, 0))

        try:
            done_general.append(general.generate_collective_for_node(
                com_type, size, involved, groups[general] if grouped else None, priority, 0))
        except SystemConfigError as e:  # an implementation that cannot run this type: the same error
            with pytest.raises(SystemConfigError) as planned_error:
                start_planned()
            assert str(planned_error.value) == str(e)
            return  # the run ends there (exit 2)
        recipe, dataset = start_planned()
        done_planned.append(dataset)
        if recipe is not None:  # a shape with a plan moves data: streams, active
            assert done_planned[-1].total_streams > 0 and done_planned[-1].active
        assert _state(planned, done_planned) == _state(general, done_general)
    assert planned_streams == general_streams
    assert groups[planned].num_streams == groups[general].num_streams
