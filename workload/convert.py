"""Convert other tools' traces into Chakra ETs.

    python -m workload.convert triosim --trace-dir DIR --batch-size 128 [--batch-size-sim N] \\
        --dp N --tp N --pp N [--micro-batches N] [--dp-mode sync|ddp] -o OUT/PREFIX
    python -m workload.convert pytorch --host-trace 'DIR/host.{rank}.json' \\
        --device-trace 'DIR/device.{rank}.json' --ranks N -o OUT/PREFIX

Exit codes: 0 done, 2 bad input (one paragraph on stderr naming the file, line and column, or
the flag), 1 a bug in us.
"""
from __future__ import annotations

import argparse
import enum
import sys
import traceback

from network.errors import InputError
from workload.pytorch.cli import add_pytorch_parser, run_pytorch
from workload.triosim import add_layout_arguments, convert_triosim, layout_from_args


class ExitCode(enum.IntEnum):
    OK = 0
    INTERNAL_ERROR = 1  #: a bug in us
    BAD_INPUT = 2  #: an InputError: file, place, what was expected


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 itself; keep its one-paragraph style
        self.print_usage(sys.stderr)
        raise SystemExit(f"{self.prog}: error: {message}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m workload.convert", description="Convert traces into Chakra ETs.")
    sub = parser.add_subparsers(dest="source", required=True, parser_class=_Parser)
    tri = sub.add_parser("triosim", help="a TrioSim trace folder (tensor.csv + trace.csv)",
                         description="TrioSim trace → one Chakra ET per rank for a dp × tp × pp layout.")
    tri.add_argument("--trace-dir", required=True, help="folder holding tensor.csv and trace.csv")
    tri.add_argument("-o", "--output", required=True, metavar="OUT/PREFIX",
                     help="writes OUT/PREFIX.{rank}.et, .comm_groups.json and .layout.json")
    tri.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    add_layout_arguments(tri)
    add_pytorch_parser(sub)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> ExitCode:
    try:
        args = parse_args(argv)
    except SystemExit as e:  # argparse: usage errors exit 2, --help exits 0
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return ExitCode.BAD_INPUT
        return ExitCode(e.code or 0) if e.code in (0, 2, None) else ExitCode.BAD_INPUT
    try:
        if args.source == "pytorch":
            return run_pytorch(args)
        result = convert_triosim(args.trace_dir, out_prefix=args.output, **layout_from_args(args))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except OSError as exc:
        print(f"error: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except Exception as exc:  # a bug in us: one line, the traceback only when asked for
        if args.debug:
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return ExitCode.INTERNAL_ERROR
    s = result.summary
    print(f"wrote {result.ranks} rank(s): {result.prefix}.{{0..{result.ranks - 1}}}.et, "
          f"{result.comm_groups_path.name}, {result.layout_path.name}")
    print(f"bsRatio {s['bs_ratio']}; gradients {s['gradients']['tensors']} tensors, "
          f"{s['gradients']['scaled_bytes']} bytes; single-GPU compute {s['single_gpu_time_ns']} ns")
    return ExitCode.OK


def console_main() -> None:
    """Entry point for a console script (``dtsim-convert = "workload.convert:console_main"``)."""
    sys.exit(int(main()))


if __name__ == "__main__":
    console_main()
