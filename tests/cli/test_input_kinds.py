"""Other tools' files given as --workload are named, with the command that converts them (issue 14,
item 4). The bad-input corpus has one of each kind; these are variants made here: our own Kineto
export, a gzipped trace, and a TrioSim CSV under another name."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from conftest import EXAMPLES
from system.main import main

RING8 = str(EXAMPLES / "network" / "Ring_8npus.yml")


def _error(capsys, workload: Path) -> str:
    assert main(["--workload", str(workload), "--network", RING8, "--quiet"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1
    return err


def test_a_kineto_trace_we_wrote_is_recognised_plain_and_gzipped(tmp_path: Path, capsys, example_args) -> None:
    assert main([*example_args, "--trace-out", str(tmp_path / "k"), "--quiet"]) == 0
    capsys.readouterr()
    kineto = tmp_path / "k" / "rank0.json"
    err = _error(capsys, kineto)
    assert "Kineto" in err and f"--device-trace {kineto}" in err and "python -m workload.convert pytorch" in err
    packed = tmp_path / "rank0.json.gz"
    packed.write_bytes(gzip.compress(kineto.read_bytes()))
    assert "Kineto" in _error(capsys, packed)


def test_a_triosim_csv_is_recognised_by_its_header(tmp_path: Path, capsys) -> None:
    shutil.copy(EXAMPLES / "triosim" / "resnet50" / "trace.csv", tmp_path / "ops.csv")
    err = _error(capsys, tmp_path / "ops.csv")
    assert "TrioSim's trace.csv" in err and "no tensor.csv" in err
    assert f"python -m workload.convert triosim --trace-dir {tmp_path}" in err


def test_a_folder_with_only_trace_csv_says_what_is_missing(tmp_path: Path, capsys) -> None:
    shutil.copy(EXAMPLES / "triosim" / "vgg13" / "trace.csv", tmp_path / "trace.csv")
    err = _error(capsys, tmp_path)
    assert "trace.csv but no tensor.csv" in err
