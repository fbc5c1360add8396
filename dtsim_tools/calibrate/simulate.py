"""Simulated nccl-tests times: one collective per run, each rank the same one-node Chakra graph.

Sizes follow nccl-tests' convention and are mapped to Chakra's ``comm_size``: an all-gather's
nccl-tests size is the gathered output, Chakra's the per-rank input (semantics §9.3); the others
agree. Runs are cached by (machine, collective, size), so a fit never simulates a point twice.
"""
from __future__ import annotations

import shutil
import tempfile
import warnings
from pathlib import Path

from network.calibrate.params import MachineParams
from network.config import NetworkConfig
from system.config import SystemConfig
from system.simulation import run_simulation
from workload.builder import write_collective_microbenchmark


def chakra_size(collective: str, nccl_size: int, npus: int) -> int:
    if collective == "ALL_GATHER":
        return max(1, nccl_size // npus)
    return nccl_size


class Simulator:
    """Runs single-collective simulations for a calibration; ``close`` removes its workloads."""

    def __init__(self, max_wall_s: float | None = 120.0) -> None:
        self._dir: Path | None = None
        self._workloads: dict[tuple[str, int], str] = {}
        self._cache: dict[tuple, int] = {}
        self.max_wall_s = max_wall_s
        self.runs = 0

    def time_us(self, params: MachineParams, collective: str, nccl_size: int) -> float:
        key = (params, collective, nccl_size)
        ns = self._cache.get(key)
        if ns is None:
            ns = self._cache[key] = self._run(params, collective, chakra_size(collective, nccl_size, params.npus))
        return ns / 1e3

    def _run(self, params: MachineParams, collective: str, size: int) -> int:
        net = NetworkConfig.from_dict(params.network_dict())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            system = SystemConfig.from_dict(params.system_dict())
        result = run_simulation(self._workload(collective, size), net, system, backend=params.backend,
                                max_wall_s=self.max_wall_s)
        self.runs += 1
        return result.end_ns

    def _workload(self, collective: str, size: int) -> str:
        key = (collective, size)
        if key not in self._workloads:
            if self._dir is None:
                self._dir = Path(tempfile.mkdtemp(prefix="dtsim-calibrate-"))
            # one shared graph serves every rank, whatever the NPU count
            self._workloads[key] = write_collective_microbenchmark(
                self._dir / f"{collective.lower()}_{size}", 1, collective, size, shared=True)
        return self._workloads[key]

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._workloads.clear()

    def __enter__(self) -> "Simulator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
