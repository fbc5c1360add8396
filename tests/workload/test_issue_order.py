"""Issue rules of the per-rank feeder (ASTRA-sim: Workload::issue_dep_free_nodes, HardwareResource)."""
from __future__ import annotations

from pathlib import Path

from chakra_proto import et_def_pb2 as pb
from network.config import NetworkConfig
from system.main import run_simulation
from workload.builder import GraphBuilder

NET = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [2], "bandwidth": [50], "latency": [500]})


def _run(tmp: Path, build) -> list[int]:  # noqa: ANN001
    for r in range(2):
        b = GraphBuilder()
        build(b)
        b.write(tmp / "w", r)
    return run_simulation(tmp / "w", NET, symmetry=False).finish_ns


def _invalid(b: GraphBuilder, deps=()) -> int:  # noqa: ANN001
    n = b._add("invalid", pb.INVALID_NODE, deps)
    return n.id


def test_children_of_an_instant_node_wait_for_the_next_completion(tmp_path: Path) -> None:
    """As in ASTRA-sim: the CPU op freed by the invalid node starts when the GPU op ends (5 µs)."""
    def build(b: GraphBuilder) -> None:
        b.comp("gpu", 5000)
        inv = _invalid(b)
        b.comp("cpu", 1000, deps=[inv], is_cpu_op=True)
    assert _run(tmp_path, build) == [6000, 6000]


def test_children_of_an_instant_node_run_when_nothing_else_would_wake_the_rank(tmp_path: Path) -> None:
    """ASTRA-sim stalls here (nothing left to complete); we issue the child at once."""
    def build(b: GraphBuilder) -> None:
        inv = _invalid(b)
        b.comp("cpu", 1000, deps=[inv], is_cpu_op=True)
    assert _run(tmp_path, build) == [1000, 1000]


def test_one_slot_per_kind_in_ascending_id(tmp_path: Path) -> None:
    """Two GPU ops run back to back; a CPU op overlaps them; lower ids go first."""
    def build(b: GraphBuilder) -> None:
        b.comp("g1", 3000)
        b.comp("g2", 2000)
        b.comp("c1", 4000, is_cpu_op=True)
    assert _run(tmp_path, build) == [5000, 5000]


def test_wide_graph_is_cheap(tmp_path: Path) -> None:
    """20,000 independent GPU ops: each completion looks at one candidate per kind, not all."""
    import time

    def build(b: GraphBuilder) -> None:
        for i in range(20_000):
            b.comp(f"g{i}", 1000)
    t0 = time.perf_counter()
    assert _run(tmp_path, build) == [20_000_000, 20_000_000]
    assert time.perf_counter() - t0 < 20
