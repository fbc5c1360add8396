"""GPU presets: dense peak FLOP/s per dtype, HBM bandwidth, NVLink bandwidth, and the
NCCL-fitted network/system knobs our simulator uses for one such node.

Peaks are the vendors' dense (no sparsity) datasheet numbers. ``nvlink_gb_s`` is one direction,
GB = 10^9 bytes. The ``*_yaml`` numbers are what ``python -m network.calibrate`` fitted to
measured nccl-tests all-reduce tables (examples/network/presets/: oci_a100_2x8 for A100,
hgx_h100_8gpu and gcp_a3mega_h100_2x8 for H100), in the network YAML's unit (GB = 2^30 bytes);
the inter-node value is per 1,600 Gbit/s of node bandwidth, the fitted clusters' NICs, and scales
with ``--inter-node-gbps``. GPUs without a fitted node (h200, b200) borrow the H100's knobs,
scaled by their NVLink bandwidth.
"""
from __future__ import annotations

from dataclasses import dataclass

from workload.megatron.config import MegatronConfigError

_T = 1e12


@dataclass(frozen=True)
class GpuPreset:
    name: str
    peak_flops: dict[str, float]  #: dtype -> dense FLOP/s
    hbm_bytes_s: float
    nvlink_gb_s: float  #: per direction, GB = 10^9 B
    intra_bandwidth_yaml: float  #: fitted NVSwitch dimension (GB/s, GB = 2^30 B)
    intra_latency_ns: float
    inter_bandwidth_yaml_per_1600gbps: float  #: fitted scale-out dimension per 1.6 Tbit/s node
    inter_latency_ns: float
    endpoint_delay_ns: int
    local_mem_bw_gb_s: float  #: the system file's reduction bandwidth (fitted)


PRESETS: dict[str, GpuPreset] = {
    # A100-SXM4-80GB; knobs: examples/network/presets/oci_a100_2x8.{yml,json}
    "a100": GpuPreset("a100", {"bf16": 312 * _T, "fp16": 312 * _T, "tf32": 156 * _T, "fp32": 19.5 * _T},
                      2.039e12, 300.0, 493.436, 661.5, 56.388, 8210.7, 1323, 8477.2),
    # A100-SXM4-40GB: same tensor cores, slower HBM2
    "a100-40gb": GpuPreset("a100-40gb", {"bf16": 312 * _T, "fp16": 312 * _T, "tf32": 156 * _T, "fp32": 19.5 * _T},
                           1.555e12, 300.0, 493.436, 661.5, 56.388, 8210.7, 1323, 8477.2),
    # H100-SXM5-80GB; knobs: hgx_h100_8gpu (intra), gcp_a3mega_h100_2x8 (inter)
    "h100": GpuPreset("h100", {"bf16": 989 * _T, "fp16": 989 * _T, "fp8": 1979 * _T, "tf32": 494 * _T, "fp32": 67 * _T},
                      3.35e12, 450.0, 735.566, 1408.6, 301.357, 64432.5, 2817, 12636.9),
    # H200: H100's tensor cores with HBM3e
    "h200": GpuPreset("h200", {"bf16": 989 * _T, "fp16": 989 * _T, "fp8": 1979 * _T, "tf32": 494 * _T, "fp32": 67 * _T},
                      4.8e12, 450.0, 735.566, 1408.6, 301.357, 64432.5, 2817, 12636.9),
    # B200 (HGX): NVLink 5 doubles the per-GPU bandwidth
    "b200": GpuPreset("b200", {"bf16": 2250 * _T, "fp16": 2250 * _T, "fp8": 4500 * _T, "tf32": 1100 * _T, "fp32": 80 * _T},
                      8.0e12, 900.0, 1471.132, 1408.6, 301.357, 64432.5, 2817, 25273.8),
}


def gpu_preset(name: str) -> GpuPreset:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise MegatronConfigError("--gpu", f"unknown GPU {name!r}; known: {', '.join(PRESETS)}") from None
