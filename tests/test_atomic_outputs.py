"""Every output file is written whole or not at all: an interrupted write (the disk fills, the
user presses Ctrl-C) leaves no half-written report, trace, ET, CSV or JSON that looks complete,
and no temporary file behind. Each writer goes to a temporary file beside the target, then renames.
"""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

import network.files
import system.report
import system.report_json
from chakra_proto import et_def_pb2 as pb, read_et, write_et
from conftest import EXAMPLES
from system.main import main as sim_main
from workload.collect.cli import main as collect_main
from workload.convert import main as convert_main

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
EXAMPLE = ["--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
           "--network", str(EXAMPLES / "network" / "Ring_8npus.yml"), "--quiet"]


class Interrupted(Exception):
    pass


def dump_then_fail(after_calls: int = 0, exc: BaseException | None = None):
    """A json.dump (system.report_json.dump_json) that writes half its text, then fails (on the call
    numbered ``after_calls``)."""
    real = json.dump
    calls = {"n": 0}

    def dump(obj, fp, **kw):  # noqa: ANN001
        calls["n"] += 1
        if calls["n"] <= after_calls:
            return real(obj, fp, **kw)
        text = json.dumps(obj, **kw)
        fp.write(text[: len(text) // 2])
        raise exc or Interrupted("interrupted mid-write")
    return dump


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_interrupted_report_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(system.report_json, "dump_json", dump_then_fail(exc=OSError(28, "No space left on device")))
    out = tmp_path / "report.json"
    assert sim_main([*EXAMPLE, "--report", str(out)]) == 2
    assert "cannot write (No space left on device)" in capsys.readouterr().err
    assert not out.exists() and leftovers(tmp_path) == []


def test_interrupted_report_keeps_the_previous_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "report.json"
    assert sim_main([*EXAMPLE, "--report", str(out)]) == 0
    before = out.read_bytes()
    monkeypatch.setattr(system.report_json, "dump_json", dump_then_fail(exc=KeyboardInterrupt()))
    assert sim_main([*EXAMPLE, "--report", str(out)]) == 130  # Ctrl-C
    assert out.read_bytes() == before and json.loads(before)["ranks"]
    assert leftovers(tmp_path) == []


def test_interrupted_traces_leave_only_complete_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system.report_json, "dump_json", dump_then_fail(after_calls=3))
    out = tmp_path / "traces"
    assert sim_main([*EXAMPLE, "--trace-out", str(out)]) == 1  # not an OSError: a bug, said as one
    names = sorted(p.name for p in out.iterdir())
    assert names == ["rank0.json", "rank1.json", "rank2.json"]
    for p in out.iterdir():
        assert json.loads(p.read_text())["traceEvents"]  # each file there is whole


class _HalfWriter(io.BytesIO):
    def __init__(self, target) -> None:  # noqa: ANN001
        super().__init__()
        self.target = target

    def write(self, data) -> int:  # noqa: ANN001
        self.target.write(data[: len(data) // 2])
        raise Interrupted("interrupted mid-write")

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.target.close()


def _fdopen_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic writer opens its temporary file with os.fdopen: make each write stop halfway."""
    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode, *a, **k: _HalfWriter(real(fd, "wb")))


def test_interrupted_et_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "w.0.et"
    write_et(good, pb.GlobalMetadata(version="0.0.4"), [pb.Node(id=0, name="c", type=pb.COMP_NODE)])
    assert good.stat().st_mode & 0o044  # an ordinary, readable file (mkstemp's would be 0600)
    _fdopen_half(monkeypatch)
    with pytest.raises(Interrupted):
        write_et(good, pb.GlobalMetadata(version="0.0.4"), [pb.Node(id=1, name="d", type=pb.COMP_NODE)])
    with pytest.raises(Interrupted):
        write_et(tmp_path / "w.1.et", pb.GlobalMetadata(version="0.0.4"), [])
    assert read_et(good)[1][0].name == "c"  # the old file, whole
    assert not (tmp_path / "w.1.et").exists() and leftovers(tmp_path) == []


def test_interrupted_triosim_conversion_leaves_no_partial_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fdopen_half(monkeypatch)
    out = tmp_path / "out"
    assert convert_main(["triosim", "--trace-dir", str(CORPUS / "triosim" / "ok"), "-o", str(out / "t"),
                         "--dp", "2"]) == 1
    assert sorted(p.name for p in out.iterdir()) == []  # no ET, JSON or temporary file


def test_interrupted_profiler_conversion_leaves_no_partial_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fdopen_half(monkeypatch)
    ok = CORPUS / "profiler" / "ok"
    out = tmp_path / "out"
    assert collect_main(["convert", "--execution-trace", str(ok / "et.json"), "--profiler-trace",
                         str(ok / "kineto.json"), "--out", str(out)]) == 1
    assert sorted(p.name for p in out.iterdir()) == []


def test_write_atomic_output_is_an_ordinary_file(tmp_path: Path) -> None:
    p = network.files.write_atomic(tmp_path / "a" / "b.json", "{}\n")
    assert p.read_text() == "{}\n" and p.stat().st_mode & 0o044 and leftovers(p.parent) == []


def test_the_temporary_file_is_created_exclusively(tmp_path: Path) -> None:
    """A temporary name that exists already (a file, or a link an attacker left) is never written
    through: the next free name is taken, and the link and its target stay as they were."""
    target, bait = tmp_path / "r.json", tmp_path / "bait"
    bait.write_text("untouched")
    taken = tmp_path / f".r.json.{os.getpid()}.0.tmp"
    taken.symlink_to(bait)
    (tmp_path / f".r.json.{os.getpid()}.1.tmp").write_text("someone else's")
    with network.files.atomic_open(target, "w") as f:
        f.write("{}")
    assert target.read_text() == "{}" and not target.is_symlink() and bait.read_text() == "untouched"
    assert taken.is_symlink() and (tmp_path / f".r.json.{os.getpid()}.1.tmp").read_text() == "someone else's"
    assert (target.stat().st_mode & 0o777) == (0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
