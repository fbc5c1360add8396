"""TrioSim traces (``tensor.csv`` + ``trace.csv``) → Chakra ETs for data, tensor and pipeline parallel training.

Public API (``system.main`` and ``python -m workload.convert triosim`` call these):

* ``convert_triosim(trace_dir, *, batch_size, ..., out_prefix) -> ConversionResult``
* ``add_layout_arguments(parser)`` and ``layout_from_args(args) -> dict`` (the keyword arguments)
* ``is_trace_dir(path)``: is this a TrioSim trace folder (for ``--workload DIR``)?
* ``load_trace(dir) -> Trace``; errors ``TrioSimTraceError`` and ``LayoutError`` (both InputError)

See docs/triosim.md for the rules.
"""
from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

# name → module: imported on first use, so that a run that converts nothing does not pay for
# the converter (csv, fractions, decimal and six modules of ours) at start-up
_HOMES = {
    "ConversionResult": "converter", "build_conversion": "converter", "convert_triosim": "converter",
    "LayoutError": "errors", "TrioSimTraceError": "errors",
    "Layout": "layout", "add_layout_arguments": "layout_flags", "layout_from_args": "layout_flags",
    "Trace": "trace", "load_trace": "trace", "is_trace_dir": "folder",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
