"""How far simulated times are from measured ones.

The headline is the **geomean error**: the geometric mean over sizes of |simulated / measured − 1|,
the measure ASTRA-sim's hardware-validation pages quote (an error below 0.01 % counts as 0.01 %,
so that one exact hit does not zero the product). Because a geometric mean rewards the sizes the
model hits closely, the mean and the largest |error| are printed beside it; the fit itself
minimises the mean |log(simulated / measured)|, which no single size dominates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

_FLOOR = 1e-4


def rel_error(simulated: float, measured: float) -> float:
    return simulated / measured - 1.0


def geomean_abs(errors: Sequence[float]) -> float:
    if not errors:
        return float("nan")
    return math.exp(sum(math.log(max(abs(e), _FLOOR)) for e in errors) / len(errors))


def mean_abs_log(simulated: Sequence[float], measured: Sequence[float]) -> float:
    """The fit's objective: mean |log(sim / meas)| (a factor-symmetric L1 misfit)."""
    return sum(abs(math.log(s / m)) for s, m in zip(simulated, measured)) / len(measured)


@dataclass(frozen=True)
class ErrorSummary:
    geomean: float
    mean: float
    max: float
    count: int

    @classmethod
    def of(cls, errors: Sequence[float]) -> "ErrorSummary":
        a = [abs(e) for e in errors]
        return cls(geomean_abs(errors), sum(a) / len(a) if a else float("nan"), max(a) if a else float("nan"), len(a))

    def line(self) -> str:
        return (f"geomean error {100 * self.geomean:.2f} %, mean {100 * self.mean:.2f} %, "
                f"max {100 * self.max:.2f} % over {self.count} sizes")
