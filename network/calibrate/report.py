"""The calibrator's printed tables: per size, measured against simulated, and the error summary."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from network.calibrate.metrics import ErrorSummary, rel_error
from network.calibrate.model import bus_factor


@dataclass(frozen=True)
class Comparison:
    """One table's measured and simulated times (µs), size by size; ``fitted`` marks the fit's own table."""

    name: str
    collective: str
    npus: int
    nodes: int
    sizes: tuple[int, ...]
    measured_us: tuple[float, ...]
    simulated_us: tuple[float, ...]
    fitted: bool

    @property
    def errors(self) -> list[float]:
        return [rel_error(s, m) for s, m in zip(self.simulated_us, self.measured_us)]

    @property
    def summary(self) -> ErrorSummary:
        return ErrorSummary.of(self.errors)


def format_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def format_comparison(c: Comparison) -> list[str]:
    role = "fit" if c.fitted else "held out"
    shape = f"{c.nodes} nodes x {c.npus // c.nodes}" if c.nodes > 1 else "1 node"
    factor = bus_factor(c.collective, c.npus)
    lines = [f"{c.name}: {c.collective} on {c.npus} NPUs ({shape}), {role}",
             f"  {'size':>10} {'measured us':>12} {'simulated us':>13} {'error':>8} {'busbw meas':>11} {'busbw sim':>10}"]
    for size, m, s, e in zip(c.sizes, c.measured_us, c.simulated_us, c.errors):
        bm, bs = factor * size / m / 1e3, factor * size / s / 1e3  # GB/s, GB = 10^9 B as nccl-tests
        lines.append(f"  {format_size(size):>10} {m:12.2f} {s:13.2f} {100 * e:+7.2f}% {bm:11.2f} {bs:10.2f}")
    lines.append(f"  {c.summary.line()}")
    return lines


def format_overall(comparisons: Sequence[Comparison]) -> str:
    held = [e for c in comparisons if not c.fitted for e in c.errors]
    fit = [e for c in comparisons if c.fitted for e in c.errors]
    parts = [f"fit tables: {ErrorSummary.of(fit).line()}"] if fit else []
    if held:
        parts.append(f"held-out tables: {ErrorSummary.of(held).line()}")
    return "; ".join(parts)
