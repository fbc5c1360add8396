"""Waiting is not communication (system/waiting.py): a receive communicates from the moment its
matching send is issued, a collective from the moment its last member enters it; before that
the rank waits, and the report counts it in ``wait_cycles``, part of idle."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES
from system.main import run_simulation
from system.report import build_report
from system.waiting import communication_starts
from workload.builder import GraphBuilder

SYSTEM = EXAMPLES / "system" / "Ring_4chunks.json"
RING4 = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
STAGES, MICROBATCHES = 4, 4
FWD_NS, BWD_NS, ACT_BYTES = 100_000, 200_000, 1 << 20
PARTS = ("compute_cycles", "exposed_comm_cycles", "exposed_cpu_cycles", "idle_cycles")


def _gpipe(d: Path) -> Path:
    """GPipe on 4 stages, 4 micro-batches: forward all, then backward in reverse. Every
    receive has no dependency, so each is posted at t = 0, as a framework pre-posts them."""
    for s in range(STAGES):
        b = GraphBuilder()
        prev = None
        for m in range(MICROBATCHES):
            deps = [] if prev is None else [prev]
            if s > 0:
                deps.append(b.recv(f"act{m}", src=s - 1, dst=s, size=ACT_BYTES, tag=m))
            prev = b.comp(f"fwd{m}", FWD_NS, deps=deps)
            if s < STAGES - 1:
                b.send(f"act{m}", src=s, dst=s + 1, size=ACT_BYTES, tag=m, deps=[prev])
        for m in reversed(range(MICROBATCHES)):
            deps = [prev]
            if s < STAGES - 1:
                deps.append(b.recv(f"grad{m}", src=s + 1, dst=s, size=ACT_BYTES, tag=100 + m))
            prev = b.comp(f"bwd{m}", BWD_NS, deps=deps)
            if s > 0:
                b.send(f"grad{m}", src=s, dst=s - 1, size=ACT_BYTES, tag=100 + m, deps=[prev])
        b.write(d / "gpipe", s)
    (d / "ring.yml").write_text(RING4)
    return d / "gpipe"


@pytest.fixture(scope="module")
def gpipe(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("gpipe")
    result = run_simulation(_gpipe(d), d / "ring.yml", SYSTEM)
    return result, build_report(result)


def test_pipeline_bubble_is_waiting_not_communication(gpipe) -> None:
    result, rep = gpipe
    last = rep["ranks"][-1]
    assert last["compute_cycles"] == MICROBATCHES * (FWD_NS + BWD_NS)
    # its first activation leaves stage 2 only after stages 0-2 ran micro-batch 0 forward
    assert last["wait_cycles"] >= (STAGES - 1) * FWD_NS
    # what is left as communication is the transfers: 4 receives of 1 MiB at 50 GB/s (about
    # 20 µs each), not the bubble
    one_transfer = ACT_BYTES / 50 + 500  # ns, an upper bound of the congestion-unaware delay
    assert 0 < last["exposed_comm_cycles"] <= MICROBATCHES * one_transfer
    assert last["exposed_comm_cycles"] < last["wait_cycles"] / 5
    for r in rep["ranks"]:
        assert sum(r[k] for k in PARTS) == r["finish_cycles"]
        assert 0 <= r["wait_cycles"] <= r["idle_cycles"]
    # stage 0 posts its gradient receives at t = 0 and waits for the whole pipeline's forward
    assert rep["ranks"][0]["wait_cycles"] >= (STAGES - 1) * FWD_NS + BWD_NS
    assert rep["totals"]["wait_cycles"] == sum(r["wait_cycles"] for r in rep["ranks"])


def test_receive_communicates_from_its_send(gpipe) -> None:
    result, _ = gpipe
    begun = communication_starts(result.workloads)
    w = result.workloads[1]
    nodes = w.graph.nodes
    sends = {n.name: w0_start for n in result.workloads[0].graph.nodes.values()
             if n.name.startswith("act") and (w0_start := result.workloads[0].starts.get(n.id)) is not None
             and n.type_name == "COMM_SEND_NODE"}
    recvs = [n for n in nodes.values() if n.type_name == "COMM_RECV_NODE" and n.name.startswith("act")]
    assert len(recvs) == MICROBATCHES
    for n in recvs:
        assert w.starts[n.id] == 0  # posted at once
        assert begun[1][n.id] == sends[n.name] > 0  # communicates once stage 0 sent it


def _late_member(d: Path, late: int) -> list[dict]:
    """An all-reduce on 4 ranks; rank 3 enters it ``late`` ns after the others."""
    for r in range(4):
        b = GraphBuilder()
        c = b.comp("fwd", 10_000 + (late if r == 3 else 0))
        b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c])
        b.write(d / "late", r)
    (d / "ring.yml").write_text(RING4)
    return build_report(run_simulation(d / "late", d / "ring.yml", SYSTEM))


def test_collective_waits_for_its_last_member(tmp_path: Path) -> None:
    late = 50_000
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    together = _late_member(tmp_path / "a", 0)["ranks"]
    report = _late_member(tmp_path / "b", late)
    ranks = report["ranks"]
    assert [r["wait_cycles"] for r in together] == [0, 0, 0, 0]
    assert [r["wait_cycles"] for r in ranks] == [late, late, late, 0]
    for r in ranks:
        assert sum(r[k] for k in PARTS) == r["finish_cycles"]
        assert r["idle_cycles"] == r["wait_cycles"]
    # what is left is the collective itself: the last member's is as long as when all enter
    # together; the early ranks' is no longer (their peers' data is already on its way)
    alone = together[0]["comm_cycles"]
    assert ranks[3]["comm_cycles"] == alone
    assert all(0 < r["comm_cycles"] <= alone for r in ranks)
    # the collective's own entry: its wait, and bandwidths of the time it moved data
    colls = report["collectives"]
    assert [c["wait_cycles"] for c in colls] == [late, late, late, 0]
    for c, r in zip(colls, ranks):
        assert c["duration_cycles"] - c["wait_cycles"] == r["comm_cycles"]
        assert c["algbw_gb_s"] == pytest.approx((1 << 20) / r["comm_cycles"], abs=1e-6)
