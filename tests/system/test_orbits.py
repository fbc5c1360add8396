"""One rank per orbit (system/shortcuts/orbits.py) gives exactly the answer of simulating every rank.

The property test draws dp×tp×pp layouts (groups in either nesting, point-to-point between
pipeline stages, per-stage compute, micro-batches, every scheduling knob, one or two network
dimensions), sometimes breaks their symmetry (a replica with other compute, a group listed in
another ring order), and compares the default run with the plain event path (no shortcut at
all) rank by rank, collective by collective, and in the report.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from implementations import COLLECTIVES, implementation_lists

from network.config import NetworkConfig
from network.errors import InputError
from system.config import SystemConfig
from system.main import Deadlock, run_simulation
from system.report import build_report
from system.trace_export import write_traces
from workload.builder import GraphBuilder

ROOT = Path(__file__).resolve().parents[2]
COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]
KINDS = ["Ring", "FullyConnected", "Switch"]


def _rank(s: int, d: int, t: int, dp: int, tp: int, dp_inner: bool) -> int:
    return (s * tp + t) * dp + d if dp_inner else (s * dp + d) * tp + t


def write_layout(tmp: Path, dp: int, tp: int, pp: int, micros: int, dp_inner: bool, stage_ns: list[int],
                 tp_coll: tuple[str, int], dp_coll: tuple[str, int], odd_rank: int | None = None,
                 reorder_group: str | None = None) -> tuple[Path, Path, int]:
    npus = dp * tp * pp
    groups: dict[int, list[int]] = {}
    gid = 1
    tp_of, dp_of = {}, {}
    for s in range(pp):
        for d in range(dp):
            if tp > 1:
                groups[gid] = [_rank(s, d, t, dp, tp, dp_inner) for t in range(tp)]
                for r in groups[gid]:
                    tp_of[r] = gid
                gid += 1
    for s in range(pp):
        for t in range(tp):
            groups[gid] = [_rank(s, d, t, dp, tp, dp_inner) for d in range(dp)]
            for r in groups[gid]:
                dp_of[r] = gid
            gid += 1
    if reorder_group == "rotate":
        g = groups[dp_of[0]]
        groups[dp_of[0]] = g[1:] + g[:1]
    elif reorder_group == "swap" and dp >= 3:
        g = groups[dp_of[0]]
        g[0], g[1] = g[1], g[0]
    for s in range(pp):
        for d in range(dp):
            for t in range(tp):
                r = _rank(s, d, t, dp, tp, dp_inner)
                b = GraphBuilder()
                prev: list[int] = []
                for m in range(micros):
                    if s > 0:
                        prev = [b.recv(f"rx{m}", _rank(s - 1, d, t, dp, tp, dp_inner), r, 4096 << m, 10 + m, deps=prev)]
                    ns = stage_ns[s] + (777 if r == odd_rank else 0)
                    prev = [b.comp(f"fwd{m}", ns, deps=prev)]
                    if tp > 1:
                        prev = [b.collective(f"tp{m}", tp_coll[0], tp_coll[1], deps=prev, pg_name=str(tp_of[r]))]
                    if s < pp - 1:
                        prev = [b.send(f"tx{m}", r, _rank(s + 1, d, t, dp, tp, dp_inner), 4096 << m, 10 + m, deps=prev)]
                b.collective("dp", dp_coll[0], dp_coll[1], deps=prev, pg_name=str(dp_of[r]))
                b.write(tmp / "w", r)
    (tmp / "groups.json").write_text(json.dumps({str(k): v for k, v in groups.items()}))
    return tmp / "w", tmp / "groups.json", npus


@st.composite
def layouts(draw):
    dp = draw(st.sampled_from([2, 3, 4]))
    tp = draw(st.sampled_from([1, 2, 3]))
    pp = draw(st.sampled_from([1, 2, 3]))
    npus = dp * tp * pp
    divisors = [a for a in range(2, npus) if npus % a == 0]
    if divisors and draw(st.booleans()):
        a = draw(st.sampled_from(divisors))
        dims = [(draw(st.sampled_from(KINDS)), a), (draw(st.sampled_from(KINDS)), npus // a)]
    else:
        dims = [(draw(st.sampled_from(KINDS)), npus)]
    stage_ns = [draw(st.sampled_from([0, 1_000, 25_000, 60_000])) for _ in range(pp)]
    size = st.one_of(st.integers(1, 2 << 20), st.sampled_from([1 << 20, 12_288]))
    tp_coll = (draw(st.sampled_from(COLLS)), draw(size))
    dp_coll = (draw(st.sampled_from(COLLS)), draw(size))
    odd = draw(st.sampled_from([None, None, None, draw(st.integers(0, npus - 1))]))
    reorder = draw(st.sampled_from([None, None, "rotate", "swap"]))
    knobs = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 10, 37])),
        "active-chunks-per-dimension": draw(st.sampled_from([1, 2])),
        "preferred-dataset-splits": draw(st.sampled_from([1, 2, 4])),
        "collective-optimization": draw(st.sampled_from(["localBWAware", "baseline"])),
        "local-mem-bw": draw(st.sampled_from([1600, 50])),
    }
    algo = draw(st.one_of(st.just(None), implementation_lists([n for _, n in dims])))  # None: rings
    return (dp, tp, pp, draw(st.integers(1, 2)), draw(st.booleans()), dims, stage_ns, tp_coll, dp_coll,
            odd, reorder, knobs, algo, draw(st.booleans()))


def _network(dims: list[tuple[str, int]]) -> NetworkConfig:
    return NetworkConfig.from_dict({
        "topology": [k for k, _ in dims], "npus_count": [n for _, n in dims],
        "bandwidth": [50 + 25 * i for i in range(len(dims))], "latency": [500 - 100 * i for i in range(len(dims))],
    })


def _config(knobs: dict, impls: dict | None, ndims: int) -> SystemConfig:
    if impls is None:
        impls = {f"{c}-implementation": ["ring"] * ndims for c in COLLECTIVES}
    return SystemConfig.from_dict({**knobs, **impls})


def _report(result) -> dict:
    rep = build_report(result)
    del rep["inputs"], rep["totals"]["events"], rep["totals"]["wall_seconds"], rep["network"]["events"]
    rep["network"].pop("simulated_ranks", None)
    return rep


@settings(max_examples=int(os.environ.get("DTSIM_PROPERTY_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=layouts())
def test_orbit_runs_equal_the_event_path(tmp_path_factory, case) -> None:
    dp, tp, pp, micros, dp_inner, dims, stage_ns, tp_coll, dp_coll, odd, reorder, knobs, algo, batching = case
    tmp = tmp_path_factory.mktemp("orb")
    spec, groups, npus = write_layout(tmp, dp, tp, pp, micros, dp_inner, stage_ns, tp_coll, dp_coll, odd, reorder)
    net, cfg = _network(dims), _config(knobs, algo, len(dims))
    try:
        plain = run_simulation(spec, net, cfg, comm_groups=groups, symmetry=False, batching=False)
    except (Deadlock, InputError) as e:  # a drawn layout that is refused or stuck: the same with orbits
        with pytest.raises(type(e)) as caught:
            run_simulation(spec, net, cfg, comm_groups=groups, batching=batching)
        assert str(caught.value) == str(e)
        return
    fast = run_simulation(spec, net, cfg, comm_groups=groups, batching=batching)
    assert fast.finish_ns == plain.finish_ns
    for key in ("messages", "bytes_sent", "bytes_received", "bytes_per_dim"):
        assert fast.network_stats[key] == plain.network_stats[key], key
    assert _report(fast) == _report(plain)
    if odd is not None:
        assert fast.inputs["simulated_ranks"] == npus  # a replica that differs: nothing to share


def _small(tmp: Path, **kw):
    spec, groups, npus = write_layout(tmp, 4, 2, 2, 2, False, [30_000, 20_000], ("ALL_REDUCE", 1 << 20),
                                      ("ALL_REDUCE", 3 << 20), **kw)
    net = _network([("Ring", 4), ("Switch", 4)])
    return spec, groups, npus, net, _config({"preferred-dataset-splits": 4, "endpoint-delay": 10, "local-mem-bw": 1600}, None, 2)


def test_a_dp_tp_pp_layout_simulates_one_rank_per_dp_group(tmp_path: Path) -> None:
    spec, groups, npus, net, cfg = _small(tmp_path)
    fast = run_simulation(spec, net, cfg, comm_groups=groups)
    plain = run_simulation(spec, net, cfg, comm_groups=groups, symmetry=False)
    assert fast.inputs["simulated_ranks"] == npus // 4 and plain.inputs["simulated_ranks"] == npus
    assert fast.finish_ns == plain.finish_ns
    assert len(set(fast.finish_ns)) > 1  # the stages differ: not a fully symmetric run
    assert fast.events < plain.events
    assert _report(fast) == _report(plain)
    a, b = write_traces(fast, tmp_path / "fast"), write_traces(plain, tmp_path / "plain")
    assert [json.loads(p.read_text()) for p in a] == [json.loads(p.read_text()) for p in b]


def test_a_replica_with_other_compute_runs_every_rank(tmp_path: Path) -> None:
    spec, groups, npus, net, cfg = _small(tmp_path, odd_rank=5)
    fast = run_simulation(spec, net, cfg, comm_groups=groups)
    plain = run_simulation(spec, net, cfg, comm_groups=groups, symmetry=False, batching=False)
    assert fast.inputs["simulated_ranks"] == npus
    assert fast.finish_ns == plain.finish_ns


def test_the_triosim_converters_layout_takes_orbits(tmp_path: Path) -> None:
    from workload.triosim import convert_triosim

    res = convert_triosim(ROOT / "examples" / "triosim" / "resnet50", batch_size=128, out_prefix=tmp_path / "r",
                          dp=4, tp=2, pp=2, micro_batches=2)
    net = _network([("Ring", 4), ("Switch", 4)])
    cfg = _config({"active-chunks-per-dimension": 1, "preferred-dataset-splits": 4, "local-mem-bw": 1600}, None, 2)
    fast = run_simulation(res.prefix, net, cfg, comm_groups=res.comm_groups_path)
    plain = run_simulation(res.prefix, net, cfg, comm_groups=res.comm_groups_path, symmetry=False)
    assert fast.inputs["simulated_ranks"] < res.ranks
    assert fast.finish_ns == plain.finish_ns
    assert _report(fast) == _report(plain)


def test_two_groups_of_the_same_ranks_run_every_rank(tmp_path: Path) -> None:
    spec, groups, npus, net, cfg = _small(tmp_path)
    spec_groups = json.loads(groups.read_text())
    spec_groups["99"] = list(spec_groups["1"])  # unused, but an image could be either group
    groups.write_text(json.dumps(spec_groups))
    fast = run_simulation(spec, net, cfg, comm_groups=groups)
    plain = run_simulation(spec, net, cfg, comm_groups=groups, symmetry=False, batching=False)
    assert fast.inputs["simulated_ranks"] == npus
    assert fast.finish_ns == plain.finish_ns
