"""Graphs that share Node objects: the ranks of one layout hold mostly equal nodes.

In a dp×tp×pp layout each rank's file repeats most node messages of other ranks byte for byte,
and a repeated message at the same entry, with the same dependencies left after linking and the
same children, is the same Node in every graph that holds it (a 128-rank ResNet-50 layout:
131,328 nodes, 13,140 distinct; up to 8 such contexts are kept per message). Sharing it saves the copy and its memory. Nodes are immutable
once linked, except those that recognising host-side communication may still rewrite (CPU
operators, sends and receives, workload/host_comms.py): each graph keeps its own of those.

A file whose dependencies need more than dropping those on missing nodes (a broken data
dependency, a cycle to repair or refuse) is linked by workload/dependencies.py on its own copies,
which names the error or warns exactly as before.
"""
from __future__ import annotations

import os

from network.native_build import GRAPH_SOURCES, load_checked
from workload.dependencies import _warn as warn_ignored_ctrl_deps

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any, Callable
    from pathlib import Path

_MAX_VARIANTS = 8  # linked Nodes kept per node message: the same bytes in different contexts
# the common file (every kept dependency on a node of a lower id) linked in C, where compiled
GRAPH_CORE = load_checked("workload._graph_core", os.path.dirname(os.path.realpath(__file__)), GRAPH_SOURCES)


def link_shared(path: str | Path, frames: list[bytes], entries: list[Any], shared: dict[bytes, list[Any]],
                may_share: Callable[[Any], bool]) -> dict[int, Any] | None:
    """The file's linked nodes by id, shared through ``shared`` (node bytes → linked Nodes);
    None where the file needs the full linking of workload/dependencies.py. ``entries`` are the
    parsed, not yet linked, nodes of ``frames`` (parents as the file gives them); ``may_share``
    says which nodes no later step rewrites."""
    if GRAPH_CORE is not None:
        missing: list[tuple[int, int]] = []
        linked = GRAPH_CORE.link_ascending(frames, entries, shared, may_share, _MAX_VARIANTS, missing)
        if linked is not None:
            if missing:
                warn_ignored_ctrl_deps(path, missing, [])
            return linked
    return _link_python(path, frames, entries, shared, may_share)


def _link_python(path: str | Path, frames: list[bytes], entries: list[Any], shared: dict[bytes, list[Any]],
                 may_share: Callable[[Any], bool]) -> dict[int, Any] | None:
    """link_shared's reference, and its path for every file GRAPH_CORE declines."""
    ids = {t.id for t in entries}
    has_all = ids.issuperset
    parents: list[tuple[int, ...]] = []
    children: dict[int, list[int]] = {nid: [] for nid in ids}
    missing: list[tuple[int, int]] = []
    ascending = True  # every dependency on a lower id (converters write them so): a DAG
    for t in entries:
        nid = t.id
        kept_t = t.parents
        if kept_t:
            if nid in kept_t or not has_all(kept_t):
                kept = []
                for dep in t.parents:
                    if dep != nid and dep in ids:
                        kept.append(dep)
                    elif dep in t.data_deps:
                        return None  # a data dependency on itself or on no node: an error to name
                    else:
                        missing.append((nid, dep))
                kept_t = tuple(kept)
            if kept_t and max(kept_t) > nid:
                ascending = False
            for dep in kept_t:
                children[dep].append(nid)
        parents.append(kept_t)
    if not ascending and not _is_dag(entries, parents, children):
        return None
    nodes: dict[int, Any] = {}
    for i, t in enumerate(entries):
        f = frames[i]
        kids = children[t.id]
        kids.sort()
        variants = shared.get(f)
        if variants is not None:
            for s in variants:
                if s.index == i and s.parents == parents[i] and s.children == kids:
                    break
            else:
                s = None
            if s is not None:
                nodes[t.id] = s
                continue
        n = t.clone(i)
        n.parents = parents[i]
        n.children = kids
        n.data_deps = None  # only needed while linking
        if may_share(n):
            if variants is None:
                shared[f] = [n]
            elif len(variants) < _MAX_VARIANTS:
                variants.append(n)
        nodes[t.id] = n
    if missing:
        warn_ignored_ctrl_deps(path, missing, [])
    return nodes


def _is_dag(entries: list[Any], parents: list[tuple[int, ...]], children: dict[int, list[int]]) -> bool:
    indeg = {t.id: len(p) for t, p in zip(entries, parents)}
    stack = [nid for nid, d in indeg.items() if d == 0]
    done = 0
    while stack:
        nid = stack.pop()
        done += 1
        for c in children[nid]:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    return done == len(entries)
