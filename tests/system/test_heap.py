"""A run keeps the cyclic collector off and gives the caller's collector state back."""
from __future__ import annotations

import gc

import pytest

from system.heap import fewer_collections


@fewer_collections
def _run(seen: list, fail: bool) -> int:
    seen.append(gc.isenabled())
    if fail:
        raise ValueError("boom")
    return 7


def test_collector_off_inside_and_back_on_after_even_on_error() -> None:
    assert gc.isenabled()
    seen: list[bool] = []
    assert _run(seen, False) == 7
    assert seen == [False] and gc.isenabled()
    with pytest.raises(ValueError):
        _run(seen, True)
    assert seen == [False, False] and gc.isenabled()


def test_a_caller_that_turned_it_off_keeps_it_off() -> None:
    gc.disable()
    try:
        seen: list[bool] = []
        _run(seen, False)
        assert seen == [False] and not gc.isenabled()
    finally:
        gc.enable()

