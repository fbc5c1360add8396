"""The converters' ``--astra-sim-compatible`` flag, apart from builder.py so that the simulator's
command line can offer it without importing the protobuf writer (start-up)."""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    import argparse

ASTRA_SIM_COMPATIBLE_HELP = (
    "write only what ASTRA-sim reads: compute durations in whole microseconds (duration_micros, "
    "rounded so that a rank's durations add up to its rounded total), no private attributes such as "
    "duration_ns; ASTRA-sim and dtsim then give the same cycles on the files (default: exact ns)")


# (option strings, add_argument keywords), as system/quick_args.py reads flags
ASTRA_SIM_COMPATIBLE_OPTION = (("--astra-sim-compatible",),
                               {"dest": "astra_sim_compatible", "action": "store_true", "help": ASTRA_SIM_COMPATIBLE_HELP})


def add_astra_sim_compatible_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The converters' shared ``--astra-sim-compatible`` flag (dest ``astra_sim_compatible``)."""
    flags, kwargs = ASTRA_SIM_COMPATIBLE_OPTION
    parser.add_argument(*flags, **kwargs)
