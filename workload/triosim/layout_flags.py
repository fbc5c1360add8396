"""The command-line flags of a TrioSim layout, apart from layout.py so that the simulator's command
line, which offers them on every run, imports neither dataclasses nor the converter (start-up)."""
from __future__ import annotations

import argparse

from workload.compatible_flag import add_astra_sim_compatible_argument

DP_MODES = ("sync", "ddp")
PP_SCHEDULES = ("gpipe", "1f1b")
PP_BALANCES = ("time", "count")


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags that choose a TrioSim trace's batch scaling and parallel layout."""
    g = parser.add_argument_group("TrioSim trace layout")
    g.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="batch size the trace was recorded at (needed with --batch-size-sim)")
    g.add_argument("--batch-size-sim", type=int, default=None, metavar="N",
                   help="batch size each data-parallel replica simulates; sizes and times are "
                        "divided by bsRatio = batch-size / batch-size-sim (default: no scaling)")
    g.add_argument("--dp", type=int, default=1, metavar="N", help="data-parallel ranks (default 1)")
    g.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel ranks (default 1)")
    g.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline stages (default 1)")
    g.add_argument("--micro-batches", type=int, default=1, metavar="N",
                   help="micro-batches per iteration (pipeline parallel; default 1)")
    g.add_argument("--dp-mode", choices=DP_MODES, default="sync",
                   help="sync: one all-reduce of all gradients after the backward pass; "
                        "ddp: bucketed all-reduces overlapping the backward pass (default sync)")
    g.add_argument("--bucket-mb", type=float, default=25.0, metavar="MiB",
                   help="DDP gradient bucket cap in MiB (default 25, as PyTorch)")
    g.add_argument("--pp-schedule", choices=PP_SCHEDULES, default="gpipe",
                   help="pipeline schedule (default gpipe: all forwards, then all backwards)")
    g.add_argument("--pp-balance", choices=PP_BALANCES, default="time",
                   help="cut stages by operator time, or by operator count as TrioSim does (default time)")
    g.add_argument("--no-scale-weights", dest="scale_weights", action="store_false",
                   help="keep parameter and gradient sizes unscaled by bsRatio (TrioSim scales them)")
    add_astra_sim_compatible_argument(g)


def layout_from_args(args: argparse.Namespace) -> dict:
    """The keyword arguments of ``convert_triosim`` taken from parsed ``add_layout_arguments`` flags."""
    return {k: getattr(args, k) for k in (
        "batch_size", "batch_size_sim", "dp", "tp", "pp", "micro_batches", "dp_mode",
        "bucket_mb", "pp_schedule", "pp_balance", "scale_weights", "astra_sim_compatible",
    )}
