"""Dependencies of one ET file: link parents to children, repair what converters leave behind,
and prove the result a DAG.

Data dependencies are the graph's meaning: one on a node not in the file, or one that closes a
cycle, is an error (exit 2). Control dependencies are order hints, and real converters write
broken ones: Chakra's PyTorch converter drops nodes (the root thread node; more in schema 1.0.1
traces) but keeps the control edges to them, points nodes at themselves, and makes a CPU op
wait on its own GPU kernel while the kernel data-depends on the op. Chakra's own feeder of that
time read data dependencies only; ASTRA-sim's feeder_v3 reads both and aborts on these files.
We keep every control dependency that can be honoured and ignore the rest, with one warning per
file: those on a missing node or the node itself, and those that would close a cycle.
"""
from __future__ import annotations

import heapq
import warnings

from workload.errors import WorkloadError

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any
    from pathlib import Path


def link_dependencies(path: str | Path, nodes: dict[int, Any]) -> None:
    """Set ``children`` (sorted) and the final ``parents`` of every node; warn once about the
    control dependencies ignored, raise WorkloadError for a broken data dependency."""
    missing: list[tuple[int, int]] = []
    for n in nodes.values():
        kept = []
        for dep in n.parents:
            if dep != n.id and dep in nodes:
                kept.append(dep)
                continue
            if dep in n.data_deps:
                if dep == n.id:
                    raise WorkloadError(path, n.describe(), "depends on itself in data_deps (a dependency cycle)")
                raise WorkloadError(path, n.describe(), f"depends on node {dep} (data_deps), which is not in this file")
            missing.append((n.id, dep))
        if len(kept) != len(n.parents):
            n.parents = tuple(kept)
    _set_children(nodes)
    in_cycles: list[tuple[int, int]] = []
    if _unordered(nodes):
        in_cycles = _drop_ctrl_deps_in_cycles(nodes)
        _set_children(nodes)
        left = _unordered(nodes)
        if left:
            _raise_cycle(path, nodes, left)
    for n in nodes.values():
        n.data_deps = None  # only needed while linking
    if missing or in_cycles:
        _warn(path, missing, in_cycles)


def _set_children(nodes: dict[int, Any]) -> None:
    for n in nodes.values():
        n.children = []
    for n in nodes.values():
        for dep in n.parents:
            nodes[dep].children.append(n.id)
    for n in nodes.values():
        n.children.sort()


def _unordered(nodes: dict[int, Any]) -> set[int]:
    """The nodes Kahn's algorithm cannot order (empty for a DAG)."""
    indeg = {nid: len(n.parents) for nid, n in nodes.items()}
    stack = [nid for nid, d in indeg.items() if d == 0]
    while stack:
        nid = stack.pop()
        for c in nodes[nid].children:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    return {nid for nid, d in indeg.items() if d > 0}


def _components(nodes: dict[int, Any]) -> dict[int, int]:
    """Strongly connected component of every node (Tarjan's algorithm, iterative)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    comp: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(nodes[root].children))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(nodes[w].children)))
                    break
                if w in on_stack and index[w] < low[v]:
                    low[v] = index[w]
            else:
                work.pop()
                if work and low[v] < low[work[-1][0]]:
                    low[work[-1][0]] = low[v]
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp[w] = v
                        if w == v:
                            break
    return comp


def _drop_ctrl_deps_in_cycles(nodes: dict[int, Any]) -> list[tuple[int, int]]:
    """Ignore the control-only dependencies that run against an order of each cycle's nodes.

    Inside a strongly connected component the data dependencies alone are acyclic (else the
    file is wrong), so its nodes have a topological order of them; we take the one that
    prefers lower ids (issue order) and keep the control dependencies that agree with it.
    What is left is acyclic: inside a component every edge follows that order, and the
    components' condensation is a DAG."""
    comp = _components(nodes)
    members: dict[int, list[int]] = {}
    for nid, c in comp.items():
        members.setdefault(c, []).append(nid)
    pos: dict[int, int] = {}
    for group in members.values():
        if len(group) > 1:
            pos.update(_data_order(nodes, set(group)))
    dropped = []
    for n in nodes.values():
        if n.id not in pos:
            continue
        c = comp[n.id]
        kept = tuple(d for d in n.parents if comp[d] != c or d in n.data_deps or pos[d] < pos[n.id])
        if len(kept) != len(n.parents):
            dropped += [(n.id, d) for d in n.parents if d not in kept]
            n.parents = kept
    return dropped


def _data_order(nodes: dict[int, Any], group: set[int]) -> dict[int, int]:
    """Position of each node of ``group`` in a topological order of the data dependencies among
    them, lowest id first among the ready; nodes on a data cycle come last (reported later)."""
    indeg = {nid: sum(1 for d in nodes[nid].parents if d in group and d in nodes[nid].data_deps) for nid in group}
    ready = [nid for nid, k in indeg.items() if k == 0]
    heapq.heapify(ready)
    order: dict[int, int] = {}
    while ready:
        nid = heapq.heappop(ready)
        order[nid] = len(order)
        for c in nodes[nid].children:
            if c in group and nid in nodes[c].data_deps:
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(ready, c)
    for nid in sorted(group - order.keys()):
        order[nid] = len(order)
    return order


def _raise_cycle(path: str | Path, nodes: dict[int, Any], left: set[int]) -> None:
    start = min(left)
    trail: list[int] = []
    pos: dict[int, int] = {}
    cur = start
    while cur not in pos:
        pos[cur] = len(trail)
        trail.append(cur)
        cur = next(p for p in nodes[cur].parents if p in left)
    cycle = trail[pos[cur]:] + [cur]
    raise WorkloadError(
        path, f"node {cycle[0]}",
        "dependency cycle: " + " -> ".join(str(c) for c in reversed(cycle)) + " (each waits on the next)",
    )


def _warn(path: str | Path, missing: list[tuple[int, int]], in_cycles: list[tuple[int, int]]) -> None:
    own = sum(1 for nid, dep in missing if nid == dep)
    total = len(missing) + len(in_cycles)
    parts = [f"{own} on the node itself", f"{len(missing) - own} on nodes not in this file"]
    if in_cycles:
        parts.append(f"{len(in_cycles)} that would close a cycle")
    shown = ", ".join(f"{nid}->{dep}" for nid, dep in (missing + in_cycles)[:5])
    warnings.warn(
        f"{path}: ignored {total} control dependenc{'y' if total == 1 else 'ies'} ({', '.join(parts)}; "
        f"first: {shown}), as Chakra's PyTorch converter leaves them behind",
        stacklevel=4,
    )
