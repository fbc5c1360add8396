"""The bad-input corpus (tests/bad_inputs/cases.yaml): every case ends with its exit code (2 bad
input, 3 stuck), one paragraph that names the file and the place, no traceback, within 5 s.

Cases run in-process through each tool's ``main(argv)`` (fast); those marked ``subprocess: true``
run again as a user runs them, ``python -m ...``.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from system.main import main as sim_main
from workload.collect.cli import main as collect_main
from workload.convert import main as convert_main

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "bad_inputs"
CASES: list[dict] = yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))
TOOLS = {"sim": sim_main, "convert": convert_main, "collect": collect_main}
MODULES = {"sim": "system.main", "convert": "workload.convert", "collect": "workload.collect"}
SIM_DEFAULTS = ["--workload", "{dir}/common/ok/w", "--network", "{dir}/common/ring4.yml",
                "--system", "{dir}/common/system.json", "--quiet"]
TIME_LIMIT_S = 5.0


def argv_of(case: dict, tmp: Path) -> list[str]:
    """The case's command line, with the sim defaults filled in and {dir}/{tmp} replaced."""
    args = [str(a) for a in case.get("args", [])]
    if case.get("tool", "sim") == "sim":
        out = list(SIM_DEFAULTS)
        i = 0
        while i < len(args):
            if args[i] in SIM_DEFAULTS[:6:2] and i + 1 < len(args):
                out[out.index(args[i]) + 1] = args[i + 1]
                i += 2
            else:
                out.append(args[i])
                i += 1
        args = out
    return [a.replace("{dir}", str(CORPUS)).replace("{tmp}", str(tmp)) for a in args]


def check_answer(case: dict, code: int, stderr: str, seconds: float) -> None:
    expect = [f.replace("{dir}", str(CORPUS)) for f in case.get("expect", [])]
    assert code == case["exit"], f"{case['id']}: exit {code}, expected {case['exit']}\n{stderr}"
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert seconds < TIME_LIMIT_S, f"{case['id']} took {seconds:.1f} s"
    for fragment in expect:
        assert fragment in stderr, f"{case['id']}: {fragment!r} not in\n{stderr}"
    said = [line for line in stderr.splitlines() if not line.startswith(("warning: ", "note: "))]
    if case["exit"] == 2:  # one paragraph: a single line, "error: FILE: PLACE: PROBLEM"
        assert len(said) == 1 and said[0].startswith("error: "), stderr
    elif case["exit"] == 3:
        assert said and said[0].startswith("stuck: "), stderr


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_in_process(case: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)  # paths inside configs (per-node-custom-implementation) are read from here
    argv = argv_of(case, tmp_path)
    t0 = time.perf_counter()
    code = TOOLS[case.get("tool", "sim")](argv)
    seconds = time.perf_counter() - t0
    check_answer(case, int(code), capsys.readouterr().err, seconds)


SUBPROCESS_CASES = [c for c in CASES if c.get("subprocess")]


@pytest.mark.parametrize("case", SUBPROCESS_CASES, ids=[c["id"] for c in SUBPROCESS_CASES])
def test_case_as_a_user_runs_it(case: dict, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", MODULES[case.get("tool", "sim")], *argv_of(case, tmp_path)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    # the interpreter's start-up is not the simulator's answer time: allow it on top
    check_answer(case, r.returncode, r.stderr, max(0.0, time.perf_counter() - t0 - 2.0))


# -- the manifest itself ---------------------------------------------------------------------

def test_manifest_is_well_formed() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    for c in CASES:
        assert set(c) <= {"id", "tool", "args", "exit", "expect", "fixed", "subprocess"}, c["id"]
        assert c.get("tool", "sim") in TOOLS and c["exit"] in (0, 2, 3), c["id"]
        if c["exit"] == 2:
            assert c["expect"], f"{c['id']}: a bad-input case must say what the message names"


# Files the cases reach only through another file.
_INDIRECT = {"system/per_node_custom.yaml.txt"}


def test_every_corpus_entry_is_a_case() -> None:
    used = " ".join(str(a) for c in CASES for a in c.get("args", []))
    orphans = []
    for kind in ("et", "network", "system", "comm_group", "remote_memory", "triosim", "profiler"):
        for entry in sorted((CORPUS / kind).iterdir()):
            rel = f"{kind}/{entry.name}"
            if rel not in _INDIRECT and f"{{dir}}/{rel}" not in used:
                orphans.append(rel)
    assert not orphans, f"corpus entries no case runs: {orphans}"


def test_corpus_is_what_make_corpus_writes(tmp_path: Path) -> None:
    """The committed files are the generator's output, so a case can be read (and remade) as code."""
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    made = {p.relative_to(tmp_path).as_posix(): p for p in tmp_path.rglob("*") if p.is_file()}
    have = {p.relative_to(CORPUS).as_posix(): p for p in CORPUS.rglob("*")
            if p.is_file() and p.parent != CORPUS and "__pycache__" not in p.parts}
    assert sorted(made) == sorted(have)
    changed = [k for k in made if made[k].read_bytes() != have[k].read_bytes()]
    assert not changed, f"rerun python tests/bad_inputs/make_corpus.py: {changed}"
