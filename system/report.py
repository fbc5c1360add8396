"""What a run produced, for people (a short table) and for tools (JSON).

Per rank: finish time, and a breakdown in which compute + exposed communication + idle = finish.
Compute is time the GPU-compute slot was busy; communication is time any collective, send,
receive or remote-memory access was in flight; exposed communication is communication not
overlapped by compute; idle is neither.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from chakra_proto import et_def_pb2 as pb

NS_PER_S = 1_000_000_000
_COMM_TYPES = {pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE}


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _length(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in iv)


def _intersection_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def rank_breakdown(workload: Any) -> dict[str, Any]:
    nodes = workload.graph.nodes
    comp, comm = [], []
    for nid, s, e in workload.records:
        n = nodes[nid]
        if n.type == pb.COMP_NODE and not n.is_cpu_op:
            comp.append((s, e))
        elif n.type in _COMM_TYPES:
            comm.append((s, e))
    comp_u, comm_u = _union(comp), _union(comm)
    finish = workload.finish_time or 0
    compute = _length(comp_u)
    comm_total = _length(comm_u)
    overlap = _intersection_length(comp_u, comm_u)
    exposed = comm_total - overlap
    idle = finish - compute - exposed
    return {
        "rank": workload.rank,
        "finish_cycles": finish,
        "finish_seconds": finish / NS_PER_S,
        "compute_cycles": compute,
        "comm_cycles": comm_total,
        "exposed_comm_cycles": exposed,
        "idle_cycles": idle,
        "overlap_pct": round(100.0 * overlap / comm_total, 3) if comm_total else 0.0,
        "nodes": len(nodes),
    }


def build_report(result: Any) -> dict[str, Any]:
    ranks = [rank_breakdown(w) for w in result.workloads]
    fin = [r["finish_cycles"] for r in ranks]
    return {
        "inputs": result.inputs,
        "backend": result.backend,
        "npus": result.npus_count,
        "ranks": ranks,
        "totals": {
            "end_cycles": max(fin) if fin else 0,
            "end_seconds": (max(fin) if fin else 0) / NS_PER_S,
            "min_finish_cycles": min(fin) if fin else 0,
            "mean_finish_cycles": sum(fin) / len(fin) if fin else 0,
            "events": result.events,
            "wall_seconds": round(result.wall_s, 6),
        },
        "network": result.network_stats,
    }


def _ranges(values: list[int]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for r, v in enumerate(values):
        if out and out[-1][2] == v and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r, v)
        else:
            out.append((r, r, v))
    return out


def format_summary(result: Any, quiet: bool = False, per_rank_limit: int = 64) -> str:
    lines = []
    fin = result.finish_ns
    if not quiet:
        if len(fin) <= per_rank_limit:
            lines += [f"sys[{r}] finished, {t} cycles ({t / NS_PER_S:.9g} s)" for r, t in enumerate(fin)]
        else:  # thousands of ranks: equal neighbours share a line
            for a, b, t in _ranges(fin):
                who = f"sys[{a}]" if a == b else f"sys[{a}..{b}]"
                lines.append(f"{who} finished, {t} cycles ({t / NS_PER_S:.9g} s)")
    end = max(fin) if fin else 0
    lines.append(
        f"total: {len(fin)} ranks on {result.inputs.get('topology')} ({result.backend}); "
        f"end {end} cycles ({end / NS_PER_S:.9g} s), min {min(fin) if fin else 0}, "
        f"mean {sum(fin) / len(fin) if fin else 0:.1f}; {result.events} events in {result.wall_s:.3f} s wall"
    )
    return "\n".join(lines)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write to a temporary file, then rename: an interrupted run never leaves half a report."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
