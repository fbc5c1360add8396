"""The closed-form starting point of a fit, and a small derivative-free minimiser.

NCCL's ring moves ``factor(N) × size`` bytes through every GPU's link (``factor`` is nccl-tests'
busbw factor: 2(N−1)/N for all-reduce, (N−1)/N for the gathers and scatters) in ``steps(N)``
dependent steps, so a measured table is close to ``T(S) = α + β·S`` over the sizes where one
protocol runs: β gives the bus bandwidth, α / steps the per-step latency. The simulator is then
asked to reproduce the table (``dtsim_tools.calibrate.fit``); this only gives it a place to start.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

#: busbw factor and dependent ring steps per collective (nccl-tests' README, NCCL's ring)
_RING = {
    "ALL_REDUCE": (lambda n: 2 * (n - 1) / n, lambda n: 2 * (n - 1)),
    "ALL_GATHER": (lambda n: (n - 1) / n, lambda n: n - 1),
    "REDUCE_SCATTER": (lambda n: (n - 1) / n, lambda n: n - 1),
    "ALL_TO_ALL": (lambda n: (n - 1) / n, lambda n: n - 1),
}
SIMULATED_COLLECTIVES = tuple(_RING)


def bus_factor(collective: str, npus: int) -> float:
    return _RING[collective][0](npus)


def ring_steps(collective: str, npus: int) -> int:
    return _RING[collective][1](npus)


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """α (same unit as times) and β (per byte) minimising mean |log((α + β·S) / T)|."""
    s, t = np.asarray(sizes, float), np.asarray(times, float)

    def objective(x: np.ndarray) -> float:
        a, b = np.exp(x)
        return float(np.mean(np.abs(np.log((a + b * s) / t))))

    b0 = max((t[-1] - t[0]) / (s[-1] - s[0]), 1e-12) if len(s) > 1 else t[0] / s[0]
    a0 = max(t[0] - b0 * s[0], 1e-3 * t[0])
    best = min((nelder_mead(objective, np.log([a0 * fa, b0 * fb]), step=0.5, max_evals=400)
                for fa in (0.3, 1.0, 3.0) for fb in (0.5, 1.0, 2.0)), key=lambda r: r[1])
    a, b = np.exp(best[0])
    return float(a), float(b)


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, step: float = 0.3,
                max_evals: int = 200, tol: float = 1e-6) -> tuple[np.ndarray, float]:
    """Nelder and Mead's simplex search (standard coefficients); returns (x, f(x))."""
    x0 = np.asarray(x0, float)
    n = len(x0)
    pts = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    evals = n + 1
    while evals < max_evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) <= tol * (abs(vals[0]) + tol):
            break
        centroid = np.mean(pts[:-1], axis=0)
        xr = centroid + (centroid - pts[-1])
        fr = f(xr)
        evals += 1
        if fr < vals[0]:
            xe = centroid + 2 * (centroid - pts[-1])
            fe = f(xe)
            evals += 1
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (pts[-1] - centroid)
            fc = f(xc)
            evals += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:  # shrink towards the best point
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                evals += n
    i = int(np.argmin(vals))
    return pts[i], float(vals[i])


def gib_per_s(bytes_per_us: float) -> float:
    """bytes/µs → the network file's GB/s, where GB = 2^30 bytes (ASTRA-sim's analytical unit)."""
    return bytes_per_us * 1e6 / 2 ** 30


def initial_guess(collective: str, npus: int, sizes: Sequence[float], times_us: Sequence[float],
                  rounds: int) -> tuple[float, float]:
    """(link bandwidth in GB/s of 2^30 B, per-step latency in ns) from a one-level α–β fit."""
    alpha_us, beta_us_per_byte = fit_alpha_beta(sizes, times_us)
    busbw = bus_factor(collective, npus) / beta_us_per_byte  # bytes/us
    step_ns = 1e3 * alpha_us / max(1, rounds * (ring_steps(collective, npus) + 1))
    return gib_per_s(busbw), max(step_ns, 1.0) if math.isfinite(step_ns) else 1000.0
