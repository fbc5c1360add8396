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


def _reference_starts(workloads: list) -> list[dict[int, int]]:
    """The rule as the module docstring states it, written another way: a collective instance is
    (the set of its member ranks, its number among the rank's collectives on that set), and a
    receive pairs with the n-th send of its (src, dst, tag, size)."""
    from collections import Counter, defaultdict

    from chakra_proto import enums as pb
    from system.waiting import _TAG_SPAN

    def members(w, n) -> frozenset:
        if n.pg_name not in (None, "", "0"):
            return frozenset(w.comm_groups[int(n.pg_name)].involved_npus)
        dims, inv = w.sys.physical_dims, n.involved_dim

        def coords(r: int) -> list[int]:
            out = []
            for size in dims:
                out.append(r % size)
                r //= size
            return out

        mine = coords(w.rank)
        return frozenset(x for x in range(len(workloads)) if all(
            c == m for i, (c, m) in enumerate(zip(coords(x), mine)) if inv is not None and i < len(inv) and not inv[i]))

    sends, entries, recvs = defaultdict(list), defaultdict(list), []
    for w in workloads:
        count: Counter = Counter()
        seen: Counter = Counter()
        for nid in w.starts:
            n, t = w.graph.nodes[nid], w.starts[nid]
            if n.type == pb.COMM_SEND_NODE:
                sends[(w.rank, n.comm_dst, n.comm_tag % _TAG_SPAN, n.comm_size)].append(t)
            elif n.type == pb.COMM_RECV_NODE:
                key = (n.comm_src, w.rank, n.comm_tag % _TAG_SPAN, n.comm_size)
                recvs.append((w, n, t, key, seen[key]))
                seen[key] += 1
            elif n.type == pb.COMM_COLL_NODE and n.comm_type != pb.BROADCAST:
                m = members(w, n)
                entries[(m, count[m])].append((w, nid, t))
                count[m] += 1
    out: list[dict[int, int]] = [{} for _ in workloads]
    ends = [{nid: e for nid, _, e in w.records} for w in workloads]
    for inst in entries.values():
        last = max(t for _, _, t in inst)
        for w, nid, t in inst:
            if last > t:
                out[w.rank][nid] = min(last, ends[w.rank].get(nid, last))
    for w, n, t, key, k in recvs:
        times = sends.get(key, [])
        if k < len(times) and times[k] > t:
            out[w.rank][n.id] = min(times[k], ends[w.rank].get(n.id, times[k]))
    return out


def _dims_layout(d: Path, seed: int) -> Path:
    """8 ranks on Ring(2) x Ring(4): collectives over one dimension (involved_dim), over both, and
    neighbour sends, each rank its own compute."""
    import random

    for r in range(8):
        rng = random.Random(seed * 31 + r)
        b = GraphBuilder()
        prev: list[int] = []
        for k in range(4):
            prev = [b.comp(f"c{k}", 1000 * rng.randint(1, 30), deps=prev)]
            inv = [[True, False], [False, True], None][(seed + k) % 3]
            prev = [b.collective(f"ar{k}", "ALL_REDUCE", 1 << 16, deps=prev, involved_dim=inv)]
            prev = [b.send(f"s{k}", r, (r + 1) % 8, 1 << 12, 7, deps=prev),  # one tag: the n-th pairs with the n-th
                    b.recv(f"r{k}", (r - 1) % 8, r, 1 << 12, 7, deps=prev)]
        b.write(d / "dims", r)
    (d / "net.yml").write_text("topology: [ Ring, Ring ]\nnpus_count: [ 2, 4 ]\nbandwidth: [ 50.0, 50.0 ]\n"
                               "latency: [ 500.0, 500.0 ]\n")
    (d / "sys.json").write_text('{"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1, '
                                '"preferred-dataset-splits": 4, "local-mem-bw": 1600, '
                                '"all-reduce-implementation": ["ring", "ring"]}')
    return d / "dims"


@pytest.mark.parametrize("layout", ["mixed-3", "mixed-8", "mixed-21", "irregular", "dims-0", "dims-1"])
def test_communication_starts_follow_the_rule_on_drawn_layouts(tmp_path: Path, layout: str) -> None:
    from dtsim_tools.bench import _write_irregular, _write_mixed

    kind, _, seed = layout.partition("-")
    if kind == "dims":
        prefix, groups, system = _dims_layout(tmp_path, int(seed)), None, tmp_path / "sys.json"
        net = tmp_path / "net.yml"
    else:
        prefix = _write_mixed(tmp_path, 16, int(seed)) if kind == "mixed" else _write_irregular(tmp_path, 16)
        groups, net, system = tmp_path / "groups.json", tmp_path / "ring.yml", SYSTEM
        net.write_text(RING4.replace("[ 4 ]", "[ 16 ]"))
    result = run_simulation(prefix, net, system, comm_groups=groups, symmetry=False)
    begun = communication_starts(result.workloads)
    assert begun == _reference_starts(result.workloads)
    assert any(begun)  # somebody waited: the layouts couple ranks that run different compute
