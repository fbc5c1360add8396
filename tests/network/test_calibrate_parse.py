"""The nccl-tests reader and the calibrator's bad-input handling (no simulation needed)."""
from __future__ import annotations

from pathlib import Path

import pytest

from network.calibrate.metrics import ErrorSummary, geomean_abs
from network.calibrate.model import fit_alpha_beta
from network.calibrate.nccl_tests import NcclTestsError, format_nccl_tests, parse_nccl_tests, read_nccl_tests

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ROOT / "examples" / "network" / "presets"

# nccl-tests 2.13's layout (in-place measured too, a log line between rows), typed by hand (see its first line)
REAL_LAYOUT = (Path(__file__).parent / "data" / "nccl_tests_4gpu_all_reduce.txt").read_text()


def test_reads_the_real_layout_with_in_place_and_log_lines() -> None:
    (t,) = parse_nccl_tests(REAL_LAYOUT, "all_reduce_perf.log")
    assert t.collective == "ALL_REDUCE"
    assert (t.ranks, t.nodes) == (4, 1)
    assert [r.size_bytes for r in t.rows] == [1 << 20, 2 << 20, 4 << 20]
    assert [r.out_of_place_us for r in t.rows] == [20.11, 29.45, 46.02]
    assert [r.in_place_us for r in t.rows] == [19.87, 29.10, 45.77]


def test_old_layout_without_root_column_in_milliseconds() -> None:
    text = ("#  out-of-place in-place\n#  size count type redop time algbw busbw res time algbw busbw res\n"
            "#  (B) (elements) (ms) (GB/s) (GB/s) (ms) (GB/s) (GB/s)\n"
            "1048576 262144 float sum 2.059 0.51 0.51 N/A 3.314 0.32 0.32 N/A\n"
            "2097152 524288 float sum 3.047 0.69 0.69 N/A N/A N/A N/A N/A\n")
    (t,) = parse_nccl_tests(text, "x_all_reduce.txt", npus=2)
    assert t.rows[0].root is None
    assert t.rows[0].time_us == pytest.approx(2059.0)
    assert t.rows[1].in_place_us is None and t.npus == 2


def test_round_trip_of_our_writer_and_the_collective_from_the_columns() -> None:
    text = format_nccl_tests([1 << 20, 1 << 22], [10.0, 30.0], 8, tool="all_gather_perf", hosts=2)
    (t,) = parse_nccl_tests(text, "table.txt")
    assert (t.collective, t.ranks, t.nodes, t.gpus_per_node) == ("ALL_GATHER", 8, 2, 4)
    assert [r.time_us for r in t.rows] == [10.0, 30.0]
    # without the tool name anywhere, count × 4 B × ranks = size marks a gather, not an all-reduce
    bare = text.replace("# Collective test starting: all_gather_perf", "#")
    assert parse_nccl_tests(bare, "table.txt")[0].collective == "ALL_GATHER"
    ar = format_nccl_tests([1 << 20, 1 << 22], [10.0, 30.0], 8).replace("all_reduce_perf", "x")
    assert parse_nccl_tests(ar, "table.txt")[0].collective == "ALL_REDUCE"


@pytest.mark.parametrize("text, line, words", [
    ("hello, this is not a benchmark\n1 2 3\n", "line 1", "not nccl-tests output"),
    ("".join(x for x in REAL_LAYOUT.splitlines(True) if not x.startswith(("     2097152", "     4194304"))),
     "line 13", "1 row(s)"),
    ("".join(x for x in REAL_LAYOUT.splitlines(True) if not x.startswith("    ")), "line 11", "0 row(s)"),
    (REAL_LAYOUT.replace("     2097152        524288", "      524288        131072"), "line 15", "does not grow"),
    (REAL_LAYOUT.replace("    29.45   71.21", "    abc   71.21"), "line 15", "column 'time' is 'abc'"),
])
def test_bad_tables_name_the_file_and_line(tmp_path: Path, text: str, line: str, words: str) -> None:
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(NcclTestsError) as e:
        read_nccl_tests(p)
    assert str(p) in str(e.value) and line in str(e.value) and words in str(e.value)


def test_bad_input_exits_2_with_one_paragraph(tmp_path: Path, capsys) -> None:
    from dtsim_tools.calibrate.cli import main
    p = tmp_path / "notes.txt"
    p.write_text("just some notes\n")
    assert main(["--nccl-tests", str(p), "--npus", "8", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(p) in err and "Traceback" not in err
    assert not (tmp_path / "out.yml").exists()
    wrong_n = tmp_path / "t.txt"
    wrong_n.write_text(REAL_LAYOUT)
    assert main(["--nccl-tests", str(wrong_n), "--npus", "8", "-o", str(tmp_path / "out")]) == 2
    assert "4 ranks but --npus is 8" in capsys.readouterr().err


def test_error_measures() -> None:
    assert geomean_abs([0.04, -0.01]) == pytest.approx(0.02)
    s = ErrorSummary.of([0.1, -0.2, 0.0])
    assert s.max == pytest.approx(0.2) and s.mean == pytest.approx(0.1) and s.count == 3
    sizes = [1 << k for k in range(20, 28)]
    alpha, beta = fit_alpha_beta(sizes, [30 + 2e-5 * s for s in sizes])
    assert alpha == pytest.approx(30, rel=1e-3) and beta == pytest.approx(2e-5, rel=1e-3)


def test_committed_presets_load_as_the_simulator_reads_them() -> None:
    from network.config import NetworkConfig
    from system.config import SystemConfig
    names = sorted(p.stem for p in PRESETS.glob("*.yml"))
    assert len(names) >= 3
    for name in names:
        net = NetworkConfig.from_file(PRESETS / f"{name}.yml")
        sysc = SystemConfig.from_file(PRESETS / f"{name}.json")
        assert net.backend == "congestion-aware" and sysc.preferred_dataset_splits >= 1
        assert not sysc.unknown_keys
    for table in (PRESETS / "measured").glob("*.txt"):
        (t,) = read_nccl_tests(table)
        assert t.collective == "ALL_REDUCE" and t.ranks in (8, 16) and len(t.rows) >= 6


def test_bad_output_places_exit_2_and_create_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    from dtsim_tools.calibrate.cli import main
    table = tmp_path / "t.txt"
    table.write_text(REAL_LAYOUT)
    missing = tmp_path / "no" / "such" / "dir"
    assert main(["--nccl-tests", str(table), "--npus", "4", "-o", str(missing / "x")]) == 2
    err = capsys.readouterr().err
    assert "-o" in err and "does not exist" in err and not (tmp_path / "no").exists()
    # matplotlib missing: refused before the fit, so no fit.yml is left behind
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["--nccl-tests", str(table), "--npus", "4", "-o", str(tmp_path / "fit"), "--plot",
                 str(tmp_path / "fit.png")]) == 2
    assert "matplotlib" in capsys.readouterr().err
    assert not list(tmp_path.glob("fit*"))


def test_an_absurd_size_exits_2_from_the_command_line(tmp_path: Path, capsys) -> None:
    from dtsim_tools.calibrate.cli import main
    table = tmp_path / "t.txt"
    table.write_text(REAL_LAYOUT.replace("     4194304       1048576", f"{1 << 70}       1048576"))
    assert main(["--nccl-tests", str(table), "--npus", "4", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "line 16" in err and "more than any GPU holds" in err and "Traceback" not in err
