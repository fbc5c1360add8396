"""workload.loader reads ``<prefix>.<rank>.et`` names without the re module: the same answers as the
regular expressions it replaced, on names built to sit on every edge of them."""
from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from workload.loader import rank_of, split_rank_file

RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")
PIECES = st.sampled_from(["a", "b", ".", "..", "et", ".et", "1", "07", "٣", "²", "x", "\n", " ", "-", "e", "t"])
NAMES = st.lists(PIECES, max_size=9).map("".join)


def _expected_split(name: str) -> tuple[str, int] | None:
    m = RANK_FILE.match(name)
    return (m["prefix"], int(m["rank"])) if m else None


def _expected_rank(name: str, prefix: str) -> int | None:
    m = re.compile(re.escape(prefix) + r"\.(\d+)\.et$").match(name)
    return int(m[1]) if m else None


@settings(max_examples=3000, deadline=None)
@given(NAMES)
def test_split_rank_file_is_the_regular_expression(name: str) -> None:
    assert split_rank_file(name) == _expected_split(name)


@settings(max_examples=3000, deadline=None)
@given(NAMES, NAMES)
def test_rank_of_is_the_regular_expression(prefix: str, tail: str) -> None:
    for name in (prefix + tail, tail):
        assert rank_of(name, prefix) == _expected_rank(name, prefix)


def test_named_cases() -> None:
    assert split_rank_file("dp.12.et") == ("dp", 12) and split_rank_file("a.b.3.et") == ("a.b", 3)
    assert split_rank_file("a.3.et\n") == ("a", 3) and split_rank_file("a.3.et\n\n") is None
    assert split_rank_file(".3.et") is None and split_rank_file("a..et") is None and split_rank_file("a.3.pb") is None
    assert rank_of("ar.5.et", "ar") == 5 and rank_of("ar.5.et", "a") is None and rank_of("ar.x5.et", "ar") is None
