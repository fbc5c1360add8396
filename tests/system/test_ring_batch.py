"""Batched ring phases (system/shortcuts/ring_batch.py) give exactly the event path's answer (issue 13).

The property test draws random multi-rank workloads in which ranks reach their collectives at
different times (per-rank compute), with communicator groups, point-to-point messages, several
network dimensions, mixed algorithms and every scheduling knob, and compares the batched run
with ``batching=False`` (every message an event) rank by rank and collective by collective.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from collective_layouts import traffic_and_knobs, write_layout
from implementations import implementation_lists
from network.config import NetworkConfig
from network.errors import InputError
from system.config import SystemConfig
from system.main import Deadlock, run_simulation
from system.shortcuts import ring_batch
from system.sys_core import SYS_CORE
from workload.builder import GraphBuilder, write_collective_microbenchmark

pytestmark = pytest.mark.usefixtures("batch_every_ring")  # small rings, batched (conftest.py)

COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]
KINDS = ["Ring", "FullyConnected", "Switch"]


@st.composite
def cases(draw):
    dims = draw(st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from([2, 3, 4])), min_size=1, max_size=3))
    npus = 1
    for _, n in dims:
        npus *= n
    # mostly rings, which the batcher takes, beside every other implementation, which it must leave
    algos = draw(st.one_of(implementation_lists([n for _, n in dims], ["ring"]),
                           implementation_lists([n for _, n in dims])))
    groups = {}
    if npus >= 4 and draw(st.booleans()):
        members = draw(st.permutations(range(npus)))
        k = draw(st.integers(2, npus - 1))
        groups[1] = list(members[:k])
    colls, comps, p2p, knobs = draw(traffic_and_knobs(npus, groups, COLLS, [1 << 20, 12_288], [1, 2, 3, 4, 8]))
    queues = draw(st.sampled_from([1, 2]))
    independent = draw(st.booleans())  # collectives may overlap on a rank
    backend = draw(st.sampled_from(["congestion-unaware", "congestion-aware"]))
    return dims, algos, groups, colls, comps, p2p, knobs, queues, independent, backend


@settings(max_examples=int(os.environ.get("DTSIM_PROPERTY_EXAMPLES", 80)), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_batched_rings_equal_the_event_path(tmp_path_factory, monkeypatch, case) -> None:
    # ranks drawn with different compute: the batcher itself must stay exact where it is tried
    monkeypatch.setattr(ring_batch, "DECLINE_UNEVEN_COMPUTE", False)
    dims, algos, groups, colls, comps, p2p, knobs, queues, independent, backend = case
    tmp = tmp_path_factory.mktemp("rb")
    npus = 1
    for _, n in dims:
        npus *= n
    spec = write_layout(tmp, npus, groups, colls, comps, p2p, independent)
    net = NetworkConfig.from_dict({
        "topology": [k for k, _ in dims], "npus_count": [n for _, n in dims],
        "bandwidth": [50 + 25 * i for i in range(len(dims))], "latency": [500 - 100 * i for i in range(len(dims))],
    })
    cfg = SystemConfig.from_dict({**knobs, **algos})
    kw = dict(num_queues_per_dim=queues, symmetry=False, backend=backend,
              comm_groups=tmp / "groups.json" if groups else None)
    try:
        plain = run_simulation(spec, net, cfg, batching=False, **kw)
    except (Deadlock, InputError) as e:  # some drawn layouts deadlock or are refused: batching alike
        with pytest.raises(type(e)) as caught:
            run_simulation(spec, net, cfg, **kw)
        assert str(caught.value) == str(e)
        return
    fast = run_simulation(spec, net, cfg, **kw)
    assert fast.finish_ns == plain.finish_ns
    for key in ("messages", "bytes_sent", "bytes_received", "bytes_per_dim", "links_used", "max_link_queue"):
        assert fast.network_stats.get(key) == plain.network_stats.get(key), key
    assert [w.finish_time for w in fast.workloads] == [w.finish_time for w in plain.workloads]
    assert fast.inputs["batched_ring_messages"] <= plain.network_stats["messages"]


def test_a_zero_endpoint_delay_runs_every_phase_on_the_event_path(tmp_path: Path) -> None:
    """With endpoint-delay 0 a phase's first message leaves in the tick its stream starts, and
    same-tick order, which a batched hand-back does not keep, decides which of a rank's streams
    sends first. This drawn layout (2 x 2 x 2, ranks starting at 0 or 20 us) deadlocks on the event
    path and, batched, finished with an answer; now nothing is batched there and both say stuck."""
    dims = [("Switch", 2), ("Ring", 2), ("Switch", 2)]
    spec = write_layout(tmp_path, 8, {}, [("ALL_REDUCE", 1, None)],
                        [[20000], [0], [0], [20000], [0], [20000], [0], [20000]], None, False)
    net = NetworkConfig.from_dict({"topology": [k for k, _ in dims], "npus_count": [2, 2, 2],
                                   "bandwidth": [50, 75, 100], "latency": [500, 400, 300]})
    cfg = SystemConfig.from_dict({"scheduling-policy": "LIFO", "endpoint-delay": 0, "preferred-dataset-splits": 2,
                                  "local-mem-bw": 1600, "all-reduce-implementation": ["ring"] * 3})
    kw = dict(symmetry=False, backend="congestion-unaware")
    with pytest.raises(Deadlock) as plain:
        run_simulation(spec, net, cfg, batching=False, **kw)
    with pytest.raises(Deadlock) as batched:
        run_simulation(spec, net, cfg, **kw)
    assert str(batched.value) == str(plain.value)
    # where it runs, the run says why nothing was batched
    ok = _ring_run(tmp_path, 4, system={"endpoint-delay": 0})
    assert ok.inputs["batched_ring_messages"] == 0 and ok.inputs["shortcut"] == "none"
    assert any(d.startswith("batched: endpoint-delay 0") for d in ok.inputs["shortcuts_declined"])
    assert ok.finish_ns == _ring_run(tmp_path, 4, system={"endpoint-delay": 0}, batching=False).finish_ns


def _ring_run(tmp: Path, npus: int, system: dict | None = None, **kw):
    spec = write_collective_microbenchmark(tmp / "ar", npus, "ALL_REDUCE", 1 << 26)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 4, "local-mem-bw": 1600,
                                  "all-reduce-implementation": ["ring"], **(system or {})})
    return run_simulation(spec, net, cfg, symmetry=False, **kw)


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_a_ring_all_reduce_is_batched_and_takes_few_events(tmp_path: Path, backend: str) -> None:
    fast = _ring_run(tmp_path, 16, backend=backend)
    plain = _ring_run(tmp_path, 16, batching=False, backend=backend)
    assert fast.finish_ns == plain.finish_ns
    # 4 chunks × 16 ranks × 2·15 messages, none of them an event
    assert fast.inputs["batched_ring_messages"] == plain.network_stats["messages"] == 4 * 16 * 30
    assert fast.events * 20 < plain.events
    assert plain.inputs["batched_ring_messages"] == 0
    assert fast.network_stats.get("max_link_queue") == plain.network_stats.get("max_link_queue")


def test_direct_phases_start_their_packets_without_asking_the_ring_batcher(tmp_path: Path, monkeypatch) -> None:
    """A direct (AllToAll) phase inherits Ring.run_stream_init, which asks the ring batcher to
    join first; the batcher refuses every algorithm but the exact Ring, so the C core starts a
    direct phase's packets itself, without that Python round trip (1.6 % of a 128-rank direct
    layout's instructions), and the answer is the event path's."""
    from system.collective.all_to_all import AllToAll
    from system.collective.ring import Ring

    assert ring_batch.RingBatcher.join(None, AllToAll.__new__(AllToAll)) is False  # what the C core relies on
    asked = []
    through_python = Ring.run_stream_init

    def counted(self) -> None:
        asked.append(type(self).__name__)
        through_python(self)

    monkeypatch.setattr(Ring, "run_stream_init", counted)
    spec = write_collective_microbenchmark(tmp_path / "ag", 8, "ALL_GATHER", 1 << 20)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [8], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 4, "local-mem-bw": 1600,
                                  "all-gather-implementation": ["direct"]})
    fast = run_simulation(spec, net, cfg, symmetry=False)
    direct_asks = asked.count("AllToAll")
    plain = run_simulation(spec, net, cfg, symmetry=False, batching=False)
    assert fast.finish_ns == plain.finish_ns and fast.network_stats == plain.network_stats
    # 8 ranks x 4 chunks: through Python only where the C core is not compiled
    assert direct_asks == (0 if SYS_CORE is not None else 8 * 4)


def test_other_traffic_on_a_claimed_link_reruns_on_the_event_path(tmp_path: Path) -> None:
    """Two chunks share the ring's links at once on the congestion-aware network (two active
    chunks per dimension): the second phase finds the first one's claim on the links, the batched
    attempt is dropped and the event path answers."""
    spec = write_collective_microbenchmark(tmp_path / "ar", 4, "ALL_REDUCE", 1 << 24)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 2, "active-chunks-per-dimension": 2,
                                  "local-mem-bw": 1600, "all-reduce-implementation": ["ring"]})
    kw = dict(symmetry=False, backend="congestion-aware")
    fast = run_simulation(spec, net, cfg, **kw)
    plain = run_simulation(spec, net, cfg, batching=False, **kw)
    assert fast.finish_ns == plain.finish_ns
    assert fast.network_stats["max_link_queue"] == plain.network_stats["max_link_queue"] > 0
    assert fast.inputs["batched_ring_messages"] == 0  # the run that answered is the event path's
    assert fast.inputs["shortcut"] == "none"
    assert any(d.startswith("batched: abandoned at run time") for d in fast.inputs["shortcuts_declined"])
    unaware = run_simulation(spec, net, cfg, symmetry=False)  # no links to share: batched
    assert unaware.inputs["batched_ring_messages"] == 2 * 4 * 6


@settings(max_examples=300, deadline=None)
@given(n=st.integers(2, 9), steps=st.integers(1, 20), data=st.data(), clockwise=st.booleans())
def test_recurrence_shortcuts_equal_the_step_by_step_recurrence(n, steps, data, clockwise) -> None:
    """The rotation shortcut (system/ring_batch._rotate) and the numpy form give the plain
    max-plus recurrence's last receives, uniform delays or not."""
    from system.shortcuts.ring_batch import _recurrence_np, _recurrence_py

    starts = data.draw(st.lists(st.integers(0, 5_000), min_size=n, max_size=n))
    d = data.draw(st.integers(0, 700))
    delays = data.draw(st.one_of(st.just([d] * n), st.lists(st.integers(0, 700), min_size=n, max_size=n)))
    extra = data.draw(st.lists(st.integers(0, 900), min_size=steps + 2, max_size=steps + 2))
    endpoint = extra[0]
    pred = [(i - 1) % n if clockwise else (i + 1) % n for i in range(n)]
    t = [s + endpoint for s in starts]
    for k in range(1, steps + 1):
        t = [max(t[p] + dd, x) for p, dd, x in zip(pred, delays, t)]
        if k < steps:
            t = [x + extra[k + 1] for x in t]
    assert _recurrence_py(starts, pred, delays, endpoint, extra, steps) == t
    assert [int(x) for x in _recurrence_np(starts, pred, delays, endpoint, extra, steps)] == t
    if SYS_CORE is not None:  # system/_ring_recurrence.c
        assert SYS_CORE.ring_recurrence(starts, pred, delays, endpoint, extra, steps) == t


@pytest.mark.skipif(SYS_CORE is None, reason="system._sys_core is not built")
def test_the_c_recurrence_declines_past_int64_and_refuses_what_is_not_a_ring() -> None:
    """Where a time would leave int64 the C recurrence answers None (ring_batch then runs Python's
    integers, whose run ends by the 64-bit clock); a predecessor outside the ring is an error; a
    predecessor map that is no rotation runs step by step (the rotation shortcut needs one)."""
    from system.shortcuts.ring_batch import _recurrence_py

    big = (1 << 63) - 10
    rec = SYS_CORE.ring_recurrence
    assert rec([big, 0], [1, 0], [5, 5], 1, [1, 1, 1, 1], 2) is None
    assert rec([0, 0], [1, 0], [5, 5], 1, [1, big, big, 1], 2) is None
    assert rec([0, 1 << 64], [1, 0], [5, 5], 1, [1, 1, 1, 1], 2) is None
    with pytest.raises(ValueError):
        rec([0, 0], [2, 0], [5, 5], 1, [1, 1, 1, 1], 2)
    with pytest.raises(ValueError):
        rec([0, 0], [1, 0], [5, 5], 1, [1], 2)
    pred = [2, 0, 1, 1]  # not a rotation: every step computed
    starts, delays, extra = [0, 40, 7, 3], [9, 9, 9, 9], [2, 3, 4, 5, 6]
    t = [s + 2 for s in starts]
    for k in range(1, 4):
        t = [max(t[p] + 9, x) for p, x in zip(pred, t)]
        if k < 3:
            t = [x + extra[k + 1] for x in t]
    assert rec(starts, pred, delays, 2, extra, 3) == t
    assert rec([5, 6, 7], [2, 0, 1], [1, 1, 1], 0, [0, 0, 0, 0, 0], 3) == \
        _recurrence_py([5, 6, 7], [2, 0, 1], [1, 1, 1], 0, [0, 0, 0, 0, 0], 3)


def test_a_batched_unaware_run_of_128_ranks_does_not_import_numpy(tmp_path: Path) -> None:
    """Tens of thousands of batched rank-steps on the congestion-unaware network run in C, so the
    run does not pay numpy's import (14 MB of peak memory, more than ASTRA-sim's whole run at 64-128
    ranks); the same cycles as the every-event path."""
    import subprocess
    import sys

    npus = 128
    for r in range(npus):
        b = GraphBuilder()
        c = b.comp("c", 1000 * (1 + r % 7))
        k = b.collective("ar", "ALL_REDUCE", 1 << 22, deps=[c], pg_name=str(1 + r // 64))
        b.collective("ag", "ALL_GATHER", 1 << 20, deps=[k])
        b.write(tmp_path / "w", r)
    (tmp_path / "groups.json").write_text(json.dumps({str(1 + g): list(range(64 * g, 64 * g + 64)) for g in range(2)}))
    (tmp_path / "net.yml").write_text(f"topology: [ FullyConnected ]\nnpus_count: [ {npus} ]\n"
                                      "bandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    # 16 chunks: some 390,000 rank-steps, past what ring_batch runs in Python before it imports numpy
    root = Path(__file__).resolve().parents[2]
    cfg = json.loads((root / "examples" / "system" / "Ring_4chunks.json").read_text())
    cfg["preferred-dataset-splits"] = 16
    (tmp_path / "sys.json").write_text(json.dumps(cfg))
    argv = ["--workload", str(tmp_path / "w"), "--network", str(tmp_path / "net.yml"), "--comm-group-configuration",
            str(tmp_path / "groups.json"), "--system", str(tmp_path / "sys.json"), "--no-symmetry", "--quiet"]
    code = ("import sys, json\nfrom system.main import main\n"
            f"rc = main({argv!r} + sys.argv[1:])\nprint(json.dumps([rc, 'numpy' in sys.modules]))\n")
    got = {}
    for flags, env in (([], {}), (["--no-batching"], {}), ([], {"DTSIM_PURE_PYTHON": "1"})):
        p = subprocess.run([sys.executable, "-c", code, *flags], cwd=root, capture_output=True, text=True,
                           check=True, env={**os.environ, **env})
        out = p.stdout.strip().splitlines()
        rc, numpy_loaded = json.loads(out[-1])
        assert rc == 0, p.stderr
        got[bool(flags), bool(env)] = out[0]
        if not flags:  # without the C recurrence this much batched work pays numpy's import
            assert numpy_loaded == (SYS_CORE is None or bool(env)), (env, numpy_loaded)
    assert len({";".join(line.split(";")[:2]) for line in got.values()}) == 1  # the same end, min, mean


def _uneven(tmp: Path, npus: int, compute, groups: dict | None = None) -> Path:
    for r in range(npus):
        b = GraphBuilder()
        c = b.comp("c", compute(r))
        pg = None if groups is None else str(next(g for g, m in groups.items() if r in m))
        k = b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c], pg_name=pg)
        b.comp("tail", 1000, deps=[k])
        b.write(tmp / "w", r)
    if groups:
        (tmp / "groups.json").write_text(json.dumps({str(k): v for k, v in groups.items()}))
    return tmp / "w"


@pytest.mark.parametrize("kind", ["Ring", "Switch"])
def test_the_aware_batcher_is_not_tried_where_a_collectives_ranks_run_different_compute(tmp_path: Path, kind) -> None:
    """Its phases would wait for their ranks while other traffic uses their links, and the batcher
    gave the run up for the event path after up to a third of its time (drawn mixed layouts)."""
    net = NetworkConfig.from_dict({"topology": [kind], "npus_count": [8], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 2, "local-mem-bw": 1600, "all-reduce-implementation": ["ring"]})
    aware = dict(symmetry=False, backend="congestion-aware")
    spec = _uneven(tmp_path / "u", 8, lambda r: 1000 * (r + 1))
    uneven = run_simulation(spec, net, cfg, **aware)
    assert uneven.inputs["batched_ring_messages"] == 0 and uneven.inputs["shortcut"] == "none"
    assert any("the ranks of the world run different compute" in d for d in uneven.inputs["shortcuts_declined"])
    assert uneven.finish_ns == run_simulation(spec, net, cfg, batching=False, **aware).finish_ns
    # the same workload, congestion-unaware: its phases are batched whatever the ranks' start
    assert run_simulation(spec, net, cfg, symmetry=False).inputs["batched_ring_messages"] > 0
    # every rank the same compute: batched
    even = run_simulation(_uneven(tmp_path / "e", 8, lambda r: 5000), net, cfg, **aware)
    assert even.inputs["batched_ring_messages"] > 0
    # compute that differs between two groups but not within either: tried, and batched here
    groups = {1: [0, 1, 2, 3], 2: [4, 5, 6, 7]}
    spec = _uneven(tmp_path / "g", 8, lambda r: 5000 if r < 4 else 9000, groups)
    split = run_simulation(spec, net, cfg, comm_groups=tmp_path / "g" / "groups.json", **aware)
    assert not any("different compute" in d for d in split.inputs["shortcuts_declined"])
    assert split.finish_ns == run_simulation(spec, net, cfg, comm_groups=tmp_path / "g" / "groups.json",
                                             batching=False, **aware).finish_ns
