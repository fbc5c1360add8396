"""One record per collective and rank, with the bandwidths nccl-tests reports, and their summary.

algbw = S / t, with S the collective's full buffer (for all-gather the gathered output,
N × comm_size, since Chakra's comm_size is the per-rank input; semantics §7), and busbw =
algbw × 2(N−1)/N for all-reduce, × (N−1)/N for all-gather, reduce-scatter and all-to-all, × 1 for
broadcast (``nccl-tests`` doc/PERFORMANCE.md). Bytes per ns are GB/s (10^9 bytes/s).
"""
from __future__ import annotations

import math
from typing import Any

# collective -> (busbw factor as a function of N, whether S is N x comm_size)
_BUS_FACTOR = {
    "ALL_REDUCE": (lambda n: 2 * (n - 1) / n, False),
    "ALL_GATHER": (lambda n: (n - 1) / n, True),
    "REDUCE_SCATTER": (lambda n: (n - 1) / n, False),
    "ALL_TO_ALL": (lambda n: (n - 1) / n, False),
    "BROADCAST": (lambda n: 1.0, False),
}



def nccl_bandwidths(coll_type: str, size_bytes: int, ranks: int, duration_ns: int) -> tuple[int, float | None, float | None]:
    """(S bytes, algbw GB/s, busbw GB/s) as nccl-tests defines them; bandwidths are None for
    a collective that took no time."""
    factor, gathered = _BUS_FACTOR.get(coll_type, (lambda n: 1.0, False))
    data = size_bytes * ranks if gathered else size_bytes
    if duration_ns <= 0:
        return data, None, None
    algbw = data / duration_ns  # bytes/ns = GB/s
    return data, round(algbw, 6), round(algbw * (factor(ranks) if ranks > 0 else 1.0), 6)


def collective_group_size(workload: Any, node: Any) -> int:
    """How many ranks take part: the communicator group's size, else the product of the
    dimensions the node involves (all of them without ``involved_dim``)."""
    pg = node.pg_name
    if pg not in (None, "", "0"):
        group = workload.comm_groups.get(int(pg))
        if group is not None:
            return len(group.involved_npus)
    involved = node.involved_dim
    dims = workload.sys.physical_dims
    return math.prod(d for i, d in enumerate(dims) if involved is None or i >= len(involved) or involved[i])


def collective_records(workload: Any, comm_starts: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """One entry per collective this rank ran, in completion order. ``wait_cycles`` is the time
    from its issue until its last member entered (``comm_starts``); the bandwidths are those of
    the rest, as nccl-tests measures collectives that all ranks enter together."""
    nodes = workload.graph.nodes
    begun = comm_starts or {}
    rank = workload.rank
    sizes: dict[tuple, int] = {}  # (pg, involved dims) → group size: a few per rank
    out = []
    for c in workload.collectives:
        nid = c["node"]
        node = nodes[nid]
        inv = node.involved_dim
        key = (node.pg_name, None if inv is None else tuple(inv))
        n = sizes.get(key)
        if n is None:
            n = sizes[key] = collective_group_size(workload, node)
        start = c["start"]
        duration = c["end"] - start
        wait = begun.get(nid, start) - start
        data, algbw, busbw = nccl_bandwidths(c["type"], c["size"], n, duration - wait)
        out.append({
            "rank": rank,
            "node": nid,
            "name": node.name,
            "type": c["type"],
            "size_bytes": c["size"],
            "algorithm": c.get("algorithm"),
            "group_size": n,
            "pg": c["pg"] or None,
            "start_cycles": start,
            "end_cycles": c["end"],
            "duration_cycles": duration,
            "wait_cycles": wait,
            "algbw_bytes": data,
            "algbw_gb_s": algbw,
            "busbw_gb_s": busbw,
        })
    return out


def summarise_collectives(records: list[dict[str, Any]], weight: int = 1) -> list[dict[str, Any]]:
    """Collectives grouped by (type, size, algorithm, ranks), over all ranks that ran them
    (``weight``: each record stands for that many equal ones)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["type"], r["size_bytes"], r["algorithm"], r["group_size"]), []).append(r)
    out = []
    for (ctype, size, algo, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]), kv[0][3])):
        mean = sum(r["duration_cycles"] for r in rs) / len(rs)
        mean_wait = sum(r.get("wait_cycles", 0) for r in rs) / len(rs)
        data, algbw, busbw = nccl_bandwidths(ctype, size, n, mean - mean_wait)
        out.append({
            "type": ctype, "size_bytes": size, "algorithm": algo, "group_size": n, "count": len(rs) * weight,
            "mean_duration_cycles": round(mean, 3),
            "max_duration_cycles": max(r["duration_cycles"] for r in rs),
            "mean_wait_cycles": round(mean_wait, 3),
            "algbw_gb_s": algbw, "busbw_gb_s": busbw,
        })
    return out
