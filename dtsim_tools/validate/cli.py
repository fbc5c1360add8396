"""``dtsim-validate vtrain CSV`` (``python -m dtsim_tools.validate vtrain CSV``): predict every row
of vTrain's measured iterations and print per-row and mean absolute error.

    dtsim-validate vtrain ground_truth_multi.csv [--rows 2,5,9 | --sample N --seed S] [--compute-model M.json]
    dtsim-validate vtrain ground_truth_single.csv --fit OUT.json [--sample N]   # single-node set only

Exit codes: 0 done, 2 bad input (the file or flag and what was expected), 1 a bug in us.
"""
from __future__ import annotations

import argparse
import enum
import json
import random
import sys
import time
import traceback

from network.errors import InputError


class ExitCode(enum.IntEnum):
    OK = 0
    INTERNAL_ERROR = 1
    BAD_INPUT = 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dtsim-validate", description="Hold dtsim's predictions against measured iterations.")
    sub = p.add_subparsers(dest="source", required=True)
    v = sub.add_parser("vtrain", help="vTrain's ground_truth_single.csv / ground_truth_multi.csv")
    v.add_argument("csv")
    v.add_argument("--rows", help="comma-separated CSV line numbers (header = line 1) to predict")
    v.add_argument("--sample", type=int, help="predict N rows drawn at random (see --seed)")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--max-gpus", type=int, help="only rows with at most this many GPUs")
    v.add_argument("--compute-model", metavar="JSON", help="compute-model knobs (default: the shipped A100 fit)")
    v.add_argument("--fit", metavar="OUT.json", help="fit the compute model on these rows (single-node set only)")
    v.add_argument("--fit-iters", type=int, default=60)
    v.add_argument("--json", metavar="OUT.json", help="also write every row's prediction")
    v.add_argument("--debug", action="store_true")
    return p.parse_args(argv)


def _select(rows: list, a: argparse.Namespace) -> list:
    if a.max_gpus:
        rows = [r for r in rows if r.gpus <= a.max_gpus]
    if a.rows:
        try:
            want = {int(x) for x in a.rows.split(",") if x.strip()}
        except ValueError:
            raise InputError(None, "--rows", f"expected comma-separated line numbers, got {a.rows!r}") from None
        have = {r.line for r in rows}
        if want - have:
            raise InputError(a.csv, "--rows", f"no data row on line(s) {sorted(want - have)[:5]}")
        rows = [r for r in rows if r.line in want]
    if a.sample:
        if a.sample < 1:
            raise InputError(None, "--sample", f"expected N >= 1, got {a.sample}")
        rows = sorted(random.Random(a.seed).sample(rows, min(a.sample, len(rows))), key=lambda r: r.line)
    return rows


def run(a: argparse.Namespace) -> None:
    from dtsim_tools.validate.vtrain import predict_ms, read_rows
    from workload.megatron import ComputeModel
    from workload.megatron.cli import default_compute_model

    rows = _select(read_rows(a.csv), a)
    model = ComputeModel.from_file(a.compute_model) if a.compute_model else default_compute_model("a100")
    if a.fit:
        if any(r.gpus > 8 for r in rows):
            raise InputError(a.csv, "--fit", "holds multi-node rows: only vTrain's single-node set may be fitted on "
                                             "(the multi-node set is the judge)")
        from dtsim_tools.validate.fit import fit

        model, err = fit(rows, predict_ms, model, a.fit_iters, log=lambda s: print(s, file=sys.stderr))
        with open(a.fit, "w") as f:
            json.dump({k: v for k, v in model.to_json().items() if k != "source"}, f, indent=1)
            f.write("\n")
        print(f"fitted on {len(rows)} rows of {a.csv}: MAE {100 * err:.2f} % -> {a.fit}")
    print(f"{'line':>5}  {'config':<58} {'measured ms':>12} {'predicted ms':>13} {'error':>8}")
    errs, out = [], []
    t0 = time.perf_counter()
    for r in rows:
        pred = predict_ms(r, model)
        e = pred / r.measured_ms - 1
        errs.append(abs(e))
        out.append({"line": r.line, "config": r.label(), "measured_ms": r.measured_ms, "predicted_ms": pred, "error": e})
        print(f"{r.line:>5}  {r.label():<58} {r.measured_ms:>12.1f} {pred:>13.1f} {100 * e:>+7.2f}%", flush=True)
    mae = 100 * sum(errs) / len(errs) if errs else float("nan")
    print(f"mean absolute error: {mae:.2f} % over {len(errs)} rows ({time.perf_counter() - t0:.1f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"csv": a.csv, "compute_model": model.to_json(), "rows": out, "mae_pct": mae}, f, indent=1)


def main(argv: list[str] | None = None) -> ExitCode:
    try:
        a = parse_args(argv)
    except SystemExit as e:
        return ExitCode.OK if e.code in (0, None) else ExitCode.BAD_INPUT
    try:
        run(a)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Exception as e:  # noqa: BLE001 -- the edge
        if a.debug:
            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", file=sys.stderr)
        return ExitCode.INTERNAL_ERROR
    return ExitCode.OK


def console_main() -> None:
    sys.exit(main())
