"""Fit the compute model's knobs to measured iterations (vTrain's single-node set): minimise the
mean absolute relative error of the simulated iteration times, by Nelder-Mead on log-scaled knobs.

Only ``ground_truth_single.csv`` may be fitted on; the multi-node set is the judge and the fitter
refuses it (cli.py).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from dtsim_tools.calibrate.compute import model_vector, vector_model
from network.calibrate.model import nelder_mead
from workload.megatron import ComputeModel

KNOBS = ("gemm_eff", "gemm_half_dim", "overhead_ns", "host_ns")
_BOUNDS = {"gemm_eff": (0.2, 1.0), "gemm_half_dim": (1.0, 4096.0), "overhead_ns": (0.0, 50e3), "host_ns": (0.0, 500e3)}


def _to_model(x: np.ndarray, base: ComputeModel) -> ComputeModel:
    return vector_model(x, base, KNOBS, _BOUNDS, "fitted")


def fit(rows: Sequence, predict: Callable[[object, ComputeModel], float], base: ComputeModel,
        iters: int = 60, log: Callable[[str], None] | None = None) -> tuple[ComputeModel, float]:
    """The knobs minimising the mean |predicted / measured - 1| over ``rows``."""
    def objective(x: np.ndarray) -> float:
        m = _to_model(x, base)
        err = float(np.mean([abs(predict(r, m) / r.measured_ms - 1) for r in rows]))
        if log:
            log(f"  {', '.join(f'{k}={getattr(m, k):.4g}' for k in KNOBS)}: MAE {100 * err:.2f} %")
        return err

    # about two simulator sweeps per simplex step: ``iters`` steps after the first simplex
    x, err = nelder_mead(objective, model_vector(base, KNOBS), step=0.4, max_evals=len(KNOBS) + 1 + 2 * iters, tol=1e-4)
    return _to_model(x, base), err
