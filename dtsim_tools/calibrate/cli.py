"""``python -m network.calibrate`` / ``dtsim-calibrate``: fit a network and system config to nccl-tests tables
(``dtsim-calibrate compute ...``: the Megatron generator's compute model to measured operators, compute.py).

    python -m network.calibrate --nccl-tests all_reduce_8gpu.txt --npus 8 -o my_node
    python -m network.calibrate --nccl-tests ar16.txt --npus 16 -o my_cluster --validate ar8.txt ag16.txt

writes ``PREFIX.yml`` (network) and ``PREFIX.json`` (system), which ``python -m system.main`` reads
unchanged, and prints the fitted values and, per size, measured against simulated time.
``main(argv)`` returns the exit code: 0 done, 1 internal error, 2 bad input.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import yaml

from dtsim_tools.calibrate.fit import DEFAULT_KNOBS, SEARCH_KNOBS, Point, fit_points, simulate_points
from dtsim_tools.calibrate.simulate import Simulator
from network.calibrate.checks import check_busbw, check_levels
from network.calibrate.metrics import ErrorSummary
from network.calibrate.model import SIMULATED_COLLECTIVES
from network.calibrate.nccl_model import NODE_TYPES, NcclRingModel, ring_equivalent, ring_machine, topology_rings
from network.calibrate.nccl_tests import NcclTable, NcclTestsError, read_nccl_tests
from network.calibrate.params import MachineParams
from network.calibrate.report import Comparison, format_comparison, format_overall, format_size
from network.errors import InputError, SimulationLimitError
from network.files import write_atomic
from network.registry import canonical_name, known_backends

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "mb": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "gb": 1 << 30}


def parse_size(text: str) -> int:
    """nccl-tests' size syntax: 1M = 2^20 bytes, 8G = 2^33 (its -b/-e flags use powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected a size such as 1048576, 1M or 8G, got {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m network.calibrate",
        description="Fit a network (per-level bandwidth and latency) and system knobs (endpoint delay, chunking, "
                    "local-mem-bw) to measured nccl-tests tables by running the simulator, write PREFIX.yml and "
                    "PREFIX.json, and print measured against simulated times.",
        epilog="Exit codes: 0 done (also when --validate tables disagree: the numbers are the result), "
               "1 internal error, 2 bad input.")
    p.add_argument("--nccl-tests", nargs="+", required=True, metavar="FILE",
                   help="stdout of all_reduce_perf (or all_gather_perf, reduce_scatter_perf, alltoall_perf) "
                        "measured on the machine to fit")
    p.add_argument("--npus", type=int, required=True, metavar="N", help="GPUs the tables were measured on")
    p.add_argument("-o", "--output", required=True, metavar="PREFIX", help="write PREFIX.yml and PREFIX.json")
    p.add_argument("--nodes", type=int, default=None, metavar="K",
                   help="nodes the N GPUs span (default: the distinct hosts on the tables' '#  Rank' lines, else 1); "
                        "K > 1 fits a two-level network, inside and between nodes")
    p.add_argument("--backend", default="congestion-aware", metavar="NAME",
                   help=f"backend the fit simulates and writes into PREFIX.yml: {', '.join(known_backends())} "
                        "(default congestion-aware)")
    p.add_argument("--min-bytes", type=parse_size, default=1 << 20, metavar="SIZE",
                   help="smallest size fitted and compared (default 1M: below it NCCL switches to its "
                        "low-latency protocols, which a bandwidth-and-latency model does not follow)")
    p.add_argument("--max-bytes", type=parse_size, default=None, metavar="SIZE", help="largest size fitted")
    p.add_argument("--in-place", action="store_true",
                   help="fit and compare the in-place times (default out-of-place; either falls back to the other where N/A)")
    p.add_argument("--validate", nargs="+", default=[], metavar="FILE[:N]",
                   help="predict these tables with the fitted files (only the GPU count changes: N, or the "
                        "table's '#  Rank' lines) and print the same comparison")
    p.add_argument("--topology", choices=("Switch", "Ring", "FullyConnected"), default="Switch",
                   help="topology of every level (default Switch: NVSwitch inside a node, the NICs' switch between)")
    p.add_argument("--node", choices=NODE_TYPES, default=None,
                   help="fit NCCL's ring model for this node type instead (all-reduce tables of one node): the "
                        "ring bandwidth from the node's NVLinks, a per-collective fixed cost and per-byte cost "
                        "(system keys collective-fixed-delay, collective-copy-bw), so that other GPU counts of "
                        "the node follow; writes a 1-D Ring network (docs/calibration.md)")
    p.add_argument("--search-knobs", action="store_true",
                   help="also try more chunks and chunks in flight (slower; see docs/calibration.md)")
    p.add_argument("--plot", metavar="OUT.png", help="plot measured and simulated times over sizes (matplotlib)")
    p.add_argument("--debug", action="store_true", help="tracebacks for internal errors")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compute"]:  # the compute model of workload.generate megatron (compute.py)
        from dtsim_tools.calibrate.compute import main as compute_main

        return compute_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (| head): nothing left to say
        sys.stdout = None  # type: ignore[assignment]
        return 0
    except SimulationLimitError as exc:
        print(f"error: a simulation ran out of budget: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug in us: one line unless --debug
        if args.debug:
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)", file=sys.stderr)
        return 1


def console_main() -> None:
    sys.exit(main())


def _run(args: argparse.Namespace) -> int:
    if args.npus < 2:
        raise InputError(None, "--npus", f"expected at least 2 GPUs, got {args.npus}")
    backend = canonical_name(args.backend)
    _check_output_places(args)
    tables = [t for f in args.nccl_tests for t in read_nccl_tests(f, npus=args.npus)]
    nodes = _nodes(tables, args)
    points, fit_tables = [], []
    for t in tables:
        _check_table(t, args.npus)
        rows = _rows_in_range(t, args)
        fit_tables.append((t, rows))
        points += [Point(t.collective, args.npus, nodes, r.size_bytes, _time(r, args)) for r in rows]
    validate = [_validate_table(v, args) for v in args.validate]
    if args.node:
        return _run_node(args, backend, nodes, fit_tables, validate)
    t0 = time.perf_counter()
    with Simulator() as sim:
        knobs = [replace(k, topology=args.topology) for k in (SEARCH_KNOBS if args.search_knobs else DEFAULT_KNOBS)]
        result = fit_points(points, args.npus, nodes, backend, sim, knobs)
        params = result.params
        comparisons = [_compare(params, t, rows, args.npus, nodes, sim, True, args) for t, rows in fit_tables]
        for t, rows, n, k in validate:
            comparisons.append(_compare(params, t, rows, n, k, sim, False, args))
        runs = sim.runs
    wall = time.perf_counter() - t0
    shape = f"{nodes} nodes x {args.npus // nodes}" if nodes > 1 else "1 node"
    sources = ", ".join(Path(f).name for f in args.nccl_tests)
    print(f"fitted {len(points)} sizes ({format_size(min(p.size_bytes for p in points))} to "
          f"{format_size(max(p.size_bytes for p in points))}) of {sources} on {args.npus} NPUs ({shape}); "
          f"backend {backend}; {runs} simulations in {wall:.1f} s")
    for line in params.describe():
        print(f"  {line}")
    if backend == "congestion-aware" and args.topology == "Switch" and params.active_chunks == 1:
        print("  (a congestion-aware Switch stores and forwards: a chunk crosses the up-link, then the down-link, "
              "so with one chunk in flight a link's bandwidth is about twice the bus bandwidth it delivers)")
    return _finish(args, params, comparisons, sources)


def _finish(args: argparse.Namespace, params: MachineParams, comparisons: list[Comparison], sources: str,
            extra_header: Sequence[str] = (), closed_form: dict[str, ErrorSummary] | None = None) -> int:
    for w in _physical_warnings(params, comparisons):
        print(f"warning: {w}", file=sys.stderr)
    png = None
    if args.plot:
        from dtsim_tools.calibrate.plot import render_plot
        png = render_plot(comparisons)
    # nothing is written until everything above has succeeded: a failed run leaves no outputs
    yml, js = _write(args.output, params, comparisons, sources, extra_header)
    print(f"wrote {yml} and {js}")
    if png is not None:
        write_atomic(args.plot, png)
        print(f"plot: {args.plot}")
    for c in comparisons:
        print()
        print("\n".join(format_comparison(c)))
        if closed_form and c.name in closed_form:
            print(f"  closed-form NCCL model (not what the simulator runs): {closed_form[c.name].line()}")
    print()
    print(format_overall(comparisons))
    return 0


def _physical_warnings(params: MachineParams, comparisons: list[Comparison]) -> list[str]:
    out = check_levels(params)
    for c in comparisons:
        if c.fitted:
            out += check_busbw(c.name, c.collective, c.npus, c.sizes, c.measured_us, c.simulated_us)
    return out


def _run_node(args: argparse.Namespace, backend: str, nodes: int, fit_tables, validate) -> int:
    """--node: NCCL's ring model (network.calibrate.nccl_model) fitted to the tables, then the single
    ring line nearest its protocol envelope at 2..N GPUs written as the simulator's files; every
    printed error is of the simulator running those files."""
    if nodes != 1:
        raise InputError(fit_tables[0][0].path, "--node", f"the NCCL ring model is of one node; the tables span {nodes}")
    for t, _ in fit_tables + [(v[0], v[1]) for v in validate]:
        if t.collective != "ALL_REDUCE":
            raise NcclTestsError(t.path, f"line {t.header_line}", f"--node models NCCL's ring all-reduce; this is a "
                                 f"{t.collective} table (leave out --node to fit it with the simulator alone)")
    for t, rows, n, k in validate:
        if k != 1:
            raise NcclTestsError(t.path, "'#  Rank' lines", f"--node predicts one node; this table spans {k}")
        if args.node == "dgx1-v100" and n > 8:
            raise NcclTestsError(t.path, "'#  Rank' lines", f"a DGX-1 holds 8 GPUs; this table has {n}")
    if args.node == "dgx1-v100" and args.npus > 8:
        raise InputError(None, "--npus", f"a DGX-1 holds 8 GPUs, got {args.npus}")
    rings, link = topology_rings(args.node)
    sizes = [r.size_bytes for _, rows in fit_tables for r in rows]
    times = [_time(r, args) for _, rows in fit_tables for r in rows]
    t0 = time.perf_counter()
    model = NcclRingModel(link, rings).fit(args.npus, sizes, times)
    eq = ring_equivalent(model, args.npus, sorted(set(sizes)))
    params = ring_machine(eq, model, args.npus, backend)
    comparisons, closed = [], {}
    with Simulator() as sim:
        for t, rows in fit_tables:
            comparisons.append(_compare(params, t, rows, args.npus, 1, sim, True, args))
        for t, rows, n, _ in validate:
            comparisons.append(_compare(ring_machine(eq, model, n, backend), t, rows, n, 1, sim, False, args))
        runs = sim.runs
    for c in comparisons:
        closed[c.name] = ErrorSummary.of([m / t - 1 for m, t in zip(model.time_us(c.npus, c.sizes), c.measured_us)])
    sources = ", ".join(Path(f).name for f in args.nccl_tests)
    print(f"fitted NCCL's ring model ({args.node}) to {len(sizes)} sizes of {sources} on {args.npus} NPUs (1 node): "
          f"latency x {model.latency_scale:.3f} of NCCL's, per-byte {1e6 * model.per_byte_us:.3f} us/MB; single-ring "
          f"stand-in: {eq.fixed_us:.2f} us + {eq.step_us:.3f} us per step, {100 * eq.bw_scale:.1f} % of the ring "
          f"bandwidth; backend {backend}; {runs} simulations in {time.perf_counter() - t0:.1f} s")
    for line in params.describe():
        print(f"  {line}")
    if args.topology != "Switch":
        print(f"  (--topology {args.topology} ignored: the NCCL model's files are a 1-D Ring, whose closed form they use)")
    per_n = {n: ring_machine(eq, model, n, backend).levels[0].bandwidth_gb_s for n in range(2, max(args.npus, 8) + 1)}
    if len(set(per_n.values())) == 1:
        how = "the bandwidth is the same for every count"
    else:  # DGX-1: the rings NVLink can lay over GPUs 0..N-1 depend on N
        how = "bandwidth to (npus: GB/s) " + ", ".join(f"{n}: {b:.3f}" for n, b in per_n.items())
    header = [f"# NCCL ring model of a {args.node} node (--node): for another GPU count set npus_count ({how}; "
              "2 GPUs: topology FullyConnected, which is ASTRA-sim's Ring of 2)"]
    return _finish(args, params, comparisons, sources, header, closed)


def _check_output_places(args: argparse.Namespace) -> None:
    """-o and --plot name files in folders that exist: a typo must not create directories."""
    for flag, target in (("-o", args.output), ("--plot", args.plot)):
        if target is None:
            continue
        parent = Path(target).parent
        if not parent.is_dir():
            raise InputError(None, flag, f"{target}: the folder {parent} does not exist (the calibrator creates "
                             "files, not folders)")
    if args.plot:
        from dtsim_tools.calibrate.plot import check_matplotlib
        check_matplotlib()


def _nodes(tables: list[NcclTable], args: argparse.Namespace) -> int:
    if args.nodes is not None:
        nodes = args.nodes
        where, path = "--nodes", None
    else:
        seen = {t.nodes for t in tables if t.nodes and t.ranks == args.npus}
        if len(seen) > 1:
            raise InputError(tables[0].path, "'#  Rank' lines", f"the tables span different node counts {sorted(seen)}")
        nodes = seen.pop() if seen else 1
        where, path = "'#  Rank' lines (hosts)", tables[0].path
    if nodes < 1 or args.npus % nodes or (nodes > 1 and args.npus // nodes < 2):
        raise InputError(path, where, f"{nodes} node(s) cannot hold {args.npus} GPUs evenly with at least 2 per node")
    return nodes


def _check_table(t: NcclTable, npus: int) -> None:
    if t.collective not in SIMULATED_COLLECTIVES:
        raise NcclTestsError(t.path, f"line {t.header_line}",
                             f"a {t.collective} table cannot be fitted: the simulator runs "
                             f"{', '.join(SIMULATED_COLLECTIVES)} as collectives")
    if t.ranks is not None and t.ranks != npus:
        raise NcclTestsError(t.path, "'#  Rank' lines",
                             f"the table was measured on {t.ranks} ranks but --npus is {npus}; fit tables of one "
                             "GPU count together, and predict the others with --validate")


def _rows_in_range(t: NcclTable, args: argparse.Namespace):
    rows = [r for r in t.rows if r.size_bytes >= args.min_bytes and (args.max_bytes is None or r.size_bytes <= args.max_bytes)]
    if len(rows) < 2:
        raise NcclTestsError(t.path, f"line {t.header_line}",
                             f"{len(rows)} size(s) lie between --min-bytes {args.min_bytes} and --max-bytes "
                             f"{args.max_bytes or 'unlimited'}; a fit needs at least 2")
    return rows


def _validate_table(spec: str, args: argparse.Namespace):
    path, npus = spec, None
    m = re.fullmatch(r"(.+):(\d+)", spec)
    if m and not Path(spec).exists():
        path, npus = m.group(1), int(m.group(2))
    tables = read_nccl_tests(path, npus=npus)
    t = tables[0]
    n = t.npus
    if n is None:
        raise NcclTestsError(path, "", "the table has no '#  Rank' lines; give its GPU count as FILE:N")
    if n < 2:
        raise NcclTestsError(path, "", f"the table was measured on {n} GPU; a collective needs at least 2")
    if t.collective not in SIMULATED_COLLECTIVES:
        raise NcclTestsError(path, f"line {t.header_line}", f"a {t.collective} table cannot be simulated")
    nodes = t.nodes if t.nodes and t.ranks == n else 1
    return t, _rows_in_range(t, args), n, nodes


def _time(row, args: argparse.Namespace) -> float:
    if args.in_place and row.in_place_us is not None:
        return row.in_place_us
    return row.time_us


def _compare(params: MachineParams, t: NcclTable, rows, npus: int, nodes: int, sim: Simulator, fitted: bool,
             args: argparse.Namespace) -> Comparison:
    if nodes > 1 and len(params.levels) == 1:
        raise NcclTestsError(t.path, "'#  Rank' lines", f"the table spans {nodes} nodes but the fit has one level "
                             "(inside a node); fit a multi-node table to predict multi-node ones")
    points = [Point(t.collective, npus, nodes, r.size_bytes, _time(r, args)) for r in rows]
    sim_us = simulate_points(params, points, sim)
    return Comparison(t.name(), t.collective, npus, nodes, tuple(p.size_bytes for p in points),
                      tuple(p.measured_us for p in points), tuple(sim_us), fitted)


def _write(prefix: str, params: MachineParams, comparisons: list[Comparison], sources: str,
           extra_header: Sequence[str] = ()) -> tuple[Path, Path]:
    import json
    base = Path(prefix)
    if base.suffix in (".yml", ".yaml", ".json"):
        base = base.with_suffix("")
    yml, js = Path(f"{base}.yml"), Path(f"{base}.json")
    fit_lines = [f"#   {c.name}: {c.summary.line()}" for c in comparisons if c.fitted]
    header = ["# Network fitted by python -m network.calibrate to measured nccl-tests tables:", *fit_lines,
              "# Change npus_count to predict another GPU count; the system file beside it holds the knobs.",
              *extra_header]
    body = yaml.safe_dump(params.network_dict(f"fitted to {sources}"), sort_keys=False, default_flow_style=None)
    write_atomic(yml, "\n".join(header) + "\n" + body)
    write_atomic(js, json.dumps(params.system_dict(), indent=2) + "\n")
    return yml, js
