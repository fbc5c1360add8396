"""``python -m workload.collect``: see workload/collect/cli.py."""
import sys

from workload.collect.cli import main

sys.exit(int(main()))
