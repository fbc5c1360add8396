"""The command line: ``python -m system.main`` / ``dtsim``. ``main(argv)`` returns an exit code.

The run itself is system/simulation.py (``run_simulation``); its names are re-exported here for
scripts written against earlier versions.
"""
from __future__ import annotations

import gc

if __name__ == "__main__":
    # A command-line process ends with os._exit (exit_process): the cycles its imports, set-up and
    # report leave need never be collected, while a collection after the run traverses its whole
    # heap (the run itself keeps the collector off: system/heap.py)
    gc.disable()

import os
import sys as _sys
import warnings

from network.choices import IntChoice
from network.config import NetworkConfig
from network.errors import InputError, SimulationLimitError
from network.files import exists, is_dir, path_join
from network.registry import known_backends
from system import __version__
from system.quick_args import SUPPRESS, defaults, quick_parse
from system.simulation import Deadlock, RankView, ShortcutMismatch, SimulationResult, run_simulation  # noqa: F401
from workload.triosim.folder import is_trace_dir
from workload.triosim.layout_flags import LAYOUT_OPTIONS, add_layout_arguments, layout_from_args

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    import argparse
    from typing import Any, NoReturn


class ExitCode(IntChoice):
    OK = 0
    INTERNAL_ERROR = 1  #: a bug in us: one line, plus "rerun with --debug for the traceback"
    BAD_INPUT = 2  #: any InputError: file, place, what was expected
    STUCK = 3  #: queue empty, nodes left: per-rank report of what each waits for


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal of standard output, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(_sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _help_formatter(argparse: Any) -> type:
    """argparse's own formatter, told the width: unasked, it imports shutil (and with it bz2, lzma
    and fnmatch, 0.7 MB) for every add_argument, where argparse formats the metavar to check it.
    Made when a parser is, so that a plain run never imports argparse."""

    class _HelpFormatter(argparse.HelpFormatter):
        def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                     width: int | None = None) -> None:
            super().__init__(prog, indent_increment, max_help_position,
                             _terminal_columns() - 2 if width is None else width)

    return _HelpFormatter


_DESCRIPTION = (
    "Simulate a distributed-training workload (Chakra ET files, one per rank) on a network "
    "and print each rank's finish time. Flags and config files follow ASTRA-sim 2.0, whose "
    "analytical results this simulator reproduces to the cycle."
)
_EPILOG = "Exit codes: 0 done, 1 internal error, 2 bad input, 3 stuck (work left when the event queue emptied)."


def _opt(*flags: str, **kwargs: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    return flags, kwargs


# (option strings, add_argument keywords): what build_parser gives argparse, and what quick_parse
# reads (system/quick_args.py); the TrioSim layout's flags follow (LAYOUT_OPTIONS)
OPTIONS = (
    _opt("--workload", "--workload-configuration", dest="workload", required=True, metavar="W",
         help="Chakra workload: PREFIX (files PREFIX.<rank>.et), a folder of such files, "
              "or one .et/.pb file run by every rank"),
    _opt("--network", "--network-configuration", dest="network", required=True, metavar="N.yaml",
         help="network YAML with ASTRA-sim's keys: topology, npus_count, bandwidth (GB/s), latency (ns); "
              "optional 'backend:'"),
    _opt("--system", "--system-configuration", dest="system", metavar="S.json",
         help="system config (ASTRA-sim JSON, or YAML with the same keys); default: ASTRA-sim's "
              "Ring_4chunks.json (ring everywhere, 4 chunks, endpoint-delay 10, local-mem-bw 1600)"),
    _opt("--logical-topology-configuration", dest="logical_topology", metavar="L.json",
         help='logical dimensions for a topology-file network, ASTRA-sim\'s {"logical-dims": ["8", "4"]}'),
    _opt("--backend", default=None, metavar="NAME",
         help=f"network backend: {', '.join(known_backends())} (overrides the YAML 'backend:' key; "
              "default congestion-unaware)"),
    _opt("--remote-memory-configuration", dest="remote_memory", metavar="M.json",
         help="remote-memory JSON for MEM_LOAD/MEM_STORE nodes (ASTRA-sim's memory-type keys)"),
    _opt("--comm-group-configuration", dest="comm_groups", metavar="G.json",
         help='communicator groups {"<id>": [ranks...]} for collectives with pg_name '
              "(default: PREFIX.comm_groups.json beside the workload, if present)"),
    _opt("--num-queues-per-dim", type=int, default=1, metavar="Q",
         help="queues (virtual networks) per dimension, as ASTRA-sim's flag (default 1)"),
    _opt("--injection-scale", type=float, default=1.0, help="multiplies endpoint-delay (ASTRA-sim flag)"),
    _opt("--comm-scale", type=float, default=1.0, help=SUPPRESS),
    _opt("--compute-scale", type=float, default=1.0, help=SUPPRESS),
    _opt("--rendezvous-protocol", nargs="?", const="true", default="false", metavar="BOOL",
         help="every message is preceded by an 8192-byte request from the receiver (ASTRA-sim's flag)"),
    _opt("--logging-configuration", default=None, help=SUPPRESS),
    _opt("--logging-folder", default=None, help=SUPPRESS),
    _opt("--report", metavar="OUT.json",
         help="write the full report as JSON to this path, or to standard output with - (the table then "
              "goes to stderr): per rank, per collective (algbw/busbw), per network dimension"),
    _opt("--trace-out", dest="trace_out", metavar="DIR",
         help="write rank{r}.json per rank: Kineto traces that Perfetto opens and Holistic Trace Analysis loads"),
    _opt("--plot", metavar="OUT.png",
         help="draw per-rank compute / exposed communication / idle and a timeline (needs the plot extra)"),
    _opt("--no-symmetry", dest="symmetry", action="store_false",
         help="simulate every rank even when ranks are provably identical (by default such "
              "runs simulate one representative rank, or one rank per data-parallel group; "
              "results are the same)"),
    _opt("--no-batching", dest="batching", action="store_false",
         help="run every ring and halving-doubling message as events, even where a phase of all "
              "ranks can be advanced at once (results are the same)"),
    _opt("--verify-shortcuts", dest="verify_shortcuts", action="store_true",
         help="where a shortcut (representative rank, orbits, batched phases) answered, also run "
              "every message as an event and fail (exit 1, naming both answers) if they differ"),
    _opt("--max-events", type=int, default=None, help="stop (exit 2) after this many events"),
    _opt("--max-wall-seconds", type=float, default=None, help="stop (exit 2) after this much wall time"),
    _opt("--triosim-out", metavar="OUT/PREFIX",
         help="with a TrioSim trace folder as --workload: keep the converted Chakra files here "
              "(default: a temporary folder)"),
    _opt("--quiet", "-q", action="store_true",
         help="print only the totals (no per-rank lines, breakdown table or progress bar)"),
    _opt("--debug", action="store_true",
         help="show tracebacks for internal errors, and which shortcut answered and why the others declined"),
    _opt("--version", action="version", version=f"dtsim {__version__}"),
)


def build_parser() -> argparse.ArgumentParser:
    import argparse  # only here: a plain command line is parsed by quick_parse

    p = argparse.ArgumentParser(prog="python -m system.main", formatter_class=_help_formatter(argparse),
                                description=_DESCRIPTION, epilog=_EPILOG)
    for flags, kwargs in OPTIONS:
        p.add_argument(*flags, **kwargs)
    add_layout_arguments(p)
    return p


def parse_args(argv: list[str] | None = None) -> Any:
    """The parsed command line: quick_parse's where it is sure, else argparse's (which exits, as
    ``parse_args`` does, on --help, --version and bad input)."""
    argv = _sys.argv[1:] if argv is None else list(argv)
    args = quick_parse(argv, OPTIONS + LAYOUT_OPTIONS)
    return args if args is not None else build_parser().parse_args(argv)


def _prepare_triosim(args: argparse.Namespace, net: NetworkConfig) -> tuple[str, str | None]:
    """One-step form: a TrioSim trace folder as --workload is converted first (issue 4)."""
    layout = layout_from_args(args)
    if not is_trace_dir(args.workload):
        unset = defaults(LAYOUT_OPTIONS)
        changed = [k for k, v in layout.items() if v != unset[k]]
        if changed and is_dir(args.workload):
            from workload.input_kind import describe_folder  # only for this message: not at start-up

            if describe_folder(args.workload):
                raise InputError(args.workload, "", describe_folder(args.workload))
        if changed:
            raise InputError(None, f"--{changed[0].replace('_', '-')}",
                             "layout flags apply only when --workload is a TrioSim trace folder "
                             "(tensor.csv + trace.csv)")
        return args.workload, args.comm_groups
    npus = net.topology.npus_count
    ranks = layout["dp"] * layout["tp"] * layout["pp"]
    if ranks != npus:
        raise InputError(None, "--dp/--tp/--pp", _layout_hint(layout, ranks, npus, args.network))
    import tempfile

    from workload.triosim import convert_triosim

    if args.triosim_out:
        prefix = args.triosim_out
    else:  # main() removes it when the run ends
        args.triosim_tmp = tempfile.mkdtemp(prefix="dtsim-triosim-")
        prefix = path_join(args.triosim_tmp, "triosim")
    try:
        conv = convert_triosim(args.workload, out_prefix=prefix, **layout)
    except OSError as e:  # reading errors are TrioSimTraceErrors already: this is the output
        raise InputError(prefix, "--triosim-out", f"cannot write ({e.strerror or e})") from None
    return str(conv.prefix), args.comm_groups or (str(conv.comm_groups_path) if conv.comm_groups_path else None)


def _layout_hint(layout: dict, ranks: int, npus: int, network: str) -> str:
    """Which flags make the layout fit: a trace is one GPU, and the network decides how many run it."""
    given = f"dp×tp×pp = {ranks} rank(s) (dp {layout['dp']}, tp {layout['tp']}, pp {layout['pp']})"
    if npus == 1:
        return (f"the layout has {given} but the network {network} has 1 NPU; drop --dp/--tp/--pp for the "
                "single-GPU time, or pass a network with as many NPUs as the layout has ranks")
    rest = npus // (layout["tp"] * layout["pp"]) if npus % (layout["tp"] * layout["pp"]) == 0 else None
    example = f"--dp {rest}" + (f" --tp {layout['tp']}" if layout["tp"] > 1 else "") + \
        (f" --pp {layout['pp']}" if layout["pp"] > 1 else "") if rest else f"--dp {npus}"
    return (f"the layout has {given}; each flag defaults to 1, but the network {network} has {npus} NPUs; "
            f"pass a layout whose product is {npus}, e.g. {example} (or --tp {npus}, or --pp {npus} with "
            "--micro-batches), or a 1-NPU network for the single-GPU time")


def _print_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
    print(f"warning: {message}", file=_sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as e:  # argparse already printed usage / help
        return int(e.code or 0) and ExitCode.BAD_INPUT
    warnings.showwarning = _print_warning
    try:
        if args.num_queues_per_dim < 1:
            raise InputError(None, "--num-queues-per-dim", "must be >= 1")
        flag = str(args.rendezvous_protocol).lower()
        if flag not in ("0", "false", "1", "true"):
            raise InputError(None, "--rendezvous-protocol", f"expected true or false, got {args.rendezvous_protocol!r}")
        rendezvous = flag in ("1", "true")
        _check_limits(args)
        _check_outputs(args)  # before the run, not after it
        _warn_ignored_flags(args)
        net = NetworkConfig.from_file(args.network)
        if args.logical_topology:  # ASTRA-sim's flag (network/graph_config.py)
            from network.graph_config import read_logical_dims

            net = net.with_logical_dims(read_logical_dims(args.logical_topology), args.logical_topology)
        workload, comm_groups = _prepare_triosim(args, net)
        result = run_simulation(
            workload, net, args.system,
            backend=args.backend, comm_groups=comm_groups, remote_memory=args.remote_memory,
            num_queues_per_dim=args.num_queues_per_dim, injection_scale=args.injection_scale,
            max_events=args.max_events, max_wall_s=args.max_wall_seconds, symmetry=args.symmetry,
            rendezvous=rendezvous, batching=args.batching, verify_shortcuts=args.verify_shortcuts,
            progress=_progress_bar(args.quiet),
        )
        if args.debug:
            print(f"debug: answered by shortcut '{result.inputs['shortcut']}' "
                  f"({result.inputs['simulated_ranks']} of {result.npus_count} ranks simulated)", file=_sys.stderr)
            for reason in result.inputs["shortcuts_declined"]:
                print(f"debug: shortcut declined, {reason}", file=_sys.stderr)
        _write_results(args, result)
    except (InputError, SimulationLimitError) as e:
        print(f"error: {e}", file=_sys.stderr)
        return ExitCode.BAD_INPUT
    except Deadlock as e:
        print(e.report(), file=_sys.stderr)
        return ExitCode.STUCK
    except ShortcutMismatch as e:  # a bug in us, found by the check the user asked for
        print(f"internal error: {e}", file=_sys.stderr)
        return ExitCode.INTERNAL_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=_sys.stderr)
        return 130
    except Exception as e:  # a bug in us
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", file=_sys.stderr)
        return ExitCode.INTERNAL_ERROR
    finally:
        if getattr(args, "triosim_tmp", None):
            import shutil

            shutil.rmtree(args.triosim_tmp, ignore_errors=True)
    return ExitCode.OK


def _progress_bar(quiet: bool) -> Any:
    """ProgressBar.for_terminal's bar, its module imported only where stderr is a terminal (a
    run whose output goes to a file or a pipe, as scripts and the bench run it, draws none)."""
    isatty = getattr(_sys.stderr, "isatty", None)
    if quiet or isatty is None or not isatty():
        return None
    from system.progress import ProgressBar

    return ProgressBar.for_terminal(quiet)


def _check_limits(args: argparse.Namespace) -> None:
    """Flags whose nonsense values would otherwise run the clock backwards or disable a budget."""
    if args.max_events is not None and args.max_events < 1:
        raise InputError(None, "--max-events", f"must be >= 1, got {args.max_events}")
    if args.max_wall_seconds is not None and not 0 < args.max_wall_seconds < float("inf"):
        raise InputError(None, "--max-wall-seconds", f"must be a number of seconds > 0, got {args.max_wall_seconds}")
    if not 0 <= args.injection_scale < float("inf"):
        raise InputError(None, "--injection-scale", f"must be a finite number >= 0, got {args.injection_scale}")


def _check_outputs(args: argparse.Namespace) -> None:
    if not (args.report or args.trace_out or args.plot or args.triosim_out):
        return  # a plain run writes no file: it need not import the checks (start-up)
    from system.outputs import check_folder, check_plot, check_prefix, check_report

    if args.report:
        check_report("--report", args.report)
    if args.trace_out:
        check_folder("--trace-out", args.trace_out)
    if args.plot:
        check_plot("--plot", args.plot)
    if args.triosim_out:
        check_prefix("--triosim-out", args.triosim_out)


# ASTRA-sim parses these and does not use them (astra-sim-semantics §8); its run scripts pass them
_IGNORED_SCALES = {"comm_scale": "--comm-scale", "compute_scale": "--compute-scale"}


def _warn_ignored_flags(args: argparse.Namespace) -> None:
    """One warning per ASTRA-sim flag that is accepted so its scripts run, but changes nothing."""
    for dest, flag in _IGNORED_SCALES.items():
        value = getattr(args, dest)
        if value != 1:
            warnings.warn(f"{flag} {value:g} is ignored: ASTRA-sim parses it but never applies it, and neither "
                          "does dtsim, so the results are those of 1; scale the workload itself instead", stacklevel=2)
    if args.logging_configuration is not None:
        missing = "" if exists(args.logging_configuration) else " (that file does not exist)"
        warnings.warn(f"--logging-configuration {args.logging_configuration}{missing} is ignored: dtsim writes no "
                      "ASTRA-sim log files; use --report, --trace-out or --debug", stacklevel=2)
    if args.logging_folder is not None:
        warnings.warn(f"--logging-folder {args.logging_folder} is ignored: dtsim writes no ASTRA-sim log folder; "
                      "use --report or --trace-out for files", stacklevel=2)


def _write_results(args: argparse.Namespace, result: SimulationResult) -> None:
    """The summary on stdout, then whatever files were asked for."""
    from system.report import build_report, format_summary

    files = bool(args.report or args.plot)
    # the terminal's table alone reads no per-collective records (a tenth of a small run's time)
    report = build_report(result, records=files) if not args.quiet or files else None
    to_stdout = args.report == "-" or (args.report and os.path.realpath(args.report) == os.path.realpath("/dev/stdout"))
    # with the report on standard output the table goes to stderr, so stdout is JSON alone
    print(format_summary(result, quiet=args.quiet, report=report), file=_sys.stderr if to_stdout else _sys.stdout)
    if to_stdout or args.report:
        from system.report_json import dump_json, write_json  # json: only where a report is written
    if to_stdout:
        dump_json(report, _sys.stdout, indent=1)
        _sys.stdout.write("\n")
        _sys.stdout.flush()
    elif args.report:
        _output("--report", args.report, write_json, args.report, report)
    if args.trace_out:
        from system.trace_export import write_traces

        _output("--trace-out", args.trace_out, write_traces, result, args.trace_out)
    if args.plot:
        from system.plot import write_plot

        _output("--plot", args.plot, write_plot, result, report, args.plot)


def _output(flag: str, path: str, write: Any, *write_args: Any) -> None:
    """Run one writer; a path that cannot be written is bad input (exit 2), not a bug."""
    try:
        write(*write_args)
    except OSError as e:
        raise InputError(path, flag, f"cannot write ({e.strerror or e})") from None


def console_main() -> None:
    gc.disable()  # as under __main__ above: the process ends with os._exit
    exit_process(main())


def exit_process(code: int) -> NoReturn:
    """``sys.exit(code)`` without the interpreter's teardown: atexit handlers run and the standard
    streams are flushed, but the heap of a large run is not freed object by object and collected
    once more (16 ms of a 128-rank run's 0.6 s; every output file is closed by then). Where a
    profiler or tracer (cProfile, coverage) or a live non-daemon thread expects the teardown, it
    is ``sys.exit``."""
    threading = _sys.modules.get("threading")
    if _sys.getprofile() is not None or _sys.gettrace() is not None or (threading is not None and any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread())):
        _sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: what the reader did not take is gone anyway
            pass
    os._exit(int(code))


if __name__ == "__main__":
    console_main()
