"""Benchmark suite: fixed cases, one table (case, NPUs, events, wall s, events/s, peak RSS).

Each case runs the command line (``system.main.main``) in a fresh subprocess, so peak RSS is the
case's own. Workloads are generated with the project's own writer into a temporary folder; the
TrioSim cases read the traces of a checkout's examples/triosim (``--examples DIR`` elsewhere).

    dtsim-bench                 # the full suite (python scripts/bench.py in a checkout)
    dtsim-bench --quick         # the small cases only
    dtsim-bench --cases ring1024 ring4096
    dtsim-bench --json out.json # also write the rows as JSON

ASTRA-sim 2.0 (C++) on the same kind of 2-core machine, from
../shared/anchors/astra-sim/REFERENCE.md: Ring 1 GB all-reduce 512 NPUs 1.85 s / 102 MB,
1024 NPUs 8.65 s / 356 MB, 4096 NPUs 310 s / 5458 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from network.errors import InputError
from system.outputs import check_file

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  #: the checkout, or site-packages after pip install

GB = 1 << 30
RING_4CHUNKS = {
    "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
}
ASTRA_SIM = {  # case → (cycles, wall s, RSS MB) measured by ASTRA-sim where available
    "ring512": (44009404, 1.85, 101.9),
    "ring1024": (46129156, 8.65, 356.1),
    "ring4096": (58640440, 310.33, 5458.3),
    "ring64": (41613556, 0.05, 14.0),
}


def _collective_case(dims: list[tuple[str, int]], extra: tuple[str, ...] = ()) -> dict:
    return {"kind": "collective", "dims": dims, "extra": list(extra)}


CASES: dict[str, dict] = {
    "ring64": _collective_case([("Ring", 64)]),
    "switch64": _collective_case([("Switch", 64)]),
    "ring64-general": _collective_case([("Ring", 64)], ("--no-symmetry",)),
    "ring3d-64": _collective_case([("Ring", 4), ("Ring", 4), ("Ring", 4)]),
    "switch3d-64": _collective_case([("Switch", 4), ("Switch", 4), ("Switch", 4)]),
    "ring512": _collective_case([("Ring", 512)]),
    "switch512": _collective_case([("Switch", 512)]),
    "ring512-general": _collective_case([("Ring", 512)], ("--no-symmetry",)),
    "ring3d-512": _collective_case([("Ring", 8), ("Ring", 8), ("Ring", 8)]),
    "switch3d-512": _collective_case([("Switch", 8), ("Switch", 8), ("Switch", 8)]),
    "ring1024": _collective_case([("Ring", 1024)]),
    "switch1024": _collective_case([("Switch", 1024)]),
    "ring3d-1024": _collective_case([("Ring", 8), ("Ring", 8), ("Ring", 16)]),
    "switch3d-1024": _collective_case([("Switch", 8), ("Switch", 8), ("Switch", 16)]),
    "ring4096": _collective_case([("Ring", 4096)]),
    "switch4096": _collective_case([("Switch", 4096)]),
    "ring3d-4096": _collective_case([("Ring", 16), ("Ring", 16), ("Ring", 16)]),
    "switch3d-4096": _collective_case([("Switch", 16), ("Switch", 16), ("Switch", 16)]),
    "vgg13-dp64": {"kind": "triosim", "trace": "vgg13", "layout": ["--dp", "64"], "npus": 64},
    "resnet50-8x8x4": {"kind": "triosim", "trace": "resnet50", "layout": ["--dp", "8", "--tp", "8", "--pp", "4",
                                                                          "--micro-batches", "4"], "npus": 256},
}
QUICK = ["ring64", "ring64-general", "ring512", "ring1024", "ring4096", "vgg13-dp64"]


def _prepare(name: str, case: dict, work: Path, examples: Path) -> list[str]:
    """Write the inputs of one case; return the CLI arguments."""
    import yaml

    from workload.builder import write_collective_microbenchmark

    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    if case["kind"] == "collective":
        dims = case["dims"]
        npus = 1
        for _, n in dims:
            npus *= n
        net = {"topology": [k for k, _ in dims], "npus_count": [n for _, n in dims],
               "bandwidth": [50.0] * len(dims), "latency": [500.0] * len(dims)}
        (d / "net.yml").write_text(yaml.safe_dump(net))
        cfg = dict(RING_4CHUNKS)
        for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
            cfg[f"{c}-implementation"] = ["ring"] * len(dims)
        (d / "sys.json").write_text(json.dumps(cfg))
        # one shared file for all ranks (ASTRA-sim's 4096 case does the same)
        spec = write_collective_microbenchmark(d / "all_reduce", npus, "ALL_REDUCE", GB, shared=True)
        return ["--workload", spec, "--network", str(d / "net.yml"), "--system", str(d / "sys.json"), *case["extra"]]
    from workload.triosim import convert_triosim

    npus = case["npus"]
    layout = dict(zip(case["layout"][::2], case["layout"][1::2]))
    res = convert_triosim(
        examples / "triosim" / case["trace"], batch_size=128,
        dp=int(layout.get("--dp", 1)), tp=int(layout.get("--tp", 1)), pp=int(layout.get("--pp", 1)),
        micro_batches=int(layout.get("--micro-batches", 1)), out_prefix=d / case["trace"],
    )
    net = {"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50.0], "latency": [500.0]}
    (d / "net.yml").write_text(yaml.safe_dump(net))
    cfg = dict(RING_4CHUNKS)
    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        cfg[f"{c}-implementation"] = ["ring"]
    (d / "sys.json").write_text(json.dumps(cfg))
    return ["--workload", str(res.prefix), "--network", str(d / "net.yml"), "--system", str(d / "sys.json")]


def _run_one(args: list[str]) -> None:
    """Child process: run the CLI, print one JSON line with what the parent measures."""
    from system.main import main

    with tempfile.TemporaryDirectory() as t:
        rep = Path(t) / "r.json"
        t0 = time.perf_counter()
        code = main([*args, "--quiet", "--report", str(rep)])
        wall = time.perf_counter() - t0
        data = json.loads(rep.read_text()) if rep.exists() else {}
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tot = data.get("totals", {})
    print(json.dumps({"code": int(code), "wall": wall, "rss_mb": rss_mb, "events": tot.get("events", 0),
                      "end_cycles": tot.get("end_cycles"), "npus": data.get("npus"),
                      "fast_path": data.get("inputs", {}).get("symmetric_fast_path")}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dtsim-bench", description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", choices=list(CASES), help="run only these cases")
    ap.add_argument("--quick", action="store_true", help=f"run {', '.join(QUICK)}")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--examples", type=Path, default=None, metavar="DIR",
                    help="a checkout's examples/ folder, for the TrioSim cases (default: the checkout's)")
    ap.add_argument("--one", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one is not None:
        _run_one(a.one)
        return 0
    names = a.cases or (QUICK if a.quick else list(CASES))
    examples = a.examples or PACKAGE_ROOT / "examples"
    try:
        if a.json:
            check_file("--json", a.json, (".json",), "the rows as JSON")
        if any(CASES[n]["kind"] == "triosim" for n in names) and not (examples / "triosim").is_dir():
            raise InputError(examples / "triosim", "--examples", "no TrioSim traces here; the TrioSim cases "
                             "need a dtsim checkout's examples/ folder (--examples DIR), or choose --cases")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = []
    hdr = f"{'case':<16} {'NPUs':>5} {'events':>10} {'wall s':>8} {'events/s':>10} {'RSS MB':>7} {'cycles':>10}  vs ASTRA-sim (cycles, wall, RSS)"
    print(hdr)
    print("-" * len(hdr))
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            args = _prepare(name, CASES[name], Path(work), examples)
            path = [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "dtsim_tools.bench", "--one", *args],
                               capture_output=True, text=True, env=env)
            proc_wall = time.perf_counter() - t0
            if p.returncode != 0 or not p.stdout.strip():
                print(f"{name:<16} FAILED: {p.stderr.strip()[-400:]}")
                rows.append({"case": name, "failed": True})
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r.update(case=name, process_wall=proc_wall)
            rows.append(r)
            eps = r["events"] / r["wall"] if r["wall"] > 0 else 0
            ref = ASTRA_SIM.get(name.replace("-general", ""))
            vs = ""
            if ref:
                same = "same cycles" if ref[0] == r["end_cycles"] else f"DIFFERENT cycles ({ref[0]})"
                vs = f"{same}; {ref[1]:.2f} s; {ref[2]:.0f} MB"
            print(f"{name:<16} {r['npus']:>5} {r['events']:>10} {r['wall']:>8.3f} {eps:>10.0f} {r['rss_mb']:>7.1f} "
                  f"{r['end_cycles']:>10}  {vs}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 1 if any(r.get("failed") for r in rows) else 0


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
