"""``python -m network.calibrate``: the calibrator's command line.

The fit runs the simulator (system/ and workload/), which network/ must never import. The driver
therefore lives above the layers, in ``dtsim_tools.calibrate`` (a composition root like
system/main.py); this entry module only hands over to it at run time, so that the pinned command
name works while network/ itself keeps importing nothing upward.
"""
from __future__ import annotations

import importlib
import sys


def main() -> None:
    sys.exit(importlib.import_module("dtsim_tools.calibrate.cli").main())


if __name__ == "__main__":
    main()
