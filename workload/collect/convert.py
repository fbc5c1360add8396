"""Execution trace + Kineto trace -> TrioSim ``tensor.csv`` / ``trace.csv`` (no torch needed).

The operators are the outermost operators of the step: the execution trace's
nodes just below a thread root, looking through record_function annotations
(``Optimizer.step#Adam.step``, ``ProfilerStep#N``). They are listed in start
order (``rf_id``) across threads, so forward, backward (autograd thread) and
optimizer come out in the order they ran.

Each ET operator is joined to its profiler event by ``Record function id`` when
the Kineto trace has it (PyTorch 2.2 and later); older traces are joined by
position, as TrioSim's script does, but here the names must agree all the way,
or the pair is refused.

The rest follows TrioSim's tracer (tracer/dataprocess.py) so that its loader and
its numbers carry over; docs/collect.md lists each rule and where we differ.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from workload.collect.errors import ProfilerTraceError, TimingTraceMismatch
from workload.collect.execution_trace import EtNode, ExecutionTrace, load_execution_trace
from workload.collect.profiler_trace import ProfiledOp, ProfilerTrace, load_profiler_trace
from workload.collect.triosim_format import OperatorRow, TensorRow, operator_tensors, write_triosim_csvs

#: Operators whose tensor-parallel split TrioSim models (its TARGET_OP_PREFIXES).
TP_OPERATORS = frozenset({"aten::conv2d", "aten::linear", "aten::embedding"})
#: TrioSim drops these (host reads of a scalar; no device work of their own).
DROPPED_NAMES = frozenset({"aten::item"})
TIME_SOURCES = ("gpu", "cpu")
TPFLAG_RULES = ("triosim", "nested")


@dataclass(frozen=True, slots=True)
class EtOperator:
    """An outermost operator of the ET, the node its tensors come from, and its stage."""

    node: EtNode
    source: EtNode | None     # None: no node with arguments (TrioSim skips it, unnumbered)
    stage: str


@dataclass(frozen=True, slots=True)
class ConvertResult:
    """What a conversion wrote, for the command line summary and for tests."""

    tensor_csv: Path
    trace_csv: Path
    operators: int            # rows in trace.csv
    zero_time_dropped: int    # operators with no kernel time, left out of trace.csv (TrioSim does too)
    unmatched: int            # ET operators with no profiler event
    tensor_rows: int
    total_ns: int             # sum of Operator_cudatimenooverlap
    time_source: str
    join: str                 # "rf_id" or "position"


def convert_pair(execution_trace: str | os.PathLike, profiler_trace: str | os.PathLike,
                 out_dir: str | os.PathLike, *, time_source: str = "gpu",
                 tpflag_rule: str = "triosim",
                 timing_trace: str | os.PathLike | None = None) -> ConvertResult:
    """Convert one ET + Kineto pair of the same step into TrioSim CSVs in out_dir.

    time_source "gpu": operator time = its kernels (sum, and first-start to last-end);
    "cpu": both = the operator's host duration (for CPU-only runs).
    timing_trace: a Kineto trace of another run of the same step, recorded without
    the execution-trace observer, whose times are used instead (the observer about
    doubles host operator times); its outermost operators must match by position.
    """
    if time_source not in TIME_SOURCES or tpflag_rule not in TPFLAG_RULES:
        raise ValueError(f"time_source {time_source!r} / tpflag_rule {tpflag_rule!r}")
    et = load_execution_trace(execution_trace)
    prof = load_profiler_trace(profiler_trace, need_kernels=time_source == "gpu")
    operators = outermost_operators(et)
    events, join = match_events(et, prof, operators)
    if timing_trace is not None:
        timing = load_profiler_trace(timing_trace, need_kernels=time_source == "gpu")
        events = retime(prof, timing, events)
    rows, tensors = build_rows(et, operators, events, time_source, tpflag_rule)
    kept = [r for r in rows if r.span_ns != 0]             # TrioSim: Operator_cudatime != 0
    tensor_csv, trace_csv = write_triosim_csvs(out_dir, tensors, kept)
    return ConvertResult(tensor_csv, trace_csv, len(kept), len(rows) - len(kept),
                         sum(e is None for e in events), len(tensors),
                         sum(r.busy_ns for r in kept), time_source, join)


def outermost_operators(et: ExecutionTrace) -> list[EtOperator]:
    """Every outermost operator of every thread, in start order (rf_id)."""
    found: list[EtOperator] = []

    def visit(node: EtNode, in_optimizer: bool) -> None:
        for child in et.kids(node):
            if child.is_annotation():
                visit(child, in_optimizer or child.name.startswith("Optimizer."))
            else:
                found.append(EtOperator(child, _tensor_source(et, child), _stage(child, in_optimizer)))

    for root in et.thread_roots():
        visit(root, False)
    found.sort(key=lambda op: (op.node.rf_id, op.node.id))
    return _after_backward_is_backward(found)


def _after_backward_is_backward(ops: list[EtOperator]) -> list[EtOperator]:
    """Host work between the backward pass and the optimizer belongs to backward.

    DDP's reducer finishes the backward pass after the last autograd function (waits for its
    all-reduces, then ``aten::as_strided`` views and ``copy_bucket_to_grad``): by name those are
    forward operators, but they run after backward, and TrioSim's order is forward, backward,
    optimizer.
    """
    out, seen_backward = [], False
    for op in ops:
        seen_backward = seen_backward or op.stage == "backward"
        if seen_backward and op.stage == "forward":
            op = EtOperator(op.node, op.source, "backward")
        out.append(op)
    return out


def _tensor_source(et: ExecutionTrace, node: EtNode) -> EtNode | None:
    """The node whose arguments stand for the operator's tensors.

    An autograd wrapper (``autograd::engine::evaluate_function: XBackward0``) has
    no arguments in the ET; like TrioSim we take its first child's first child
    (the first ATen call of the backward function), else its first child.
    """
    if node.has_io():
        return node
    kids = et.kids(node)
    if not kids:
        return None
    grandkids = et.kids(kids[0])
    source = grandkids[0] if grandkids else kids[0]
    return source if source.has_io() else None


def _stage(node: EtNode, in_optimizer: bool) -> str:
    if node.name.startswith("autograd"):
        return "backward"
    if in_optimizer or node.name.startswith("aten::_for"):   # TrioSim: names starting aten::_for
        return "optimizer"
    return "forward"


def match_events(et: ExecutionTrace, prof: ProfilerTrace,
                 operators: list[EtOperator]) -> tuple[list[ProfiledOp | None], str]:
    """The profiler event of each ET operator (None where the profiler has none)."""
    by_rf = prof.by_rf_id()
    if by_rf:
        events = [by_rf.get(op.node.rf_id) for op in operators]
        if not any(events):
            raise ProfilerTraceError(prof.path, "Record function id", f"no operator matches one of "
                                     f"{et.path}; the two files are not from the same step")
        return events, "rf_id"
    if len(prof.ops) != len(operators) or any(
            e.name != op.node.name for e, op in zip(prof.ops, operators)):
        raise ProfilerTraceError(prof.path, "traceEvents", _position_mismatch(et, prof, operators))
    return list(prof.ops), "position"


def retime(prof: ProfilerTrace, timing: ProfilerTrace,
           events: list[ProfiledOp | None]) -> list[ProfiledOp | None]:
    """Swap each matched event for the same-position outermost operator of timing."""
    for i, (a, b) in enumerate(zip(prof.ops, timing.ops)):
        if a.name != b.name:
            raise TimingTraceMismatch(timing.path, "traceEvents", f"outermost operator {i + 1} is "
                                     f"{b.name!r}, but {a.name!r} in {prof.path}: not the same step")
    if len(prof.ops) != len(timing.ops):
        raise TimingTraceMismatch(timing.path, "traceEvents", f"{len(timing.ops)} outermost operators, "
                                 f"but {len(prof.ops)} in {prof.path}: not the same step")
    same = {id(a): b for a, b in zip(prof.ops, timing.ops)}
    return [None if e is None else same[id(e)] for e in events]


def _position_mismatch(et: ExecutionTrace, prof: ProfilerTrace, operators: list[EtOperator]) -> str:
    for i, (e, op) in enumerate(zip(prof.ops, operators)):
        if e.name != op.node.name:
            return (f"this trace has no 'Record function id', so its outermost operators are "
                    f"matched to those of {et.path} by position, and they differ at position {i + 1}: "
                    f"{e.name!r} here, {op.node.name!r} there; record both files for the same step")
    return (f"this trace has no 'Record function id', so its outermost operators are matched to "
            f"those of {et.path} by position, but it has {len(prof.ops)} and the execution trace "
            f"{len(operators)}; record both files for the same step")


def build_rows(et: ExecutionTrace, operators: list[EtOperator], events: list[ProfiledOp | None],
               time_source: str, tpflag_rule: str) -> tuple[list[OperatorRow], list[TensorRow]]:
    """trace.csv rows (zero-time ones included) and tensor.csv rows, in TrioSim's order."""
    picked = []
    for number, (op, event) in enumerate(
            ((op, ev) for op, ev in zip(operators, events) if op.source is not None), start=1):
        if op.node.name in DROPPED_NAMES or not op.source.op_schema.replace(" ", ""):
            continue                            # TrioSim: numbered, but no row and no tensors
        picked.append((number, op, event))
    flagged = _tp_sequence_numbers(et, [op for _, op, _ in picked], tpflag_rule)
    rows, tensors = [], []
    for number, op, event in picked:
        inputs, outputs = operator_tensors(op.source)
        tensors += inputs + outputs
        span, busy = _times(event, time_source)
        seq = _sequence_number(et, op.node)
        rows.append(OperatorRow(number, op.node.name, tuple(inputs), tuple(outputs), span, busy,
                                op.stage, int(seq is not None and seq in flagged)))
    return rows, tensors


def _times(event: ProfiledOp | None, time_source: str) -> tuple[int, int]:
    if event is None:
        return 0, 0
    if time_source == "cpu":
        return event.cpu_ns, event.cpu_ns
    return event.kernel_span_ns, event.kernel_ns


def _sequence_number(et: ExecutionTrace, node: EtNode) -> int | None:
    """The autograd sequence number; an autograd wrapper takes its backward function's."""
    if node.seq_id >= 0:
        return node.seq_id
    kids = et.kids(node)
    if node.name.startswith("autograd::engine::evaluate_function") and kids and kids[0].seq_id >= 0:
        return kids[0].seq_id
    return None


def _tp_sequence_numbers(et: ExecutionTrace, ops: list[EtOperator], rule: str) -> set[int]:
    """Sequence numbers whose operators get tpflag=1.

    "triosim": those of conv2d / linear / embedding themselves, so a backward
    operator is flagged when it has the same number (ConvolutionBackward0 yes;
    AddmmBackward0 of a linear no, it carries the inner addmm's number).
    "nested": also every number inside those operators, which flags AddmmBackward0.
    """
    seqs: set[int] = set()
    for op in ops:
        if op.node.name not in TP_OPERATORS:
            continue
        if op.node.seq_id >= 0:
            seqs.add(op.node.seq_id)
        if rule == "nested":
            stack = list(et.kids(op.node))
            while stack:
                node = stack.pop()
                if node.seq_id >= 0:
                    seqs.add(node.seq_id)
                stack.extend(et.kids(node))
    return seqs
