"""Scheduler-unit invariants under random collectives and knobs: no queue ever runs more
streams than ceil(active-chunks-per-dimension / queues-per-dim), and the chunks of one
collective that share a queue start their first phase in chunk order whatever the scheduling
policy (semantics §10.2)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from network.config import NetworkConfig
from system.config import SystemConfig
from system.main import run_simulation
from system.scheduler_unit import SchedulerUnit
from system.stream import StreamBaseline
from workload.builder import GraphBuilder


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    dims=st.sampled_from([[4], [2, 2], [2, 4], [3, 2, 2]]),
    colls=st.lists(st.tuples(st.sampled_from(["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]),
                             st.integers(1, 1 << 20)), min_size=1, max_size=4),
    splits=st.integers(1, 9), active=st.integers(1, 5), queues=st.integers(1, 3),
    policy=st.sampled_from(["LIFO", "FIFO"]), optimization=st.sampled_from(["localBWAware", "baseline"]),
)
def test_queue_limits_and_chunk_order(tmp_path_factory, monkeypatch, dims, colls, splits, active, queues,
                                      policy, optimization) -> None:
    tmp = tmp_path_factory.mktemp("su")
    b = GraphBuilder()
    for i, (c, size) in enumerate(colls):
        b.collective(f"k{i}", c, size)  # independent: the comm slot still runs them one at a time
    spec = b.write(tmp / "w.et")
    net = NetworkConfig.from_dict({"topology": ["Ring"] * len(dims), "npus_count": dims,
                                   "bandwidth": [50] * len(dims), "latency": [500] * len(dims)})
    impl = ["ring"] * len(dims)
    cfg = SystemConfig.from_dict({"scheduling-policy": policy, "preferred-dataset-splits": splits,
                                  "active-chunks-per-dimension": active, "collective-optimization": optimization,
                                  "local-mem-bw": 1600, **{f"{c}-implementation": impl for c in
                                                           ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    limit = -(-active // queues)
    # (rank, dataset, phase step, queue) -> stream ids in the order they started
    started: dict[tuple[int, int, int, int], list[int]] = {}
    original_start = SchedulerUnit.__dict__["_start_waiting"]
    original_init = StreamBaseline.__dict__["init"]

    def checked_start(self: SchedulerUnit, vnet: int) -> None:
        original_start(self, vnet)
        assert all(0 <= n <= limit for n in self.running_streams.values()), self.running_streams

    def recorded_init(self: StreamBaseline) -> None:
        key = (self.owner.id, self.dataset.my_id, self.steps_finished, self.current_queue_id)
        started.setdefault(key, []).append(self.stream_id)
        original_init(self)

    with monkeypatch.context() as m:  # undone after each example: Hypothesis reuses the fixture
        m.setattr(SchedulerUnit, "_start_waiting", checked_start)
        m.setattr(StreamBaseline, "init", recorded_init)
        r = run_simulation(spec, net, cfg, num_queues_per_dim=queues, symmetry=False)
    assert len(set(r.finish_ns)) == 1
    for key, ids in started.items():
        if key[2] == 1:  # first phase: the chunks sharing a queue start in creation order
            assert ids == sorted(ids), (key, ids)
