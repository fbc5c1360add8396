"""Command line: ``python -m workload.collect`` (collect) and ``... convert``.

    python -m workload.collect --model MODULE:CALLABLE --batch-size 32 [--device cuda|cpu]
                               [--iterations N] --out DIR
    python -m workload.collect --model MODULE:CALLABLE --batch-size 32 --world N --backend gloo|nccl --out DIR
    python -m workload.collect run --step K --out DIR -- train.py ARGS     (also: -- torchrun ... train.py)
    python -m workload.collect convert --execution-trace ET.json --profiler-trace KINETO.json --out DIR

``main`` returns an exit code (0 ok, 1 internal error, 2 bad input) and never
exits itself, so tests call it in-process. torch is imported only by collect.
"""
from __future__ import annotations

import argparse
import enum
import json
import os
import sys
import traceback
from pathlib import Path

from network.errors import InputError
from network.files import write_atomic
from workload.collect.convert import TPFLAG_RULES, ConvertResult, convert_pair
from workload.collect.spec import LOSSES, OPTIMIZERS
from workload.collect.world import DEFAULT_THREADS, collect_world, run_script


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
                   help="torch intra-op threads per process (default 1: operator times then measure the "
                        "model, not the contention of every rank's threads for the cores)")
    p.add_argument("--world", type=int, default=None, metavar="N",
                   help="train with DistributedDataParallel on N local processes and write host.{rank}.json "
                        "and device.{rank}.json per rank (for 'python -m workload.convert pytorch')")
    p.add_argument("--backend", choices=("gloo", "nccl"), default="gloo",
                   help="torch.distributed backend with --world (default gloo; nccl needs a GPU per rank)")
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


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workload.collect run",
        description="Run an unmodified training script (or a launcher such as torchrun) and profile "
                    "optimizer step K on every rank: writes host.{rank}.json, device.{rank}.json, "
                    "step.{rank}.json and collect.json in --out.")
    p.add_argument("--step", type=int, required=True, metavar="K", help="the optimizer step to profile (1-based)")
    p.add_argument("--out", type=Path, default=Path("traces"), metavar="DIR", help="default: ./traces")
    p.add_argument("--threads", type=int, default=None,
                   help="set torch intra-op threads in every process (default: leave the script's choice)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- train.py ARGS")
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
    mode = argv[0] if argv and argv[0] in ("convert", "collect", "run") else "collect"
    if argv and argv[0] in ("convert", "collect", "run"):
        argv = argv[1:]
    parser = {"convert": _convert_parser, "run": _run_parser}.get(mode, _collect_parser)()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:                  # argparse: usage error (2) or --help (0)
        return exc.code if isinstance(exc.code, int) else ExitCode.BAD_INPUT
    try:
        if mode == "run":
            return _run_script(args)
        _run_convert(args) if mode == "convert" else _run_collect(args)
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


def _threads_note(threads: int | None, world: int) -> int:
    chosen = DEFAULT_THREADS if threads is None else threads
    how = "the default" if threads is None else "--threads"
    print(f"threads: {chosen} intra-op thread(s) per process ({how}; {os.cpu_count()} cores, {world} "
          f"process(es)); pass --threads N to change", file=sys.stderr)
    return chosen


def _run_script(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    code, meta = run_script(command, args.step, args.out, args.threads)
    _print_world(args.out, meta)
    return code


def _print_world(out: Path, meta: dict) -> None:
    for r in meta["ranks"]:
        unprofiled = ""
        if r.get("unprofiled_median_s"):
            unprofiled = (f"; unprofiled steps: median {r['unprofiled_median_s'] * 1e3:.3f} ms of "
                          f"{r['unprofiled_steps']}, so the profiler slowed the step {r['profiler_slowdown']:.2f}x")
        print(f"rank {r['rank']}: step {r['step']} took {r['profiled_step_wall_s'] * 1e3:.3f} ms "
              f"(profiled; {r['threads']} thread(s)){unprofiled}")
    if not any(r.get("unprofiled_median_s") for r in meta["ranks"]):
        print("note: no unprofiled step besides the first was timed, so the profiler's own cost is unknown; "
              "let the script run a few steps more than --step")
    n = len(meta["ranks"])
    print(f"wrote {out}/host.{{rank}}.json, device.{{rank}}.json for {n} rank(s) and collect.json; next:\n"
          f"  python -m workload.convert pytorch --host-trace '{out}/host.{{rank}}.json' "
          f"--device-trace '{out}/device.{{rank}}.json' --ranks {n} -o {out}/et/step")


def _run_collect(args: argparse.Namespace) -> None:
    if args.world is not None:
        threads = _threads_note(args.threads, args.world)
        meta = collect_world(args.model, args.world, args.backend, args.batch_size, args.out,
                             iterations=args.iterations, threads=threads, device=args.device or "cpu",
                             loss=args.loss, optimizer=args.optimizer)
        _print_world(args.out, meta)
        return
    from workload.collect.profile_step import collect     # imports torch

    args.threads = _threads_note(args.threads, 1)
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
