"""One record per collective and rank, with the bandwidths nccl-tests reports, and their summary.

algbw = S / t, with S the collective's full buffer (for all-gather the gathered output,
N × comm_size, since Chakra's comm_size is the per-rank input; semantics §7), and busbw =
algbw × 2(N−1)/N for all-reduce, × (N−1)/N for all-gather, reduce-scatter and all-to-all, × 1 for
broadcast (``nccl-tests`` doc/PERFORMANCE.md). Bytes per ns are GB/s (10^9 bytes/s).
"""
from __future__ import annotations

import math
from functools import lru_cache

from chakra_proto.enums import COLLECTIVE_NAMES

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Iterable

# collective -> (busbw factor as a function of N, whether S is N x comm_size)
_BUS_FACTOR = {
    "ALL_REDUCE": (lambda n: 2 * (n - 1) / n, False),
    "ALL_GATHER": (lambda n: (n - 1) / n, True),
    "REDUCE_SCATTER": (lambda n: (n - 1) / n, False),
    "ALL_TO_ALL": (lambda n: (n - 1) / n, False),
    "BROADCAST": (lambda n: 1.0, False),
}
_NO_FACTOR = (lambda n: 1.0, False)


def nccl_bandwidths(coll_type: str, size_bytes: int, ranks: int, duration_ns: int) -> tuple[int, float | None, float | None]:
    """(S bytes, algbw GB/s, busbw GB/s) as nccl-tests defines them; bandwidths are None for
    a collective that took no time."""
    factor, gathered = _BUS_FACTOR.get(coll_type, _NO_FACTOR)
    data = size_bytes * ranks if gathered else size_bytes
    if duration_ns <= 0:
        return data, None, None
    return (data, *_gb_s(data, duration_ns, factor(ranks) if ranks > 0 else 1.0))


@lru_cache(maxsize=1 << 12, typed=True)  # ranks that ran a collective alike share its figures; round() is slow
def _gb_s(data: int, duration_ns: int, bus_factor: float) -> tuple[float, float]:
    algbw = data / duration_ns  # bytes/ns = GB/s
    return round(algbw, 6), round(algbw * bus_factor, 6)


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


def collective_records(workload: Any, comm_starts: dict[int, int] | None = None,
                       rows: bool = False) -> list[dict[str, Any]] | list[tuple]:
    """One entry per collective this rank ran, in completion order. ``wait_cycles`` is the time
    from its issue until its last member entered (``comm_starts``); the bandwidths are those of
    the rest, as nccl-tests measures collectives that all ranks enter together. ``rows``: what
    the summary reads of each instead (summarise_rows), without the record."""
    begun = comm_starts or {}
    if rows:
        return _rows(workload, begun)
    sizes: dict[tuple, int] = {}  # (pg, involved dims) → group size: a few per rank
    nodes = workload.graph.nodes
    rank = workload.rank
    scales: dict[tuple, tuple[float, bool]] = {}  # (type, group size) → busbw factor, whether S is N x size
    out = []
    for c in workload.collectives:
        nid = c["node"]
        node = nodes[nid]
        inv = node.involved_dim
        key = (node.pg_name, None if inv is None else tuple(inv))
        n = sizes.get(key)
        if n is None:
            n = sizes[key] = collective_group_size(workload, node)
        ctype, size, start, end = c["type"], c["size"], c["start"], c["end"]
        duration = end - start
        wait = begun.get(nid, start) - start
        scale = scales.get((ctype, n))
        if scale is None:
            factor, gathered = _BUS_FACTOR.get(ctype, _NO_FACTOR)
            scale = scales[(ctype, n)] = (factor(n) if n > 0 else 1.0, gathered)
        data = size * n if scale[1] else size  # nccl_bandwidths, its factor found once per type and group size
        t = duration - wait
        algbw_gb_s, busbw_gb_s = _gb_s(data, t, scale[0]) if t > 0 else (None, None)
        out.append({
            "rank": rank,
            "node": nid,
            "name": node.name,
            "type": ctype,
            "size_bytes": size,
            "algorithm": c.get("algorithm"),
            "group_size": n,
            "pg": c["pg"] or None,
            "start_cycles": start,
            "end_cycles": end,
            "duration_cycles": duration,
            "wait_cycles": wait,
            "algbw_bytes": data,
            "algbw_gb_s": algbw_gb_s,
            "busbw_gb_s": busbw_gb_s,
        })
    return out


def _rows(workload: Any, begun: dict[int, int]) -> list[tuple]:
    """collective_records' rows from the workload's collective_timings: the same values, without
    a dict per collective that the summary never reads."""
    sizes: dict[tuple, int] = {}  # (pg, involved dims) → group size: a few per rank
    out = []
    for node, start, end, algorithm in workload.collective_timings():
        inv = node.involved_dim
        key = (node.pg_name, None if inv is None else tuple(inv))
        n = sizes.get(key)
        if n is None:
            n = sizes[key] = collective_group_size(workload, node)
        out.append((COLLECTIVE_NAMES[node.comm_type], node.comm_size, algorithm, n, end - start,
                    begun.get(node.id, start) - start))
    return out


def summarise_collectives(records: list[dict[str, Any]], weight: int = 1) -> list[dict[str, Any]]:
    """Collectives grouped by (type, size, algorithm, ranks), over all ranks that ran them
    (``weight``: each record stands for that many equal ones)."""
    return summarise_parts([(records, weight)])


def summarise_parts(parts: Iterable[tuple[list[dict[str, Any]], int]]) -> list[dict[str, Any]]:
    """``summarise_collectives`` of lists of records, each record of a list standing for as many
    equal ones as the list's weight (the ranks that ran a representative's collectives alike)."""
    return summarise_rows(([(r["type"], r["size_bytes"], r["algorithm"], r["group_size"], r["duration_cycles"],
                             r.get("wait_cycles", 0)) for r in records], weight) for records, weight in parts)


def summarise_rows(parts: Iterable[tuple[list[tuple], int]]) -> list[dict[str, Any]]:
    """``summarise_parts`` of rows (``collective_records(..., rows=True)``: type, size, algorithm,
    ranks, duration, wait), which the terminal's summary reads without the records."""
    groups: dict[tuple, list[int]] = {}  # (type, size, algorithm, ranks) → [count, Σ duration, Σ wait, longest]
    for rows, weight in parts:
        for ctype, size, algorithm, ranks, d, w in rows:
            key = (ctype, size, algorithm, ranks)
            g = groups.get(key)
            if g is None:
                groups[key] = [weight, d * weight, w * weight, d]
            else:
                g[0] += weight
                g[1] += d * weight
                g[2] += w * weight
                if d > g[3]:
                    g[3] = d
    out = []
    for (ctype, size, algo, n), (count, total, total_wait, longest) in sorted(
            groups.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]), kv[0][3])):
        # cycles are integers: the weighted totals are exact, and int / int is correctly rounded,
        # so a mean is the same whichever way its records were counted
        mean, mean_wait = total / count, total_wait / count
        data, algbw, busbw = nccl_bandwidths(ctype, size, n, mean - mean_wait)
        out.append({
            "type": ctype, "size_bytes": size, "algorithm": algo, "group_size": n, "count": count,
            "mean_duration_cycles": round(mean, 3),
            "max_duration_cycles": longest,
            "mean_wait_cycles": round(mean_wait, 3),
            "algbw_gb_s": algbw, "busbw_gb_s": busbw,
        })
    return out
