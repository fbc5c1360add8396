"""Per-rank timelines in PyTorch's Kineto trace format, for Perfetto and Holistic Trace Analysis.

One file per rank, ``rank{r}.json``: GPU compute nodes become ``kernel`` events on a compute
stream; collectives, sends and receives become ``ncclDevKernel_*`` kernels on communication
streams; remote-memory loads and stores become ``Memcpy`` events; CPU-only nodes become
``cpu_op`` events. What HTA needs (docs/formats.md §B, verified against HTA 0.5.0):

* ``distributedInfo`` first, written with json's default separators: HTA takes the rank from
  the first match of ``"rank":\\s+(\\d+)`` in the file, so ``"rank":0`` would read as no rank;
* ``args.stream`` on every GPU event (HTA fails to load a trace without any);
* communication kernels named ``nccl...Kernel...`` (HTA classifies kernels by name) and compute
  kernels named so that they do not look like communication, memory or sync kernels;
* no two events of one stream overlap (else HTA's idle time goes negative): events are put on
  the first stream lane that is free, so a rank's concurrent receives get lanes of their own;
* no ``ProfilerStep`` annotations (with two or more HTA drops the last step and every kernel
  without a matching CPU launch).

Time is in µs (Kineto's unit), as floats that keep the simulator's nanoseconds.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chakra_proto import et_def_pb2 as pb
from system.report import collective_records
from system.report_json import write_json_atomic
from system.waiting import communication_starts

COMPUTE_STREAM = 7  #: first compute stream (PyTorch's default stream is 7 in Kineto traces)
COMM_STREAM = 20  #: first communication stream; concurrent communication takes 21, 22, ...
CPU_TID = 1  #: the thread CPU-only nodes run on
WAIT_TID = 2  #: the first track of receives and collectives waiting for a peer (more: 2003, 2004, ...)
_LANE_GAP = 1000  # compute lanes past 19 would meet the comm streams: they go to 1007, 1008, ...

_COLL = {"ALL_REDUCE": "AllReduce", "ALL_GATHER": "AllGather", "REDUCE_SCATTER": "ReduceScatter",
         "ALL_TO_ALL": "AllToAll", "BROADCAST": "Broadcast"}
# hta.utils.utils.NCCL_COMPUTE_KERNEL_RE: a name it matches is not a computation kernel for HTA
_HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def compute_kernel_name(name: str) -> str:
    """The node's name, changed only where HTA would not count it as computation
    (``Memcpy``, ``Memset``, ``Sync`` anywhere, a leading ``nccl``): those are lower-cased."""
    if not name:
        return "compute"
    if _HTA_NOT_COMPUTE.match(name):
        name = name.replace("Memcpy", "memcpy").replace("Memset", "memset").replace("Sync", "sync")
        if name.startswith("nccl"):
            name = "NCCL" + name[4:]
    return name


def comm_kernel_name(coll_type: str, algorithm: str | None) -> str:
    """``ncclDevKernel_<Coll>_<ALGORITHM>``, as NCCL names its kernels, so HTA sees communication."""
    coll = _COLL.get(coll_type, coll_type.title().replace("_", ""))
    if not algorithm or algorithm == "replay":
        return f"ncclDevKernel_{coll}"
    return f"ncclDevKernel_{coll}_{re.sub(r'[^A-Za-z0-9]+', '_', algorithm).upper()}"


class _Lanes:
    """Streams for one kind of work: an event takes the first stream whose last event has ended."""

    def __init__(self, first: int, limit: int | None = None, gap: int = _LANE_GAP) -> None:
        self.first = first
        self.limit = limit
        self.gap = gap
        self.ends: list[int] = []

    def take(self, start: int, end: int) -> int:
        for i, last in enumerate(self.ends):
            if last <= start:
                self.ends[i] = end
                return self._stream(i)
        self.ends.append(end)
        return self._stream(len(self.ends) - 1)

    def _stream(self, i: int) -> int:
        s = self.first + i
        return s if self.limit is None or s < self.limit else self.gap + s


def _us(ns: int) -> float:
    return ns / 1000


def rank_trace(workload: Any, world_size: int, extra: dict[str, Any] | None = None,
               comm_starts: dict[int, int] | None = None) -> dict[str, Any]:
    """The Kineto trace of one rank, as a dict whose first key is ``distributedInfo``;
    ``comm_starts`` as for system.report.rank_breakdown."""
    rank = workload.rank
    begun = comm_starts or {}
    nodes = workload.graph.nodes
    colls = {c["node"]: c for c in collective_records(workload, begun)}
    compute, comm = _Lanes(COMPUTE_STREAM, COMM_STREAM), _Lanes(COMM_STREAM)
    waits = _Lanes(WAIT_TID, WAIT_TID + 1, gap=2000)
    events: list[dict[str, Any]] = []
    threads: dict[int, str] = {}
    records = [(nid, begun.get(nid, s), e, s) for nid, s, e in workload.records]
    peer = getattr(workload, "peer", None)  # a view of a representative's workload (orbit runs)
    for nid, s, e, issued in sorted(records, key=lambda r: (r[1], r[2], r[0])):
        node = nodes[nid]
        t = node.type
        if s > issued:
            tid = waits.take(issued, s)
            threads[tid] = "waiting for peers"
            events.append({"ph": "X", "cat": "user_annotation", "name": f"wait: {node.name or node.type_name}",
                           "pid": rank, "tid": tid, "ts": _us(issued), "dur": _us(s - issued),
                           "args": {"node_id": nid}})
        if t == pb.COMP_NODE and node.is_cpu_op:
            threads[CPU_TID] = "CPU"
            events.append({"ph": "X", "cat": "cpu_op", "name": node.name or "cpu_op", "pid": rank, "tid": CPU_TID,
                           "ts": _us(s), "dur": _us(e - s), "args": {"node_id": nid}})
            continue
        if t == pb.COMP_NODE:
            stream = compute.take(s, e)
            threads[stream] = f"stream {stream} (compute)"
            cat, name = "kernel", compute_kernel_name(node.name)
            args: dict[str, Any] = {}
        elif t == pb.COMM_COLL_NODE:
            c = colls.get(nid)
            stream = comm.take(s, e)
            cat = "kernel"
            name = comm_kernel_name(c["type"] if c else "ALL_REDUCE", c["algorithm"] if c else None)
            args = {} if c is None else {
                "collective": c["type"], "bytes": c["size_bytes"], "algorithm": c["algorithm"],
                "group size": c["group_size"], "pg": c["pg"], "algbw (GB/s)": c["algbw_gb_s"],
                "busbw (GB/s)": c["busbw_gb_s"]}
        elif t in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            stream = comm.take(s, e)
            send = t == pb.COMM_SEND_NODE
            cat, name = "kernel", "ncclDevKernel_Send" if send else "ncclDevKernel_Recv"
            other = node.comm_dst if send else node.comm_src
            args = {"peer": other if peer is None or other is None else peer(other), "tag": node.comm_tag,
                    "bytes": node.comm_size}
        elif t in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE):
            stream = comm.take(s, e)
            load = t == pb.MEM_LOAD_NODE
            cat = "gpu_memcpy"
            name = "Memcpy RtoD (Remote -> Device)" if load else "Memcpy DtoR (Device -> Remote)"
            args = {"bytes": node.tensor_size}
        else:  # metadata and invalid nodes take no time
            continue
        if stream not in threads:
            threads[stream] = f"stream {stream} (communication)"
        events.append({"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": stream, "ts": _us(s),
                       "dur": _us(e - s), "args": {"stream": stream, "device": rank, "node_id": nid,
                                                   "node_name": node.name, **args}})
    meta = [{"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}},
            {"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}}]
    meta += [{"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": label}}
             for tid, label in sorted(threads.items())]
    return {
        "distributedInfo": {"rank": rank, "world_size": world_size, "backend": "nccl"},
        "schemaVersion": 1,
        "traceName": f"dtsim rank {rank}",
        "dtsim": {"finish_ns": workload.finish_time, **(extra or {})},
        "traceEvents": meta + events,
    }


def write_traces(result: Any, out_dir: str | Path) -> list[Path]:
    """Write ``rank{r}.json`` for every rank into ``out_dir`` (each file atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    extra = {"backend": result.backend, "topology": result.inputs.get("topology")}
    begun = communication_starts(result.workloads, bool(result.inputs.get("symmetric_fast_path")))
    paths = []
    for w, b in zip(result.workloads, begun):
        p = out / f"rank{w.rank}.json"
        write_json_atomic(p, rank_trace(w, result.npus_count, extra, b), indent=None)
        paths.append(p)
    return paths
