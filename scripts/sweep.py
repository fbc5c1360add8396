#!/usr/bin/env python
"""``dtsim-sweep`` from a checkout without installing: the code is dtsim_tools/sweep.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dtsim_tools.sweep import console_main  # noqa: E402

if __name__ == "__main__":
    console_main()
