"""Reading a Kineto profiler trace (``torch.profiler`` Chrome-trace JSON) without torch.

What is used of it:

* ``cpu_op`` events (``Operator`` in old Kineto), ``ph: X``: host operators with
  start and duration; nested ones lie inside their caller on the same thread.
  Newer traces carry ``Record function id``, equal to the execution trace's
  ``rf_id``.
* runtime events (``cuda_runtime``, ``cuda_driver``; ``cudaLaunchKernel`` and
  friends) with ``args.correlation``: they say which host thread launched what,
  and when.
* ``kernel`` events with the same ``correlation``: GPU kernel start and duration.

A kernel belongs to the outermost operator, on the launching thread, whose time
span holds the launch (TrioSim's tracer/dataprocess.py attributes them the same way).
Times are kept as integer nanoseconds; JSON numbers are read as decimals so that
no precision is lost on microsecond timestamps of 16 digits.
"""
from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from workload.collect.errors import ProfilerTraceError
from workload.collect.execution_trace import _read_json

_CPU_OP_CATS = frozenset({"cpu_op", "operator"})


@dataclass(slots=True)
class ProfiledOp:
    """One outermost host operator and the GPU kernels it launched. Times in ns."""

    name: str
    thread: tuple
    start_ns: int
    end_ns: int
    rf_id: int | None
    kernel_count: int = 0
    kernel_ns: int = 0                   # sum of kernel durations (TrioSim: cudatimenooverlap)
    first_kernel_ns: int | None = None
    last_kernel_end_ns: int | None = None

    @property
    def cpu_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def kernel_span_ns(self) -> int:
        """First kernel start to last kernel end (TrioSim: cudatime); 0 without kernels."""
        if self.first_kernel_ns is None:
            return 0
        return self.last_kernel_end_ns - self.first_kernel_ns


@dataclass(slots=True)
class ProfilerTrace:
    """The outermost operators of a Kineto trace, in start order, with their kernels."""

    path: Path
    ops: list[ProfiledOp]
    kernel_count: int
    attributed_kernels: int

    def by_rf_id(self) -> dict[int, ProfiledOp]:
        return {op.rf_id: op for op in self.ops if op.rf_id is not None}


def to_ns(value: Any) -> int:
    """A Kineto time (microseconds, int or decimal) as integer nanoseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal, float)):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, int):
        return value * 1000
    return int((Decimal(value) * 1000).to_integral_value())


def load_profiler_trace(path: str | os.PathLike, *, need_kernels: bool = True) -> ProfilerTrace:
    """Read a Kineto trace; with need_kernels, refuse one that holds no GPU kernels."""
    path = Path(path)
    events = _read_events(path)
    cpu_ops, runtimes, kernels = _split_events(path, events)
    if not cpu_ops:
        raise ProfilerTraceError(path, "traceEvents", "no CPU operator events (cat 'cpu_op'); "
                                 "record it with torch.profiler (ProfilerActivity.CPU)")
    if need_kernels and not kernels:
        raise ProfilerTraceError(path, "traceEvents", "no GPU kernel events (cat 'kernel'): the "
                                 "step was not profiled with ProfilerActivity.CUDA or ran on the CPU; "
                                 "pass --cpu-times to use CPU operator durations instead")
    outermost = _outermost_by_thread(cpu_ops)
    attributed = _attribute_kernels(outermost, runtimes, kernels)
    if need_kernels and attributed == 0:
        raise ProfilerTraceError(path, "traceEvents", f"{len(kernels)} kernel events, but none has a "
                                 "launch (cuda_runtime event with the same 'correlation') inside a "
                                 "CPU operator")
    ops = sorted((op for ops in outermost.values() for op in ops), key=lambda o: (o.start_ns, -o.end_ns))
    return ProfilerTrace(path, ops, len(kernels), attributed)


def _read_events(path: Path) -> list:
    doc = _read_json(path, parse_float=Decimal)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ProfilerTraceError(path, "top level", "expected a JSON object with a 'traceEvents' list "
                                 "(a torch.profiler Chrome trace)")
    return doc["traceEvents"]


def _split_events(path: Path, events: list) -> tuple[list, dict, list]:
    cpu_ops: list[ProfiledOp] = []
    runtimes: dict[Any, tuple[tuple, int, int]] = {}       # correlation -> (thread, start, end)
    kernels: list[tuple[Any, int, int]] = []                # (correlation, start, end)
    for index, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        try:
            if cat in _CPU_OP_CATS:
                start = to_ns(ev["ts"])
                args = ev.get("args") or {}
                rf = args.get("Record function id")
                cpu_ops.append(ProfiledOp(str(ev["name"]), (ev.get("pid"), ev.get("tid")), start,
                                          start + to_ns(ev["dur"]), None if rf is None else int(rf)))
            elif cat == "kernel":
                start = to_ns(ev["ts"])
                kernels.append((ev["args"]["correlation"], start, start + to_ns(ev["dur"])))
            elif cat.endswith(("runtime", "driver")) and "correlation" in (ev.get("args") or {}):
                start = to_ns(ev["ts"])
                runtimes[ev["args"]["correlation"]] = ((ev.get("pid"), ev.get("tid")), start,
                                                       start + to_ns(ev["dur"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProfilerTraceError(path, f"traceEvents[{index}] ({ev.get('name', '?')})",
                                     f"a '{cat}' event needs numeric 'ts', 'dur' (and for kernels "
                                     f"args.correlation): {exc}") from None
    return cpu_ops, runtimes, kernels


def _outermost_by_thread(cpu_ops: list[ProfiledOp]) -> dict[tuple, list[ProfiledOp]]:
    """Per thread, the operators not inside another operator, sorted by start."""
    threads: dict[tuple, list[ProfiledOp]] = {}
    for op in cpu_ops:
        threads.setdefault(op.thread, []).append(op)
    outermost = {}
    for thread, ops in threads.items():
        ops.sort(key=lambda o: (o.start_ns, -o.end_ns))      # stable: file order breaks ties
        top: list[ProfiledOp] = []
        open_end = None
        for op in ops:
            if open_end is None or op.start_ns >= open_end:
                top.append(op)
                open_end = op.end_ns
            # else: nested in (or overlapping) the open outermost operator
        outermost[thread] = top
    return outermost


def _attribute_kernels(outermost: dict, runtimes: dict, kernels: list) -> int:
    starts = {thread: [op.start_ns for op in ops] for thread, ops in outermost.items()}
    attributed = 0
    for correlation, k_start, k_end in kernels:
        launch = runtimes.get(correlation)
        if launch is None or launch[0] not in outermost:
            continue
        thread, r_start, r_end = launch
        i = bisect.bisect_right(starts[thread], r_start) - 1
        if i < 0:
            continue
        op = outermost[thread][i]
        if r_end > op.end_ns:
            continue                                         # launched between operators
        op.kernel_count += 1
        op.kernel_ns += k_end - k_start
        op.first_kernel_ns = k_start if op.first_kernel_ns is None else min(op.first_kernel_ns, k_start)
        op.last_kernel_end_ns = k_end if op.last_kernel_end_ns is None else max(op.last_kernel_end_ns, k_end)
        attributed += 1
    return attributed
