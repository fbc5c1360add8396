"""Is a path a TrioSim trace folder? Asked on every run (``--workload DIR``), so it imports
nothing of the converter."""
from __future__ import annotations

from network.files import is_dir, is_file, path_join

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from pathlib import Path


def is_trace_dir(path: str | Path) -> bool:
    """True if ``path`` is a folder holding both TrioSim CSVs (for ``--workload DIR``)."""
    # network/files.py's path functions, not pathlib: every run asks
    return is_dir(path) and is_file(path_join(path, "tensor.csv")) and is_file(path_join(path, "trace.csv"))
