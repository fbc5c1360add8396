"""Holistic Trace Analysis reads our traces and agrees with our report (the analysis extra:
holistictraceanalysis 0.5.0, pandas < 3).

HTA's figures per rank: temporal breakdown (idle / compute / non-compute time, and "kernel
time", the span from the first GPU kernel to the end of the last) and the share of
communication time overlapped by computation. Ours: idle + exposed CPU (HTA reads the GPU
streams only), compute, exposed communication, finish, overlap_pct. They are the same
quantities when each rank's first GPU kernel starts at 0 and its last one ends at its finish
time, as in this workload. Its ranks are skewed, so early ranks wait in the all-reduces for
the last one: the trace starts those kernels when the communication began, as the report
counts it, and HTA's non-compute time is still our exposed communication.

HTA rounds float timestamps by default (start up, end down, to whole µs: its fix for
overlapping real kernels), which opens up to 1 µs gaps between our exactly abutting kernels;
with HTA_DISABLE_NS_ROUNDING=1 it keeps our nanoseconds and agrees exactly.
"""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import EXAMPLES, need

need("hta", "analysis")
from hta.trace_analysis import TraceAnalysis  # noqa: E402

from system.main import run_simulation  # noqa: E402
from system.report import build_report  # noqa: E402
from system.trace_export import write_traces  # noqa: E402
from workload.builder import GraphBuilder  # noqa: E402

SYSTEM = EXAMPLES / "system" / "Ring_4chunks.json"
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # HTA 0.5.0 on pandas 2.x


def _ddp_step(d: Path) -> tuple[Path, Path]:
    """Four ranks: backward compute overlapping gradient all-reduces, an all-gather, CPU-only
    work that leaves the GPU idle, ranks skewed by 1 µs; the last node of each rank is a kernel."""
    for r in range(4):
        b = GraphBuilder()
        f = b.comp("fwd_gemm", 20_000 + 1000 * r)
        g1 = b.comp("bwd_layer2", 15_500, deps=[f])
        ar1 = b.collective("grad_ar_layer2", "ALL_REDUCE", 1 << 20, deps=[g1])
        g2 = b.comp("bwd_layer1", 30_250, deps=[g1])
        ar2 = b.collective("grad_ar_layer1", "ALL_REDUCE", 4 << 20, deps=[g2])
        cpu = b.comp("optimizer_launch", 3_000, deps=[ar1], is_cpu_op=True)
        ag = b.collective("param_ag", "ALL_GATHER", 256 << 10, deps=[ar2])
        b.comp("opt_step", 7_777, deps=[ar1, ar2, cpu])
        dl = b.comp("dataloader", 5_000, deps=[ag], is_cpu_op=True)
        b.comp("fwd_next", 12_345, deps=[dl])
        b.write(d / "ddp", r)
    net = d / "ring.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return d / "ddp", net


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    d = tmp_path_factory.mktemp("hta")
    prefix, net = _ddp_step(d)
    result = run_simulation(prefix, net, SYSTEM)
    write_traces(result, d / "traces")
    return build_report(result), d / "traces"


def _analyse(trace_dir: Path, monkeypatch: pytest.MonkeyPatch, exact: bool):
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1" if exact else "0")
    logging.getLogger("hta").setLevel(logging.ERROR)
    t = TraceAnalysis(trace_dir=str(trace_dir))
    assert sorted(t.t.traces) == [0, 1, 2, 3]  # every file got its own rank
    tb = t.get_temporal_breakdown(visualize=False).set_index("rank")
    ov = t.get_comm_comp_overlap(visualize=False).set_index("rank")
    return tb, ov


def test_hta_agrees_with_the_report(run, monkeypatch: pytest.MonkeyPatch) -> None:
    report, traces = run
    tb, ov = _analyse(traces, monkeypatch, exact=True)
    for r in report["ranks"]:
        row = tb.loc[r["rank"]]
        assert row["kernel_time(us)"] == pytest.approx(r["finish_cycles"] / 1000, abs=1e-3)
        assert row["compute_time(us)"] == pytest.approx(r["compute_cycles"] / 1000, abs=1e-3)
        assert row["non_compute_time(us)"] == pytest.approx(r["exposed_comm_cycles"] / 1000, abs=1e-3)
        # HTA sees the GPU only: time the CPU works and the GPU does not is idle to it
        assert row["idle_time(us)"] == pytest.approx((r["idle_cycles"] + r["exposed_cpu_cycles"]) / 1000, abs=1e-3)
        assert r["exposed_cpu_cycles"] >= 5_000 and 0 < r["overlap_pct"] < 100
        # HTA rounds its percentage to 2 decimals
        assert ov.loc[r["rank"], "comp_comm_overlap_pctg"] == pytest.approx(r["overlap_pct"], abs=0.006)
    comm = [r["comm_cycles"] for r in report["ranks"]]
    assert comm == sorted(comm) and comm[0] < comm[-1]  # rank 0 waited longest: least communication


def test_hta_default_rounding_stays_within_a_microsecond_per_kernel(run, monkeypatch: pytest.MonkeyPatch) -> None:
    report, traces = run
    tb, ov = _analyse(traces, monkeypatch, exact=False)
    kernels = 8  # GPU kernels per rank: each loses under 1 µs at either end to HTA's rounding
    for r in report["ranks"]:
        row = tb.loc[r["rank"]]
        ours = {**r, "idle_cycles": r["idle_cycles"] + r["exposed_cpu_cycles"]}
        for col, key in (("kernel_time(us)", "finish_cycles"), ("compute_time(us)", "compute_cycles"),
                         ("non_compute_time(us)", "exposed_comm_cycles"), ("idle_time(us)", "idle_cycles")):
            assert abs(row[col] - ours[key] / 1000) <= 2 * kernels, (r["rank"], col, row[col], ours[key])
        comm_us = r["comm_cycles"] / 1000
        assert abs(ov.loc[r["rank"], "comp_comm_overlap_pctg"] - r["overlap_pct"]) <= 100 * 4 * kernels / comm_us
