"""The command-line flags of a TrioSim layout, apart from layout.py so that the simulator's command
line, which offers them on every run, imports neither dataclasses nor the converter (start-up)."""
from __future__ import annotations

from workload.compatible_flag import ASTRA_SIM_COMPATIBLE_OPTION

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    import argparse

DP_MODES = ("sync", "ddp")
PP_SCHEDULES = ("gpipe", "1f1b")
PP_BALANCES = ("time", "count")
LAYOUT_TITLE = "TrioSim trace layout"


def _opt(*flags: str, **kwargs: object) -> tuple[tuple[str, ...], dict]:
    return flags, kwargs


# (option strings, add_argument keywords), as system/quick_args.py reads flags
LAYOUT_OPTIONS = (
    _opt("--batch-size", type=int, default=None, metavar="N",
         help="batch size the trace was recorded at (needed with --batch-size-sim)"),
    _opt("--batch-size-sim", type=int, default=None, metavar="N",
         help="batch size each data-parallel replica simulates; sizes and times are "
              "divided by bsRatio = batch-size / batch-size-sim (default: no scaling)"),
    _opt("--dp", type=int, default=1, metavar="N", help="data-parallel ranks (default 1)"),
    _opt("--tp", type=int, default=1, metavar="N", help="tensor-parallel ranks (default 1)"),
    _opt("--pp", type=int, default=1, metavar="N", help="pipeline stages (default 1)"),
    _opt("--micro-batches", type=int, default=1, metavar="N",
         help="micro-batches per iteration (pipeline parallel; default 1)"),
    _opt("--dp-mode", choices=DP_MODES, default="sync",
         help="sync: one all-reduce of all gradients after the backward pass; "
              "ddp: bucketed all-reduces overlapping the backward pass (default sync)"),
    _opt("--bucket-mb", type=float, default=25.0, metavar="MiB",
         help="DDP gradient bucket cap in MiB (default 25, as PyTorch)"),
    _opt("--pp-schedule", choices=PP_SCHEDULES, default="gpipe",
         help="pipeline schedule (default gpipe: all forwards, then all backwards)"),
    _opt("--pp-balance", choices=PP_BALANCES, default="time",
         help="cut stages by operator time, or by operator count as TrioSim does (default time)"),
    _opt("--no-scale-weights", dest="scale_weights", action="store_false",
         help="keep parameter and gradient sizes unscaled by bsRatio (TrioSim scales them)"),
    ASTRA_SIM_COMPATIBLE_OPTION,
)


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags that choose a TrioSim trace's batch scaling and parallel layout."""
    g = parser.add_argument_group(LAYOUT_TITLE)
    for flags, kwargs in LAYOUT_OPTIONS:
        g.add_argument(*flags, **kwargs)


def layout_from_args(args: argparse.Namespace) -> dict:
    """The keyword arguments of ``convert_triosim`` taken from parsed ``add_layout_arguments`` flags."""
    return {k: getattr(args, k) for k in (
        "batch_size", "batch_size_sim", "dp", "tp", "pp", "micro_batches", "dp_mode",
        "bucket_mb", "pp_schedule", "pp_balance", "scale_weights", "astra_sim_compatible",
    )}
