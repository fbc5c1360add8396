"""Is a path a TrioSim trace folder? Asked on every run (``--workload DIR``), so it imports
nothing of the converter."""
from __future__ import annotations

from pathlib import Path


def is_trace_dir(path: str | Path) -> bool:
    """True if ``path`` is a folder holding both TrioSim CSVs (for ``--workload DIR``)."""
    p = Path(path)
    return p.is_dir() and (p / "tensor.csv").is_file() and (p / "trace.csv").is_file()
