"""Per-operator compute time: FLOPs and bytes from shapes, then a roofline with a shape-dependent
GEMM efficiency.

    time = overhead + max(FLOPs / (peak x eff(M, N, K)), bytes / (HBM x mem_eff))   per kernel
    a run of kernels between two synchronising communications: max(sum of their times, kernels x host_ns)
    eff(M, N, K) = gemm_eff x  m/(m + d) x n/(n + d) x k/(k + d)  for (m, n, k) = (M, N, K),  d = gemm_half_dim

A GEMM reaches ``gemm_eff`` of peak when all three dimensions are large; a dimension of size d
halves that (tiles run partly empty, waves do not fill the GPU). ``overhead_ns`` is the gap a kernel
costs on the GPU beyond its own work (tail, launch latency). ``host_ns`` is what the framework's
Python and launch path spend per kernel on the CPU: the CPU runs ahead of the GPU, so a run of
kernels takes the longer of its GPU time and its host time (small models are host-bound: vTrain's
single-node iterations take ~3.5 ms per layer and micro-batch however small the GEMMs get). The
five numbers are calibratable (docs/megatron.md):
the defaults are fitted to vTrain's single-node A100 iterations (dtsim_tools/validate/fit.py).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from network.errors import InputError
from workload.megatron.gpus import GpuPreset


@dataclass(frozen=True, slots=True)
class Op:
    """One GPU kernel (or a fused run of them): its name, work and memory traffic per rank."""

    name: str
    flops: float
    bytes: float
    gemm: tuple[int, int, int, int] | None = None  #: (batch, M, N, K) for a (batched) GEMM
    kernels: int = 1


def gemm(name: str, m: int, n: int, k: int, elem_bytes: int = 2, batch: int = 1) -> Op:
    """C[m,n] = A[m,k] @ B[k,n], ``batch`` times; reads A and B, writes C."""
    return Op(name, 2.0 * batch * m * n * k, float(elem_bytes * batch * (m * k + k * n + m * n)), (batch, m, n, k))


def memory(name: str, nbytes: float, flops: float = 0.0, kernels: int = 1) -> Op:
    return Op(name, flops, float(nbytes), None, kernels)


@dataclass(frozen=True)
class ComputeModel:
    """The calibratable knobs of the per-operator time (dimensionless except ``overhead_ns``)."""

    gemm_eff: float = 0.80
    gemm_half_dim: float = 128.0
    mem_eff: float = 0.80
    overhead_ns: float = 4000.0
    host_ns: float = 0.0
    dtype: str = "bf16"
    source: str = "default"

    def __post_init__(self) -> None:
        for name in ("gemm_eff", "mem_eff"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise InputError(None, f"compute model {name}", f"expected a number in (0, 1], got {v!r}")
        for name in ("gemm_half_dim", "overhead_ns", "host_ns"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v < 0:
                raise InputError(None, f"compute model {name}", f"expected a number >= 0, got {v!r}")

    def efficiency(self, m: int, n: int, k: int) -> float:
        d = self.gemm_half_dim
        return self.gemm_eff * (m / (m + d)) * (n / (n + d)) * (k / (k + d))

    def time_ns(self, op: Op, gpu: GpuPreset) -> float:
        peak = gpu.peak_flops.get(self.dtype)
        if peak is None:
            raise InputError(None, "--dtype", f"{gpu.name} has no {self.dtype} peak; known: {', '.join(gpu.peak_flops)}")
        mem_s = op.bytes / (gpu.hbm_bytes_s * self.mem_eff)
        if op.gemm is not None:
            _, m, n, k = op.gemm
            flop_s = op.flops / (peak * self.efficiency(m, n, k))
        else:
            flop_s = op.flops / peak
        return self.overhead_ns * op.kernels + 1e9 * max(mem_s, flop_s)

    def run_ns(self, gpu_ns: float, kernels: int) -> float:
        """A run of kernels with no synchronisation inside: GPU- or host-bound."""
        return max(gpu_ns, kernels * self.host_ns)

    def with_values(self, **kw: float) -> "ComputeModel":
        return replace(self, **kw)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "ComputeModel":
        p = Path(path)
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise InputError(p, "", f"expected a compute-model JSON ({', '.join(cls.__dataclass_fields__)}): {e}") from None
        if not isinstance(data, dict):
            raise InputError(p, "", "expected a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise InputError(p, f"key {sorted(unknown)[0]!r}", f"unknown; expected {', '.join(cls.__dataclass_fields__)}")
        try:
            return cls(**{**data, "source": str(p)})
        except InputError as e:
            raise InputError(p, e.where, e.problem) from None
