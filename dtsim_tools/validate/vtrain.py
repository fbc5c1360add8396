"""vTrain's measured Megatron-DeepSpeed iterations (VIA-Research/vTrain, data/ground_truth_*.csv)
as Megatron configs, and our prediction of each.

vTrain's validation setup (its config/validation/*.json): A100 GPUs, 8 per node, 800 Gbit/s per
node between nodes, 1F1B, full activation recompute, no gradient bucketing (one data-parallel
all-reduce after the pipeline flush), GPT with vocabulary 50257 (GPT-2's BPE).
"""
from __future__ import annotations

import csv
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from network.errors import InputError
from workload.megatron import Cluster, ComputeModel, MegatronConfig, generate, gpu_preset

_SINGLE = ["# GPUs", "global batch", "micro batch", "hidden size", "attention heads", "# layers", "sequence length",
           "tensor parallelism", "data parallelism", "pipeline parallelism", "iteration time (ms)"]
_MULTI = ["Parameters (billion)"] + _SINGLE
VOCAB = 50257


@dataclass(frozen=True)
class Row:
    line: int
    gpus: int
    config: MegatronConfig
    measured_ms: float

    def label(self) -> str:
        c = self.config
        return (f"L{c.num_layers} h{c.hidden_size} a{c.num_attention_heads} s{c.seq_length} gbs{c.global_batch_size} "
                f"mbs{c.micro_batch_size} tp{c.tensor_model_parallel_size} dp{c.data_parallel_size} "
                f"pp{c.pipeline_model_parallel_size}")


def read_rows(path: str | os.PathLike) -> list[Row]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(p, "", f"cannot read vTrain's ground-truth CSV: {e}") from None
    lines = list(csv.reader(text.splitlines()))
    if not lines:
        raise InputError(p, "", "empty file; expected vTrain's ground_truth_single.csv or ground_truth_multi.csv")
    header = [h.strip() for h in lines[0]]
    if header not in (_SINGLE, _MULTI):
        raise InputError(p, "line 1", f"expected vTrain's header ({', '.join(_SINGLE)}, optionally after "
                                      f"'{_MULTI[0]}'), got {', '.join(header)}")
    off = 1 if header == _MULTI else 0
    rows = []
    for i, rec in enumerate(lines[1:], start=2):
        if not rec:
            continue
        try:
            v = [int(x) for x in rec[off:off + 10]]
            ms = float(rec[off + 10])
        except (ValueError, IndexError):
            raise InputError(p, f"line {i}", f"expected {len(header)} numbers, got {rec}") from None
        gpus, gbs, mbs, h, heads, layers, seq, tp, dp, pp = v
        if gpus != tp * dp * pp:
            raise InputError(p, f"line {i}", f"# GPUs {gpus} is not tp x dp x pp = {tp * dp * pp}")
        try:
            cfg = MegatronConfig(num_layers=layers, hidden_size=h, num_attention_heads=heads, seq_length=seq,
                                 global_batch_size=gbs, micro_batch_size=mbs, tensor_model_parallel_size=tp,
                                 pipeline_model_parallel_size=pp, data_parallel_size=dp, vocab_size=VOCAB,
                                 recompute_granularity="full")
        except InputError as e:  # the row, not a flag, is what is wrong
            raise InputError(p, f"line {i}", f"{e.where}: {e.problem}") from None
        rows.append(Row(i, gpus, cfg, ms))
    return rows


def predict_ms(row: Row, model: ComputeModel, gpu: str = "a100", workdir: str | os.PathLike | None = None) -> float:
    """Generate the row's workload and simulate it; the iteration time is the last rank's finish."""
    from system.simulation import run_simulation  # the tool's composition root: every layer

    cluster = Cluster(gpu_preset(gpu), 8, 800.0)
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        prefix = Path(d) / "w"
        generate(row.config, cluster, model, prefix)
        res = run_simulation(prefix, f"{prefix}.network.yml", f"{prefix}.system.json")
    return res.end_ns / 1e6
