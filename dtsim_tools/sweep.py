#!/usr/bin/env python
"""Run a grid of simulations in parallel; one CSV row per point, and optionally a plot.

    dtsim-sweep --grid examples/sweep/bandwidth_splits.yaml --out results.csv --plot results.png
    dtsim-sweep --grid G.yaml --scheduler tcp://HOST:8786 --out results.csv   # on a Dask cluster

(``python scripts/sweep.py`` in a checkout is the same.) The grid (a base configuration and the
values to vary; dtsim_tools/sweep_grid.py and docs/sweeps.md)
expands to the cartesian product of its ``vary`` lists. Points run in local processes by default,
or on a Dask cluster given ``--scheduler`` (the ``dask`` extra; the workers need dtsim installed).
Each row holds the varied values, the end time, mean/max/min rank finish, compute and exposed
communication, events and wall time, and for a point that failed its status, exit code and message:
a failed point never stops the sweep.
"""
from __future__ import annotations

import argparse
import csv
import enum
import io
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from dtsim_tools.sweep_grid import Grid, Point, format_value, load_grid
from dtsim_tools.sweep_point import RESULT_COLUMNS, run_point
from network.errors import InputError
from network.extras import install_hint
from system.outputs import check_file, check_folder, check_plot

NUMERIC_COLUMNS = ("npus", "end_cycles", "mean_rank_cycles", "max_rank_cycles", "min_rank_cycles",
                   "compute_cycles_mean", "exposed_comm_cycles_mean", "exposed_comm_cycles_max", "events",
                   "sim_wall_s", "wall_s")
DASK_HINT = install_hint("dask", "'dask[distributed]'")
PLOT_HINT = install_hint("plot", "matplotlib")


class ExitCode(enum.IntEnum):
    OK = 0  #: every point ran to the end
    INTERNAL_ERROR = 1  #: a bug in the sweep tool itself
    BAD_INPUT = 2  #: the grid file, a flag, or a missing optional package: nothing ran
    POINTS_FAILED = 4  #: the sweep finished and the CSV is complete, but some points failed (see status)


class MissingExtra(Exception):
    """An optional package the command line asked for is not installed."""


# -- where points run ------------------------------------------------------------------------------

def run_local(points: list[Point], workers: int, work_dir: str | None) -> Iterator[dict[str, Any]]:
    """Rows in completion order from a pool of local processes (``workers == 1``: in this process)."""
    if workers == 1:
        for p in points:
            yield run_point(asdict(p), work_dir)
        return
    # spawn: a fresh interpreter per worker, safe whatever threads this process holds
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(run_point, asdict(p), work_dir): p for p in points}
        for f in as_completed(futures):
            yield _row_of(futures[f], f.result)
    finally:  # after Ctrl-C, do not start the points still queued
        pool.shutdown(wait=True, cancel_futures=True)


def run_dask(points: list[Point], address: str, work_dir: str | None) -> Iterator[dict[str, Any]]:
    """Rows in completion order from the Dask cluster whose scheduler listens at ``address``."""
    try:
        from dask.distributed import Client, as_completed as dask_completed
    except ImportError:
        raise MissingExtra(f"--scheduler needs dask.distributed: {DASK_HINT}") from None
    try:
        client = Client(address, timeout="15s")
    except (OSError, TimeoutError, ValueError) as e:
        raise InputError(None, "--scheduler", f"cannot connect to the Dask scheduler at {address}: {e}") from None
    with client:
        try:  # the workers unpickle run_point by name: they need dtsim (with dtsim_tools) installed
            client.run(_worker_has_dtsim)
        except Exception as e:  # noqa: BLE001 -- whatever the nodes raised, nothing has run yet
            raise InputError(None, "--scheduler", f"the Dask cluster at {address} cannot load the point runner "
                             f"(is dtsim installed there?): {type(e).__name__}: {_first_line(e)}") from None
        futures = {client.submit(run_point, asdict(p), work_dir, pure=False): p for p in points}
        for f in dask_completed(futures):
            yield _row_of(futures[f], f.result)


def _worker_has_dtsim() -> bool:
    import dtsim_tools.sweep_point  # noqa: F401 -- raises on a worker without dtsim

    return True


def _row_of(point: Point, result: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The row a worker returned, or a 'lost' row when the worker itself died (killed, out of memory)."""
    try:
        return result()
    except Exception as e:  # noqa: BLE001 -- run_point catches the point's own errors; this is the worker
        return {"point": point.index, **point.params, "status": "lost", "exit_code": "",
                "message": f"the worker running this point failed: {type(e).__name__}: {_first_line(e)}"}


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


# -- what comes out --------------------------------------------------------------------------------

def write_csv(rows: Iterable[dict[str, Any]], grid: Grid, out: io.TextIOBase,
              columns: tuple[str, ...] = RESULT_COLUMNS) -> None:
    """One row per point, in point order: the point, the varied values as written, then ``columns``."""
    w = csv.DictWriter(out, ["point", *grid.axes, *columns], restval="", extrasaction="ignore",
                       lineterminator="\n")
    w.writeheader()
    for row in sorted(rows, key=lambda r: r["point"]):
        w.writerow({k: format_value(v) if k in grid.axes else v for k, v in row.items()})


def plot(rows: list[dict[str, Any]], grid: Grid, path: str) -> None:
    """y (default end_cycles) against x (default the first vary key), one line per value of the
    other vary keys, one panel per value of ``facet`` if the grid's plot: section names one;
    failed points are left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = grid.plot
    x, y, facet = spec.get("x", grid.axes[0] if grid.axes else None), spec.get("y", "end_cycles"), spec.get("facet")
    ok = sorted((r for r in rows if r.get("status") == "ok"), key=lambda r: r["point"])
    xs = list(dict.fromkeys(format_value(r.get(x, "")) for r in ok))
    numeric = bool(xs) and all(_is_number(v) for v in xs)
    panels = list(dict.fromkeys(format_value(r[facet]) for r in ok)) if facet else [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(1.5 + 5.5 * len(panels), 4.2), sharey=True, squeeze=False)
    for ax, panel in zip(axes[0], panels):
        sub = [r for r in ok if panel is None or format_value(r[facet]) == panel]
        _draw(ax, sub, x, y, [a for a in grid.axes if a not in (x, facet)], xs, numeric)
        if panel is not None:
            ax.set_title(f"{_short(facet)} = {panel}", fontsize="medium")
        values = [float(v) for v in xs] if numeric else []
        if spec.get("logx", bool(values) and min(values) > 0 and max(values) / min(values) >= 8):
            ax.set_xscale("log", base=2)
            if len(values) <= 12:  # label the values swept, not powers of two
                ax.set_xticks(values, xs)
                ax.minorticks_off()
        if spec.get("logy", False):
            ax.set_yscale("log")
    axes[0][0].set_ylabel(y + (" (ns)" if "cycles" in y else " (s)" if y.endswith("wall_s") else ""))
    if axes[0][-1].get_legend_handles_labels()[1][1:]:
        axes[0][-1].legend(fontsize="small")
    fig.suptitle(spec.get("title", Path(grid.path).stem))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _draw(ax: Any, rows: list[dict[str, Any]], x: str | None, y: str, others: list[str], xs: list[str],
          numeric: bool) -> None:
    lines: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        name = ", ".join(f"{_short(a)}={format_value(r[a])}" for a in others) or y
        xv = format_value(r.get(x, ""))
        lines.setdefault(name, []).append((float(xv) if numeric else xs.index(xv), float(r[y])))
    for name, pts in lines.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    if not numeric:
        ax.set_xticks(range(len(xs)), xs, rotation=20)
    ax.set_xlabel(x or "point")
    ax.grid(True, alpha=0.3)


def _short(column: str) -> str:
    """``system.preferred-dataset-splits`` → ``preferred-dataset-splits``, for legends."""
    return column.split(".", 1)[-1]


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


# -- the command line ------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dtsim-sweep", description=__doc__.splitlines()[0],
        epilog="Exit codes: 0 every point ran, 1 internal error, 2 bad grid/flags/missing extra (nothing ran), "
               "4 the sweep finished but some points failed (their rows say why), 130 interrupted.")
    p.add_argument("--grid", required=True, metavar="G.yaml", help="the sweep grid (docs/sweeps.md)")
    p.add_argument("--out", metavar="OUT.csv", help="write the CSV here (default: standard output)")
    p.add_argument("--plot", metavar="OUT.png",
                   help=f"draw y against x as the grid's plot: section says; needs matplotlib: {PLOT_HINT}")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="local processes (default: one per CPU; 1 runs in this process); ignored with --scheduler")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help=f"run the points on this Dask cluster; needs dask.distributed: {DASK_HINT}")
    p.add_argument("--work-dir", metavar="DIR",
                   help="keep each point's generated inputs and its system.main command in DIR/point-NNNN/ "
                        "(default: temporary folders, removed); with --scheduler, a path on the workers")
    p.add_argument("--dry-run", action="store_true", help="print the points' varied values as CSV and stop")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse printed usage or help
        return int(e.code or 0) and ExitCode.BAD_INPUT
    try:
        if args.workers < 1:
            raise InputError(None, "--workers", f"expected an integer >= 1, got {args.workers}")
        grid = load_grid(args.grid)
        _check_plot(grid, args.plot)
        if args.out:
            check_file("--out", args.out, (".csv",), "one CSV row per point")
        if args.work_dir and not args.scheduler:  # with a scheduler it is a path on the workers
            check_folder("--work-dir", args.work_dir)
        if args.dry_run:
            write_csv([{"point": p.index, **p.params} for p in grid.points], grid, sys.stdout, columns=())
            return ExitCode.OK
        if args.scheduler:
            rows_iter, where = run_dask(grid.points, args.scheduler, args.work_dir), f"Dask at {args.scheduler}"
        else:
            workers = max(1, min(args.workers, len(grid.points)))
            rows_iter, where = run_local(grid.points, workers, args.work_dir), f"{workers} local process(es)"
        t0 = time.perf_counter()
        rows, interrupted = _collect(grid, rows_iter, args.quiet)
        wall = time.perf_counter() - t0
    except (InputError, MissingExtra) as e:
        print(f"error: {e}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", encoding="utf-8", newline="") as f:
            write_csv(rows, grid, f)
    else:
        write_csv(rows, grid, sys.stdout)
    if args.plot:
        plot(rows, grid, args.plot)
    failed = sum(r.get("status") != "ok" for r in rows)
    print(f"sweep: {len(rows)} point(s), {len(rows) - failed} ok, {failed} failed, in {wall:.2f} s on {where}"
          + (f"; CSV {args.out}" if args.out else "") + (f"; plot {args.plot}" if args.plot else ""), file=sys.stderr)
    if interrupted:
        return 130
    return ExitCode.POINTS_FAILED if failed else ExitCode.OK


def _check_plot(grid: Grid, path: str | None) -> None:
    """Fail before running anything: a missing matplotlib or a y that is not a numeric column."""
    if path is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingExtra(f"--plot needs matplotlib: {PLOT_HINT}") from None
    check_plot("--plot", path)
    y = grid.plot.get("y", "end_cycles")
    if y not in NUMERIC_COLUMNS:
        raise InputError(grid.path, "key 'plot.y'",
                         f"{y!r} is not a result column; expected one of {', '.join(NUMERIC_COLUMNS)}")


def _collect(grid: Grid, rows_iter: Iterator[dict[str, Any]], quiet: bool) -> tuple[list[dict[str, Any]], bool]:
    """Every point's row; after Ctrl-C, the points that did not finish are rows marked 'cancelled'."""
    rows: list[dict[str, Any]] = []
    n = len(grid.points)
    try:
        for row in rows_iter:
            rows.append(row)
            if not quiet:
                result = f"end {row['end_cycles']} cycles" if row.get("status") == "ok" else row.get("message", "")
                print(f"[{len(rows):>{len(str(n))}}/{n}] point {row['point']}: {row.get('status')}, {result} "
                      f"({row.get('wall_s', 0)} s)", file=sys.stderr)
    except KeyboardInterrupt:
        rows_iter.close()
        done = {r["point"] for r in rows}
        rows += [{"point": p.index, **p.params, "status": "cancelled", "exit_code": 130}
                 for p in grid.points if p.index not in done]
        return rows, True
    return rows, False


def console_main() -> None:
    sys.exit(int(main()))


if __name__ == "__main__":
    console_main()
