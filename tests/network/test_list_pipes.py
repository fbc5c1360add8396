"""ListPipes (network/analytical/list_pipes.py) is LinkPipes (link_pipes.py) on lists: the same
arrival times, the same conflicts on the same step, the same claims and statistics left on the
links; and a run whose batched ring phases are small never imports numpy."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import system.shortcuts.ring_batch as ring_batch
from network.analytical.link_pipes import DEPTH, LinkPipes
from network.analytical.list_pipes import DEPTH as LIST_DEPTH, ListPipes
from network.config import NetworkConfig
from network.errors import FastPathConflict
from system.config import SystemConfig
from system.main import run_simulation
from workload.builder import write_collective_microbenchmark

pytestmark = pytest.mark.usefixtures("batch_every_ring")  # small rings, batched (conftest.py)

ROOT = Path(__file__).resolve().parents[2]


class FakeLink:
    """The fields of aware.py's Link that the pipes read and write."""

    def __init__(self, src: int, state: dict) -> None:
        self.src, self.dst = src, src + 1
        self.busy = self.pending = False
        self.latency_ns, self.bytes_per_ns = state["latency"], state["bw"]
        self.claim_until, self.free_at = state["claim_until"], state["free_at"]
        self.last_start, self.claim_last = state["last_start"], state["claim_last"]
        self.claim_recent = state["recent"]
        self.delays: dict = {}
        self.chunks = self.peak_pending = 0

    def after(self) -> tuple:
        recent = None if self.claim_recent is None else [int(v) for v in self.claim_recent]
        return (self.claim_until, self.claim_last, recent, self.chunks, self.peak_pending)


link_states = st.fixed_dictionaries({
    "latency": st.sampled_from([0.0, 500.0, 37.5]), "bw": st.sampled_from([50.0, 12.5, 3.0]),
    "claim_until": st.integers(-1, 3_000), "free_at": st.integers(-1, 3_000),
    "last_start": st.integers(-1, 3_000), "claim_last": st.integers(-1, 3_000),
    "recent": st.one_of(st.none(), st.lists(st.integers(-1, 4_000), min_size=DEPTH - 1, max_size=DEPTH - 1)),
})


def _drive(cls, states, hops, n, size, sends_per_step):
    routes = [tuple(FakeLink(i * hops + h, states[i * hops + h]) for h in range(hops)) for i in range(n)]
    out = []
    try:
        pipes = cls(routes, size)
        for sends in sends_per_step:
            out.append([int(v) for v in pipes.step(list(sends) if cls is ListPipes else _array(sends))])
        pipes.close(len(sends_per_step))
    except FastPathConflict as e:
        out.append(("conflict", str(e)))
    return out, [link.after() for r in routes for link in r]


def _array(values):
    import numpy as np

    return np.asarray(values, dtype=np.int64)


@settings(max_examples=400, deadline=None)
@given(data=st.data(), n=st.integers(1, 6), hops=st.integers(1, 3), steps=st.integers(1, 12),
       size=st.sampled_from([1, 1000, 65_536, 1 << 20]))
def test_list_pipes_equal_numpy_pipes(data, n, hops, steps, size) -> None:
    assert LIST_DEPTH == DEPTH
    states = data.draw(st.lists(link_states, min_size=n * hops, max_size=n * hops))
    # sends that rise step by step (as a ring phase's do), close together: queues, ties, conflicts
    sends, t = [], data.draw(st.lists(st.integers(0, 4_000), min_size=n, max_size=n))
    for _ in range(steps):
        sends.append(t)
        t = [x + data.draw(st.integers(0, 3_000)) for x in t]
    assert _drive(ListPipes, states, hops, n, size, sends) == _drive(LinkPipes, states, hops, n, size, sends)


def test_a_link_claimed_by_one_kind_is_read_by_the_other() -> None:
    """A phase on one kind leaves its claim (a queue of three 1 MB chunks) for a phase on the
    other: every pairing gives the same arrival, behind that queue."""
    state = {"latency": 500.0, "bw": 50.0, "claim_until": -1, "free_at": -1, "last_start": -1, "claim_last": -1,
             "recent": None}
    got = {}
    for first in (ListPipes, LinkPipes):
        for second in (ListPipes, LinkPipes):
            links = [(FakeLink(0, state),)]
            p = first(links, 1 << 20)
            for k in range(3):
                p.step([10_000 * (k + 1)] if first is ListPipes else _array([10_000 * (k + 1)]))
            p.close(3)
            q = second(links, 1 << 20)
            got[first, second] = [int(v) for v in q.step([40_005] if second is ListPipes else _array([40_005]))]
    ser = (1 << 20) // 50  # 20,971 ns a chunk: the three queue and the fourth starts when they are off
    assert set(map(tuple, got.values())) == {(10_000 + 4 * ser + 500,)}


@pytest.mark.parametrize("backend", ["congestion-aware", "congestion-unaware"])
def test_the_run_is_the_same_on_lists_and_on_numpy(tmp_path: Path, backend: str, monkeypatch) -> None:
    """The same batched run with every phase on lists and with every big phase on numpy."""
    spec = write_collective_microbenchmark(tmp_path / "ar", 64, "ALL_REDUCE", 1 << 20)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [64], "bandwidth": [50.0], "latency": [500.0]})
    cfg = SystemConfig.from_file(ROOT / "examples" / "system" / "Ring_4chunks.json")
    kw = dict(backend=backend, symmetry=False)
    monkeypatch.setattr(ring_batch, "_PYTHON_WORK_BEFORE_NUMPY", 0)
    on_numpy = run_simulation(spec, net, cfg, **kw)
    monkeypatch.setattr(ring_batch, "_PYTHON_WORK_BEFORE_NUMPY", 10**12)
    monkeypatch.setattr(ring_batch, "_numpy_loaded", lambda: False)  # as in a run that has not imported it
    on_lists = run_simulation(spec, net, cfg, **kw)
    assert on_numpy.inputs["batched_ring_messages"] == on_lists.inputs["batched_ring_messages"] > 0
    assert on_numpy.finish_ns == on_lists.finish_ns
    assert on_numpy.network_stats == on_lists.network_stats
    assert on_numpy.events == on_lists.events


def test_a_small_batched_run_does_not_import_numpy(tmp_path: Path) -> None:
    """A 64-rank ring all-reduce is batched on both backends without numpy (its import costs a
    small run more than the run: 0.07-0.2 s and 14 MB)."""
    spec = write_collective_microbenchmark(tmp_path / "ar", 64, "ALL_REDUCE", 1 << 20)
    (tmp_path / "net.yml").write_text(json.dumps({"topology": ["Ring"], "npus_count": [64], "bandwidth": [50.0],
                                                 "latency": [500.0]}))
    program = ("import sys, system.main as m\n"
               "code = m.main(sys.argv[1:])\n"
               "print(code, 'numpy' in sys.modules)\n")
    for backend in ("congestion-aware", "congestion-unaware"):
        r = subprocess.run([sys.executable, "-c", program, "--workload", spec, "--network", str(tmp_path / "net.yml"),
                            "--system", str(ROOT / "examples" / "system" / "Ring_4chunks.json"), "--backend", backend, "--no-symmetry", "--report",
                            str(tmp_path / "r.json"), "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.stdout.split()[-2:] == ["0", "False"], (backend, r.stdout, r.stderr)
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["inputs"]["batched_ring_messages"] > 0, backend


@pytest.mark.parametrize("start", [(1 << 63) - 30_000, (1 << 63) - 45_000, (1 << 63) - 80_000])
def test_times_past_the_clock_are_a_conflict_on_both(start: int) -> None:
    """Near 2^63 ns numpy's int64 would wrap: both kinds give up the phase on the same step (the
    event path then ends the run by its clock) instead of answering."""
    state = {"latency": 500.0, "bw": 50.0, "claim_until": -1, "free_at": -1, "last_start": -1, "claim_last": -1,
             "recent": None}
    sends = [[start + 21_000 * k, start + 5 + 21_000 * k] for k in range(4)]
    got = _drive(ListPipes, [state] * 4, 2, 2, 1 << 20, sends)
    assert got == _drive(LinkPipes, [state] * 4, 2, 2, 1 << 20, sends)
    assert got[0][-1] == ("conflict", "a time past the 64-bit clock")
