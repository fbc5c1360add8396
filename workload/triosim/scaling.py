"""Batch-size scaling as TrioSim does it (docs/formats.md §D.2).

bsRatio = batch_size_trace / batch_size_sim. Every operator time is divided by bsRatio (time is
assumed linear in the batch) and every tensor size too, truncated to whole bytes per tensor as
TrioSim's ``TraceLoader.Load`` does (``int(size / bsRatio)``). TrioSim scales the weights as well;
with ``scale_weights=False`` parameter tensors keep their real size, which is what happens on a GPU.
Times stay exact fractions of a nanosecond here; rounding happens once per rank (see rank_graph).
"""
from __future__ import annotations

from fractions import Fraction

from workload.triosim.trace import Operator, Trace

_NS_PER_US = 1000


class ScaledTrace:
    """A trace seen at the simulated batch size: times in ns (exact), sizes in bytes (truncated)."""

    __slots__ = ("trace", "bs_ratio", "scale_weights", "parameter_ids")

    def __init__(self, trace: Trace, bs_ratio: Fraction, scale_weights: bool,
                 parameter_ids: frozenset[int]) -> None:
        self.trace = trace
        self.bs_ratio = bs_ratio
        self.scale_weights = scale_weights
        self.parameter_ids = parameter_ids

    def time_ns(self, op: Operator) -> Fraction:
        """Operator_cudatimenooverlap in ns at the simulated batch, exact."""
        return op.time_us * _NS_PER_US / self.bs_ratio

    def tensor_bytes(self, tensor_id: int) -> int:
        """Bytes of a tensor at the simulated batch (parameters unscaled unless scale_weights)."""
        raw = self.trace.tensors[tensor_id].bytes
        if tensor_id in self.parameter_ids and not self.scale_weights:
            return raw
        return int(raw / self.bs_ratio)  # exact Fraction division, truncated like TrioSim's int()

    def output_bytes(self, op: Operator) -> int:
        """Bytes of an operator's outputs at the simulated batch (each tensor truncated, then summed)."""
        return sum(self.tensor_bytes(t) for t in op.outputs)


def bs_ratio(batch_size: int | None, batch_size_sim: int | None) -> Fraction:
    """batch_size_trace / batch_size_sim as an exact fraction; 1 when no simulated batch is given."""
    if batch_size_sim is None or batch_size is None:
        return Fraction(1)
    return Fraction(batch_size, batch_size_sim)
