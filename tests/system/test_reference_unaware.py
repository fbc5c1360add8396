"""Every congestion-unaware reference case of ASTRA-sim (tests/data/astra_sim_reference), to the
cycle, on both paths: the default one (the symmetric fast path where system/shortcuts/representative.py allows it)
and the general one (``symmetry=False``: every rank simulated).

Cases above 256 NPUs belong to the scale benchmark (tests/system/test_scale.py). Where ASTRA-sim
does not finish (track-local-mem without inputs/outputs; endpoint-delay 0) we must do better:
finish, and agree with the closed form or with the same case without the broken knob.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from reference_data import load_cases
from system.main import run_simulation

UNAWARE = [c for c in load_cases() if c["backend"] == "unaware" and c["ranks"] <= 256]
# 256-NPU runs take about 8 s each on the general path (2 cores); these three repeat, at 256 NPUs,
# what their 64-NPU twins check on it. S_unaware_Switch256_all_reduce_1024MB_Ring_4chunks stays.
GENERAL_PATH_LEFT_OUT = {"S_unaware_Ring256_all_reduce_1MB_Ring_4chunks",
                         "S_unaware_Switch256_all_reduce_1MB_Ring_4chunks",
                         "S_unaware_Ring256_all_reduce_1024MB_Ring_4chunks"}
PATHS = {"default": True, "general": False}


def _params(status: str) -> list:
    out = []
    for c in UNAWARE:
        if c["status"] != status:
            continue
        for path, symmetry in PATHS.items():
            if symmetry or c["case"] not in GENERAL_PATH_LEFT_OUT:
                out.append(pytest.param(c, symmetry, id=f"{c['case']}-{path}"))
    return out


def _run(c: dict, anchors: Path, symmetry: bool):
    m = re.search(r"--num-queues-per-dim[= ](\d+)", c["command"])
    r = run_simulation(anchors / c["workload"], anchors / c["network"], anchors / c["system"],
                       backend="congestion-unaware", num_queues_per_dim=int(m[1]) if m else 1,
                       symmetry=symmetry)
    if not symmetry:
        assert r.inputs["symmetric_fast_path"] is False
    return r


@pytest.mark.parametrize("case,symmetry", _params("ok"))
def test_reference_case(case: dict, symmetry: bool, anchors: Path) -> None:
    r = _run(case, anchors, symmetry)
    assert r.finish_ns == case["per_rank_cycles"]


def test_reference_cases_were_found() -> None:
    assert len(UNAWARE) >= 50
    assert GENERAL_PATH_LEFT_OUT <= {c["case"] for c in UNAWARE}


def test_the_default_path_takes_the_shortcut_where_it_may(anchors: Path) -> None:
    """Otherwise "both paths" would be the general path twice."""
    case = next(c for c in UNAWARE if c["case"] == "B_unaware_Ring8_all_reduce_Ring_4chunks")
    assert _run(case, anchors, True).inputs["symmetric_fast_path"] is True


@pytest.mark.parametrize("case,symmetry", _params("no-finish"))
def test_track_local_mem_finishes_with_a_warning(case: dict, symmetry: bool, anchors: Path,
                                                 reference_cases: list[dict]) -> None:
    """ASTRA-sim exits 0 without finishing; we finish, warn, and equal the same run without tracking."""
    twin = next(c for c in reference_cases if c["status"] == "ok" and c["backend"] == case["backend"]
                and c["network"] == case["network"] and "notrack" in c["system"])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = _run(case, anchors, symmetry)
    assert r.finish_ns == twin["per_rank_cycles"]
    assert any("track-local-mem" in str(x.message) for x in w)


@pytest.mark.parametrize("symmetry", PATHS.values(), ids=PATHS.keys())
def test_endpoint_delay_zero_runs(symmetry: bool, anchors: Path, reference_cases: list[dict]) -> None:
    """ASTRA-sim aborts (same-time event assertion); we run and agree with the ring closed form
    (docs/astra-sim-semantics.md §7.2) with ED = 0."""
    case = next(c for c in reference_cases if c["case"] == "F_unaware_Ring8_all_reduce_knob_epdelay0")
    r = _run(case, anchors, symmetry)
    n, splits, lat, bw, lmbw = 8, 4, 500.0, 50.0, 1600.0
    m = (1 << 20) // splits // n
    t = int(lat + m / (bw * (1 << 30) / 1e9))
    p = 3 * int(m / (lmbw * 1e9) * 1e9)
    per_chunk = 0 * (2 * (n - 1) + 1) + (n - 1) * p + 2 * (n - 1) * t
    assert r.finish_ns == [splits * per_chunk] * n
