"""Physical checks of a fit (network/calibrate/checks.py): warnings on stderr, never a failure."""
from __future__ import annotations

from pathlib import Path

from dtsim_tools.calibrate.cli import main
from network.calibrate.checks import check_busbw, check_levels, delivered_busbw_gb_s
from network.calibrate.nccl_tests import format_nccl_tests
from network.calibrate.params import Level, MachineParams

SIZES = [1 << k for k in range(20, 31, 2)]


def machine(*levels: Level, ed: int = 1000) -> MachineParams:
    return MachineParams(tuple(levels), ed, 1, 1, 1000.0)


def test_bandwidth_above_the_tables_largest_busbw_warns() -> None:
    # measured: 20 us + bytes at 100 GB/s bus bandwidth (8 GPUs: factor 1.75)
    measured = [20 + 1.75 * s / 100e3 for s in SIZES]
    assert abs(delivered_busbw_gb_s("ALL_REDUCE", 8, SIZES, measured) - 100.0) < 1e-6
    assert check_busbw("t", "ALL_REDUCE", 8, SIZES, measured, measured) == []
    fast = [5 + 1.75 * s / 150e3 for s in SIZES]  # a fit that reaches 150 GB/s: no row showed it
    (w,) = check_busbw("t", "ALL_REDUCE", 8, SIZES, measured, fast)
    assert "150.0 GB/s" in w and "largest busbw" in w
    near = [20 + 1.75 * s / 105e3 for s in SIZES]  # within the margin the fixed costs explain
    assert check_busbw("t", "ALL_REDUCE", 8, SIZES, measured, near) == []


def test_between_nodes_faster_or_sooner_than_inside_warns() -> None:
    good = machine(Level(8, 400.0, 600.0), Level(2, 50.0, 5000.0))
    assert check_levels(good) == []
    faster = machine(Level(8, 400.0, 600.0), Level(2, 1555.0, 5000.0))
    assert any("faster than inside" in w for w in check_levels(faster))
    sooner = machine(Level(8, 400.0, 6000.0), Level(2, 50.0, 900.0))
    assert any("below the latency inside" in w for w in check_levels(sooner))


def test_latency_under_a_links_minimum_warns() -> None:
    (w,) = check_levels(machine(Level(8, 400.0, 1.0)))
    assert "dim 0" in w and "under 50 ns" in w
    assert check_levels(machine(Level(8, 400.0, 60.0), Level(2, 50.0, 700.0))) == []
    warnings = check_levels(machine(Level(8, 400.0, 60.0), Level(2, 50.0, 100.0)))
    assert any("dim 1 (between nodes)" in w and "under 500 ns" in w for w in warnings)


def test_the_command_line_prints_the_warnings_on_stderr_and_still_succeeds(tmp_path: Path, capsys) -> None:
    # a table whose fixed cost is tiny against its busbw: the fit's per-hop latency falls under any link's
    p = tmp_path / "ar.txt"
    p.write_text(format_nccl_tests(SIZES, [0.05 + 1.75 * s / 100e3 for s in SIZES], 8))
    assert main(["--nccl-tests", str(p), "--npus", "8", "-o", str(tmp_path / "fit"), "--backend",
                 "congestion-unaware"]) == 0
    err = capsys.readouterr().err
    assert "warning: dim 0 (inside a node)" in err and "Traceback" not in err
    assert (tmp_path / "fit.yml").exists()
