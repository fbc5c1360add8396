"""Mutation fuzzing over real input bytes: flip, cut, duplicate, delete, insert and splice bytes of
real Chakra ET files (the bundled all-reduce, a TrioSim VGG-13 conversion with pipeline sends,
ASTRA-sim's custom ring collective, as a workload and as the ETs a custom collective replays), and
of the text inputs (TrioSim CSVs, profiler JSON,
network YAML, system JSON). Every run must end with exit 0, 2 or 3: no internal error, no hang.

The budget is fixed (a seeded ``random.Random`` per test), so CI runs the same mutants every time.
Run longer: ``DTSIM_FUZZ_SCALE=50 DTSIM_FUZZ_SEED=7 python -m pytest tests/test_fuzz_mutation.py``.
A failure prints the seed and the case number; the mutant's files are kept under pytest's tmp_path.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import time
from pathlib import Path
from typing import Callable

import pytest

from system.main import main as sim_main
from workload.collect.cli import main as collect_main
from workload.convert import main as convert_main

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "bad_inputs"
EXAMPLES = ROOT / "examples"
SCALE = float(os.environ.get("DTSIM_FUZZ_SCALE", "1"))
SEED = int(os.environ.get("DTSIM_FUZZ_SEED", "20261129"))
HARD_LIMIT_S = 15.0
LIMITS = ["--max-wall-seconds", "5", "--max-events", "2000000", "--quiet"]


def budget(n: int) -> int:
    return max(1, int(n * SCALE))


def mutate(data: bytes, rng: random.Random, donor: bytes = b"") -> bytes:
    """One to four byte-level edits, the kinds a bad disk, a bad copy or a bad tool makes."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            b.extend(rng.randbytes(rng.randint(1, 8)))
            continue
        i = rng.randrange(len(b))
        op = rng.randrange(8)
        if op == 0:  # flip a bit
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # an interesting byte (varint continuation, sign, zero)
            b[i] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
        elif op == 2:  # cut the file
            del b[i:]
        elif op == 3:  # duplicate a slice in place
            j = min(len(b), i + rng.randint(1, 64))
            b[j:j] = b[i:j]
        elif op == 4:  # delete a slice
            del b[i:i + rng.randint(1, 16)]
        elif op == 5:  # insert random bytes
            b[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == 6 and donor:  # splice in bytes of another file
            k = rng.randrange(len(donor))
            b[i:i] = donor[k:k + rng.randint(1, 64)]
        else:  # overwrite a run with one value
            b[i:i + rng.randint(1, 8)] = bytes([rng.randrange(256)]) * rng.randint(1, 8)
    return bytes(b)


def run_tool(tool: Callable, argv: list[str]) -> tuple[int, str, float]:
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = int(tool(argv))
    return code, err.getvalue(), time.perf_counter() - t0


def check(code: int, stderr: str, seconds: float, what: str) -> None:
    assert code in (0, 2, 3), f"{what}: exit {code}\n{stderr}"
    assert "internal error" not in stderr and "Traceback" not in stderr, f"{what}:\n{stderr}"
    assert seconds < HARD_LIMIT_S, f"{what}: {seconds:.1f} s"


# -- seeds: real workloads -------------------------------------------------------------------

class Seed:
    """A workload: its rank files' bytes and the extra arguments it runs with."""

    def __init__(self, name: str, files: dict[str, bytes], args: list[str], extra: dict[str, bytes] | None = None):
        self.name, self.files, self.args, self.extra = name, files, args, extra or {}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory, anchors: Path) -> list[Seed]:
    out = []
    ar = EXAMPLES / "workload" / "all_reduce_8npus_1MB"
    out.append(Seed("bundled all-reduce", {p.name: p.read_bytes() for p in sorted(ar.glob("*.et"))},
                    ["--network", str(EXAMPLES / "network" / "Ring_8npus.yml"),
                     "--system", str(EXAMPLES / "system" / "Ring_4chunks.json")]))
    vgg = tmp_path_factory.mktemp("vgg") / "vgg"
    assert convert_main(["triosim", "--trace-dir", str(EXAMPLES / "triosim" / "vgg13"), "-o", str(vgg),
                         "--dp", "2", "--pp", "2", "--micro-batches", "2", "--batch-size", "128",
                         "--batch-size-sim", "64"]) == 0
    out.append(Seed("TrioSim VGG-13 dp2 pp2", {p.name: p.read_bytes() for p in sorted(vgg.parent.glob("*.et"))},
                    ["--network", str(CORPUS / "common" / "ring4.yml")],
                    {"groups.json": vgg.with_name("vgg.comm_groups.json").read_bytes()}))
    custom = anchors / "system" / "examples" / "custom_collectives" / "custom_ring_allreduce_8npus_1MB"
    out.append(Seed("ASTRA-sim custom ring (sends and receives)",
                    {p.name: p.read_bytes() for p in sorted(custom.glob("*.et"))},
                    ["--network", str(EXAMPLES / "network" / "Ring_8npus.yml"),
                     "--system", str(EXAMPLES / "system" / "Ring_4chunks.json")]))
    return out


def _materialise(seed: Seed, rng: random.Random, d: Path) -> list[str]:
    names = sorted(seed.files)
    blobs = dict(seed.files)
    if rng.random() < 0.3:  # every rank the same edit: runs stay symmetric and get further
        state = rng.getstate()
        for n in names:
            rng.setstate(state)
            blobs[n] = mutate(blobs[n], rng)
    else:
        for n in rng.sample(names, rng.randint(1, 2)):
            blobs[n] = mutate(blobs[n], rng, donor=seed.files[rng.choice(names)])
    for n, data in blobs.items():
        (d / n).write_bytes(data)
    prefix = names[0].rsplit(".", 2)[0]
    argv = ["--workload", str(d / prefix), *seed.args, *LIMITS]
    for n, data in seed.extra.items():
        (d / n).write_bytes(data)
        argv += ["--comm-group-configuration", str(d / n)]
    if rng.random() < 0.3:
        argv += ["--backend", "congestion-aware"]
    return argv


def test_mutated_et_files_never_crash_or_hang(seeds: list[Seed], tmp_path: Path) -> None:
    rng = random.Random(SEED)
    codes = {0: 0, 2: 0, 3: 0}
    for k in range(budget(3000)):
        seed = seeds[k % len(seeds)]
        d = tmp_path / f"case{k}"
        d.mkdir()
        argv = _materialise(seed, rng, d)
        code, err, seconds = run_tool(sim_main, argv)
        check(code, err, seconds, f"seed {SEED}, case {k} ({seed.name}), files in {d}")
        codes[code] += 1
        shutil.rmtree(d)  # keep only a failing case on disk
    assert codes[2] and codes[0], codes  # the mutants reach both the decoder's errors and real runs


def test_mutated_custom_collective_ets_never_crash_or_hang(anchors: Path, tmp_path: Path) -> None:
    """The ETs a ``*-implementation-custom`` collective replays, mutated, under a real workload."""
    custom = anchors / "system" / "examples" / "custom_collectives" / "custom_ring_allreduce_8npus_1MB"
    files = {p.name: p.read_bytes() for p in sorted(custom.glob("*.et"))}
    names = sorted(files)
    rng = random.Random(f"{SEED}-custom")
    for k in range(budget(600)):
        d = tmp_path / f"case{k}"
        d.mkdir()
        victims = rng.sample(names, rng.randint(1, 2))
        for n, data in files.items():
            (d / n).write_bytes(mutate(data, rng, donor=files[rng.choice(names)]) if n in victims else data)
        (d / "custom.json").write_text('{"scheduling-policy": "FIFO", "preferred-dataset-splits": 1, '
                                       '"local-mem-bw": 50, "all-reduce-implementation-custom": ["%s"]}'
                                       % (d / "custom_allreduce"))
        argv = ["--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
                "--network", str(EXAMPLES / "network" / "Ring_8npus.yml"), "--system", str(d / "custom.json"),
                *LIMITS]
        code, err, seconds = run_tool(sim_main, argv)
        check(code, err, seconds, f"seed {SEED}, custom collective case {k}, files in {d}")
        shutil.rmtree(d)


# -- seeds: real text inputs ------------------------------------------------------------------

def _text_cases() -> list[tuple[str, Path, Callable[[Path, Path], tuple[Callable, list[str]]]]]:
    """(name, folder of good files, how to run a folder holding the mutant)."""
    def configs(d: Path, tmp: Path) -> tuple[Callable, list[str]]:
        return sim_main, ["--workload", str(CORPUS / "et" / "mem_nodes" / "w"), "--network", str(d / "ring4.yml"),
                          "--system", str(d / "system.json"), "--remote-memory-configuration",
                          str(d / "memory.json"), *LIMITS]

    def triosim(d: Path, tmp: Path) -> tuple[Callable, list[str]]:
        return convert_main, ["triosim", "--trace-dir", str(d), "-o", str(tmp / "out" / "t"), "--dp", "2"]

    def collect(d: Path, tmp: Path) -> tuple[Callable, list[str]]:
        return collect_main, ["convert", "--execution-trace", str(d / "et.json"),
                              "--profiler-trace", str(d / "kineto.json"), "--out", str(tmp / "out")]

    return [
        ("network YAML, system and remote-memory JSON", CORPUS / "common", configs),
        ("TrioSim CSVs", CORPUS / "triosim" / "ok", triosim),
        ("profiler JSON", CORPUS / "profiler" / "ok", collect),
    ]


@pytest.mark.parametrize("name,good,how", _text_cases(), ids=[c[0] for c in _text_cases()])
def test_mutated_text_inputs_never_crash_or_hang(name: str, good: Path, how, tmp_path: Path) -> None:
    rng = random.Random(f"{SEED}-{name}")
    files = {p.name: p.read_bytes() for p in good.iterdir() if p.is_file()}
    for k in range(budget(600)):
        d = tmp_path / f"case{k}"
        d.mkdir()
        targets = [n for n in files if n.endswith((".csv", ".json", ".yml"))]
        victim = rng.choice(targets)
        for n, data in files.items():
            (d / n).write_bytes(mutate(data, rng) if n == victim else data)
        tool, argv = how(d, tmp_path / f"out{k}")
        code, err, seconds = run_tool(tool, argv)
        check(code, err, seconds, f"seed {SEED}, {name} case {k}, files in {d}")
        shutil.rmtree(d)
