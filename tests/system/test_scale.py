"""ASTRA-sim's scaling cases (512–4,096 NPUs): same cycles, and far less time than its C++ took
(``wall_s`` in cases.json: ASTRA-sim's own wall time on a 2-core machine like ours)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from system.main import run_simulation


def _scale_cases(reference_cases: list[dict]) -> list[dict]:
    return [c for c in reference_cases if c["case"].startswith("S_") and c["ranks"] > 256]


def test_scale_cases_match_and_beat_astra_sim(anchors: Path, reference_cases: list[dict]) -> None:
    cases = _scale_cases(reference_cases)
    assert {c["ranks"] for c in cases} >= {512, 1024, 4096}
    for c in cases:
        workload = anchors / c["workload"]  # the 4,096-NPU case: one file for all ranks (data README)
        t0 = time.perf_counter()
        r = run_simulation(workload, anchors / c["network"], anchors / c["system"],
                           backend="congestion-unaware" if c["backend"] == "unaware" else "congestion-aware")
        wall = time.perf_counter() - t0
        assert r.finish_ns == [c["cycles_max"]] * c["ranks"], c["case"]
        assert wall < c["wall_s"] or wall < 1.0, (c["case"], wall)


@pytest.mark.slow
def test_general_path_agrees_at_512(anchors: Path, reference_cases: list[dict]) -> None:
    """The general path (every rank simulated) on a 512-NPU case, without the symmetry shortcut."""
    c = next(c for c in _scale_cases(reference_cases) if c["ranks"] == 512)
    r = run_simulation(anchors / c["workload"], anchors / c["network"], anchors / c["system"], symmetry=False)
    assert r.finish_ns == [c["cycles_max"]] * 512
