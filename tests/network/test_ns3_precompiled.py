"""The ns-3 backend's C++ compiled ahead of time (network/ns3/precompiled.py): a run that finds
no library starts building one in the background and says so; a run that finds it loads it and
gives the very report a JIT-compiled run gives, wall time aside. Where there is no C++ compiler,
nothing is built and the run JIT-compiles, as before."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, need

need("ns", "ns3", import_it=False)

pytestmark = pytest.mark.ns3

EXAMPLE = ["--workload", str(ROOT / "examples/workload/all_reduce_8npus_1MB/all_reduce"),
           "--network", str(ROOT / "examples/network/Ring_8npus.yml"),
           "--system", str(ROOT / "examples/system/Ring_4chunks.json"), "--backend", "ns3", "-q"]


def _run(tmp: Path, name: str, precompile: str, cache: Path, *, path: str | None = None,
         args: list[str] = EXAMPLE) -> tuple[dict, str]:
    env = dict(os.environ, DTSIM_NS3_PRECOMPILE=precompile, DTSIM_CACHE_DIR=str(cache))
    if path is not None:
        env["PATH"] = path
        env.pop("CXX", None)
    report = tmp / f"{name}.json"
    p = subprocess.run([sys.executable, "-m", "system.main", *args, "--report", str(report)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(report.read_text()), p.stderr


def _same_answer(a: dict, b: dict) -> None:
    for r in (a, b):
        r["totals"].pop("wall_seconds", None)
        r["network"].pop("cxx", None)
        r.pop("inputs", None)
    assert a == b


def test_a_background_build_then_a_run_on_the_library_gives_the_jit_runs_report(tmp_path):
    from network.ns3.precompiled import compiler

    cache = tmp_path / "cache"
    if compiler() is None:
        # nothing to build with: no note, no library, the run JIT-compiles
        rep, err = _run(tmp_path, "first", "1", cache)
        assert "compiling the backend's C++" not in err and rep["network"]["cxx"] == "jit"
        assert not cache.exists() or not list(cache.glob("*.so"))
        return
    jit, _ = _run(tmp_path, "jit", "0", cache)
    assert jit["network"]["cxx"] == "jit" and not cache.exists()  # 0: nothing built, nothing loaded
    first, err = _run(tmp_path, "first", "1", cache)
    assert "compiling the backend's C++ once, in the background" in err
    assert first["network"]["cxx"] == "jit"
    deadline = time.monotonic() + 240
    while (not list(cache.glob("*.so")) or list(cache.glob("*.lock"))) and time.monotonic() < deadline:
        time.sleep(1)
    assert len(list(cache.glob("*.so"))) == 1 and not list(cache.glob("*.lock")), sorted(cache.iterdir())
    later, err = _run(tmp_path, "later", "1", cache)
    assert later["network"]["cxx"] == "precompiled" and "compiling" not in err
    _same_answer(later, jit)
    # the rest of what Python calls: a topology file's per-flow routes, UDP, a TCP variant
    from workload.builder import write_collective_microbenchmark

    w = write_collective_microbenchmark(tmp_path / "w", 8, "ALL_TO_ALL", 1 << 18, shared=True)
    for transport in ("udp", "tcp"):
        net = tmp_path / f"ft-{transport}.yml"
        net.write_text("topology-generator: {shape: fat-tree, leaves: 2, npus-per-leaf: 4}\n"
                       f"ns3: {{transport: {transport}, tcp_variant: TcpCubic}}\n")
        args = ["--workload", str(w), "--network", str(net), "--backend", "ns3", "-q"]
        a, _ = _run(tmp_path, f"jit-{transport}", "0", cache, args=args)
        b, _ = _run(tmp_path, f"pre-{transport}", "1", cache, args=args)
        assert (a["network"]["cxx"], b["network"]["cxx"]) == ("jit", "precompiled")
        _same_answer(a, b)
    bad = tmp_path / "bad.yml"
    bad.write_text("topology: [Ring]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\nns3: {tcp_variant: TcpNoSuch}\n")
    p = subprocess.run([sys.executable, "-m", "system.main", *EXAMPLE[:2], "--network", str(bad), "--backend", "ns3"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env=dict(os.environ, DTSIM_NS3_PRECOMPILE="1", DTSIM_CACHE_DIR=str(cache)))
    assert p.returncode == 2 and "'TcpNoSuch' is not an ns-3 TCP congestion control" in p.stderr


def test_without_a_compiler_the_command_says_so_and_runs_jit(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    os.symlink(sys.executable, bare / "python")  # a PATH with python and no C++ compiler
    env = dict(os.environ, PATH=str(bare), DTSIM_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("CXX", None)
    p = subprocess.run([sys.executable, "-m", "network.ns3.precompiled"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "no C++ compiler" in p.stderr
    rep, err = _run(tmp_path, "bare", "1", tmp_path / "cache", path=str(bare))
    assert rep["network"]["cxx"] == "jit" and "compiling" not in err


def test_a_failed_build_is_reported_once_and_not_started_again(tmp_path):
    cxx = tmp_path / "broken-c++"
    cxx.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "broken 1.0"; exit 0; fi\n'
                   'echo "broken: cannot compile" >&2\nexit 1\n')
    cxx.chmod(0o755)
    cache = tmp_path / "cache"
    env = dict(os.environ, CXX=str(cxx), DTSIM_CACHE_DIR=str(cache), DTSIM_NS3_PRECOMPILE="1")
    p = subprocess.run([sys.executable, "-m", "network.ns3.precompiled"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 1 and "broken: cannot compile" in p.stderr
    failed = list(cache.glob("*.failed"))
    assert len(failed) == 1 and "cannot compile" in failed[0].read_text() and not list(cache.glob("*.so"))
    report = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "system.main", *EXAMPLE, "--report", str(report)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "compiling" not in r.stderr and not list(cache.glob("*.lock"))
    assert json.loads(report.read_text())["network"]["cxx"] == "jit"


def test_a_library_that_will_not_load_is_set_aside_and_the_run_jit_compiles(tmp_path):
    """A cached file under the library's name that is no library (a truncated copy, another ABI):
    the run JIT-compiles, the file goes, a .failed note says why, and no build starts over it."""
    cxx = tmp_path / "some-c++"  # names the library; never asked to compile here
    cxx.write_text('#!/bin/sh\necho "some-c++ 1.0"\n')
    cxx.chmod(0o755)
    cache = tmp_path / "cache"
    env = dict(os.environ, CXX=str(cxx), DTSIM_CACHE_DIR=str(cache), DTSIM_NS3_PRECOMPILE="1")
    name = subprocess.run([sys.executable, "-c", "from network.ns3.loader import HEADERS, _package\n"
                           "from network.ns3.precompiled import library_path\nprint(library_path(*_package(), HEADERS))"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    path = Path(name.stdout.strip())
    assert name.returncode == 0 and path.parent == cache, name.stderr
    cache.mkdir()
    path.write_bytes(b"not a shared library")
    report = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "system.main", *EXAMPLE, "--report", str(report)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(report.read_text())["network"]["cxx"] == "jit" and "compiling" not in r.stderr
    assert not path.exists() and "failed" in path.with_suffix(".failed").read_text()


def test_one_build_at_a_time_and_a_dead_builds_lock_is_taken_over(tmp_path):
    from network.ns3.precompiled import _STALE_LOCK_S, _take_lock

    lock = tmp_path / "x.lock"
    assert _take_lock(lock) and not _take_lock(lock)  # a second run starts no second build
    old = time.time() - _STALE_LOCK_S - 5
    os.utime(lock, (old, old))
    assert _take_lock(lock) and not _take_lock(lock)  # a lock from a build that died is taken over
