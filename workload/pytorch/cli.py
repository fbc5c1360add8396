"""The ``pytorch`` subcommand of ``python -m workload.convert`` (flags and summary)."""
from __future__ import annotations

import argparse
import sys

from workload.builder import add_astra_sim_compatible_argument
from workload.pytorch.converter import convert_pytorch, summary_lines


def add_pytorch_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pytorch", help="PyTorch execution traces + Kineto traces, one pair per rank",
                       description="Per-rank PyTorch ExecutionTraceObserver JSON (host) and Kineto "
                                   "export_chrome_trace JSON (device) of one step → one Chakra ET per rank "
                                   "and PREFIX.comm_groups.json. '.json.gz' files are read too.")
    p.add_argument("--host-trace", required=True, metavar="'DIR/host.{rank}.json'",
                   help="execution trace of each rank; {rank} is replaced by 0..N-1")
    p.add_argument("--device-trace", required=True, metavar="'DIR/device.{rank}.json'",
                   help="Kineto trace of each rank, same step; {rank} is replaced by 0..N-1")
    p.add_argument("--ranks", required=True, type=int, metavar="N", help="number of ranks traced")
    p.add_argument("-o", "--output", required=True, metavar="OUT/PREFIX",
                   help="writes OUT/PREFIX.{rank}.et and OUT/PREFIX.comm_groups.json")
    add_astra_sim_compatible_argument(p)
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")


def run_pytorch(args: argparse.Namespace) -> int:
    """Convert, print the summary (stdout) and the warnings (stderr); errors propagate to the caller."""
    result = convert_pytorch(args.host_trace, args.device_trace, args.ranks, args.output,
                             astra_sim_compatible=args.astra_sim_compatible)
    for line in summary_lines(result):
        print(line)
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0
