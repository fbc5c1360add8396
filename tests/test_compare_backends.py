"""dtsim_tools/compare_backends.py (dtsim-compare): one workload, several network models, side by side."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dtsim_tools import compare_backends as cb

ROOT = Path(__file__).resolve().parents[1]


def test_switch_congestion_shows_up(anchors: Path, tmp_path: Path, capsys) -> None:
    code = cb.main([
        "--workload", str(anchors / "workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce"),
        "--network", str(anchors / "network/derived/Switch_8npus.yml"),
        "--system", str(anchors / "system/examples/native_collectives/Ring_4chunks.json"),
        "--backends", "congestion-unaware", "congestion-aware", "--json", str(tmp_path / "rows.json"),
    ])
    out = capsys.readouterr().out
    assert code == 0
    rows = {r["backend"]: r for r in __import__("json").loads((tmp_path / "rows.json").read_text())}
    # ASTRA-sim's reference: C_aware_Switch8_all_reduce 126600 vs unaware (Switch counts serialization once)
    assert rows["congestion-aware"]["end_cycles"] == 126600
    assert rows["congestion-unaware"]["end_cycles"] < 126600
    assert rows["congestion-aware"]["vs_unaware_pct"] == pytest.approx(100 * (126600 - rows["congestion-unaware"]["end_cycles"]) / rows["congestion-unaware"]["end_cycles"])
    assert "congestion-aware" in out and "vs unaware" in out


def test_missing_backend_is_reported_not_fatal(monkeypatch, capsys) -> None:
    monkeypatch.setattr(cb, "installed", lambda name: name != "ns3")
    rows = cb.compare(str(ROOT / "examples/workload/all_reduce_8npus_1MB/all_reduce"),
                      str(ROOT / "examples/network/Ring_8npus.yml"), None, ["congestion-unaware", "ns3"])
    assert rows[0]["status"] == "ok" and rows[0]["end_cycles"] == 64440  # ASTRA-sim: B_unaware_Ring8_all_reduce
    assert rows[1]["status"].startswith("not installed")
