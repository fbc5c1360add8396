"""A run makes young collections rarer and gives the caller's collector settings back."""
from __future__ import annotations

import gc

import pytest

from system.heap import fewer_collections


def test_thresholds_raised_inside_and_restored_after_even_on_error() -> None:
    before = gc.get_threshold()
    seen = []

    @fewer_collections
    def run(fail: bool) -> int:
        seen.append(gc.get_threshold())
        if fail:
            raise ValueError("boom")
        return 7

    assert run(False) == 7
    assert seen[0][0] >= 100_000 and seen[0][1:] == before[1:]
    assert gc.get_threshold() == before
    with pytest.raises(ValueError):
        run(True)
    assert gc.get_threshold() == before
