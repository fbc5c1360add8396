"""No silent wrong answer (issue 14, items 2, 3, 8): layouts that do not fit, one file of a rank set,
outputs refused before the run, and ASTRA-sim flags that change nothing say so."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import EXAMPLES, need
from system.main import main
from workload.builder import GraphBuilder, write_collective_microbenchmark

RING4 = str(EXAMPLES / "network" / "Ring_4npus.yml")
RING8 = str(EXAMPLES / "network" / "Ring_8npus.yml")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return int(code), out, err


@pytest.mark.parametrize("layout, hint", [([], "--dp 4"), (["--pp", "2"], "--dp 2 --pp 2"),
                                          (["--dp", "8"], "--dp 4")])
def test_triosim_layout_that_does_not_fit_the_network_names_the_flags(capsys, layout, hint) -> None:
    code, out, err = _run(capsys, "--workload", str(EXAMPLES / "triosim" / "resnet50"), "--batch-size", "128",
                          *layout, "--network", RING4, "--quiet")
    assert code == 2 and out == ""
    assert "has 4 NPUs" in err and "dp×tp×pp" in err and hint in err


def _rank_set(folder: Path, ranks: int) -> Path:
    write_collective_microbenchmark(folder / "set", ranks)
    return folder / "set.0.et"


def test_one_file_of_a_smaller_rank_set_warns(tmp_path: Path, capsys) -> None:
    code, _, err = _run(capsys, "--workload", str(_rank_set(tmp_path, 4)), "--network", RING8, "--quiet")
    assert code == 0
    warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "4 rank(s) (0..3)" in warning[0] and "8 NPUs" in warning[0]


def test_one_file_of_a_full_rank_set_suggests_the_prefix(tmp_path: Path, capsys) -> None:
    code, _, err = _run(capsys, "--workload", str(_rank_set(tmp_path, 4)), "--network", RING4, "--quiet")
    assert code == 0 and f"pass the prefix {tmp_path / 'set'}" in err


def test_one_file_without_siblings_is_quiet(tmp_path: Path, capsys) -> None:
    b = GraphBuilder()
    b.collective("ar", "ALL_REDUCE", 1 << 20)
    code, _, err = _run(capsys, "--workload", str(b.write(tmp_path / "only.0.et")), "--network", RING4, "--quiet")
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("flag, value, says", [
    ("--plot", "run.txt", "'.txt'"), ("--plot", "run", "no suffix"),
    ("--report", "", "is a folder"), ("--report", "file.json/r.json", "is a file, not a folder"), ("--trace-out", "file.json", "a file exists there"),
])
def test_outputs_are_refused_before_the_run(tmp_path: Path, capsys, example_args, flag, value, says) -> None:
    need("matplotlib", "plot")
    (tmp_path / "file.json").write_text("{}")
    code, out, err = _run(capsys, *example_args, flag, str(tmp_path / value))
    assert code == 2 and out == ""  # nothing was simulated
    assert flag in err and says in err


@pytest.mark.parametrize("flag, value", [("--comm-scale", "2"), ("--compute-scale", "3"),
                                         ("--logging-configuration", "missing.toml"),
                                         ("--logging-folder", "logs")])
def test_ignored_astra_sim_flags_warn_once(tmp_path: Path, capsys, example_args, flag, value) -> None:
    code, out, err = _run(capsys, *example_args, f"{flag}={tmp_path / value if 'logging' in flag else value}",
                          "--quiet")
    assert code == 0 and "end 64440 cycles" in out  # the answer is unchanged, as in ASTRA-sim
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and flag in warnings[0] and "ignored" in warnings[0]
    if flag == "--logging-configuration":
        assert "does not exist" in warnings[0] and "missing.toml" in warnings[0]


def test_scales_of_one_do_not_warn(capsys, example_args) -> None:
    code, _, err = _run(capsys, *example_args, "--comm-scale", "1", "--compute-scale", "1.0", "--quiet")
    assert code == 0 and "warning" not in err
