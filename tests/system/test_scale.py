"""ASTRA-sim's scaling cases (512–4,096 NPUs): same cycles, and far less time than its C++ took."""
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
        workload = anchors / c["workload"]
        if c["ranks"] == 4096:  # per-rank files not stored: one file shared by all ranks (REFERENCE.md)
            workload = anchors / "workload/generated/all_reduce/1024npus_1024MB/all_reduce.0.et"
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
