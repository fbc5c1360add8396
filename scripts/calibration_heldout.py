"""Held-out checks of the calibrator (the numbers in docs/calibration.md).

    python scripts/calibration_heldout.py [--hardware ../shared/anchors/hardware] [--out DIR]

0. Measured GPU counts: vTrain's A100 and V100 all-reduce tables (tests/network/data/vtrain): the
   8-GPU table is fitted with ``--node`` (NCCL's ring model) and the simulator runs the written
   files at 2-7 GPUs; the closed form's error is printed beside.
1. GPU count: 8-GPU tables synthesised from NCCL's own cost model (its tuning.cc form: a base
   latency, a latency per ring step, bytes over bus bandwidth) are fitted, and the fit predicts the
   2- to 7-GPU tables of the same model (only npus_count changes).
2. Sizes: a table is fitted on every other size and predicts the sizes left out.
3. Measured: ASTRA-sim's HGX-H100 8-GPU validation numbers (read off its plot, see the hardware
   README) and the two public two-node tables, fitted whole and on part of their sizes.
Every table is written in nccl-tests' layout and goes through the command line, as a user's would.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dtsim_tools.calibrate.cli import main as calibrate_main  # noqa: E402
from network.calibrate.nccl_tests import format_nccl_tests, read_nccl_tests  # noqa: E402

#: NCCL tuning.cc (v2.18) ring constants, µs: (base latency, NVLink latency per step)
NCCL_RING = {"Simple": (8.4, 3.4), "LL128": (14.0, 1.9)}
#: ASTRA-sim's HGX-H100 validation page, 8 GPUs, NCCL ring all-reduce (µs, read off its plot)
ASTRA_H100_8 = {64 << 20: 393, 128 << 20: 701, 256 << 20: 1327, 512 << 20: 2606, 1 << 30: 5088, 2 << 30: 10029}
SIZES = [1 << k for k in range(20, 31)]  # 1 MiB .. 1 GiB


def nccl_model_us(n: int, size: int, base: float, step: float, busbw_gb_s: float) -> float:
    return base + 2 * (n - 1) * step + 2 * (n - 1) / n * size / (busbw_gb_s * 1e3)


def run(argv: list[str]) -> tuple[str, list[tuple[str, str]]]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = calibrate_main(argv)
    text = buf.getvalue()
    if rc != 0:
        raise SystemExit(f"calibrate failed ({rc}): {argv}\n{text}")
    lines = text.splitlines()
    tables, name = [], None
    for line in lines:
        m = re.match(r"(\S+): \w+ on (\d+) NPUs .*, (fit|held out)$", line)
        if m:
            name = f"{m.group(1)} ({m.group(2)} NPUs, {m.group(3)})"
        elif name and line.strip().startswith("geomean error"):
            tables.append((name, line.strip()))
            name = None
    return text, tables


def write(d: Path, name: str, sizes, times, ranks: int, hosts: int = 1, note: str = "") -> str:
    p = d / name
    p.write_text(format_nccl_tests(sizes, times, ranks, hosts=hosts, note=note))
    return str(p)


def gpu_count_checks(d: Path) -> None:
    print("== 1. GPU count: fit 8 GPUs, predict 2..7 (synthetic tables from NCCL's cost model)")
    for proto, (base, step) in NCCL_RING.items():
        for busbw in (230.0, 370.0):
            files = {n: write(d, f"nccl_{proto}_{int(busbw)}_{n}gpu.txt", SIZES,
                              [nccl_model_us(n, s, base, step, busbw) for s in SIZES], n,
                              note=f"synthetic: NCCL ring {proto} model, base {base} us, {step} us/step, busbw {busbw} GB/s")
                     for n in range(2, 9)}
            _, tables = run(["--nccl-tests", files[8], "--npus", "8", "-o", str(d / f"fit_{proto}_{int(busbw)}"),
                             "--validate", *[files[n] for n in range(2, 8)]])
            for name, line in tables:
                print(f"  {proto:6s} busbw {busbw:5.0f}  {name:45s} {line}")


VTRAIN = ROOT / "tests" / "network" / "data" / "vtrain"


def measured_gpu_count_checks(d: Path) -> None:
    print("== 0. Measured GPU counts: vTrain, fit 8 GPUs with --node, the simulator predicts 2..7")
    for gpu, node in (("a100", "nvswitch-a100"), ("v100", "dgx1-v100")):
        held = [f"{VTRAIN / f'{gpu}_AR_GPU{n}.csv'}:{n}" for n in range(2, 8)]
        text, tables = run(["--nccl-tests", str(VTRAIN / f"{gpu}_AR_GPU8.csv"), "--npus", "8", "--node", node,
                            "-o", str(d / f"fit_{gpu}_node"), "--validate", *held])
        closed = [ln.split(": ", 1)[1] for ln in text.splitlines() if ln.strip().startswith("closed-form")]
        for (name, line), cf in zip(tables, closed):
            print(f"  {node:14s} {name:36s} simulator: {line}")
            print(f"  {'':14s} {'':36s} closed form: {cf}")


def size_checks(d: Path, hardware: Path | None) -> None:
    print("== 2. Sizes: fit every other size, predict the rest")
    base, step = NCCL_RING["Simple"]
    cases = {"nccl_Simple_370_8gpu": (SIZES, [nccl_model_us(8, s, base, step, 370.0) for s in SIZES], 8, 1)}
    sizes = sorted(ASTRA_H100_8)
    cases["astra_h100_8gpu"] = (sizes, [ASTRA_H100_8[s] for s in sizes], 8, 1)
    if hardware:
        for f in sorted(hardware.glob("*_all_reduce.txt")):
            t = read_nccl_tests(f)[0]
            rows = [r for r in t.rows if r.size_bytes >= 1 << 20]
            cases[f.stem] = ([r.size_bytes for r in rows], [r.time_us for r in rows], t.ranks, t.nodes)
    for name, (sizes, times, n, hosts) in cases.items():
        fit = write(d, f"{name}_even.txt", sizes[::2], times[::2], n, hosts)
        rest = write(d, f"{name}_odd.txt", sizes[1::2], times[1::2], n, hosts)
        whole = write(d, f"{name}.txt", sizes, times, n, hosts)
        _, tables = run(["--nccl-tests", fit, "--npus", str(n), "-o", str(d / f"fit_{name}_even"),
                         "--validate", rest, "--min-bytes", "1"])
        _, whole_tables = run(["--nccl-tests", whole, "--npus", str(n), "-o", str(d / f"fit_{name}"), "--min-bytes", "1"])
        for tname, line in whole_tables + tables:
            print(f"  {tname:52s} {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default=str(ROOT.parent / "shared" / "anchors" / "hardware"))
    ap.add_argument("--out", default=None, help="keep the tables and fitted files here")
    args = ap.parse_args()
    hardware = Path(args.hardware) if Path(args.hardware).is_dir() else None
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(args.out or tmp)
        d.mkdir(parents=True, exist_ok=True)
        measured_gpu_count_checks(d)
        gpu_count_checks(d)
        size_checks(d, hardware)


if __name__ == "__main__":
    main()
