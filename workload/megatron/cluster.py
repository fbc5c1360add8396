"""The cluster files beside a generated workload: ``PREFIX.network.yml`` and ``PREFIX.system.json``.

* ``switch`` (default): ASTRA-sim's analytical format, [Switch(gpus-per-node), Switch(nodes)]
  (one dimension inside a node), bandwidths and latencies fitted to nccl-tests (gpus.py); the
  inter-node bandwidth scales with ``--inter-node-gbps`` (per node, shared by its GPUs).
* ``fat-tree``: a rail-optimized two-tier fat-tree (``topology-generator: rail-optimized``: every
  server's GPUs on one NVSwitch; GPU k of every server on leaf (rail) switch k, every leaf linked to
  every spine, non-blocking) at datasheet rates, NVLink per direction and the NIC share of
  ``--inter-node-gbps``; the logical dimensions stay [gpus-per-node, nodes]. Run it congestion-aware.
* system: ring in every dimension, one chunk per collective, ``localBWAware``, the preset's
  endpoint delay and reduction bandwidth (examples/network/presets/*.json).
"""
from __future__ import annotations

import json

from workload.megatron.config import MegatronConfigError
from workload.megatron.gpus import GpuPreset

_FITTED_NODE_GBPS = 1600.0


def logical_dims(ranks: int, gpus_per_node: int) -> list[int]:
    if ranks <= gpus_per_node:
        return [ranks]
    if ranks % gpus_per_node:
        raise MegatronConfigError("--gpus-per-node", f"{ranks} GPUs (tp x pp x dp) do not fill nodes of {gpus_per_node}")
    return [gpus_per_node, ranks // gpus_per_node]


def network_yaml(gpu: GpuPreset, ranks: int, gpus_per_node: int, inter_node_gbps: float,
                 topology: str = "switch", backend: str | None = None) -> str:
    dims = logical_dims(ranks, gpus_per_node)
    head = (f"# {ranks} x {gpu.name}: {gpus_per_node} per node (NVSwitch), {inter_node_gbps:g} Gbit/s per node between "
            "nodes; written by python -m workload.generate megatron\n")
    if topology == "fat-tree":
        servers = max(1, ranks // gpus_per_node)
        nic_gbps = inter_node_gbps / gpus_per_node
        spec = (f"{{ shape: rail-optimized, servers: {servers}, gpus-per-server: {min(ranks, gpus_per_node)}, "
                f"bandwidth: {nic_gbps:g}Gbps, latency: 0.001ms, scale-up-bandwidth: {gpu.nvlink_gb_s * 8:g}Gbps, "
                f"scale-up-latency: 0.0005ms, spines: {min(ranks, gpus_per_node) if servers > 1 else 0} }}")
        return (head + f"topology-generator: {spec}\nnpus_count: {json.dumps(dims)}\n"
                f"backend: {backend or 'congestion-aware'}\n")
    if topology != "switch":
        raise MegatronConfigError("--topology", f"expected switch or fat-tree, got {topology!r}")
    bw = [gpu.intra_bandwidth_yaml]
    lat = [gpu.intra_latency_ns]
    if len(dims) == 2:
        bw.append(round(gpu.inter_bandwidth_yaml_per_1600gbps * inter_node_gbps / _FITTED_NODE_GBPS, 6))
        lat.append(gpu.inter_latency_ns)
    text = (head + f"topology: {json.dumps(['Switch'] * len(dims))}\nnpus_count: {json.dumps(dims)}\n"
            f"bandwidth: {json.dumps(bw)}\nlatency: {json.dumps(lat)}\n")
    return text + (f"backend: {backend}\n" if backend else "")


def system_json(gpu: GpuPreset, ranks: int, gpus_per_node: int) -> str:
    n = len(logical_dims(ranks, gpus_per_node))
    impl = ["ring"] * n
    cfg = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": gpu.endpoint_delay_ns,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1,
        "all-reduce-implementation": impl,
        "all-gather-implementation": impl,
        "reduce-scatter-implementation": impl,
        "all-to-all-implementation": impl,
        "collective-optimization": "localBWAware",
        "local-mem-bw": gpu.local_mem_bw_gb_s,
    }
    return json.dumps(cfg, indent=2) + "\n"
