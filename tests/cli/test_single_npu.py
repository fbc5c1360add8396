"""One NPU: a network of 1 runs, and a single-rank workload's collectives take no time (issue 14, item 5)."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from conftest import EXAMPLES
from system.main import main
from system.simulation import run_simulation
from workload.builder import GraphBuilder
from workload.triosim import load_trace
from workload.triosim.rank_graph import round_half_up

MEMORY = '{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 50}'


def _network(folder: Path, topology: str, npus: int = 1) -> Path:
    p = folder / f"{topology}_{npus}.yml"
    p.write_text(f"topology: [ {topology} ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    return p


def _mixed(folder: Path) -> str:
    """GPU compute, a CPU op, every native collective and a remote-memory load, in a chain."""
    b = GraphBuilder()
    n = b.comp("fwd", 1500)
    n = b.comp("host", 700, deps=[n], is_cpu_op=True)
    for coll in ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"):
        n = b.collective(coll.lower(), coll, 1 << 20, deps=[n])
    n = b.memory("load", "load", 4000, deps=[n])
    b.comp("opt", 500, deps=[n])
    return str(b.write(folder / "w", 0))


@pytest.mark.parametrize("topology", ["Ring", "Switch", "FullyConnected"])
@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
@pytest.mark.parametrize("symmetry", [True, False])
def test_one_npu_runs_compute_cpu_and_memory_and_collectives_take_no_time(
        tmp_path: Path, topology: str, backend: str, symmetry: bool) -> None:
    (tmp_path / "mem.json").write_text(MEMORY)
    r = run_simulation(_mixed(tmp_path), _network(tmp_path, topology), backend=backend, symmetry=symmetry,
                       remote_memory=tmp_path / "mem.json")
    memory_ns = 100 + 4000 // 50  # remote-mem-latency + size / remote-mem-bw
    assert r.npus_count == 1
    assert r.finish_ns == [1500 + 700 + memory_ns + 500]
    colls = r.workloads[0].collectives
    assert [c["type"] for c in colls] == ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]
    assert all(c["end"] == c["start"] for c in colls)


def test_a_one_member_group_on_a_larger_network_takes_no_time(tmp_path: Path) -> None:
    for rank in range(4):
        b = GraphBuilder()
        c = b.comp("fwd", 1000)
        b.collective("alone", "ALL_REDUCE", 1 << 20, deps=[c], pg_name=str(rank + 1))
        b.write(tmp_path / "g", rank)
    (tmp_path / "groups.json").write_text('{"1": [0], "2": [1], "3": [2], "4": [3]}')
    r = run_simulation(tmp_path / "g", _network(tmp_path, "Ring", 4), comm_groups=tmp_path / "groups.json")
    assert r.finish_ns == [1000] * 4


@pytest.mark.parametrize("trace", ["vgg13", "resnet50"])
def test_triosim_single_gpu_time_is_the_sum_of_operator_times(trace: str, capsys) -> None:
    """TrioSim's case 0: one GPU; the end is Σ Operator_cudatimenooverlap, computed here from the CSV."""
    ops = load_trace(EXAMPLES / "triosim" / trace).operators
    expected = round_half_up(sum((op.time_us for op in ops), Fraction(0)) * 1000)
    code = main(["--workload", str(EXAMPLES / "triosim" / trace), "--batch-size", "128",
                 "--network", str(EXAMPLES / "network" / "Ring_1npu.yml"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"end {expected} cycles" in out
    warned = [line for line in err.splitlines() if line.startswith("warning")]
    assert len(warned) == 1 and "dimension(s) 0 of 1 NPU" in warned[0]  # ASTRA-sim refuses a dimension of 1 NPU
