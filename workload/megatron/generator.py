"""Megatron config -> ``PREFIX.{rank}.et``, ``PREFIX.comm_groups.json``, ``PREFIX.network.yml``,
``PREFIX.system.json`` and ``PREFIX.megatron.json`` (what was built: flags, groups, per-stage
compute breakdown by operator, parameters, node counts)."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from network.files import write_atomic
from workload.megatron.cluster import network_yaml, system_json
from workload.megatron.compute import ComputeModel
from workload.megatron.config import MegatronConfig, MegatronConfigError
from workload.megatron.gpus import GpuPreset
from workload.megatron.layout import KINDS, Layout
from workload.megatron.program import StageProgram, build_stage, stage_parameters
from workload.megatron.writer import StageTemplate, write_ranks


@dataclass(frozen=True)
class Cluster:
    gpu: GpuPreset
    gpus_per_node: int = 8
    inter_node_gbps: float = 800.0  #: per node, shared by its GPUs
    topology: str = "switch"
    backend: str | None = None


@dataclass(frozen=True)
class Generated:
    prefix: Path
    ranks: int
    nodes_per_stage: list[int]
    et_bytes: int
    summary: dict[str, Any]
    representatives: list[int] | None = None  # --per-orbit: the ranks whose files were written


def build_programs(cfg: MegatronConfig, cluster: Cluster, model: ComputeModel) -> tuple[Layout, list[StageProgram]]:
    layout = Layout(cfg)
    present = {layout.kind_of[g] for g in layout.members} | {k for (k, _), g in layout._id.items() if g == 0}
    skip = set(KINDS) - present
    programs = [build_stage(cfg, cluster.gpu, model, p, skip) for p in range(cfg.pipeline_model_parallel_size)]
    return layout, programs


#: per-rank files above this many bytes in all are refused without --per-orbit
MAX_ALL_RANKS_BYTES = 8 << 30


def generate(cfg: MegatronConfig, cluster: Cluster, model: ComputeModel, out_prefix: str | os.PathLike, *,
             astra_sim_compatible: bool = False, per_orbit: bool = False) -> Generated:
    prefix = Path(out_prefix)
    layout, programs = build_programs(cfg, cluster, model)
    templates = [StageTemplate(p, astra_sim_compatible) for p in programs]
    parent, name = prefix.parent, prefix.name
    reps = None
    if per_orbit:
        if layout.ep > 1:
            raise MegatronConfigError("--per-orbit", "expert parallelism is carved out of data parallelism, so "
                                      "rotating the data-parallel groups is no symmetry of the layout; write every rank")
        reps = [layout.rank(0, 0, p) for p in range(layout.pp)]
    else:
        per_rank = layout.tp * layout.dp
        estimate = sum(sum(len(x) if isinstance(x, bytes) else len(x[1]) + 8 for x in t.pieces) for t in templates)
        if estimate * per_rank > MAX_ALL_RANKS_BYTES:
            raise MegatronConfigError("-o", (
                f"{layout.ranks} per-rank files would take about {estimate * per_rank / 2**30:.0f} GiB; pass "
                "--per-orbit to write one file per pipeline stage and PREFIX.orbits.json, which the simulator "
                "runs as one rank per stage (the other ranks are images of those under the dp and tp rotations)"))
    et_bytes = write_ranks(prefix, layout, templates, astra_sim_compatible, reps)
    orbits_path = parent / f"{name}.orbits.json"
    if reps is not None:
        write_atomic(orbits_path, json.dumps(layout.orbits_json(reps), separators=(",", ":")) + "\n")
    elif orbits_path.exists():
        orbits_path.unlink()  # an older per-orbit set under the same prefix would take precedence
    write_atomic(parent / f"{name}.comm_groups.json", json.dumps(layout.to_json(), separators=(",", ":")) + "\n")
    write_atomic(parent / f"{name}.network.yml", network_yaml(cluster.gpu, layout.ranks, cluster.gpus_per_node,
                                                              cluster.inter_node_gbps, cluster.topology, cluster.backend))
    write_atomic(parent / f"{name}.system.json", system_json(cluster.gpu, layout.ranks, cluster.gpus_per_node))
    summary = _summary(cfg, cluster, model, layout, programs)
    write_atomic(parent / f"{name}.megatron.json", json.dumps(summary, indent=1) + "\n")
    return Generated(prefix, layout.ranks, [len(p.nodes) for p in programs], et_bytes, summary, reps)


def _summary(cfg: MegatronConfig, cluster: Cluster, model: ComputeModel, layout: Layout,
             programs: list[StageProgram]) -> dict[str, Any]:
    stages = []
    for p in programs:
        dense, expert, emb = stage_parameters(cfg, p.stage)
        ops = sorted(p.compute_ns_by_op.items(), key=lambda kv: -kv[1])
        stages.append({
            "stage": p.stage, "nodes": len(p.nodes),
            "compute_ms": round(sum(p.compute_ns_by_op.values()) / 1e6, 6),
            "compute_ms_by_op": {k: round(v / 1e6, 6) for k, v in ops},
            "comm_bytes_by_type": p.bytes_by_comm,
            "parameters_per_rank": {"dense": dense, "expert": expert, "embedding": emb},
        })
    kinds: dict[str, int] = {}
    for g in layout.members:
        kinds[layout.kind_of[g]] = kinds.get(layout.kind_of[g], 0) + 1
    return {
        "format": "dtsim-megatron/1",
        "megatron": {k: v for k, v in asdict(cfg).items()},
        "micro_batches": cfg.micro_batches, "model_chunks": cfg.model_chunks, "ranks": layout.ranks,
        "rank_order": "rank = t + tp * (d + dp * p)",
        "cluster": {"gpu": cluster.gpu.name, "gpus_per_node": cluster.gpus_per_node,
                    "inter_node_gbps": cluster.inter_node_gbps, "topology": cluster.topology},
        "compute_model": model.to_json(),
        "groups": kinds,
        "stages": stages,
    }
