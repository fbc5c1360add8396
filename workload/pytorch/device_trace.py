"""What the converter takes from a Kineto trace (``torch.profiler`` ``export_chrome_trace`` JSON).

* host events (``cpu_op``, ``user_annotation``) with ``Record function id``: the measured span of
  each execution-trace node (its ``rf_id``) and the thread it ran on;
* runtime events (``cuda_runtime`` / ``cuda_driver``): kernel launches (``args.correlation``) and
  host waits for the device (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, ...);
* GPU events (``kernel``, ``gpu_memcpy``, ``gpu_memset``) with their stream and launch correlation;
* ``distributedInfo``: the rank, the world size and the process groups (``pg_config``).

Times are integer nanoseconds (microsecond decimals scaled without rounding loss).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload.collect.profiler_trace import to_ns
from workload.pytorch.errors import PyTorchTraceError

_HOST_CATS = frozenset({"cpu_op", "operator", "user_annotation"})   # not gpu_user_annotation: GPU time
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


@dataclass(slots=True)
class Span:
    """One host event: where and when it ran."""

    name: str
    thread: tuple
    start_ns: int
    end_ns: int
    args: dict

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class GpuEvent:
    name: str
    stream: Any
    start_ns: int
    end_ns: int
    correlation: Any
    args: dict

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns

    def is_nccl(self) -> bool:
        low = self.name.lower()
        return low.startswith("nccl") and "kernel" in low


@dataclass
class DeviceTrace:
    path: Path
    rank: int | None
    world_size: int | None
    pid: Any
    pg_config: list[dict]
    by_rf: dict[int, Span] = field(default_factory=dict)
    launches: dict[Any, Span] = field(default_factory=dict)     # correlation -> runtime call
    syncs: list[Span] = field(default_factory=list)             # host waits for the device
    gpu: list[GpuEvent] = field(default_factory=list)
    steps: list[Span] = field(default_factory=list)             # ProfilerStep#N annotations
    host_name: str | None = None                                # the machine (one clock for its ranks)


def device_trace_from_doc(path: Path, doc: dict) -> DeviceTrace:
    info = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    trace = DeviceTrace(path, _int_or_none(info.get("rank")), _int_or_none(info.get("world_size")), None,
                        [c for c in info.get("pg_config") or [] if isinstance(c, dict)])
    if isinstance(doc.get("host_name"), str) and doc["host_name"]:
        trace.host_name = doc["host_name"]
    for index, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        try:
            _take(trace, ev)
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
            raise PyTorchTraceError(path, f"traceEvents[{index}] ({ev.get('name', '?')})",
                                    f"a '{ev.get('cat')}' event needs numeric 'ts' and 'dur' ({exc})") from None
    if not trace.by_rf:
        raise PyTorchTraceError(path, "traceEvents", "no host event carries a 'Record function id': the "
                                "trace must come from torch 2.2 or later, recorded with "
                                "torch.profiler (ProfilerActivity.CPU) in the same run as the execution trace")
    return trace


def _take(trace: DeviceTrace, ev: dict) -> None:
    cat = str(ev.get("cat", "")).lower()
    args = ev.get("args") or {}
    if cat in _HOST_CATS:
        span = _span(ev, args)
        rf = args.get("Record function id")
        if rf is not None:
            trace.by_rf[int(rf)] = span
        if str(ev.get("name", "")).startswith("ProfilerStep#"):
            trace.steps.append(span)
        if trace.pid is None:
            trace.pid = ev.get("pid")
    elif cat in _GPU_CATS:
        start = to_ns(ev["ts"])
        trace.gpu.append(GpuEvent(str(ev.get("name", "")), args.get("stream", ev.get("tid")), start,
                                  start + to_ns(ev["dur"]), args.get("correlation"), args))
    elif cat.endswith(("runtime", "driver")):
        span = _span(ev, args)
        if "synchronize" in span.name.lower() or span.name in ("cudaMemcpy", "hipMemcpy"):
            trace.syncs.append(span)
        if "correlation" in args:
            trace.launches[args["correlation"]] = span


def _span(ev: dict, args: dict) -> Span:
    start = to_ns(ev["ts"])
    return Span(str(ev.get("name", "")), (ev.get("pid"), ev.get("tid")), start, start + to_ns(ev["dur"]), args)


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None or isinstance(value, bool) else int(value)
    except (TypeError, ValueError):
        return None
