"""The C code (the event queue, the congestion-aware links and the pairing in network/_event_core.c,
_aware_links.c and _pairing.c; the system layer's ring path and its streams' moves between queues
in system/_sys_core.c) against the
Python classes and methods it replaces (DTSIM_PURE_PYTHON=1): on random workloads of the
differential generator and on topology files, both give every rank's cycles, the event count,
the bytes and the network statistics alike."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from network.event_queue import EventQueue, PyEventQueue

pytestmark = pytest.mark.skipif(EventQueue is PyEventQueue, reason="the C event queue is not built")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

#: one process per side: run each case (workload, network, system, groups, backend, mode) and
#: print what must agree
_RUNNER = r"""
import json, os, sys
from system.simulation import run_simulation
from network.errors import InputError
out = []
for case in json.loads(sys.stdin.read()):
    w, n, s, g, backend, symmetry, batching, *queues = case
    try:
        r = run_simulation(w, n, s, backend=backend, comm_groups=g, symmetry=symmetry, batching=batching,
                           num_queues_per_dim=queues[0] if queues else 1,
                           max_events=5_000_000)  # a side that loops fails fast
    except Exception as e:  # the same refusal on both sides is agreement too
        out.append({"error": type(e).__name__ + ": " + str(e).splitlines()[0]})
        continue
    stats = {k: v for k, v in r.network_stats.items() if k not in ("wall_s", "core")}
    pure = bool(os.environ.get("DTSIM_PURE_PYTHON"))
    stats["core_ok"] = r.network_stats["core"] == ("python" if pure else "c")
    from system.sys_core import SYS_CORE
    # every rank on a plain analytical backend takes the C path; pure Python never does
    expected = "python" if pure else "c" if not symmetry else r.inputs["system_core"]
    stats["sys_core_ok"] = (SYS_CORE is None) == pure and r.inputs["system_core"] == expected
    events = r.events
    if batching and backend == "congestion-unaware" and not symmetry:
        # the C core also batches phases pure Python sends as events (system/shortcuts/phase_batch.py):
        # the same answer and traffic in fewer events
        stats.pop("events", None)
        events = None
    out.append({"finish": list(r.finish_ns), "events": events, "stats": json.loads(json.dumps(stats, default=str))})
print(json.dumps(out))
"""


def _run(cases: list, pure: bool) -> list:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("DTSIM_PURE_PYTHON", None)
    if pure:
        env["DTSIM_PURE_PYTHON"] = "1"
    r = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(cases), capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def _random_cases(tmp_path: Path, seeds: range) -> list:
    from dtsim_tools.differential import case_paths, generate_spec, materialize

    cases = []
    for seed in seeds:
        d = materialize(generate_spec(seed), tmp_path / f"c{seed}")
        p = case_paths(d)
        g = None if p["groups"] is None else str(p["groups"])
        # every message an event (on both analytical backends); the shortcuts
        for backend, symmetry, batching in (("congestion-aware", False, False), ("congestion-unaware", False, False),
                                            ("congestion-aware", True, True)):
            cases.append([str(p["workload"]), str(p["network"]), str(p["system"]), g, backend, symmetry, batching])
    return cases


def test_random_workloads_agree(tmp_path: Path) -> None:
    cases = _random_cases(tmp_path, range(20261202, 20261202 + 24))
    native, pure = _run(cases, pure=False), _run(cases, pure=True)
    assert sum("finish" in r for r in native) >= len(cases) // 2  # most cases run (a few are refused alike)
    for case, a, b in zip(cases, native, pure):
        assert a == b, f"{case}: C {a} != Python {b}"


def test_topology_files_and_multi_dim_agree(tmp_path: Path) -> None:
    """A topology file's links are the Python PacketLink on the C Link: routes over switches,
    same-tick arbitration, packets; a 2-D network of Ring x Switch; system knobs the C ring path
    reads."""
    from workload.builder import write_collective_microbenchmark

    sysj = EXAMPLES / "system" / "Ring_4chunks.json"
    cases = []
    for topo in ("fat_tree_32npus_4to1.yml", "fat_tree_32npus_1to1.yml"):
        for coll in ("ALL_REDUCE", "ALL_TO_ALL"):
            w = write_collective_microbenchmark(tmp_path / f"{topo}-{coll}", 32, coll, 1 << 20, shared=True)
            for symmetry, batching in ((False, False), (True, True)):
                cases.append([str(w), str(EXAMPLES / "network" / topo), str(sysj), None, "congestion-aware",
                              symmetry, batching])
    net = tmp_path / "2d.yml"
    net.write_text("topology: [Ring, Switch]\nnpus_count: [4, 4]\nbandwidth: [50, 25]\nlatency: [500, 700]\n")
    w = write_collective_microbenchmark(tmp_path / "2d", 16, "ALL_REDUCE", 3 << 20, shared=True)
    cases.append([str(w), str(net), str(sysj), None, "congestion-aware", False, False])
    # a reduction's time size / local-mem-bw: a fractional bandwidth, one too large for a double to
    # hold exactly (the C ring path hands those to Python's arithmetic), an endpoint delay of 0, and
    # one that takes the clock past 2^63 ns (the same refusal on both sides)
    for name, extra in (("frac", {"local-mem-bw": 1.7}), ("huge", {"local-mem-bw": 10_000_000}),
                        ("zero", {"endpoint-delay": 0}), ("late", {"endpoint-delay": 1 << 62})):
        cfg = tmp_path / f"{name}.json"
        cfg.write_text(json.dumps({**json.loads(sysj.read_text()), **extra}))
        for backend in ("congestion-aware", "congestion-unaware"):
            cases.append([str(w), str(net), str(cfg), None, backend, False, False])
    # direct (AllToAll, whose steps run in C too): all-reduce and all-to-all, every peer at once and
    # a window of 2, on the 2-D network
    # and halving-doubling (its steps too): all-reduce, reduce-scatter and all-gather
    for impl, colls in (("direct", ("ALL_REDUCE", "ALL_TO_ALL")), ("direct2", ("ALL_REDUCE", "ALL_TO_ALL")),
                        ("halvingDoubling", ("ALL_REDUCE", "REDUCE_SCATTER", "ALL_GATHER"))):
        cfg = tmp_path / f"{impl}.json"
        conf = json.loads(sysj.read_text())
        for c in ("all-reduce", "all-to-all", "all-gather", "reduce-scatter"):
            conf[f"{c}-implementation"] = [impl, impl]
        cfg.write_text(json.dumps(conf))
        for coll in colls:
            wd = write_collective_microbenchmark(tmp_path / f"{impl}-{coll}", 16, coll, 3 << 20, shared=True)
            cases.append([str(wd), str(net), str(cfg), None, "congestion-aware", False, False])
            cases.append([str(wd), str(net), str(cfg), None, "congestion-unaware", False, False])
    # the bench's irregular layout (groups, neighbour sends, compute that differs per rank, so that
    # who pairs with whom shows in the cycles) with each implementation
    from dtsim_tools.bench import _write_irregular

    for impl in ("ring", "direct", "halvingDoubling"):
        d = tmp_path / f"irregular-{impl}"
        d.mkdir()
        prefix = _write_irregular(d, 32, tp=4, iterations=2)
        cfg = tmp_path / f"irregular-{impl}.json"
        conf = json.loads(sysj.read_text())
        for c in ("all-reduce", "all-gather", "reduce-scatter"):
            conf[f"{c}-implementation"] = [impl]
        cfg.write_text(json.dumps(conf))
        sw = tmp_path / "switch32.yml"
        sw.write_text("topology: [Switch]\nnpus_count: [32]\nbandwidth: [50]\nlatency: [500]\n")
        for backend in ("congestion-aware", "congestion-unaware"):
            cases.append([str(prefix), str(sw), str(cfg), str(d / "groups.json"), backend, False, False])
    # the bench's drawn layouts without point-to-point traffic: ring phases batched on lists
    # (unaware), tried and given up at run time (aware), then every message an event
    from dtsim_tools.bench import _write_mixed

    for seed in (15, 20):
        d = tmp_path / f"mixed-{seed}"
        d.mkdir()
        prefix = _write_mixed(d, 32, seed)
        for backend in ("congestion-aware", "congestion-unaware"):
            cases.append([str(prefix), str(sw), str(EXAMPLES / "system" / "Ring_4chunks.json"), str(d / "groups.json"),
                          backend, False, True])
    native, pure = _run(cases, pure=False), _run(cases, pure=True)
    assert sum("finish" not in r for r in native) == 2, native  # the "late" cases only
    assert native == pure


def test_scheduling_knobs_agree(tmp_path: Path) -> None:
    """The streams' moves between phases and queues (system/_sys_core.c: proceed, schedule, the
    scheduler unit): LIFO, FIFO and explicit priorities, 1 to 3 active chunks per dimension, 1 and 2
    queues per dimension, chunk counts, localBWAware and baseline phases on a 2-D network, a
    dimension left out (involved_dim), the trees (their steps in Python, their moves in C), on
    the irregular layout whose collectives overlap."""
    from dtsim_tools.bench import _write_irregular
    from workload.builder import GraphBuilder, write_collective_microbenchmark

    sysj = json.loads((EXAMPLES / "system" / "Ring_4chunks.json").read_text())
    net = tmp_path / "2d.yml"
    net.write_text("topology: [Ring, Switch]\nnpus_count: [4, 4]\nbandwidth: [50, 25]\nlatency: [500, 700]\n")
    d = tmp_path / "irregular"
    d.mkdir()
    irregular = _write_irregular(d, 16, tp=4, iterations=2)
    ar = write_collective_microbenchmark(tmp_path / "ar", 16, "ALL_REDUCE", 3 << 20, shared=True)
    b = GraphBuilder()  # concurrent collectives of several priorities, one on dimension 1 only
    first = b.collective("ag dim 1", "ALL_GATHER", 1 << 20, involved_dim=[False, True], priority=3)
    b.collective("ar low", "ALL_REDUCE", 3 << 20, priority=1)
    b.collective("rs high", "REDUCE_SCATTER", 2 << 20, priority=7)
    b.collective("ar after", "ALL_REDUCE", 1 << 20, deps=[first], priority=5)
    dim1 = str(b.write(tmp_path / "mixed.et"))
    cases = []
    knobs = [("LIFO", 1, 4, "localBWAware", 1), ("FIFO", 2, 4, "baseline", 1), ("explicit", 3, 8, "localBWAware", 2),
             ("FIFO", 1, 16, "localBWAware", 2), ("LIFO", 2, 2, "baseline", 2)]
    for i, (policy, chunks, splits, opt, queues) in enumerate(knobs):
        impl = ["ring", "doubleBinaryTree"] if i == 2 else ["halvingDoubling", "ring"] if i == 3 else ["ring", "ring"]
        conf = {**sysj, "scheduling-policy": policy, "active-chunks-per-dimension": chunks,
                "preferred-dataset-splits": splits, "collective-optimization": opt,
                **{f"{c}-implementation": impl for c in ("all-reduce", "all-gather", "reduce-scatter")}}
        cfg = tmp_path / f"sys{i}.json"
        cfg.write_text(json.dumps(conf))
        for w, g in ((irregular, str(d / "groups.json")), (ar, None), (dim1, None)):
            for backend in ("congestion-aware", "congestion-unaware"):
                cases.append([str(w), str(net), str(cfg), g, backend, False, False, queues])
    native, pure = _run(cases, pure=False), _run(cases, pure=True)
    assert sum("finish" in r for r in native) >= len(cases) - 6
    for case, a, b in zip(cases, native, pure):
        assert a == b, f"{case}: C {a} != Python {b}"
