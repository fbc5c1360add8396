"""Interval arithmetic spelled out, to check system.report's breakdown (one sweep per union)
and the traces' figures against: the union as a list, its length, two unions' overlap."""
from __future__ import annotations

from typing import Iterable


def union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def length(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in iv)


def intersection_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
