"""Command line: ``python -m workload.collect`` (collect) and ``... convert``.

    python -m workload.collect --model MODULE:CALLABLE --batch-size 32 [--device cuda|cpu]
                               [--iterations N] --out DIR
    python -m workload.collect convert --execution-trace ET.json --profiler-trace KINETO.json --out DIR

``main`` returns an exit code (0 ok, 1 internal error, 2 bad input) and never
exits itself, so tests call it in-process. torch is imported only by collect.
"""
from __future__ import annotations

import argparse
import enum
import json
import sys
import traceback
from pathlib import Path

from network.errors import InputError
from network.files import write_atomic
from workload.collect.convert import TPFLAG_RULES, ConvertResult, convert_pair
from workload.collect.spec import LOSSES, OPTIMIZERS


class ExitCode(enum.IntEnum):
    OK = 0
    INTERNAL_ERROR = 1   #: a bug in us: one line, plus "rerun with --debug for the traceback"
    BAD_INPUT = 2        #: any InputError: file, place, what was expected


def _collect_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workload.collect",
        description="Profile one training step of a PyTorch model (torch.profiler + "
                    "ExecutionTraceObserver) and write TrioSim tensor.csv / trace.csv. "
                    "'python -m workload.collect convert --help' converts an existing pair of "
                    "files without torch.")
    p.add_argument("--model", required=True, metavar="MODULE:CALLABLE",
                   help="callable(batch_size) returning a ModelSpec or (module, example_input[, target]); "
                        "shipped: workload.collect.models:mlp, :small_cnn, :transformer_block")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--device", choices=("cuda", "cpu"), default=None,
                   help="default: cuda when torch sees a GPU, else cpu (times are then CPU operator durations)")
    p.add_argument("--iterations", type=int, default=4,
                   help="training steps to run; the last one is profiled (default 4: 3 warm-up)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's); 1 gives steadier CPU times on a busy machine")
    p.add_argument("--loss", choices=LOSSES, default=None, help="default: the model's, else cross_entropy")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help="default: the model's, else adam")
    _common(p)
    return p


def _convert_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workload.collect convert",
        description="Convert a PyTorch execution trace and the Kineto profiler trace of the same "
                    "step into TrioSim tensor.csv / trace.csv. Needs no torch.")
    p.add_argument("--execution-trace", required=True, type=Path, metavar="ET.json")
    p.add_argument("--profiler-trace", required=True, type=Path, metavar="KINETO.json")
    p.add_argument("--cpu-times", action="store_true",
                   help="take operator times from CPU operator durations (a trace without GPU kernels)")
    p.add_argument("--timing-trace", type=Path, default=None, metavar="KINETO2.json",
                   help="take the times from this Kineto trace of another run of the same step "
                        "(recorded without the execution-trace observer, which inflates CPU times)")
    _common(p)
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for tensor.csv, trace.csv")
    p.add_argument("--tpflag-rule", choices=TPFLAG_RULES, default="triosim",
                   help="triosim (default): tpflag=1 for conv2d/linear/embedding and operators with their "
                        "autograd sequence number; nested: also numbers of operators inside them "
                        "(flags a linear's AddmmBackward0)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an internal error")


def main(argv: list[str] | None = None) -> ExitCode | int:
    argv = list(sys.argv[1:] if argv is None else argv)
    is_convert = bool(argv) and argv[0] == "convert"
    if argv and argv[0] in ("convert", "collect"):
        argv = argv[1:]
    parser = _convert_parser() if is_convert else _collect_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:                  # argparse: usage error (2) or --help (0)
        return exc.code if isinstance(exc.code, int) else ExitCode.BAD_INPUT
    try:
        _run_convert(args) if is_convert else _run_collect(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Exception as exc:                   # a bug: say so briefly; --debug shows where
        if args.debug:
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return ExitCode.INTERNAL_ERROR
    return ExitCode.OK


def _run_convert(args: argparse.Namespace) -> None:
    result = convert_pair(args.execution_trace, args.profiler_trace, args.out,
                          time_source="cpu" if args.cpu_times else "gpu", tpflag_rule=args.tpflag_rule,
                          timing_trace=args.timing_trace)
    _report(result)


def _run_collect(args: argparse.Namespace) -> None:
    from workload.collect.profile_step import collect     # imports torch

    done = collect(args.model, args.batch_size, args.out, device=args.device, iterations=args.iterations,
                   loss=args.loss, optimizer=args.optimizer, tpflag_rule=args.tpflag_rule, threads=args.threads)
    out = Path(args.out)
    rel = lambda p: None if p is None else p.relative_to(out).as_posix()  # noqa: E731
    meta = {"model": args.model, "batch_size": args.batch_size, "device": done.device,
            "time_source": done.result.time_source, "iterations": args.iterations,
            "tpflag_rule": args.tpflag_rule, "threads": args.threads, "torch": done.torch_version,
            "execution_trace": rel(done.execution_trace), "profiler_trace": rel(done.profiler_trace),
            "timing_trace": rel(done.timing_trace), "notes": list(done.notes)}
    write_atomic(out / "collect.json", json.dumps(meta, indent=2) + "\n")
    _report(done.result)
    for note in done.notes:
        print(f"note: {note}", file=sys.stderr)


def _report(r: ConvertResult) -> None:
    what = "kernel time" if r.time_source == "gpu" else "CPU operator time"
    print(f"wrote {r.trace_csv} ({r.operators} operators, {r.total_ns / 1e6:.3f} ms of {what}; "
          f"join by {r.join}) and {r.tensor_csv} ({r.tensor_rows} tensor rows)")
    if r.zero_time_dropped:
        print(f"note: {r.zero_time_dropped} operators had no {what} and were left out of trace.csv "
              f"(TrioSim does the same); their tensors stay in tensor.csv", file=sys.stderr)
    if r.unmatched:
        print(f"note: {r.unmatched} operators of the execution trace have no profiler event", file=sys.stderr)
    if r.time_source == "cpu":
        print("note: no GPU kernels: Operator_cudatime and Operator_cudatimenooverlap hold each "
              "operator's CPU duration (host wall time), not GPU kernel time", file=sys.stderr)
