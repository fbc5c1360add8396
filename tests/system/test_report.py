"""The report: per-rank breakdown that adds up, per-collective NCCL bandwidths, bytes per
dimension, the terminal table, and the JSON file."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import EXAMPLES, run_cli
from system.main import run_simulation
from system.report import build_report, nccl_bandwidths
from workload.builder import GraphBuilder

RING4 = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
SYSTEM = EXAMPLES / "system" / "Ring_4chunks.json"
# per rank r: compute kernels (ns) of the overlap scenario below
COMPUTE_NS = [20_000, 15_500, 30_250, 7_777, 12_345]


def write_overlap_workload(d: Path, npus: int = 4) -> tuple[str, Path]:
    """A DDP-like step per rank: backward compute overlaps gradient all-reduces, a CPU-only
    'dataloader' leaves the GPU idle, ranks start skewed by 1 µs each."""
    for r in range(npus):
        b = GraphBuilder()
        f = b.comp("fwd_gemm", COMPUTE_NS[0] + 1000 * r)
        g1 = b.comp("bwd_layer2", COMPUTE_NS[1], deps=[f])
        ar1 = b.collective("grad_ar_layer2", "ALL_REDUCE", 1 << 20, deps=[g1])
        g2 = b.comp("bwd_layer1", COMPUTE_NS[2], deps=[g1])
        ar2 = b.collective("grad_ar_layer1", "ALL_REDUCE", 4 << 20, deps=[g2])
        cpu = b.comp("optimizer_launch", 3_000, deps=[ar1], is_cpu_op=True)
        ag = b.collective("param_ag", "ALL_GATHER", 256 << 10, deps=[ar2])
        b.comp("opt_step", COMPUTE_NS[3], deps=[ar1, ar2, cpu])
        dl = b.comp("dataloader", 5_000, deps=[ag], is_cpu_op=True)
        b.comp("fwd_next", COMPUTE_NS[4], deps=[dl])
        b.write(d / "ddp", r)
    net = d / "ring.yml"
    net.write_text(RING4.replace("4 ]", f"{npus} ]", 1))
    return str(d / "ddp"), net


@pytest.fixture
def overlap_run(tmp_path: Path):
    prefix, net = write_overlap_workload(tmp_path)
    result = run_simulation(prefix, net, SYSTEM)
    return result, build_report(result)


def test_breakdown_adds_up_and_matches_the_schedule(overlap_run) -> None:
    result, rep = overlap_run
    assert [r["rank"] for r in rep["ranks"]] == [0, 1, 2, 3]
    for r in rep["ranks"]:
        parts = ("compute_cycles", "exposed_comm_cycles", "exposed_cpu_cycles", "idle_cycles")
        assert sum(r[k] for k in parts) == r["finish_cycles"]
        assert r["finish_cycles"] == result.finish_ns[r["rank"]]
        assert r["compute_cycles"] == sum(COMPUTE_NS) + 1000 * r["rank"]  # one compute slot: no overlap
        assert r["cpu_cycles"] == 8_000  # the optimizer launch and the dataloader
        # rank r finishes the first all-reduce 1 µs × r after rank 0 and enters the second at once
        # (one communication slot), where it waits for rank 3: its optimizer launch runs during
        # that wait and is exposed for (3 - r) µs; the dataloader (5 µs) always is
        assert r["exposed_cpu_cycles"] == 5_000 + 1000 * (3 - r["rank"])
        assert r["idle_cycles"] == 0 and r["wait_cycles"] == 0  # every wait is covered by compute or CPU
        assert 0 < r["exposed_comm_cycles"] < r["comm_cycles"]
        hidden = r["comm_cycles"] - r["exposed_comm_cycles"]
        assert r["overlap_pct"] == round(100 * hidden / r["comm_cycles"], 3)
    t = rep["totals"]
    assert t["compute_cycles"] + t["exposed_comm_cycles"] + t["exposed_cpu_cycles"] + t["idle_cycles"] \
        == sum(result.finish_ns)
    assert t["collectives"] == 12


@pytest.mark.parametrize("coll,n,factor,gathered", [
    ("ALL_REDUCE", 8, 2 * 7 / 8, False),
    ("ALL_GATHER", 8, 7 / 8, True),      # Chakra's comm_size is the per-rank input
    ("REDUCE_SCATTER", 4, 3 / 4, False),
    ("ALL_TO_ALL", 16, 15 / 16, False),
    ("BROADCAST", 4, 1.0, False),
])
def test_nccl_bandwidth_definitions(coll: str, n: int, factor: float, gathered: bool) -> None:
    size, t = 1 << 20, 64_440
    data, algbw, busbw = nccl_bandwidths(coll, size, n, t)
    assert data == (size * n if gathered else size)
    assert algbw == pytest.approx(data / t, abs=1e-6)  # bytes/ns = GB/s
    assert busbw == pytest.approx(data / t * factor, abs=1e-6)
    assert nccl_bandwidths(coll, size, n, 0)[1:] == (None, None)


def test_bundled_example_report(example_args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "sub" / "r.json"
    r = run_cli(*example_args, "--report", str(out))
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    colls = rep["collectives"]
    assert [c["rank"] for c in colls] == list(range(8))
    for c in colls:
        assert c == {**c, "type": "ALL_REDUCE", "size_bytes": 1 << 20, "algorithm": "ring", "group_size": 8,
                     "start_cycles": 0, "end_cycles": 64440, "duration_cycles": 64440}
        assert c["algbw_gb_s"] == pytest.approx((1 << 20) / 64440, abs=1e-6)
        assert c["busbw_gb_s"] == pytest.approx((1 << 20) / 64440 * 14 / 8, abs=1e-6)
    (summary,) = rep["collective_summary"]
    assert summary["count"] == 8 and summary["mean_duration_cycles"] == 64440  # ASTRA-sim: B_unaware_Ring8_all_reduce
    (dim,) = rep["network"]["dimensions"]
    assert dim == {"dim": 0, "topology": "Ring", "npus": 8, "bandwidth_gb_s": 50.0, "latency_ns": 500.0,
                   "bytes": rep["network"]["bytes_per_dim"][0]}
    # a ring all-reduce sends 2(N-1) messages of size/N per chunk and rank
    assert dim["bytes"] == 8 * 2 * 7 * ((1 << 20) // 4 // 8) * 4
    # written atomically: no temporary file left, an ordinary file mode
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def test_terminal_table(example_args: list[str]) -> None:
    r = run_cli(*example_args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:8] == [f"sys[{i}] finished, 64440 cycles (6.444e-05 s)" for i in range(8)]
    assert lines[-1].startswith("total: 8 ranks") and "end 64440 cycles" in lines[-1]
    table = "\n".join(lines[8:-1])
    assert "exposed comm" in table and "exposed CPU" in table and "of it wait" in table and "overlap" in table
    assert "0-7" in table and "64440" in table and "100.0%" in table  # equal ranks share a row
    assert "ALL_REDUCE" in table and "ring" in table and "busbw GB/s" in table and "28.476" in table
    assert "dim 0 Ring(8) moved 14 MiB" in table
    q = run_cli(*example_args, "--quiet")
    (only,) = q.stdout.splitlines()  # --quiet: the total line alone
    assert only.rsplit(";", 1)[0] == lines[-1].rsplit(";", 1)[0]


def test_group_size_comes_from_the_communicator_group(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        if r < 2:
            b.collective("ar", "ALL_REDUCE", 1 << 20, pg_name="1")
        else:
            b.comp("c", 1000)
        b.write(tmp_path / "pg", r)
    (tmp_path / "groups.json").write_text('{"1": [0, 1]}')
    net = tmp_path / "ring.yml"
    net.write_text(RING4)
    result = run_simulation(tmp_path / "pg", net, SYSTEM, comm_groups=tmp_path / "groups.json")
    colls = build_report(result)["collectives"]
    assert [c["rank"] for c in colls] == [0, 1]
    for c in colls:
        assert c["group_size"] == 2 and c["pg"] == "1" and c["algorithm"] == "ring"
        assert c["busbw_gb_s"] == c["algbw_gb_s"]  # 2(N-1)/N = 1 for two ranks


def test_long_record_lists_are_written_one_record_per_line(tmp_path: Path) -> None:
    from system.report import write_json_atomic

    records = [{"rank": r, "name": f"ar \"{r}\"\n", "bw": r / 3, "pg": None, "dims": [True, False]} for r in range(300)]
    data = {"ranks": records[:5], "nested": {"collectives": records, "empty": []}, "nan": float("inf")}
    out = tmp_path / "r.json"
    write_json_atomic(out, data)
    text = out.read_text()
    assert json.loads(text) == data  # the same data as json.dump writes
    lines = text.splitlines()
    assert sum(line.lstrip().startswith('{"rank": ') for line in lines) == 300  # the long list: one per line
    assert '  "ranks": [' not in text and ' "ranks": [\n  {\n   "rank": 0,' in text  # short lists keep the indent


def test_collective_table_shows_the_wait_its_bandwidths_leave_out(tmp_path) -> None:
    """Rank 0 computes 100 us before the all-reduce, rank 1 enters at once: the collective's mean
    duration holds rank 1's wait, the table says how much, and algbw is over the rest."""
    from system.report import build_report, format_breakdown
    from system.simulation import run_simulation
    from workload.builder import GraphBuilder

    for rank in range(2):
        b = GraphBuilder()
        deps = [b.comp("c", 100_000)] if rank == 0 else []
        b.collective("ar", "ALL_REDUCE", 1 << 20, deps)
        b.write(tmp_path / "w", rank)
    (tmp_path / "r2.yml").write_text("topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n")
    rep = build_report(run_simulation(tmp_path / "w", tmp_path / "r2.yml"))
    (s,) = rep["collective_summary"]
    assert s["mean_wait_cycles"] == pytest.approx(100_000 / 2, rel=0.01)      # rank 1 waited, rank 0 did not
    moving = s["mean_duration_cycles"] - s["mean_wait_cycles"]
    assert s["algbw_gb_s"] == pytest.approx((1 << 20) / moving, rel=1e-6)
    row = next(line for line in format_breakdown(rep).splitlines() if line.strip().startswith("ALL_REDUCE"))
    assert f"{s['mean_wait_cycles']:.1f}" in row.split()
