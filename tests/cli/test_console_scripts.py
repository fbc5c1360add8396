"""What ``pip install`` puts on the PATH (issue 14, item 7): dtsim-sweep / -compare / -bench, --version,
and tools that fail loudly (non-zero) when part of their answer is missing."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import system
from conftest import EXAMPLES, ROOT, need, run_cli
from dtsim_tools import bench, compare_backends, sweep

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXAMPLE = ["--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
           "--network", str(EXAMPLES / "network" / "Ring_8npus.yml")]


@pytest.mark.parametrize("name", ["dtsim", "dtsim-convert", "dtsim-collect", "dtsim-sweep", "dtsim-compare",
                                  "dtsim-bench"])
def test_every_console_script_names_an_installed_function(name: str) -> None:
    module, func = PYPROJECT["project"]["scripts"][name].split(":")
    top = module.split(".")[0]
    assert any(top == pattern.rstrip("*") for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
    assert callable(getattr(importlib.import_module(module), func))


def test_version_from_both_entry_points() -> None:
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "system.__version__"}
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"dtsim {system.__version__}"
    assert system.__version__.count(".") >= 2


@pytest.mark.parametrize("script", ["sweep.py", "compare_backends.py", "bench.py"])
def test_checkout_wrappers_run_the_installed_code(script: str) -> None:
    env = {**os.environ, "PYTHONPATH": ""}  # the wrapper finds the checkout by itself
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--help"], capture_output=True,
                       text=True, env=env, cwd="/", timeout=60)
    assert r.returncode == 0 and "usage:" in r.stdout, r.stderr


def test_compare_fails_when_a_backend_gives_no_answer(monkeypatch, capsys) -> None:
    monkeypatch.setattr(compare_backends, "installed", lambda name: name != "ns3")
    code = compare_backends.main([*EXAMPLE, "--backends", "congestion-unaware", "ns3"])
    out, err = capsys.readouterr()
    assert code == compare_backends.ExitCode.BACKENDS_FAILED != 0
    assert "not installed" in out and "pip install -e '.[ns3]'" in out and "ns3" in err


def test_compare_by_default_runs_what_is_installed(monkeypatch, capsys) -> None:
    monkeypatch.setattr(compare_backends, "installed", lambda name: name != "ns3")
    assert compare_backends.main(EXAMPLE) == 0
    assert "congestion-aware" in capsys.readouterr().out


@pytest.mark.parametrize("extra, says", [(["--backends", "quantum"], "unknown backend 'quantum'"),
                                         (["--json", "rows.csv"], "ending in .json"),
                                         (["--plot", "end.txt"], "'.txt'")])
def test_compare_bad_input_is_exit_2_before_running(tmp_path: Path, capsys, extra, says) -> None:
    need("matplotlib", "plot")
    extra = [str(tmp_path / a) if a.endswith((".csv", ".txt")) else a for a in extra]
    assert compare_backends.main([*EXAMPLE, *extra]) == 2
    out, err = capsys.readouterr()
    assert out == "" and says in err


def test_sweep_checks_its_outputs_before_running(tmp_path: Path, capsys) -> None:
    need("matplotlib", "plot")
    grid = str(EXAMPLES / "sweep" / "bandwidth_splits.yaml")
    assert sweep.main(["--grid", grid, "--out", str(tmp_path / "rows.txt"), "-q"]) == sweep.ExitCode.BAD_INPUT
    assert "ending in .csv" in capsys.readouterr().err
    assert sweep.main(["--grid", grid, "--plot", str(tmp_path / "p.doc"), "-q"]) == sweep.ExitCode.BAD_INPUT
    assert "'.doc'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_bench_checks_its_inputs_and_outputs_before_running(tmp_path: Path, capsys) -> None:
    assert bench.main(["--cases", "ring64", "--json", str(tmp_path / "rows.txt")]) == 2
    assert "ending in .json" in capsys.readouterr().err
    assert bench.main(["--cases", "vgg13-dp64", "--examples", str(tmp_path)]) == 2
    assert "--examples" in capsys.readouterr().err


def test_bench_draws_layouts_that_its_names_rebuild(tmp_path: Path, capsys) -> None:
    """--draw N runs N drawn layouts; a row's name is the whole case (--cases NAME reruns it), the
    draw is the same for the same seed, and a bad rank list or name is bad input."""
    cases = [bench.case_by_name(bench._drawn_name(3, i, (16, 32))) for i in range(40)]
    assert cases == [bench._drawn_case(3, i, (16, 32)) for i in range(40)]
    assert {c["dims"][0][1] for c in cases} == {16, 32}
    assert {c["kind"] for c in cases} == {"irregular", "mixed"}
    assert {c["backend"] for c in cases} == {"congestion-aware", "congestion-unaware"}
    assert {c.get("impl") for c in cases if c["kind"] == "irregular"} == set(bench._DRAW_IMPLS)
    assert cases != [bench._drawn_case(4, i, (16, 32)) for i in range(40)]
    for bad in ("draw-3-x-16", "draw-3-1-12", "draw-3-1", "draw-3-1-16.x", "ring65"):
        with pytest.raises(KeyError):
            bench.case_by_name(bad)
    with pytest.raises(SystemExit) as e:  # argparse's own bad-input exit
        bench.main(["--cases", "draw-3-1-12"])
    assert e.value.code == 2 and "no case 'draw-3-1-12'" in capsys.readouterr().err
    assert bench.main(["--draw", "2", "--draw-npus", "16,20"]) == 2
    assert "multiple of 8" in capsys.readouterr().err
    out = tmp_path / "rows.json"
    assert bench.main(["--draw", "2", "--seed", "3", "--draw-npus", "16", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "drawn: 2 layouts, 0 failed here" in printed
    rows = json.loads(out.read_text())
    assert [r["case"] for r in rows] == ["draw-3-0-16", "draw-3-1-16"]
    assert all(r["npus"] == 16 and r["events"] > 0 for r in rows)


def test_bench_byte_compiles_the_run_first(tmp_path, monkeypatch, capsys) -> None:
    # where PYTHONDONTWRITEBYTECODE is set, an editable install never writes .pyc files and every
    # timed run would compile its modules again: the bench writes them first, as pip install does
    pkg = tmp_path / "network"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("X = 1\n")
    monkeypatch.setattr(bench, "PACKAGE_ROOT", tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    bench._byte_compile()
    assert [p.name.split(".")[0] for p in (pkg / "__pycache__").glob("*.pyc")] == ["__init__"]
    # rewritten within the second it was compiled in: compileall keeps the .pyc, the importer
    # (mtime and size) would not; the bench compiles it again
    source = pkg / "__init__.py"
    mtime = source.stat().st_mtime_ns
    source.write_text("X = 12345\n")
    os.utime(source, ns=(mtime, mtime))
    assert bench._rejected_pycs(tmp_path) == [source]
    bench._byte_compile()
    assert bench._rejected_pycs(tmp_path) == []
    import importlib.util
    pyc = Path(importlib.util.cache_from_source(str(source))).read_bytes()
    assert int.from_bytes(pyc[12:16], "little") == len("X = 12345\n")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmHWM is Linux's")
def test_bench_peak_rss_is_the_childs_own_not_the_parents(tmp_path: Path) -> None:
    """A child's ru_maxrss holds its parent's RSS at fork: the bench's numbers for both
    simulators must not. With this process 300 MB larger, a Python child and ASTRA-sim's stand-in,
    both started by the bench's spawner (rusage from wait4), report only their own."""
    import json
    import subprocess

    ballast = bytearray(300 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    mine = tmp_path / "ours.json"
    subprocess.run([sys.executable, "-S", "-c", bench._SPAWNER, str(mine), sys.executable, "-c", "pass"], check=True)
    ours = json.loads(mine.read_text())["rss_mb"]
    out = tmp_path / "m.json"
    subprocess.run([sys.executable, "-S", "-c", bench._SPAWNER, str(out), "/bin/sh", "-c", "exit 3"], check=True)
    spawned = json.loads(out.read_text())
    naive = subprocess.run([sys.executable, "-c", "import resource; print(resource.getrusage("
                            "resource.RUSAGE_SELF).ru_maxrss / 1024)"], capture_output=True, text=True, check=True)
    if float(naive.stdout) < 250:  # what the old measure read here: the ballast
        pytest.skip("this kernel does not carry a parent's RSS over the exec: nothing to correct")
    assert ours < 150 and spawned["rss_mb"] < 150 and spawned["code"] == 3 and spawned["wall"] > 0
    del ballast


def test_bench_names_the_interpreters_own_start_and_the_pth_files_that_run_code(tmp_path, monkeypatch) -> None:
    """Every wall of ours includes the interpreter's start, and with it whatever .pth files in
    site-packages execute (an environment's hook can cost more than a small run): the bench
    measures that floor and names the files, and leaves out those that only add a path."""
    import site

    (tmp_path / "hook.pth").write_text("import os; os.environ.get('X')\n")
    (tmp_path / "path_only.pth").write_text(str(tmp_path) + "\n")
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "absent"))
    floor = bench._interpreter_floor(1)
    assert floor["pth_hooks"] == ["hook.pth"]
    assert floor["venv"] is (sys.prefix != sys.base_prefix)  # the note says whether it was a virtual environment
    assert 0 < floor["wall"] < 10 and 1 < floor["rss_mb"] < 1000
    # our own start-up (that start and every import a run makes first) is the least a row of ours takes
    assert floor["wall"] < floor["startup"] < 10


def test_bench_reads_our_cycles_from_the_output_users_get(tmp_path: Path) -> None:
    """The bench times our default command, as ASTRA-sim's is timed, and reads each rank's cycles
    from the finish lines: one per rank (ranks that differ) or one per run of equal neighbours (a
    large run). They agree with the report; a missing rank or total line gives no answer."""
    from workload.builder import write_collective_microbenchmark

    irregular = tmp_path / "irregular"
    irregular.mkdir()
    net16 = tmp_path / "ring16.yml"
    net16.write_text("topology: [ Ring ]\nnpus_count: [ 16 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    net128 = tmp_path / "ring128.yml"
    net128.write_text("topology: [ Ring ]\nnpus_count: [ 128 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    ring = write_collective_microbenchmark(tmp_path / "ar128", 128, "ALL_REDUCE", 1 << 20, shared=True)
    outputs = []
    groups = ["--comm-group-configuration", str(irregular / "groups.json")]
    for workload, net, extra in ((str(bench._write_irregular(irregular, 16, tp=4, iterations=1)), net16, groups),
                                 (ring, net128, [])):
        rep = tmp_path / "r.json"
        r = run_cli("--workload", workload, "--network", str(net), *extra, "--report", str(rep))
        assert r.returncode == 0, r.stderr
        data = json.loads(rep.read_text())
        parsed = bench._our_output(r.stdout.encode())
        assert parsed is not None
        assert parsed["cycles"] == [x["finish_cycles"] for x in data["ranks"]]
        assert (parsed["npus"], parsed["end_cycles"], parsed["events"]) == (
            data["npus"], data["totals"]["end_cycles"], data["totals"]["events"])
        outputs.append(r.stdout)
    assert len(set(bench._our_output(outputs[0].encode())["cycles"])) > 1  # the ranks differ
    assert "sys[0..127] finished" in outputs[1]  # equal neighbours share a line
    lines = outputs[0].splitlines()
    assert bench._our_output("\n".join(l for l in lines if not l.startswith("sys[5]")).encode()) is None
    assert bench._our_output("\n".join(l for l in lines if not l.startswith("total:")).encode()) is None


@pytest.mark.parametrize("finished, expect", [(4, "cycles"), (3, "failed")])
def test_bench_keeps_astra_sims_cycles_when_it_crashes_after_every_rank_finished(
        tmp_path: Path, finished: int, expect: str) -> None:
    """ASTRA-sim's congestion-aware binary can abort in its teardown (free()) after every rank
    printed its finish line: those cycles stand, and the exit code goes with them; where a rank
    did not finish, the run failed."""
    exe = tmp_path / bench.ASTRA_BINARIES["congestion-aware"]
    exe.write_text("#!/bin/sh\n" + "".join(f"echo 'sys[{r}] finished, {100 + r} cycles'\n" for r in range(finished))
                   + "kill -ABRT $$\n")
    exe.chmod(0o755)
    prep = bench.Prepared([], ["--workload-configuration=x"], "congestion-aware", 4)
    got = bench._run_astra(tmp_path, prep, tmp_path)
    if expect == "cycles":
        assert got["cycles"] == [100, 101, 102, 103] and got["exit"] == -6 and not got.get("failed")
    else:
        assert got["failed"] and "3 of 4 ranks finished" in got["error"]


def test_bench_jitter_moves_each_ranks_compute_within_its_bound(tmp_path: Path) -> None:
    from chakra_proto import enums as pb
    from chakra_proto.io import read_et
    from workload.builder import GraphBuilder

    for r in range(3):
        b = GraphBuilder()
        c = b.comp("a", 100_000)
        b.comp("b", 40_000, deps=[c])
        b.write(tmp_path / "w", r)
    bench._micros_only(tmp_path / "w", 3)  # as _prepare does first: we replay duration_micros then
    bench._jitter(tmp_path / "w", 3, 0.05)
    got = [[n.duration_micros for n in read_et(tmp_path / f"w.{r}.et")[1] if n.type == pb.COMP_NODE]
           for r in range(3)]
    assert all(95 <= a <= 105 and 38 <= b <= 42 for a, b in got)
    assert len({tuple(x) for x in got}) == 3  # every rank its own
    # what we replay is the jittered time: no finer duration_ns is left beside it
    assert not any(a.name == "duration_ns" for r in range(3) for n in read_et(tmp_path / f"w.{r}.et")[1] for a in n.attr)
    bench._jitter(tmp_path / "w", 3, 0.0)
    assert [[n.duration_micros for n in read_et(tmp_path / f"w.{r}.et")[1] if n.type == pb.COMP_NODE]
            for r in range(3)] == got


def test_bench_has_issue_26s_direct_cases_on_every_rank_and_with_shortcuts(tmp_path: Path) -> None:
    """Direct all-reduce and all-to-all, congestion-aware, Switch and FullyConnected at 256-1,024
    NPUs; a -general row runs every rank (--no-symmetry). The 256-NPU pair's prepared commands say so."""
    for short, collective in (("ar", "ALL_REDUCE"), ("a2a", "ALL_TO_ALL")):
        for label, kind in (("switch", "Switch"), ("fc", "FullyConnected")):
            for npus in (256, 512, 1024):
                for tail in ("", "-general"):
                    case = bench.case_by_name(f"direct-{short}-{label}{npus}-aware{tail}")
                    assert (case["collective"], case["impl"], case["backend"], case["dims"]) == (
                        collective, "direct", "congestion-aware", [(kind, npus)])
                    assert ("--no-symmetry" in case["extra"]) == (tail == "-general")
    for tail in ("", "-general"):
        prepared = subprocess.run(
            [sys.executable, "-m", "dtsim_tools.bench", "--prepare", f"direct-a2a-fc256-aware{tail}",
             str(tmp_path / (tail.strip("-") or "plain")), str(EXAMPLES)],
            capture_output=True, text=True, check=True).stdout.splitlines()[-1]
        ours = json.loads(prepared)["ours"]
        assert ("--no-symmetry" in ours) == (tail == "-general") and "congestion-aware" in ours


def test_draw_summary_names_the_layouts_slower_than_astra_sim() -> None:
    from dtsim_tools import bench

    def row(case: str, ratio: float, equal: bool = True) -> dict:
        return {"case": case, "wall_ratio": ratio, "cycles_equal": equal, "rss_mb": 10.0,
                "astra_sim": {"rss_mb": 12.0}}

    rows = [row("draw-1-0-64", 0.5), row("draw-1-1-64", 1.12), row("draw-1-2-64", 0.9, equal=False),
            {"case": "draw-1-3-64", "failed": True}, row("draw-1-4-64", 1.04)]
    text = bench._draw_summary(rows, True)
    assert "drawn: 5 layouts, 1 failed here" in text
    assert "cycles equal on every rank in 3 of them" in text
    assert "wall ratio median 0.97x (0.50-1.12x), above 1.0x in 2 of 4 (draw-1-1-64, draw-1-4-64)" in text
    assert "above 1.0x in 0 of 1;" in bench._draw_summary([row("draw-1-0-64", 1.0)], True)
    # against our start-up: ASTRA-sim's whole run on the layouts we are slower on
    walls = {"draw-1-1-64": 0.031, "draw-1-4-64": 0.052, "draw-1-0-64": 0.2}
    for r in rows:
        if "astra_sim" in r:
            r["astra_sim"]["wall"] = walls.get(r["case"], 0.5)
    text = bench._draw_summary(rows, True, 0.028)
    assert text.endswith("; ASTRA-sim's whole run on those 0.031-0.052 s, our start-up alone 0.028 s")
    assert "our start-up" not in bench._draw_summary(rows, True)
    assert "our start-up" not in bench._draw_summary([row("draw-1-0-64", 0.5)], True, 0.028)
