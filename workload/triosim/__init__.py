"""TrioSim traces (``tensor.csv`` + ``trace.csv``) → Chakra ETs for data, tensor and pipeline parallel training.

Public API (``system.main`` and ``python -m workload.convert triosim`` call these):

* ``convert_triosim(trace_dir, *, batch_size, ..., out_prefix) -> ConversionResult``
* ``add_layout_arguments(parser)`` and ``layout_from_args(args) -> dict`` (the keyword arguments)
* ``is_trace_dir(path)``: is this a TrioSim trace folder (for ``--workload DIR``)?
* ``load_trace(dir) -> Trace``; errors ``TrioSimTraceError`` and ``LayoutError`` (both InputError)

See docs/triosim.md for the rules.
"""
from workload.triosim.converter import ConversionResult, build_conversion, convert_triosim
from workload.triosim.errors import LayoutError, TrioSimTraceError
from workload.triosim.layout import Layout, add_layout_arguments, layout_from_args
from workload.triosim.trace import Trace, is_trace_dir, load_trace

__all__ = [
    "ConversionResult",
    "Layout",
    "LayoutError",
    "Trace",
    "TrioSimTraceError",
    "add_layout_arguments",
    "build_conversion",
    "convert_triosim",
    "is_trace_dir",
    "layout_from_args",
    "load_trace",
]
