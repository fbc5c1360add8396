"""Which operator ran inside which: Kineto's timestamps, where the execution trace's parent links disagree.

The execution trace files a record under the operator that was open on its thread's record-function
stack when it started, and that stack is wrong in places real runs reach: an operator that ended
is still "open" for the next one (a second ``c10d::broadcast_`` of DDP's BatchNorm buffers filed
under the first, a dense ``c10d::allreduce_`` under the sparse one before it), and a record that a
backend starts on its own thread (``gloo:all_reduce``) lands under whatever the caller had open.
Kineto times every one of those operators, on the thread that ran it. Nesting by time on one
thread is what happened, so every operator Kineto saw is put under the innermost operator of the
same thread whose span holds it; one that nothing holds hangs from its thread root, as before.
Operators Kineto did not see keep the parent the execution trace gave them.
"""
from __future__ import annotations

from dataclasses import replace

from workload.collect.execution_trace import EtNode, ExecutionTrace
from workload.pytorch.device_trace import DeviceTrace, Span


def renest(et: ExecutionTrace, dev: DeviceTrace) -> tuple[ExecutionTrace, int]:
    """The same trace with parents decided by Kineto's spans; also the number of operators moved."""
    roots = {r.id for r in et.thread_roots()}
    spans: dict[int, Span] = {}
    for n in et.nodes.values():
        s = dev.by_rf.get(n.rf_id)
        if s is not None and n.id not in roots and n.parent != n.id:
            spans[n.id] = s
    by_thread: dict[tuple, list[int]] = {}
    for nid, s in spans.items():
        by_thread.setdefault(s.thread, []).append(nid)
    new_parent: dict[int, int] = {}
    for ids in by_thread.values():
        ids.sort(key=lambda i: (spans[i].start_ns, -spans[i].end_ns, et.nodes[i].rf_id, i))
        stack: list[int] = []
        for nid in ids:
            s = spans[nid]
            while stack and not _holds(spans[stack[-1]], s):
                stack.pop()
            new_parent[nid] = stack[-1] if stack else _thread_root(et, et.nodes[nid], roots)
            stack.append(nid)
    moved = 0
    nodes: list[EtNode] = []
    for n in et.nodes.values():
        p = new_parent.get(n.id, n.parent)
        if p is not None and p != n.parent:
            moved += 1
            n = replace(n, parent=p)
        nodes.append(n)
    if not moved:
        return et, 0
    out = ExecutionTrace(et.path, et.schema, nodes)
    for attr in ("pid",):
        if hasattr(et, attr):
            setattr(out, attr, getattr(et, attr))
    return out, moved


def _holds(outer: Span, inner: Span) -> bool:
    if inner.start_ns < outer.start_ns or inner.end_ns > outer.end_ns:
        return False
    # one that starts the instant the other ends followed it (unless the other took no time)
    return not (inner.start_ns == outer.end_ns and outer.end_ns > outer.start_ns and inner.end_ns > inner.start_ns)


def _thread_root(et: ExecutionTrace, n: EtNode, roots: set[int]) -> int:
    """The thread root above ``n`` in the execution trace (the root it was filed under)."""
    seen = set()
    cur = n
    while cur.id not in seen:
        seen.add(cur.id)
        if cur.parent in roots:
            return cur.parent
        nxt = et.nodes.get(cur.parent)
        if nxt is None or nxt.id == cur.id:
            break
        cur = nxt
    by_tid = [r.id for r in et.thread_roots() if r.tid == cur.tid]
    return by_tid[0] if by_tid else n.parent
