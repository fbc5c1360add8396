"""Budgets on runaway work: ``--max-events`` and ``--max-wall-seconds`` stop a run with exit 2 and
one line that says which budget ran out, where (simulated time, events) and how to raise it; no
report is written for a run that did not finish."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES
from system.main import main
from workload.builder import GraphBuilder

EXAMPLE = ["--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
           "--network", str(EXAMPLES / "network" / "Ring_8npus.yml"), "--quiet"]


def _events(tmp_path: Path, args: list[str]) -> int:
    out = tmp_path / "full.json"
    assert main([*args, "--report", str(out)]) == 0
    return json.loads(out.read_text())["totals"]["events"]


@pytest.mark.parametrize("symmetry", [[], ["--no-symmetry"]], ids=["symmetric", "every-rank"])
def test_event_budget_stops_cleanly_and_an_exact_budget_finishes(tmp_path: Path, capsys, symmetry: list[str]) -> None:
    args = [*EXAMPLE, *symmetry]
    events = _events(tmp_path, args)
    assert events > 10
    out = tmp_path / "r.json"
    assert main([*args, "--max-events", str(events), "--report", str(out)]) == 0
    out.unlink()
    capsys.readouterr()
    assert main([*args, "--max-events", str(events - 1), "--report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: event budget of {events - 1} events exhausted at simulated time ")
    assert "events still queued (raise --max-events)" in err and "\n" not in err
    assert not out.exists()


def _long_workload(tmp_path: Path) -> list[str]:
    """8 ranks run one file of 40,000 all-reduces in a row: 37 M events, over 10 s of them on the
    development machine (8,000 once were, until the event path got faster), little setup."""
    b = GraphBuilder()
    prev: list[int] = []
    for i in range(40_000):
        prev = [b.collective(f"ar{i}", "ALL_REDUCE", 1024, deps=prev)]
    b.write(tmp_path / "long", 0)
    return ["--workload", str(tmp_path / "long.0.et"), "--network", str(EXAMPLES / "network" / "Ring_8npus.yml"),
            "--no-symmetry", "--no-batching", "--quiet"]


def test_wall_time_budget_stops_the_event_loop(tmp_path: Path, capsys) -> None:
    args = _long_workload(tmp_path)
    t0 = time.perf_counter()
    # 3 s: on a loaded machine reading the workload must not use up the budget before the loop runs
    assert main([*args, "--max-wall-seconds", "3", "--report", str(tmp_path / "r.json")]) == 2
    took = time.perf_counter() - t0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: wall-time budget of 3 s exhausted at simulated time ")
    assert "events (raise --max-wall-seconds)" in err and "\n" not in err
    assert took < 7.0 and not (tmp_path / "r.json").exists()


def test_wall_time_budget_also_bounds_the_setup(tmp_path: Path, capsys) -> None:
    assert main([*EXAMPLE, "--max-wall-seconds", "1e-9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: wall-time budget of 1e-09 s exhausted while reading the workload (raise --max-wall-seconds)"


@pytest.mark.parametrize("flag,value,problem", [
    ("--max-events", "0", "must be >= 1, got 0"),
    ("--max-events", "-5", "must be >= 1, got -5"),
    ("--max-wall-seconds", "0", "must be a number of seconds > 0, got 0.0"),
    ("--max-wall-seconds", "inf", "must be a number of seconds > 0, got inf"),
])
def test_budgets_that_mean_nothing_are_rejected(flag: str, value: str, problem: str, capsys) -> None:
    assert main([*EXAMPLE, flag, value]) == 2
    assert capsys.readouterr().err.strip() == f"error: <command line>: {flag}: {problem}"


def test_generous_budgets_change_nothing(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main([*EXAMPLE, "--report", str(a)]) == 0
    assert main([*EXAMPLE, "--report", str(b), "--max-events", "1000000", "--max-wall-seconds", "600"]) == 0
    strip = lambda p: {k: v for k, v in json.loads(p.read_text()).items() if k != "totals"}  # noqa: E731
    assert strip(a) == strip(b)


def test_wall_time_budget_stops_a_long_run_on_time(tmp_path: Path, capsys) -> None:
    """A 1,024-NPU ring all-reduce on the general path (about 21 M events, seconds of work; the
    256-NPU one it replaced now takes 0.3 s) with a 0.5 s budget stops with exit 2 well before it
    would have finished."""
    from workload.builder import write_collective_microbenchmark

    spec = write_collective_microbenchmark(tmp_path / "ar", 1024, "ALL_REDUCE", 1 << 30, shared=True)
    net = tmp_path / "ring1024.yml"
    net.write_text("topology: [Ring]\nnpus_count: [1024]\nbandwidth: [50]\nlatency: [500]\n")
    t0 = time.perf_counter()
    assert main(["--workload", spec, "--network", str(net), "--no-symmetry", "--no-batching", "--quiet",
                 "--max-wall-seconds", "0.5"]) == 2
    assert time.perf_counter() - t0 < 2.5
    assert "wall-time budget of 0.5 s exhausted" in capsys.readouterr().err


def test_a_collective_of_int64_max_bytes_ends_by_the_clock_on_every_path(tmp_path: Path, capsys,
                                                                         monkeypatch) -> None:
    """An all-reduce of 2^63 - 1 bytes on 2 NPUs at 0.5 GB/s (the graph fuzzer's example): its
    second message ends past the 64-bit clock, so every path ends with exit 2 and the clock's
    message, not an internal error from a counter that overflowed (exit 1) and not an answer: the
    batched ring phase once computed its times in int64, which wrapped, and answered exit 0 with
    the event path's last instant as the end (on numpy, and on lists an internal error)."""
    import system.shortcuts.ring_batch as ring_batch

    for rank in range(2):
        b = GraphBuilder()
        b.collective("ar", "ALL_REDUCE", (1 << 63) - 1)
        b.write(tmp_path / "w", rank)
    (tmp_path / "net.yml").write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 0.5 ]\nlatency: [ 0 ]\n")
    (tmp_path / "sys.json").write_text(json.dumps({
        "scheduling-policy": "LIFO", "preferred-dataset-splits": 1, "active-chunks-per-dimension": 1,
        "endpoint-delay": 0, "collective-optimization": "baseline", "local-mem-bw": 50,
        "all-reduce-implementation": ["ring"]}))
    base = ["--workload", str(tmp_path / "w"), "--network", str(tmp_path / "net.yml"), "--system",
            str(tmp_path / "sys.json"), "--quiet"]
    for numpy_first in (False, True):  # ring phases on lists, and on numpy from the first rank-step
        monkeypatch.setattr(ring_batch, "_NUMPY_MIN_WORK", 0 if numpy_first else 1 << 40)
        monkeypatch.setattr(ring_batch, "_PYTHON_WORK_BEFORE_NUMPY", 0 if numpy_first else 1 << 40)
        for backend in ("congestion-unaware", "congestion-aware"):
            for extra in ([], ["--no-symmetry"], ["--no-symmetry", "--no-batching"]):
                assert main([*base, "--backend", backend, *extra]) == 2, (numpy_first, backend, extra)
                err = capsys.readouterr().err
                assert "past 2^63 ns" in err and "internal error" not in err, err
    # at 1,000 GB/s it ends in time, and the report's byte counts are the totals, past 2^63
    (tmp_path / "net.yml").write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 1000 ]\nlatency: [ 0 ]\n")
    ends = set()
    for numpy_first in (False, True):
        monkeypatch.setattr(ring_batch, "_NUMPY_MIN_WORK", 0 if numpy_first else 1 << 40)
        monkeypatch.setattr(ring_batch, "_PYTHON_WORK_BEFORE_NUMPY", 0 if numpy_first else 1 << 40)
        for extra in ([], ["--no-symmetry"], ["--no-symmetry", "--no-batching"]):
            report = tmp_path / "r.json"
            assert main([*base, "--backend", "congestion-aware", "--report", str(report), *extra]) == 0
            rep = json.loads(report.read_text())
            net = rep["network"]
            assert net["bytes_sent"] == net["bytes_received"] == sum(net["bytes_per_dim"]) > 1 << 63
            ends.add(rep["totals"]["end_cycles"])
    assert len(ends) == 1 and 0 < ends.pop() < 1 << 63


def test_a_topology_files_ring_phases_past_the_clock_end_by_it_too(tmp_path: Path, capsys) -> None:
    """The batched ring phases of a topology file (ring_flows.py) keep times in int64 arrays: past
    2^63 ns they give the phase up, and the run ends by the clock (exit 2) as the event path's
    does, where they stopped with an internal error (exit 1); the link's clock ends there too."""
    for rank in range(8):
        b = GraphBuilder()
        b.collective("ar", "ALL_REDUCE", (1 << 63) - 1)
        b.write(tmp_path / "w", rank)
    (tmp_path / "sys.json").write_text(json.dumps({
        "scheduling-policy": "LIFO", "preferred-dataset-splits": 1, "active-chunks-per-dimension": 1,
        "endpoint-delay": 1, "collective-optimization": "baseline", "local-mem-bw": 50,
        "all-reduce-implementation": ["ring"]}))
    base = ["--workload", str(tmp_path / "w"), "--system", str(tmp_path / "sys.json"), "--quiet",
            "--backend", "congestion-aware"]
    ends = {}
    for gbps in (1, 10, 16):
        net = tmp_path / f"ft{gbps}.yml"
        net.write_text(f"topology-generator: {{shape: fat-tree, leaves: 2, npus-per-leaf: 4, bandwidth: {gbps}Gbps}}\n")
        for extra in ([], ["--no-batching"]):
            code = main([*base, "--network", str(net), *extra])
            out = capsys.readouterr()
            assert "internal error" not in out.err, (gbps, extra, out.err)
            ends.setdefault(gbps, set()).add((code, "past 2^63 ns" in out.err,
                                              out.out.split(" end ")[1].split()[0] if code == 0 else None))
    assert ends[1] == ends[10] == {(2, True, None)}
    (code, _, end), = ends[16]  # 16 Gbps: in time, the same end on both paths
    assert code == 0 and int(end) < 1 << 63
