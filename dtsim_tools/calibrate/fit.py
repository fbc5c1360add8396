"""Fitting a machine to measured tables with the simulator in the loop.

1. Start: a one-level α–β fit of the tables (``network.calibrate.model``) gives the link
   bandwidth and the per-step latency; a second level (several nodes) starts slower and later.
2. Refine: the simulator reproduces every measured size; its times are linearised in the log of
   the continuous parameters (a finite difference per parameter), the linear model's best step is
   taken within a trust region, and the step is kept only if the simulator agrees it is better
   (a Gauss–Newton search on the L1 misfit mean |log(sim / meas)|). A few rounds suffice: the
   simulated time is close to linear in 1/bandwidth and latency.
3. Knobs that are integers (chunks, chunks in flight) and the reduction bandwidth are tried from a
   short list of physically plausible settings; the best refined one wins.

Continuous parameters: per level the link bandwidth and latency. The endpoint delay (per-step
software overhead on every packet bundle) and the inside-node latency act the same way on one
table, so they are tied: endpoint-delay = 2 × latency[0], i.e. half of a step's fixed cost is
software and half the two switch hops.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dtsim_tools.calibrate.simulate import Simulator
from network.calibrate.metrics import mean_abs_log
from network.calibrate.model import initial_guess, nelder_mead
from network.calibrate.params import Level, MachineParams


@dataclass(frozen=True)
class Point:
    """One measured size of one table, at that table's GPU count and node count."""

    collective: str
    npus: int
    nodes: int
    size_bytes: int
    measured_us: float


@dataclass(frozen=True)
class Knobs:
    splits: int
    active_chunks: int
    reduction_ratio: float  # local-mem-bw as a multiple of the inside-node link bandwidth
    topology: str = "Switch"


#: chunking settings tried: NCCL pipelines a message in several chunks with a few in flight
DEFAULT_KNOBS = (Knobs(1, 1, 16.0),)
#: --search-knobs: more chunks, and chunks in flight; on single-collective tables these tie with
#: or lose to one chunk (docs/calibration.md), but a user's own tables may say otherwise
SEARCH_KNOBS = DEFAULT_KNOBS + (Knobs(4, 1, 16.0), Knobs(4, 2, 16.0), Knobs(8, 4, 16.0))


@dataclass
class FitResult:
    params: MachineParams
    objective: float
    simulations: int
    tried: list[tuple[Knobs, float]]


def build(x: np.ndarray, levels: int, knobs: Knobs, npus: int, nodes: int, backend: str) -> MachineParams:
    """Parameters from the search vector: log of (bw0, lat0[, bw1, lat1][, reduction ratio])."""
    bw0, lat0 = math.exp(x[0]), math.exp(x[1])
    ratio = math.exp(min(x[2 * levels], math.log(256.0))) if len(x) > 2 * levels else knobs.reduction_ratio
    lv = [Level(npus // nodes if levels > 1 else npus, bw0, lat0, knobs.topology)]
    if levels > 1:
        lv.append(Level(nodes, math.exp(x[2]), math.exp(x[3]), knobs.topology))
    return MachineParams(tuple(lv), max(1, round(2 * lat0)), knobs.splits, knobs.active_chunks,
                         ratio * bw0 * 2 ** 30 / 1e9, backend)


class Fitter:
    def __init__(self, points: Sequence[Point], npus: int, nodes: int, backend: str, sim: Simulator) -> None:
        self.points = list(points)
        self.npus, self.nodes, self.backend, self.sim = npus, nodes, backend, sim
        self.levels = 2 if nodes > 1 else 1
        self.measured = np.array([p.measured_us for p in self.points])
        # the reduction's cost separates all-reduce and reduce-scatter from all-gather: with one kind
        # of table it only trades against the link bandwidth, so it is fitted only when both are given
        kinds = {p.collective for p in self.points}
        self.fit_reduction = bool(kinds & {"ALL_REDUCE", "REDUCE_SCATTER"}) and bool(kinds - {"ALL_REDUCE", "REDUCE_SCATTER"}) \
            or kinds >= {"ALL_REDUCE", "REDUCE_SCATTER"}

    def machine(self, x: np.ndarray, knobs: Knobs) -> MachineParams:
        return build(x, self.levels, knobs, self.npus, self.nodes, self.backend)

    def simulate(self, x: np.ndarray, knobs: Knobs) -> np.ndarray:
        m = self.machine(x, knobs)
        return np.array([self.sim.time_us(m.with_npus(p.npus, p.nodes), p.collective, p.size_bytes)
                         for p in self.points])

    def start(self, knobs: Knobs) -> np.ndarray:
        rounds = max(1, math.ceil(knobs.splits / knobs.active_chunks))
        first = self.points[0]
        same = [p for p in self.points if (p.collective, p.npus) == (first.collective, first.npus)]
        bw, step_ns = initial_guess(first.collective, first.npus, [p.size_bytes for p in same],
                                    [p.measured_us for p in same], rounds)
        # a step's fixed cost = endpoint delay + two switch hops = 4 × latency (see the module doc)
        lat = max(step_ns / 4, 0.5)
        x = [bw, lat] if self.levels == 1 else [4 * bw, lat / 4, bw, lat * 4]  # between nodes: slower, later
        if self.fit_reduction:
            x.append(knobs.reduction_ratio)
        return np.log(x)

    def refine(self, knobs: Knobs, rounds: int = 5) -> tuple[np.ndarray, float]:
        x = self.start(knobs)
        t = self.simulate(x, knobs)
        best = mean_abs_log(t, self.measured)
        radius, h = 1.5, 0.03
        for _ in range(rounds):
            jac = np.empty((len(t), len(x)))
            for k in range(len(x)):  # a finite difference per parameter, in log space
                xk = x.copy()
                xk[k] += h
                jac[:, k] = (self.simulate(xk, knobs) - t) / h
            d = self._linear_step(t, jac, radius)
            tn = self.simulate(x + d, knobs)
            obj = mean_abs_log(tn, self.measured)
            if obj < best - 1e-5:
                gain = best - obj
                x, t, best = x + d, tn, obj
                if gain < 5e-4:
                    break
            else:
                radius /= 3
                if radius < 0.03:
                    break
        return x, best

    def _linear_step(self, t: np.ndarray, jac: np.ndarray, radius: float) -> np.ndarray:
        """The step that minimises the misfit of the linearised simulator, within ``radius``."""
        meas = self.measured

        def misfit(d: np.ndarray) -> float:
            if np.max(np.abs(d)) > radius:
                return 1e9
            pred = np.maximum(t + jac @ d, 1e-3 * t)
            return float(np.mean(np.abs(np.log(pred / meas))))

        n = jac.shape[1]
        d, _ = nelder_mead(misfit, np.zeros(n), step=0.25 * radius, max_evals=400 * n, tol=1e-10)
        return d

    def run(self, knobs_list: Sequence[Knobs] = DEFAULT_KNOBS) -> FitResult:
        tried = []
        best: tuple[float, np.ndarray, Knobs] | None = None
        for knobs in knobs_list:
            x, obj = self.refine(knobs)
            tried.append((knobs, obj))
            if best is None or obj < best[0] - 2e-3:  # the simpler setting (listed first) wins ties
                best = (obj, x, knobs)
        assert best is not None
        obj, x, knobs = best
        return FitResult(self.machine(x, knobs), obj, self.sim.runs, tried)


def fit_points(points: Sequence[Point], npus: int, nodes: int, backend: str, sim: Simulator,
               knobs: Sequence[Knobs] = DEFAULT_KNOBS) -> FitResult:
    return Fitter(points, npus, nodes, backend, sim).run(knobs)


def simulate_points(params: MachineParams, points: Sequence[Point], sim: Simulator) -> list[float]:
    return [sim.time_us(params.with_npus(p.npus, p.nodes), p.collective, p.size_bytes) for p in points]


