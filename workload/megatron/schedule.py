"""The order in which one pipeline rank runs forward and backward passes, as Megatron-LM's
``megatron/core/pipeline_parallel/schedules.py`` (core 0.20 development line, commit d98e8a6):

* pp = 1 (``forward_backward_no_pipelining``): forward then backward of each micro-batch in turn;
* 1F1B (``forward_backward_pipelining_without_interleaving``): pp - rank - 1 warm-up forwards,
  then one forward and one backward in turn, then the remaining backwards;
* interleaved (``forward_backward_pipelining_with_interleaving``), v model chunks per rank:
  virtual micro-batches follow ``get_schedule_table`` (groups of pp micro-batches, every chunk of a
  group before the next group); warm-up is (pp - rank - 1) x 2 + (v - 1) x pp virtual
  micro-batches (``get_pp_rank_microbatches``), then 1F1B over virtual micro-batches, a backward
  running its chunks in reverse (``get_model_chunk_id``).
"""
from __future__ import annotations

from typing import NamedTuple


class Pass(NamedTuple):
    kind: str  #: "F" or "B"
    micro_batch: int
    chunk: int  #: model chunk (virtual stage) on this rank


def schedule_table(micro_batches: int, chunks: int, group: int) -> list[tuple[int, int]]:
    """Megatron's ``get_schedule_table``: (micro-batch, chunk) per virtual micro-batch."""
    table: list[tuple[int, int]] = []
    for first in range(0, micro_batches, group):
        last = micro_batches if first + group >= micro_batches else first + group
        table += [(m, c) for c in range(chunks) for m in range(first, last)]
    return table


def warmup_count(pp: int, rank: int, chunks: int, total: int, group: int) -> int:
    if pp == 1:
        return 0
    w = pp - rank - 1 if chunks == 1 else (pp - rank - 1) * 2 + (chunks - 1) * group
    return min(w, total)


def pipeline_schedule(pp: int, rank: int, micro_batches: int, chunks: int = 1) -> list[Pass]:
    """Every pass the pipeline rank runs in one iteration, in Megatron's order."""
    group = pp  # microbatch_group_size_per_vp_stage defaults to pp
    table = schedule_table(micro_batches, chunks, group)
    total = len(table)

    def fwd(k: int) -> Pass:
        m, c = table[k]
        return Pass("F", m, c)

    def bwd(k: int) -> Pass:
        m, c = table[k]
        return Pass("B", m, chunks - 1 - c)

    if pp == 1:
        return [p for k in range(total) for p in (fwd(k), bwd(k))]
    warm = warmup_count(pp, rank, chunks, total, group)
    order = [fwd(k) for k in range(warm)]
    for i in range(total - warm):
        order += [fwd(warm + i), bwd(i)]
    order += [bwd(k) for k in range(total - warm, total)]
    return order
