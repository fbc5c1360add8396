"""Pipeline schedules in Megatron's order (workload/megatron/schedule.py)."""
from __future__ import annotations

import pytest

from workload.megatron.schedule import pipeline_schedule, schedule_table, warmup_count


@pytest.mark.parametrize("pp,m,chunks", [(1, 4, 1), (2, 4, 1), (4, 8, 1), (4, 3, 1), (2, 4, 2), (4, 8, 2), (4, 8, 3)])
def test_every_pass_once_and_backward_after_its_forward(pp: int, m: int, chunks: int) -> None:
    for rank in range(pp):
        order = pipeline_schedule(pp, rank, m, chunks)
        assert sorted(order) == sorted({(k, mb, c) for k in "FB" for mb in range(m) for c in range(chunks)})
        pos = {p: i for i, p in enumerate(order)}
        for mb in range(m):
            for c in range(chunks):
                assert pos[("F", mb, c)] < pos[("B", mb, c)]


def test_1f1b_warmup_is_pp_minus_rank_minus_one() -> None:
    order = pipeline_schedule(4, 1, 8)
    assert [p.kind for p in order[:4]] == ["F", "F", "F", "B"]  # 2 warm-up forwards, then 1F1B
    assert [p.kind for p in pipeline_schedule(4, 3, 8)[:2]] == ["F", "B"]  # the last stage starts 1F1B at once
    assert [p.kind for p in pipeline_schedule(4, 0, 2)] == ["F", "F", "B", "B"]  # fewer micro-batches than warm-up


def test_interleaved_table_and_warmup_follow_megatron() -> None:
    # get_schedule_table(4, 2, 2): groups of 2 micro-batches, every chunk of a group first
    assert schedule_table(4, 2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    assert warmup_count(2, 0, 2, 8, 2) == (2 - 0 - 1) * 2 + (2 - 1) * 2
    order = pipeline_schedule(2, 1, 4, 2)
    assert order[0] == ("F", 0, 0)
    first_b = next(p for p in order if p.kind == "B")
    assert first_b == ("B", 0, 1)  # a backward runs its chunks in reverse: the last chunk first
