"""``workload.convert pytorch`` on a real 2-rank DDP step (gloo, torch 2.13, ../shared/anchors/chakra-real).

An extra layer: skipped with one reason on a clone without ../shared. The traces were recorded by
someone else's script (its README says how), so they are inputs this converter was not tuned on.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from system.simulation import run_simulation
from system.report import build_report
from workload.convert import main as convert_main

RAW = Path(__file__).resolve().parents[3] / "shared" / "anchors" / "chakra-real" / "mlp_w2" / "raw"
pytestmark = pytest.mark.skipif(not RAW.is_dir(), reason=f"{RAW} is absent (clone beside ../shared for this layer)")


def _kineto(r: int) -> list[dict]:
    return json.loads(gzip.decompress((RAW / f"device.{r}.json.gz").read_bytes()))["traceEvents"]


def test_real_ddp_step_converts_and_simulates_coupled(tmp_path) -> None:
    out = tmp_path / "mlp"
    assert convert_main(["pytorch", "--host-trace", str(RAW / "host.{rank}.json"), "--device-trace",
                         str(RAW / "device.{rank}.json"), "--ranks", "2", "-o", str(out)]) == 0
    net = tmp_path / "ring.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    report = build_report(run_simulation(out, net))
    steps = []
    for r in range(2):
        events = _kineto(r)
        gloo = sum(e.get("name") == "gloo:all_reduce" for e in events)
        mine = [c for c in report["collectives"] if c["rank"] == r]
        assert gloo == 3 and [c["type"] for c in mine] == ["ALL_REDUCE"] * gloo
        steps.append(max(e["dur"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")))
    # the last all-reduce couples the ranks: it ends at one time on both
    last = [max((c for c in report["collectives"] if c["rank"] == r), key=lambda c: c["end_cycles"]) for r in range(2)]
    assert abs(last[0]["end_cycles"] - last[1]["end_cycles"]) <= 10_000     # within a few messages
    end_us = report["totals"]["end_cycles"] / 1e3
    assert abs(end_us - max(steps)) <= 0.25 * max(steps), (end_us, steps)
