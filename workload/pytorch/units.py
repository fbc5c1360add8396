"""The host side of one rank: which execution-trace operators become CPU nodes, and their times.

An operator just below a thread root (looking through record_function annotations such as
``ProfilerStep#3`` or ``DistributedDataParallel.forward``) is one CPU node with its measured
duration, unless communication starts somewhere inside it (DDP starts its all-reduces from a hook
inside the backward pass): then it is opened up, its own time (duration minus its children's)
becomes one node and its children follow, each by the same rule. A communication operator is a
unit of its own and is never opened: its children are the backend's records (``gloo:all_reduce``
runs on gloo's threads, not on the launching one).

Each host thread that runs operators is a track of its own (the thread Kineto saw it on, with
parents decided by Kineto's timestamps, nesting.py). The main track is the thread that ran the
``ProfilerStep#N`` annotation (without one: the thread with the most operator time). On any other
thread, what a communication backend runs (``gloo:all_reduce`` and everything inside it, on gloo's
worker threads) is the collective's own work, which the network simulates: it is not host time.
Other operators there (an autograd engine thread) stay host time.

The time between two outermost operators of the main track (Python, the framework) is host time
too and goes to the next unit, unless that unit waits for a collective: then it was the wait until
the collective's backend record ended, and host time after it (rank_graph.py). On any other thread
such a gap is the thread waiting for work, not work.

Units come in start order (``rf_id``, a process-wide counter) across all threads: the rank has one
CPU slot, so the host threads' work is one chain.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from workload.collect.execution_trace import EtNode, ExecutionTrace
from workload.comm_names import BACKEND_PREFIXES
from workload.pytorch.comm_ops import has_dispatch_ops, is_comm_op, storages
from workload.pytorch.device_trace import DeviceTrace, Span
from workload.pytorch.groups import PG_INIT


@dataclass(slots=True)
class Unit:
    node: EtNode
    span: Span | None
    self_only: bool           # an opened operator: only its own time
    is_comm: bool
    cpu_ns: int
    storages: set[int]
    gap_ns: int = 0           # host time on its thread since the previous outermost operator ended
    launches: list = field(default_factory=list)     # (launch start ns, correlation)
    syncs: list = field(default_factory=list)        # Span of each host wait for the device

    @property
    def name(self) -> str:
        return f"{self.node.name} (self)" if self.self_only else self.node.name


def host_units(et: ExecutionTrace, dev: DeviceTrace) -> list[Unit]:
    tops: list[EtNode] = []

    def visit(node: EtNode) -> None:
        for child in et.kids(node):
            if child.name == PG_INIT:
                continue
            if child.is_annotation():
                visit(child)
            else:
                tops.append(child)

    for root in et.thread_roots():
        visit(root)
    main = main_thread(dev)
    backend_records = not has_dispatch_ops(et.nodes.values())
    inside = _BackendSpans(dev, main) if not backend_records else None
    tops = [n for n in _inside_steps(tops, dev)
            if not _backend_work(n, dev, main, backend_records) and not (inside and inside.holds(n))]
    tops.sort(key=lambda n: (n.rf_id, n.id))
    is_comm = _CommTest(not has_dispatch_ops(et.nodes.values()))
    with_comm = _subtrees_with_comm(et, is_comm)
    units: list[Unit] = []
    for top in tops:
        _expand(et, dev, top, with_comm, is_comm, units)
    # the step's time before its first operator is host time too (the script's own Python between
    # ProfilerStep's start and the first operator: 4 ms on a loaded host), as every later gap is
    last_end: int | None = min(s.start_ns for s in dev.steps) if dev.steps else None
    for u in units:
        if u.span is None:
            continue
        if u.span.thread != main:
            if u.is_comm:       # an old trace's backend record, on the backend's thread: the transfer
                u.cpu_ns = 0
            continue
        if last_end is not None and u.span.start_ns > last_end:
            u.gap_ns = u.span.start_ns - last_end
        last_end = max(last_end or 0, u.span.end_ns)
    _attribute_runtime(units, dev)
    return units


class _CommTest:
    def __init__(self, backend_records: bool) -> None:
        self.backend_records = backend_records

    def __call__(self, node: EtNode) -> bool:
        return is_comm_op(node, self.backend_records)


def main_thread(dev: DeviceTrace) -> tuple | None:
    """The thread that ran the step: the one with the ProfilerStep annotations, else the busiest
    (a backend's records do not count: gloo's threads can be busier than the one feeding them)."""
    if dev.steps:
        return Counter(s.thread for s in dev.steps).most_common(1)[0][0]
    busy: Counter = Counter()
    for s in dev.by_rf.values():
        if not s.name.startswith(BACKEND_PREFIXES):
            busy[s.thread] += s.dur_ns
    return busy.most_common(1)[0][0] if busy else None


def _backend_work(node: EtNode, dev: DeviceTrace, main: tuple | None, backend_records: bool) -> bool:
    """A backend's record on a thread other than the main one (gloo's worker threads), in a trace
    whose collectives show as dispatcher ops: the transfer the collective node simulates."""
    if backend_records or not node.name.startswith(BACKEND_PREFIXES):
        return False
    span = dev.by_rf.get(node.rf_id)
    return span is None or span.thread != main


class _BackendSpans:
    """Kineto's backend records on threads other than the main one. What runs on such a thread
    inside one is that collective's own work, even where the execution trace lost the record
    (it drops one that outlives the step) and files the work at the thread's root: gloo's sparse
    all-reduce coalescing and copying on its worker thread, 37 ms on one rank of four, was
    counted as that rank's host time (+26 %)."""

    def __init__(self, dev: DeviceTrace, main: tuple | None) -> None:
        self.dev = dev
        self.by_thread: dict[tuple, list[tuple[int, int]]] = {}
        for sp in dev.by_rf.values():
            if sp.thread != main and sp.name.startswith(BACKEND_PREFIXES):
                self.by_thread.setdefault(sp.thread, []).append((sp.start_ns, sp.end_ns))

    def holds(self, node: EtNode) -> bool:
        if not self.by_thread:
            return False
        sp = self.dev.by_rf.get(node.rf_id)
        if sp is None or sp.name.startswith(BACKEND_PREFIXES):
            return False
        return any(a <= sp.start_ns and sp.end_ns <= b for a, b in self.by_thread.get(sp.thread, ()))


def _inside_steps(tops: list[EtNode], dev: DeviceTrace) -> list[EtNode]:
    """With ProfilerStep#N annotations, the step is what ran between the first one's start and the
    last one's end, on any thread (the autograd thread's backward is under no annotation)."""
    if not dev.steps:
        return tops
    start, end = min(s.start_ns for s in dev.steps), max(s.end_ns for s in dev.steps)
    spans = ((n, dev.by_rf.get(n.rf_id)) for n in tops)
    return [n for n, s in spans if s is None or (s.start_ns >= start and s.end_ns <= end)]


def _subtrees_with_comm(et: ExecutionTrace, is_comm: _CommTest) -> set[int]:
    """Ids of nodes with a communication operator in their subtree (themselves included)."""
    found: set[int] = set()
    for node in et.nodes.values():
        if is_comm(node):
            seen = set()
            cur = node
            while cur.id not in found and cur.id not in seen:
                found.add(cur.id)
                seen.add(cur.id)
                parent = et.nodes.get(cur.parent)
                if parent is None or parent.id == cur.id:
                    break
                cur = parent
    return found


def _expand(et: ExecutionTrace, dev: DeviceTrace, node: EtNode, with_comm: set[int], is_comm: _CommTest,
            out: list[Unit]) -> None:
    span = dev.by_rf.get(node.rf_id)
    dur = span.dur_ns if span else 0
    comm = is_comm(node)
    if comm or node.id not in with_comm:
        out.append(Unit(node, span, False, comm, dur, _subtree_storages(et, node)))
        return
    # a child that ran on another thread (a backend's record started there) is not the caller's time
    kids = [k for k in et.kids(node) if k.name != PG_INIT and not _elsewhere(dev, span, k)]
    # the ET's parent is the op open when a child started; children it lists after the parent's
    # end (seen for ops following a DDP hook) are not inside its time
    inner = sum(s.dur_ns for s in (dev.by_rf.get(k.rf_id) for k in kids)
                if s is not None and span is not None and s.start_ns >= span.start_ns and s.end_ns <= span.end_ns)
    if not node.is_annotation():
        out.append(Unit(node, span, True, False, max(0, dur - inner), storages(node)))
    for kid in kids:
        _expand(et, dev, kid, with_comm, is_comm, out)


def _elsewhere(dev: DeviceTrace, span: Span | None, kid: EtNode) -> bool:
    mine = dev.by_rf.get(kid.rf_id)
    return span is not None and mine is not None and mine.thread != span.thread


def _subtree_storages(et: ExecutionTrace, node: EtNode) -> set[int]:
    found = storages(node)
    stack = list(et.kids(node))
    while stack:
        n = stack.pop()
        found |= storages(n)
        stack.extend(et.kids(n))
    return found


def _attribute_runtime(units: list[Unit], dev: DeviceTrace) -> None:
    """Give each kernel launch and host wait to the innermost unit that, on its thread, holds it."""
    by_thread: dict[tuple, list[int]] = {}
    for i, u in enumerate(units):
        if u.span is not None:
            by_thread.setdefault(u.span.thread, []).append(i)
    index = {t: _Nesting(units, idx) for t, idx in by_thread.items()}
    for correlation, launch in dev.launches.items():
        found = index.get(launch.thread)
        u = found.innermost(launch.start_ns) if found else None
        if u is not None:
            u.launches.append((launch.start_ns, correlation))
    for sync in dev.syncs:
        found = index.get(sync.thread)
        u = found.innermost(sync.start_ns) if found else None
        if u is not None:
            u.syncs.append(sync)
    for u in units:
        u.launches.sort()
        u.syncs.sort(key=lambda s: s.start_ns)


class _Nesting:
    """The units of one thread by start, each with the nearest earlier unit that contains it."""

    def __init__(self, units: list[Unit], idx: list[int]) -> None:
        order = sorted(idx, key=lambda i: (units[i].span.start_ns, -units[i].span.end_ns))
        self.units = [units[i] for i in order]
        self.starts = [u.span.start_ns for u in self.units]
        self.parent: list[int] = []
        stack: list[int] = []
        for k, u in enumerate(self.units):
            while stack and self.units[stack[-1]].span.end_ns <= u.span.start_ns:
                stack.pop()
            self.parent.append(stack[-1] if stack else -1)
            stack.append(k)

    def innermost(self, t: int) -> Unit | None:
        k = bisect.bisect_right(self.starts, t) - 1
        while k >= 0 and self.units[k].span.end_ns < t:
            k = self.parent[k]
        return self.units[k] if k >= 0 else None
