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

from hypothesis import HealthCheck, given, settings, strategies as st

from implementations import implementation_lists
from orbit_layouts import _config, _report, check_against_event_path, write_layout

from network.config import NetworkConfig
from system.main import run_simulation
from system.trace_export import write_traces

ROOT = Path(__file__).resolve().parents[2]
COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]
KINDS = ["Ring", "FullyConnected", "Switch"]


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


@settings(max_examples=int(os.environ.get("DTSIM_PROPERTY_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=layouts())
def test_orbit_runs_equal_the_event_path(tmp_path_factory, case) -> None:
    dp, tp, pp, micros, dp_inner, dims, stage_ns, tp_coll, dp_coll, odd, reorder, knobs, algo, batching = case
    tmp = tmp_path_factory.mktemp("orb")
    spec, groups, npus = write_layout(tmp, dp, tp, pp, micros, dp_inner, stage_ns, tp_coll, dp_coll, odd, reorder)
    net, cfg = _network(dims), _config(knobs, algo, len(dims))
    fast = check_against_event_path(spec, net, cfg, groups, batching=batching)
    if fast is not None and odd is not None:
        assert fast.inputs["simulated_ranks"] == npus  # a replica that differs: nothing to share


def _small(tmp: Path, **kw):
    spec, groups, npus = write_layout(tmp, 4, 2, 2, 2, False, [30_000, 20_000], ("ALL_REDUCE", 1 << 20),
                                      ("ALL_REDUCE", 3 << 20), **kw)
    net = _network([("Ring", 4), ("Switch", 4)])
    return spec, groups, npus, net, _config({"preferred-dataset-splits": 4, "endpoint-delay": 10, "local-mem-bw": 1600}, None, 2)


def test_a_dp_tp_pp_layout_simulates_one_rank_per_stage(tmp_path: Path) -> None:
    """dp 4 x tp 2 x pp 2: rotating the dp groups and rotating the tp groups commute, and
    their product (8 elements) leaves one rank per pipeline stage."""
    spec, groups, npus, net, cfg = _small(tmp_path)
    fast = run_simulation(spec, net, cfg, comm_groups=groups)
    plain = run_simulation(spec, net, cfg, comm_groups=groups, symmetry=False)
    assert fast.inputs["simulated_ranks"] == 2 and plain.inputs["simulated_ranks"] == npus
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
