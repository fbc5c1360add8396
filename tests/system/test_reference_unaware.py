"""Every congestion-unaware reference case of ASTRA-sim (../shared/anchors/astra-sim), to the cycle.

Cases above 256 NPUs belong to the scale benchmark (tests/system/test_scale.py). Where ASTRA-sim
does not finish (track-local-mem without inputs/outputs; endpoint-delay 0) we must do better:
finish, and agree with the closed form or with the same case without the broken knob.
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from system.main import run_simulation

_ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchors" / "astra-sim"
_CASES = json.loads((_ANCHORS / "results.json").read_text()) if (_ANCHORS / "results.json").exists() else []
UNAWARE = [c for c in _CASES if c["backend"] == "unaware" and c["ranks"] <= 256]


def _run(c: dict, anchors: Path):
    m = re.search(r"--num-queues-per-dim[= ](\d+)", c["command"])
    return run_simulation(anchors / c["workload"], anchors / c["network"], anchors / c["system"],
                          backend="congestion-unaware", num_queues_per_dim=int(m[1]) if m else 1)


@pytest.mark.parametrize("case", [c for c in UNAWARE if c["status"] == "ok"], ids=lambda c: c["case"])
def test_reference_case(case: dict, anchors: Path) -> None:
    r = _run(case, anchors)
    assert r.finish_ns == case["per_rank_cycles"]


def test_reference_cases_were_found() -> None:
    assert len(UNAWARE) >= 50


@pytest.mark.parametrize("case", [c for c in UNAWARE if c["status"] == "no-finish"], ids=lambda c: c["case"])
def test_track_local_mem_finishes_with_a_warning(case: dict, anchors: Path, reference_cases: list[dict]) -> None:
    """ASTRA-sim exits 0 without finishing; we finish, warn, and equal the same run without tracking."""
    twin = next(c for c in reference_cases if c["status"] == "ok" and c["backend"] == case["backend"]
                and c["network"] == case["network"] and "notrack" in c["system"])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = _run(case, anchors)
    assert r.finish_ns == twin["per_rank_cycles"]
    assert any("track-local-mem" in str(x.message) for x in w)


def test_endpoint_delay_zero_runs(anchors: Path, reference_cases: list[dict]) -> None:
    """ASTRA-sim aborts (same-time event assertion); we run and agree with the ring closed form."""
    case = next(c for c in reference_cases if c["case"] == "F_unaware_Ring8_all_reduce_knob_epdelay0")
    r = _run(case, anchors)
    n, splits, lat, bw, lmbw = 8, 4, 500.0, 50.0, 1600.0
    m = (1 << 20) // splits // n
    t = int(lat + m / (bw * (1 << 30) / 1e9))
    p = 3 * int(m / (lmbw * 1e9) * 1e9)
    per_chunk = 0 * (2 * (n - 1) + 1) + (n - 1) * p + 2 * (n - 1) * t
    assert r.finish_ns == [splits * per_chunk] * n
