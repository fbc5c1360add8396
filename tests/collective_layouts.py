"""A drawn layout's per-rank ET files, for the batchers' property tests (test_ring_batch.py,
test_phase_batch.py): per rank, compute before each of its collectives, the collectives in order
(or independent of each other), optionally one point-to-point message, and a tail."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import strategies as st

from workload.builder import GraphBuilder


def write_layout(tmp: Path, npus: int, groups: dict[int, list[int]], colls: list[tuple[str, int, int | None]],
                 comps: list[list[int]], p2p: tuple[int, int, int] | None, independent: bool) -> Path:
    """``colls``: (type, bytes, group id or None) each; ``comps[r][i]``: rank r's compute before
    collective i (0: none); ``p2p``: (src, dst, bytes) after the collectives. Returns the prefix."""
    for r in range(npus):
        b = GraphBuilder()
        prev: list[int] = []
        for i, ((ct, size, gid), c) in enumerate(zip(colls, comps[r])):
            if gid is not None and r not in groups[gid]:
                continue
            dep = b.comp(f"c{i}", c, deps=prev) if c else None
            deps = [dep] if dep is not None else ([] if independent else prev)
            prev = [b.collective(f"k{i}", ct, size, deps=deps, pg_name=None if gid is None else str(gid))]
        if p2p is not None and r in p2p[:2]:
            a, d, size = p2p
            prev = [(b.send if r == a else b.recv)("p", a, d, size, 7, deps=prev)]
        b.comp("tail", 1000 + r, deps=prev)  # no rank's file is empty
        b.write(tmp / "w", r)
    if groups:
        (tmp / "groups.json").write_text(json.dumps({str(k): v for k, v in groups.items()}))
    return tmp / "w"


@st.composite
def traffic_and_knobs(draw, npus: int, groups: dict[int, list[int]], coll_types: list[str],
                      sizes: list[int], splits: list[int]):
    """The drawn part of a layout every batcher test shares: 1-4 collectives (on the world or a
    group), per-rank compute before each (so that ranks start their phases at different times, or,
    drawn from a few values, at the same time: same-tick order), maybe one point-to-point message,
    and the system file's scheduling knobs. ``sizes``: byte counts drawn often (equal sizes: ties)."""
    colls = []
    for _ in range(draw(st.integers(1, 4))):
        gid = draw(st.sampled_from([None] + list(groups)))
        size = st.one_of(st.integers(1, 3 << 20), st.sampled_from(sizes))
        colls.append((draw(st.sampled_from(coll_types)), draw(size), gid))
    comp = st.one_of(st.integers(0, 40_000), st.sampled_from([0, 2_000, 20_000]))
    comps = [[draw(comp) for _ in colls] for _ in range(npus)]
    p2p = None
    if draw(st.booleans()):
        a, b = draw(st.permutations(range(npus)))[:2]
        p2p = (a, b, draw(st.integers(1, 1 << 16)))
    knobs = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 1, 10, 37])),
        "active-chunks-per-dimension": draw(st.sampled_from([1, 2, 4])),
        "preferred-dataset-splits": draw(st.sampled_from(splits)),
        "collective-optimization": draw(st.sampled_from(["localBWAware", "baseline"])),
        "local-mem-bw": draw(st.sampled_from([1600, 50, 7])),
    }
    return colls, comps, p2p, knobs
