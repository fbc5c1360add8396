"""TrioSim trace → one Chakra ET per rank, plus the comm groups and a layout description.

Files written for ``out_prefix`` = ``OUT/NAME``:

* ``OUT/NAME.{rank}.et``: GlobalMetadata version 0.0.4, then the rank's nodes (rank_graph.py);
* ``OUT/NAME.comm_groups.json``: ASTRA-sim's ``--comm-group-configuration`` (``{"1": [0, 1], ...}``);
* ``OUT/NAME.layout.json``: the flags, bsRatio, rank → (dp, tp, pp), groups, stages, buckets and
  per-rank node counts and compute time.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from chakra_proto import et_def_pb2 as pb
from chakra_proto.attrs import attr_string
from chakra_proto.io import write_et
from network.files import write_atomic
from workload.triosim.anatomy import Anatomy, analyse
from workload.triosim.layout import CommGroups, Layout
from workload.triosim.program import ProgramBuilder
from workload.triosim.rank_graph import RankGraph, round_half_up
from workload.triosim.scaling import ScaledTrace, bs_ratio
from workload.triosim.stages import plan_stages
from workload.triosim.trace import Trace, load_trace

ET_VERSION = "0.0.4"
RANK_ORDER = "rank = tp_index + tp * (dp_index + dp * pp_index)"


@dataclass(frozen=True)
class ConversionResult:
    """What ``convert_triosim`` wrote. ``prefix`` is what ``--workload`` takes."""

    prefix: Path
    ranks: int
    comm_groups_path: Path
    layout_path: Path
    summary: dict[str, Any] = field(default_factory=dict)

    def et_path(self, rank: int) -> Path:
        return self.prefix.parent / f"{self.prefix.name}.{rank}.et"


@dataclass
class Conversion:
    """The converted workload in memory, before writing."""

    layout: Layout
    groups: CommGroups
    graphs: list[RankGraph]
    summary: dict[str, Any]


def convert_triosim(
    trace_dir: str | os.PathLike, *, batch_size: int | None, batch_size_sim: int | None = None,
    dp: int = 1, tp: int = 1, pp: int = 1, micro_batches: int = 1, dp_mode: str = "sync",
    bucket_mb: float = 25.0, pp_schedule: str = "gpipe", pp_balance: str = "time",
    scale_weights: bool = True, astra_sim_compatible: bool = False, out_prefix: str | os.PathLike,
) -> ConversionResult:
    """Convert the TrioSim trace in ``trace_dir`` and write ``out_prefix.{rank}.et`` and friends.

    Raises TrioSimTraceError (bad CSV) or LayoutError (flags that do not fit); both are InputError.
    """
    layout = Layout(batch_size, batch_size_sim, dp, tp, pp, micro_batches, dp_mode, bucket_mb,
                    pp_schedule, pp_balance, scale_weights, astra_sim_compatible)
    return write_conversion(build_conversion(load_trace(trace_dir), layout), out_prefix)


def build_conversion(trace: Trace, layout: Layout) -> Conversion:
    anatomy = analyse(trace)
    ratio = bs_ratio(layout.batch_size, layout.batch_size_sim)
    scaled = ScaledTrace(trace, ratio, layout.scale_weights, anatomy.parameter_ids)
    stages = plan_stages(anatomy, scaled, layout.pp, layout.pp_balance)
    groups = CommGroups.of(layout)
    builder = ProgramBuilder(anatomy, scaled, layout, stages, groups)
    graphs = [builder.build(r) for r in range(layout.ranks)]
    summary = _summary(trace, anatomy, scaled, layout, groups, builder, graphs)
    return Conversion(layout, groups, graphs, summary)


def write_conversion(conv: Conversion, out_prefix: str | os.PathLike) -> ConversionResult:
    prefix = Path(out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for g in conv.graphs:
        meta = pb.GlobalMetadata(version=ET_VERSION)
        if not conv.layout.astra_sim_compatible:  # nothing ASTRA-sim does not read
            meta.attr.extend([attr_string("generator", "dtsim workload.triosim"),
                              attr_string("rank", str(g.rank))])
        write_et(prefix.parent / f"{prefix.name}.{g.rank}.et", meta, g.nodes)
    groups_path = prefix.parent / f"{prefix.name}.comm_groups.json"
    write_atomic(groups_path, json.dumps(conv.groups.to_json(), indent=1) + "\n")
    layout_path = prefix.parent / f"{prefix.name}.layout.json"
    write_atomic(layout_path, json.dumps(conv.summary, indent=1) + "\n")
    return ConversionResult(prefix, conv.layout.ranks, groups_path, layout_path, conv.summary)


def _summary(trace: Trace, anatomy: Anatomy, scaled: ScaledTrace, layout: Layout, groups: CommGroups,
             builder: ProgramBuilder, graphs: list[RankGraph]) -> dict[str, Any]:
    ratio = scaled.bs_ratio
    total_ns = sum((scaled.time_ns(op) for op in trace.operators), Fraction(0))
    coords = [layout.coordinates(g.rank) for g in graphs]
    return {
        "format": "dtsim-triosim-layout/1",
        "trace_dir": str(trace.directory),
        "flags": layout.as_dict(),
        "bs_ratio": str(ratio),
        "ranks": layout.ranks,
        "rank_order": RANK_ORDER,
        "coordinates": [{"rank": g.rank, "dp": d, "tp": t, "pp": p} for g, (d, t, p) in zip(graphs, coords)],
        "comm_groups": {str(gid): {"kind": groups.kinds[gid], "ranks": r} for gid, r in groups.members.items()},
        "single_gpu_time_ns": round_half_up(total_ns),
        "gradients": {
            "rule": anatomy.parameter_rule,
            "tensors": len(anatomy.parameters),
            "trace_bytes": anatomy.gradient_bytes(),
            "scaled_bytes": sum(scaled.tensor_bytes(p.tensor_id) for p in anatomy.parameters),
        },
        "stages": [_stage_summary(builder, st) for st in builder.stages],
        "per_rank": [
            {"rank": g.rank, "nodes": len(g.nodes), **g.counts, "compute_ns": g.compute_ns}
            for g in graphs
        ],
    }


def _stage_summary(builder: ProgramBuilder, st) -> dict[str, Any]:
    out: dict[str, Any] = {
        "stage": st.index,
        "forward_ops": [op.id for op in st.forward],
        "backward_ops": [op.id for op in st.backward],
        "optimizer_ops": [[op.id, str(share)] for op, share in st.optimizer],
        "parameters": len(st.parameters),
        "gradient_bytes_per_rank": sum(builder.gradient_bytes(i) for i in st.parameters),
    }
    if st.index < len(builder.stages) - 1:
        out["activation_bytes_per_micro_batch"] = builder.activation_bytes(st.index)
    if builder.buckets is not None:
        params = builder.anatomy.parameters
        out["ddp_buckets"] = [
            {"bytes": b.size_bytes, "tensors": [params[i].tensor_id for i in b.params],
             "ready_after_op": None if b.ready is None else st.backward[b.ready].id}
            for b in builder.buckets[st.index]
        ]
    return out
