"""TrioSim CSV loader: the tracer's quirks are accepted, bad files name file, line and column,
and the converter's command line exits 2 on them."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from workload.convert import main as convert_main
from workload.triosim import TrioSimTraceError, is_trace_dir, load_trace

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "triosim"
SHARED_SAMPLES = ROOT.parent / "shared" / "anchors" / "triosim" / "sample_trace" / "trace2-h100-bs128"


def test_sample_traces_load_with_the_tracers_quirks() -> None:
    vgg = EXAMPLES / "vgg13"
    raw = (vgg / "trace.csv").read_bytes()
    assert not raw.endswith(b"\n")  # the shipped file has no trailing newline
    trace = load_trace(vgg)
    assert len(trace.operators) == 77 and len(trace.tensors) == 275
    ids = [op.id for op in trace.operators]
    assert 27 not in ids and ids == sorted(ids)  # gaps in OperatorID (zero-time ops were dropped)
    assert trace.tensors[4].shape == (128, 3, 224, 224)  # quoted shape
    assert trace.tensors[8].shape == (64,) and "bias=None" in trace.tensors[8].types  # bare list, bias=None
    assert trace.tensors[281].shape == ()  # []
    assert trace.tensors[14].bytes == 411_041_792 * 4
    first = trace.operators[0]
    assert (first.inputs, first.outputs, first.input_sizes) == ((4, 6, 8), (14,), (19267584, 1728, 64))
    assert first.time_us == 2671 and first.stage == "forward" and first.tpflag == 1
    assert trace.total_time_us() == 94038
    assert load_trace(EXAMPLES / "resnet50").total_time_us() == 70723
    assert is_trace_dir(vgg) and not is_trace_dir(EXAMPLES)


def test_bundled_samples_are_the_shared_anchor_files() -> None:
    """examples/triosim holds byte-identical copies of the anchors (sha1 as in PROVENANCE.md)."""
    expected = {"vgg13/tensor.csv": "7b1a0958", "vgg13/trace.csv": "362d4ca9",
                "resnet50/tensor.csv": "ee320510", "resnet50/trace.csv": "12d39603"}
    for name, sha in expected.items():
        assert hashlib.sha1((EXAMPLES / name).read_bytes()).hexdigest().startswith(sha), name
        if SHARED_SAMPLES.is_dir():
            assert (EXAMPLES / name).read_bytes() == (SHARED_SAMPLES / name).read_bytes()


def test_trailing_newline_crlf_and_decimal_times_are_accepted(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    text = (d / "trace.csv").read_text().replace(",2671,", ",2671.5,")
    (d / "trace.csv").write_bytes((text + "\n").replace("\n", "\r\n").encode())
    trace = load_trace(d)
    assert trace.operators[0].time_us == Fraction(5343, 2)
    assert trace.total_time_us() == Fraction(94038) + Fraction(1, 2)


def _copy(tmp_path: Path) -> Path:
    d = tmp_path / "trace"
    shutil.copytree(EXAMPLES / "vgg13", d)
    return d


def _edit_line(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text().split("\n")
    assert old in lines[line - 1], (old, lines[line - 1])
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path.write_text("\n".join(lines))


# (id, file, edit(dir), line, column or None, words the message must hold)
BAD = [
    ("missing-column", "trace.csv", lambda d: _edit_line(d / "trace.csv", 1, ",stage,", ",stages,"),
     1, "stage", "missing column"),
    ("unknown-tensor", "trace.csv", lambda d: _edit_line(d / "trace.csv", 2, "[4; 6; 8]", "[4; 6; 123456]"),
     2, "Operator_input", "123456"),
    ("bad-stage", "trace.csv", lambda d: _edit_line(d / "trace.csv", 3, ",forward,", ",forwards,"),
     3, "stage", "'forwards'"),
    ("non-number-time", "trace.csv", lambda d: _edit_line(d / "trace.csv", 5, ",1081,1081,", ",1081,12ms,"),
     5, "Operator_cudatimenooverlap", "'12ms'"),
    ("empty-file", "tensor.csv", lambda d: (d / "tensor.csv").write_text(""), 1, None, "empty"),
    ("negative-time", "trace.csv", lambda d: _edit_line(d / "trace.csv", 5, ",1081,1081,", ",1081,-3,"),
     5, "Operator_cudatimenooverlap", "negative"),
    ("nan-time", "trace.csv", lambda d: _edit_line(d / "trace.csv", 6, ",1236,1236,", ",nan,1236,"),
     6, "Operator_cudatime", "'nan'"),
    ("duplicate-op", "trace.csv", lambda d: _edit_line(d / "trace.csv", 4, "3,aten::conv2d", "1,aten::conv2d"),
     4, "OperatorID", "line 2"),
    ("bad-tpflag", "trace.csv", lambda d: _edit_line(d / "trace.csv", 2, "forward,1", "forward,2"),
     2, "tpflag", "0 or 1"),
    ("size-count", "trace.csv", lambda d: _edit_line(d / "trace.csv", 2, "[19267584; 1728; 64]", "[19267584; 1728]"),
     2, "InputSize", "2 sizes"),
    ("stage-order", "trace.csv", lambda d: _edit_line(d / "trace.csv", 39, ",backward,", ",forward,"),
     39, "stage", "after a 'backward'"),
    ("bad-id-list", "trace.csv", lambda d: _edit_line(d / "trace.csv", 2, "[4; 6; 8]", "4; 6; 8"),
     2, "Operator_input", "list"),
    ("tensor-conflict", "tensor.csv", lambda d: _edit_line(d / "tensor.csv", 6, ",411041792,", ",411041791,"),
     6, "TensorNumElement", "line 5"),
    ("unquoted-shape", "tensor.csv",
     lambda d: _edit_line(d / "tensor.csv", 2, "\"[128, 3, 224, 224]\"", "[128, 3, 224, 224]"),
     2, None, "expected 8 fields"),
    ("bad-elements", "tensor.csv", lambda d: _edit_line(d / "tensor.csv", 3, ",1728,4,", ",1.7e3,4,"),
     3, "TensorNumElement", "integer"),
    ("header-only", "trace.csv", lambda d: (d / "trace.csv").write_text((d / "trace.csv").read_text().split("\n")[0]),
     2, None, "no operator rows"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_csv_names_file_line_and_column(tmp_path: Path, case) -> None:
    _, name, edit, line, column, words = case
    d = _copy(tmp_path)
    edit(d)
    with pytest.raises(TrioSimTraceError) as info:
        load_trace(d)
    msg = str(info.value)
    assert msg.startswith(f"{d / name}: line {line}"), msg
    if column:
        assert f"column {column!r}" in msg, msg
    assert words in msg, msg


def test_missing_file_and_folder(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "tensor.csv").unlink()
    with pytest.raises(TrioSimTraceError, match="tensor.csv: file not found"):
        load_trace(d)
    with pytest.raises(TrioSimTraceError, match="not a folder"):
        load_trace(tmp_path / "nowhere")


@pytest.mark.parametrize("case", BAD[:5], ids=[c[0] for c in BAD[:5]])
def test_cli_exits_2_with_one_paragraph(tmp_path: Path, capsys: pytest.CaptureFixture[str], case) -> None:
    _, name, edit, line, column, _ = case
    d = _copy(tmp_path)
    edit(d)
    rc = convert_main(["triosim", "--trace-dir", str(d), "--batch-size", "128", "-o", str(tmp_path / "out" / "w")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"{d / name}: line {line}" in err and (column is None or repr(column) in err)
    assert not (tmp_path / "out").exists()  # nothing written on bad input


@pytest.mark.parametrize("argv, words", [
    (["--pp", "36"], "--pp: 36 stages but the trace has only 35 forward operators"),
    (["--batch-size-sim", "64"], "--batch-size-sim: needs --batch-size"),
    (["--dp", "0"], "--dp: expected an integer >= 1"),
    (["--dp", "two"], "argument --dp: invalid int value"),
    (["--dp-mode", "async"], "argument --dp-mode: invalid choice"),
], ids=["pp-too-deep", "bs-sim-alone", "dp-zero", "dp-text", "dp-mode"])
def test_cli_bad_flags_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv, words) -> None:
    rc = convert_main(["triosim", "--trace-dir", str(EXAMPLES / "vgg13"), "-o", str(tmp_path / "w"), *argv])
    assert rc == 2
    assert words in capsys.readouterr().err


def test_cli_as_a_module_never_shows_a_traceback(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    _edit_line(d / "trace.csv", 3, ",forward,", ",sideways,")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    bad = subprocess.run([sys.executable, "-m", "workload.convert", "triosim", "--trace-dir", str(d),
                          "--batch-size", "128", "-o", str(tmp_path / "w")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert f"{d / 'trace.csv'}: line 3, column 'stage'" in bad.stderr
    good = subprocess.run([sys.executable, "-m", "workload.convert", "triosim", "--trace-dir", str(EXAMPLES / "vgg13"),
                           "--batch-size", "128", "--dp", "2", "-o", str(tmp_path / "ok" / "vgg")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert good.returncode == 0, good.stderr
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == [
        "vgg.0.et", "vgg.1.et", "vgg.comm_groups.json", "vgg.layout.json"]
