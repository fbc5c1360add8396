"""Same inputs, same outputs, byte for byte: whatever PYTHONHASHSEED, whatever the order in which
the rank files were written to disk. Only wall-clock values (keys named ``wall*``) may differ.

The workload is a TrioSim VGG-13 conversion with data and pipeline parallelism (4 ranks: world
and group collectives, pipeline sends and receives), run on every rank (no symmetric shortcut)
and on both analytical backends; the bundled all-reduce covers the symmetric fast path.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workload.convert import main as convert_main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RING4 = ROOT / "tests" / "bad_inputs" / "common" / "ring4.yml"
_WALL = re.compile(rb'("wall[a-z_]*": )[-0-9.e+]+')


def masked(data: bytes) -> bytes:
    """The JSON text with the values of wall-clock keys blanked (``"wall_seconds": 0.0018``)."""
    return _WALL.sub(rb"\1<wall>", data)


def cli(args: list[str], hash_seed: str, *, module: str = "system.main") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed,
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return r


@pytest.fixture(scope="module")
def vgg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("vgg") / "vgg"
    assert convert_main(["triosim", "--trace-dir", str(EXAMPLES / "triosim" / "vgg13"), "-o", str(prefix),
                         "--dp", "2", "--pp", "2", "--micro-batches", "2", "--batch-size", "128",
                         "--pp-schedule", "1f1b"]) == 0
    return prefix


def outputs(out: Path) -> dict[str, bytes]:
    """Every file a run wrote, wall-clock values masked."""
    return {p.relative_to(out).as_posix(): masked(p.read_bytes()) for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_reports_and_traces_are_identical_whatever_the_hash_seed(vgg: Path, tmp_path: Path, backend: str) -> None:
    runs = []
    for seed in ("0", "4242"):
        out = tmp_path / f"seed{seed}"
        r = cli(["--workload", str(vgg), "--network", str(RING4), "--backend", backend, "--no-symmetry",
                 "--report", str(out / "report.json"), "--trace-out", str(out / "traces")], seed)
        runs.append((r.stdout.decode().rsplit(";", 1)[0], outputs(out)))
    (stdout_a, files_a), (stdout_b, files_b) = runs
    assert sorted(files_a) == ["report.json"] + [f"traces/rank{r}.json" for r in range(4)]
    assert files_a == files_b
    assert stdout_a == stdout_b


def test_symmetric_fast_path_is_identical_whatever_the_hash_seed(tmp_path: Path) -> None:
    args = ["--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
            "--network", str(EXAMPLES / "network" / "Ring_8npus.yml")]
    got = []
    for seed in ("1", "99"):
        out = tmp_path / f"seed{seed}"
        cli([*args, "--report", str(out / "report.json"), "--trace-out", str(out / "traces")], seed)
        got.append(outputs(out))
    assert got[0] == got[1] and len(got[0]) == 9


def test_converter_output_is_identical_whatever_the_hash_seed(tmp_path: Path) -> None:
    got = []
    for seed in ("3", "77"):
        out = tmp_path / f"seed{seed}"
        cli(["triosim", "--trace-dir", str(EXAMPLES / "triosim" / "vgg13"), "-o", str(out / "v"),
             "--dp", "2", "--tp", "2", "--pp", "2", "--micro-batches", "2", "--dp-mode", "ddp",
             "--batch-size", "128"], seed, module="workload.convert")
        got.append(outputs(out))
    assert got[0] == got[1] and len(got[0]) == 8 + 2


def _write_ranks(src: Path, dst: Path, order: list[int]) -> None:
    """Copy the rank files into ``dst`` one at a time in ``order``, with distinct mtimes."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    files = sorted(src.parent.glob(f"{src.name}.*.et"), key=lambda p: int(p.name.split(".")[-2]))
    for i, r in enumerate(order):
        target = dst / files[r].name
        shutil.copyfile(files[r], target)
        os.utime(target, (1_000_000 + i, 1_000_000 + i))
    shutil.copyfile(src.with_name(src.name + ".comm_groups.json"), dst / (src.name + ".comm_groups.json"))


@pytest.mark.parametrize("form", ["prefix", "folder"])
def test_the_order_of_files_on_disk_does_not_matter(vgg: Path, tmp_path: Path, form: str) -> None:
    """Rank files written in reverse (and in a shuffled) order, into the same path: same bytes out."""
    wl = tmp_path / "wl"
    got = []
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]):
        _write_ranks(vgg, wl, order)
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        workload = str(wl / vgg.name) if form == "prefix" else str(wl)
        args = ["--workload", workload, "--network", str(RING4), "--no-symmetry",
                "--report", str(out / "report.json"), "--trace-out", str(out / "traces")]
        if form == "folder":
            args += ["--comm-group-configuration", str(wl / (vgg.name + ".comm_groups.json"))]
        cli(args, "0")
        got.append(outputs(out))
    assert got[0] == got[1] == got[2]
