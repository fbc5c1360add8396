#!/usr/bin/env python
"""Differential testing against ASTRA-sim from a checkout: the code is dtsim_tools/differential.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dtsim_tools.differential import console_main  # noqa: E402

if __name__ == "__main__":
    console_main()
