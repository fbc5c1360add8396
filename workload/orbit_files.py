"""Workloads written per orbit: one ET file per representative rank and ``PREFIX.orbits.json``.

A layout of 131,072 GPUs has 131,072 graphs that differ only in their peers and groups; written
out they are tens of GB. ``python -m workload.generate megatron --per-orbit`` writes instead the
files of the representatives (one per pipeline stage) and declares the rest::

    {"format": "dtsim-orbits/1", "ranks": N, "representatives": [r, ...],
     "rotate": [[group id, ...], ...]}

Each list under ``rotate`` is a family of communicator groups (``PREFIX.comm_groups.json``) of one
size that partition the ranks; rotating every group of a family by one place is a permutation
of the ranks, and the families' rotations generate a group G. Rank x = g(r), for r the
representative of its G-orbit, runs r's graph with every peer and every group mapped by g. The
simulator proves the rest as for any orbit run (groups onto groups, algorithms, the network's
symmetry: system/shortcuts/orbits.py ``prove_declared``) and simulates the representatives only;
where that proof or the run fails there is no per-rank file to fall back on, so it says so (exit 2).
"""
from __future__ import annotations

import os

from network.files import is_file, path_str
from network.records import record
from workload.errors import WorkloadError
from workload.graph import Graph, load_graph
from workload.loader import orbit_declaration_path

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

FORMAT = "dtsim-orbits/1"


@record
class OrbitDeclaration:
    path: str  # as pathlib names it (network/files.py: a run does not import pathlib)
    ranks: int
    representatives: list[int]
    rotate: list[list[int]]  # families, as communicator-group ids


def find_declaration(spec: str | os.PathLike, npus_count: int) -> OrbitDeclaration | None:
    """``PREFIX.orbits.json`` beside a workload prefix, read and checked; None if there is none."""
    path = orbit_declaration_path(spec)
    if not is_file(path):
        return None
    import json  # a declaration is there: only then

    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WorkloadError(path, "", f"not a JSON orbit declaration: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise WorkloadError(path, "key 'format'", f"expected {FORMAT!r}")
    ranks = data.get("ranks")
    if ranks != npus_count:
        raise WorkloadError(path, "key 'ranks'", f"the network has {npus_count} NPUs but the declaration {ranks!r} ranks")
    reps = data.get("representatives")
    if not isinstance(reps, list) or not reps or not all(isinstance(r, int) and 0 <= r < ranks for r in reps) \
            or len(set(reps)) != len(reps):
        raise WorkloadError(path, "key 'representatives'", f"expected a list of distinct ranks in 0..{ranks - 1}")
    rotate = data.get("rotate")
    if not isinstance(rotate, list) or not all(isinstance(f, list) and f and all(isinstance(g, int) for g in f)
                                               for f in rotate):
        raise WorkloadError(path, "key 'rotate'", "expected a list of families, each a list of communicator-group ids")
    return OrbitDeclaration(path, ranks, sorted(reps), rotate)


def families(decl: OrbitDeclaration, groups: dict[int, list[int]]) -> list[list[list[int]]]:
    """The declared families as member lists; each must be groups of one size that partition the ranks."""
    out = []
    for i, family in enumerate(decl.rotate):
        missing = [g for g in family if g not in groups]
        if missing:
            raise WorkloadError(decl.path, f"key 'rotate', family {i}",
                                f"group {missing[0]} is not in the communicator-group configuration")
        members = [groups[g] for g in family]
        seen = [r for m in members for r in m]
        if len({len(m) for m in members}) != 1 or len(seen) != decl.ranks or len(set(seen)) != decl.ranks:
            raise WorkloadError(decl.path, f"key 'rotate', family {i}",
                                "expected groups of one size that hold every rank exactly once")
        out.append(members)
    return out


def load_representatives(spec: str | os.PathLike, decl: OrbitDeclaration) -> list[Graph]:
    """A graph per rank: the representatives' own; every other rank holds its placeholder, the
    graph of the first representative (only the orbit run, which maps it, may read it)."""
    cache: dict[bytes, Any] = {}
    shared: dict[bytes, list[Any]] = {}
    own = {}
    for r in decl.representatives:
        path = path_str(f"{spec}.{r}.et")
        if not is_file(path):
            raise WorkloadError(path, "", f"{decl.path} names rank {r} a representative, but its file is missing")
        own[r] = load_graph(path, cache, shared)
    first = own[decl.representatives[0]]
    return [own.get(r, first) for r in range(decl.ranks)]
