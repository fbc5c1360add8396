"""Ring and halving-doubling phases batched in C (system/shortcuts/phase_batch.py) give exactly the event path's answer.

The property test draws workloads whose collectives run halving-doubling or ring (beside other
implementations) on one to three dimensions, on communicator groups (whose rings have their own
10 ns endpoint) and on the whole network, with per-rank compute so that ranks reach a phase at
different times, point-to-point traffic, and every scheduling knob; it compares the batched run
with ``batching=False`` (every message an event) rank by rank, collective by collective and byte by
byte. The ASTRA-sim side is checked by scripts/differential.py's corpus (its every-rank modes run
the batcher).
"""
from __future__ import annotations

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
from system.shortcuts import phase_batch
from system.sys_core import SYS_CORE
from workload.builder import GraphBuilder, write_collective_microbenchmark

pytestmark = [
    pytest.mark.usefixtures("batch_every_ring"),  # phases of one message batched too (conftest.py)
    pytest.mark.skipif(SYS_CORE is None, reason="the batcher joins phases in the C core (system/_sys_core.c)"),
]

COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"]
KINDS = ["Ring", "FullyConnected", "Switch"]


@st.composite
def cases(draw):
    dims = draw(st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from([2, 4, 8])), min_size=1, max_size=3)
                .filter(lambda d: _product(n for _, n in d) <= 64))
    sizes = [n for _, n in dims]
    npus = _product(sizes)
    names = draw(st.sampled_from([["halvingDoubling", "oneHalvingDoubling"], ["ring", "oneRing"],
                                  ["halvingDoubling", "oneHalvingDoubling", "ring", "direct", "doubleBinaryTree"]]))
    algos = draw(implementation_lists(sizes, names))
    groups = {}
    if npus >= 4 and draw(st.booleans()):
        members = draw(st.permutations(range(npus)))
        groups[1] = sorted(members[:draw(st.sampled_from([k for k in (2, 4, 8, 16) if k < npus]))])
    colls, comps, p2p, knobs = draw(traffic_and_knobs(npus, groups, COLLS, [1 << 20, 12_288, 64],
                                                      [1, 2, 3, 4, 8, 64]))
    return dims, algos, groups, colls, comps, p2p, knobs, draw(st.sampled_from([1, 2])), draw(st.booleans())


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _same_answer(fast, plain) -> None:
    assert fast.finish_ns == plain.finish_ns
    for key in ("messages", "bytes_sent", "bytes_received", "bytes_per_dim"):
        assert fast.network_stats.get(key) == plain.network_stats.get(key), key
    for a, b in zip(fast.workloads, plain.workloads):
        assert [(n.id, *rest) for n, *rest in a.collective_timings()] == \
            [(n.id, *rest) for n, *rest in b.collective_timings()]
    assert fast.inputs["astra_sim_differs"] == plain.inputs["astra_sim_differs"]


@settings(max_examples=int(os.environ.get("DTSIM_PROPERTY_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_batched_halving_doubling_equals_the_event_path(tmp_path_factory, case) -> None:
    dims, algos, groups, colls, comps, p2p, knobs, queues, independent = case
    tmp = tmp_path_factory.mktemp("hd")
    npus = _product(n for _, n in dims)
    spec = write_layout(tmp, npus, groups, colls, comps, p2p, independent)
    net = NetworkConfig.from_dict({
        "topology": [k for k, _ in dims], "npus_count": [n for _, n in dims],
        "bandwidth": [50 + 25 * i for i in range(len(dims))], "latency": [500 - 100 * i for i in range(len(dims))],
    })
    cfg = SystemConfig.from_dict({**knobs, **algos})
    kw = dict(num_queues_per_dim=queues, symmetry=False, comm_groups=tmp / "groups.json" if groups else None)
    try:
        plain = run_simulation(spec, net, cfg, batching=False, **kw)
    except (Deadlock, InputError) as e:  # a drawn layout may deadlock or be refused: batching alike
        with pytest.raises(type(e)) as caught:
            run_simulation(spec, net, cfg, **kw)
        assert str(caught.value) == str(e)
        return
    _same_answer(run_simulation(spec, net, cfg, **kw), plain)


def _hd_run(tmp: Path, npus: int, size: int = 1 << 24, splits: int = 4, **kw):
    spec = write_collective_microbenchmark(tmp / "ar", npus, "ALL_REDUCE", size)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": splits, "local-mem-bw": 1600,
                                  "all-reduce-implementation": ["halvingDoubling"]})
    return run_simulation(spec, net, cfg, symmetry=False, **kw)


def test_a_halving_doubling_all_reduce_is_batched_and_takes_few_events(tmp_path: Path) -> None:
    fast = _hd_run(tmp_path, 16)
    plain = _hd_run(tmp_path, 16, batching=False)
    _same_answer(fast, plain)
    # 4 chunks x 16 ranks x 2·log2(16) messages, none of them an event
    assert fast.inputs["batched_ring_messages"] == plain.network_stats["messages"] == 4 * 16 * 8
    assert fast.inputs["shortcut"] == "batched"
    assert fast.events * 8 < plain.events
    assert plain.inputs["batched_ring_messages"] == 0


def test_zero_byte_messages_are_left_to_the_event_path_that_notes_them(tmp_path: Path) -> None:
    """7 bytes in 32 chunks on 8 ranks: the phase's later messages carry 0 bytes, which ASTRA-sim
    aborts on and the event path notes; the batched attempt gives the run up to it."""
    fast = _hd_run(tmp_path, 8, size=7, splits=32)
    plain = _hd_run(tmp_path, 8, size=7, splits=32, batching=False)
    _same_answer(fast, plain)
    assert any("0-byte messages" in note for note in fast.inputs["astra_sim_differs"])
    assert fast.inputs["shortcut"] == "none"
    assert any(d.startswith("batched: abandoned at run time") for d in fast.inputs["shortcuts_declined"])


def test_phases_below_min_steps_run_as_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(phase_batch, "MIN_STEPS", 2 * 4 + 1)  # an all-reduce on 16 ranks has 8 messages
    fast = _hd_run(tmp_path, 16)
    assert fast.inputs["batched_ring_messages"] == 0
    assert fast.finish_ns == _hd_run(tmp_path, 16, batching=False).finish_ns


def test_a_ring_all_reduce_is_joined_in_c_and_takes_few_events(tmp_path: Path) -> None:
    spec = write_collective_microbenchmark(tmp_path / "ar", 8, "ALL_REDUCE", 1 << 22)
    net = NetworkConfig.from_dict({"topology": ["Switch"], "npus_count": [8], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 4, "local-mem-bw": 1600,
                                  "all-reduce-implementation": ["ring"]})
    fast = run_simulation(spec, net, cfg, symmetry=False)
    plain = run_simulation(spec, net, cfg, symmetry=False, batching=False)
    _same_answer(fast, plain)
    assert fast.inputs["batched_ring_messages"] == plain.network_stats["messages"] == 4 * 8 * 14
    assert fast.events * 8 < plain.events


@pytest.mark.parametrize("impl", ["halvingDoubling", "ring"])
def test_a_stuck_run_reports_what_the_event_path_reports(tmp_path: Path, impl: str) -> None:
    """Rank 3 waits for a message rank 0 sends only after the all-reduce: the phases rank 3 never
    joins stay open, the batched attempt ends stuck, and the run's report is the event path's."""
    for r in range(4):
        b = GraphBuilder()
        c = b.comp("c", 1000 * (r + 1))
        if r == 3:
            b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[b.recv("r", 0, 3, 4096, 7, deps=[c])])
        else:
            a = b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c])
            if r == 0:
                b.send("s", 0, 3, 4096, 7, deps=[a])
        b.write(tmp_path / "w", r)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 2, "local-mem-bw": 1600,
                                  "all-reduce-implementation": [impl]})
    with pytest.raises(Deadlock) as plain:
        run_simulation(tmp_path / "w", net, cfg, symmetry=False, batching=False)
    with pytest.raises(Deadlock) as batched:
        run_simulation(tmp_path / "w", net, cfg, symmetry=False)
    assert str(batched.value) == str(plain.value)
    assert "rank 3" in str(plain.value)


def _recurrence(starts, partners, delays, extra, steps):
    """The recurrence step by step, on Python's integers (the reference)."""
    n = len(starts)
    rows = len(partners) // n
    t = [s + extra[0] for s in starts]
    for j in range(steps):
        row = 0 if rows == 1 else j * n
        r = [max(t[partners[row + i]] + delays[row + i], t[i]) for i in range(n)]
        t = [x + (extra[j + 1] if j + 1 < steps else 0) for x in r]
    return t


@settings(max_examples=400, deadline=None)
@given(n=st.integers(1, 9), steps=st.integers(1, 20), data=st.data())
def test_the_c_recurrence_and_its_rotation_equal_the_step_by_step_one(n, steps, data) -> None:
    """A ring's one row (its rotation shortcut where the predecessors are a rotation and the delays
    one) and halving-doubling's row per step give the plain recurrence's times."""
    starts = data.draw(st.lists(st.sampled_from([0, 5, 1000, 123_456]) | st.integers(0, 10**6), min_size=n, max_size=n))
    extra = data.draw(st.lists(st.integers(0, 5_000), min_size=steps + 1, max_size=steps + 1))
    if data.draw(st.booleans()):  # a ring: one row
        shift = data.draw(st.sampled_from([1, n - 1]))
        partners = [(i + shift) % n for i in range(n)]
        d = data.draw(st.integers(0, 50_000))
        delays = [d] * n if data.draw(st.booleans()) else data.draw(
            st.lists(st.integers(0, 50_000), min_size=n, max_size=n))
    else:
        partners = data.draw(st.lists(st.integers(0, n - 1), min_size=n * steps, max_size=n * steps))
        delays = data.draw(st.lists(st.integers(0, 50_000), min_size=n * steps, max_size=n * steps))
    assert SYS_CORE.partner_recurrence(starts, partners, delays, extra, steps) == \
        _recurrence(starts, partners, delays, extra, steps)


def test_the_recurrence_pairs_partners_and_declines_past_int64() -> None:
    rec = SYS_CORE.partner_recurrence
    # two ranks exchanging twice, the second starting 100 ns later: sends at 10 and 110; rank 0's
    # first receive waits for 110 + 5, rank 1's for its own send (110); sends at 118 and 113;
    # receives at max(113 + 5, 118) and max(118 + 5, 113)
    assert rec([0, 100], [1, 0, 1, 0], [5, 5, 5, 5], [10, 3, 0], 2) == [118, 123]
    # a rank whose message arrives before its own send waits for its send
    assert rec([1000, 0], [1, 0], [5, 5], [0, 0], 1) == [1000, 1005]
    assert rec([2 ** 63 - 2, 0], [1, 0], [5, 5], [0, 0], 1) is None
    with pytest.raises(ValueError):
        rec([0, 0], [2, 0], [1, 1], [0, 0], 1)
    with pytest.raises(TypeError):
        rec([0, 0], [1, 0], [1], [0, 0], 1)
    # one row of partners for every step (a ring): rank 1 receives from 0 and 0 from 1, twice
    assert rec([0, 100], [1, 0], [5, 5], [10, 3, 0], 2) == rec([0, 100], [1, 0, 1, 0], [5, 5, 5, 5], [10, 3, 0], 2)
    with pytest.raises(TypeError):
        rec([0, 0, 0], [1, 2, 0, 1], [1, 1, 1, 1], [0, 0, 0], 2)  # neither one row nor one per step

