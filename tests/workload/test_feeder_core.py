"""The workload's feeder in C (system/_feeder.c) against its reference, workload/workload.py's
methods: on random workloads of the differential generator (compute, sends and receives,
collectives on groups, several resource kinds, per-rank graphs) and on graphs built for the
rules' corners (nodes that finish at once inside a pass, wide graphs, a stuck rank), both start
and end every node at the same time, in the same order, and describe a stuck rank alike."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import workload.workload as ww
from dtsim_tools.differential import case_paths, generate_spec, materialize
from network.errors import InputError
from system.simulation import Deadlock, run_simulation
from workload.builder import GraphBuilder

pytestmark = pytest.mark.skipif(ww._FEEDER is None, reason="system._sys_core is not built (or DTSIM_PURE_PYTHON=1)")

ROOT = Path(__file__).resolve().parents[2]
SYS = ROOT / "examples" / "system" / "Ring_4chunks.json"


def _outcome(args: tuple, kw: dict) -> Any:
    """Every rank's records and starts, the stuck report, or the refusal."""
    try:
        r = run_simulation(*args, **kw)
    except Deadlock as e:
        return ("stuck", e.report())
    except InputError as e:  # the same refusal on both sides is agreement too
        return ("refused", str(e))
    return [(w.rank, list(w.records), dict(w.starts), w.finish_time, w.remaining, w.compute_ns) for w in r.workloads]


def _both(monkeypatch: pytest.MonkeyPatch, *args: Any, **kw: Any) -> tuple[Any, Any]:
    c = _outcome(args, kw)
    with monkeypatch.context() as m:
        m.setattr(ww, "_FEEDER", None)
        python = _outcome(args, kw)
    return c, python


@pytest.mark.parametrize("seed", range(20261203, 20261203 + 16))
def test_random_workloads_feed_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    d = materialize(generate_spec(seed), tmp_path / "case")
    p = case_paths(d)
    for backend in ("congestion-unaware", "congestion-aware"):
        c, python = _both(monkeypatch, str(p["workload"]), str(p["network"]), str(p["system"]), backend=backend,
                          comm_groups=None if p["groups"] is None else str(p["groups"]), symmetry=False)
        assert c == python, f"seed {seed} {backend}"


@pytest.mark.parametrize("knobs", [{}, {"roofline-enabled": 1, "peak-perf": 900, "local-mem-bw": 50},
                                   {"replay-only": 1}], ids=["replay", "roofline", "replay-only"])
def test_compute_is_replayed_alike_in_c_and_in_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      knobs: dict) -> None:
    """The C feeder starts replayed compute nodes itself (enable_replay): their start, end and GPU
    time are Python's, a zero-length node takes 1 ns, a CPU operator counts no GPU time; under the
    roofline a GPU compute node is timed by it (in Python), under replay-only every node is Python's."""
    import json

    for r in range(4):
        b = GraphBuilder()
        g = b.comp("gpu", 1_500 + 700 * r, num_ops=10**9 * (r + 1), tensor_size=1 << 20)
        c = b.comp("cpu", 2_000, deps=[g], is_cpu_op=True)
        z = b.comp("zero", 0, deps=[c], num_ops=10**6, tensor_size=1 << 10)
        a = b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[z])
        b.comp("tail", 3_000, deps=[a], num_ops=10**8, tensor_size=1 << 16)
        b.comp("side", 500 * r, deps=[g])  # beside the chain: the GPU slot orders it
        b.write(tmp_path / "w", r)
    sys_file = tmp_path / "sys.json"
    sys_file.write_text(json.dumps({**json.loads(SYS.read_text()), **knobs}))
    c, python = _both(monkeypatch, str(tmp_path / "w"), str(_net(tmp_path, 4)), str(sys_file), symmetry=False)
    assert c == python
    assert all(rank[5] > 0 for rank in c)  # every rank ran GPU compute


def _net(tmp_path: Path, npus: int) -> Path:
    net = tmp_path / "net.yml"
    net.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    return net


def _spread_ids(b: GraphBuilder) -> None:
    """Node ids far apart and beyond 32 bits, in the same order (the C feeder numbers them)."""
    def new(i: int) -> int:
        return (1 << 40) + 7919 * i * i
    for n in b.nodes:
        n.id = new(n.id)
        deps = [new(d) for d in n.data_deps]
        del n.data_deps[:]
        n.data_deps.extend(deps)


def test_corners_feed_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero-byte collectives and metadata nodes finish inside the pass that issues them; a wide
    layer of compute behind one node; receives, which take no slot, beside compute; CPU operators;
    ids far apart."""
    from chakra_proto import et_def_pb2 as pb

    for r in range(2):
        b = GraphBuilder()
        # an instant node in the first pass frees a CPU op: it waits for the rank's next completion
        b.comp("gpu", 5000)
        first = b._add("invalid0", pb.INVALID_NODE, []).id
        b.comp("cpu", 1000, [first], is_cpu_op=True)
        root = b.comp("root", 3000)
        meta = b._add("meta", pb.METADATA_NODE, [root]).id
        zero = b.collective("zero", "ALL_REDUCE", 0, [root])
        wide = [b.comp(f"w{i}", 1000 + 1000 * (i % 3), [zero], is_cpu_op=i % 4 == 0) for i in range(40)]
        ar = b.collective("ar", "ALL_REDUCE", 1 << 16, [wide[5], meta])
        if r == 0:
            b.send("s", 0, 1, 4096, 3, [root])
        else:
            b.recv("r", 0, 1, 4096, 3, [root])
        b.comp("last", 2000, [ar, *wide[-3:]])
        # an instant node inside a pass frees a CPU op that waits for the rank's next completion,
        # and one whose freeing leaves nothing in flight, which runs at once
        inv = b._add("invalid", pb.INVALID_NODE, [wide[0]]).id
        b.comp("freed", 1000, [inv], is_cpu_op=True)
        inv2 = b._add("invalid2", pb.INVALID_NODE, [ar]).id
        b.comp("freed2", 1000, [inv2], is_cpu_op=True)
        _spread_ids(b)
        b.write(tmp_path / "w", r)
    c, python = _both(monkeypatch, str(tmp_path / "w"), str(_net(tmp_path, 2)), str(SYS))
    assert c == python
    assert c[0][4] == 0 and len(c[0][1]) == 53  # every node ran


def test_a_stuck_rank_is_described_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for r in range(2):
        b = GraphBuilder()
        a = b.comp("a", 1000)
        if r == 0:  # a receive nobody sends: its child waits
            rv = b.recv("r", 1, 0, 64, 5, [a])
            b.comp("after", 1000, [rv])
        b.comp("b", 1000, [a])
        b.write(tmp_path / "w", r)
    c, python = _both(monkeypatch, str(tmp_path / "w"), str(_net(tmp_path, 2)), str(SYS))
    assert c[0] == "stuck" and c == python
    assert "waits for node(s) 1" in c[1] and "never completed" in c[1]
