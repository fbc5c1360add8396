"""What a run produced, for people (a short table) and for tools (JSON).

Per rank: finish time, and a breakdown in which compute + exposed communication + exposed CPU
+ idle = finish. Compute is time the GPU-compute slot was busy; communication is time any
collective, send, receive or remote-memory access was moving data (a receive from the moment
its matching send was issued, a collective from the moment its last member entered it:
system/waiting.py); exposed communication is communication not overlapped by compute; CPU is
time the CPU slot was busy, exposed CPU the part of it under neither compute nor
communication; idle is the rest, and waiting (for a peer's send or a collective's last
member, under nothing else) is part of idle. docs/results.md defines each key.

Per collective (one entry per rank that ran it): type, size, the implementation the system
config chose, start, end, and the bandwidths NCCL's tests report (``nccl-tests``
doc/PERFORMANCE.md): algbw = S / t, with S the collective's full buffer (for all-gather the
gathered output, N × comm_size, since Chakra's comm_size is the per-rank input; semantics §7),
and busbw = algbw × 2(N−1)/N for all-reduce, × (N−1)/N for all-gather, reduce-scatter and
all-to-all, × 1 for broadcast. Bytes per ns are GB/s (10^9 bytes/s), as NCCL prints them.
Per network dimension: the bytes the backend moved in it.
"""
from __future__ import annotations

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from system.collective_records import (  # noqa: F401 (re-exported: report.py's public names)
    collective_group_size,
    collective_records,
    nccl_bandwidths,
    summarise_collectives,
    summarise_parts,
    summarise_rows,
)
from system.sys_core import SYS_CORE
from system.waiting import communication_starts, orbit_communication_starts

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

NS_PER_S = 1_000_000_000
_union_length = None if SYS_CORE is None else SYS_CORE.union_length
_COMM_TYPES = {pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE}


def _covered(intervals: list[tuple[int, int]]) -> int:
    """The length of the union of ``intervals``: _covered_sweep's, in C where compiled."""
    total = _union_length(intervals) if _union_length is not None else None
    return total if total is not None else _covered_sweep(intervals)


def _covered_sweep(intervals: list[tuple[int, int]]) -> int:
    """The length of the union of ``intervals``, in one sweep."""
    total, reach = 0, float("-inf")
    for s, e in sorted(intervals):
        if s < reach:
            s = reach
        if e > s:
            total += e - s
            reach = e
    return total


def rank_breakdown(workload: Any, comm_starts: dict[int, int] | None = None) -> dict[str, Any]:
    """One rank's figures; ``comm_starts`` (system.waiting.communication_starts) says when the
    communication of the nodes that waited for a peer began."""
    nodes = workload.graph.nodes
    begun = comm_starts or {}
    comp, comm, cpu, wait = [], [], [], []
    comp_node, comm_types = pb.COMP_NODE, _COMM_TYPES
    for nid, s, e in workload.records:
        n = nodes[nid]
        t = n.type
        if t == comp_node:
            (cpu if n.is_cpu_op else comp).append((s, e))
        elif t in comm_types:
            c = begun.get(nid, s)
            if c > s:
                wait.append((s, c))
                comm.append((c, e))
            else:
                comm.append((s, e))
    # each figure is the length of a union, an overlap |A ∩ B| = |A| + |B| - |A ∪ B|: a sweep
    # per union, where unions of unions and intersections of them took nine
    compute = _covered(comp)
    comm_total = _covered(comm)
    gpu = _covered(comp + comm)
    overlap = compute + comm_total - gpu
    cpu_total = _covered(cpu) if cpu else 0
    busy = _covered(comp + comm + cpu) if cpu else gpu
    waiting = _covered(comp + comm + cpu + wait) - busy if wait else 0
    finish = workload.finish_time or 0
    exposed = gpu - compute
    exposed_cpu = busy - gpu
    idle = finish - compute - exposed - exposed_cpu
    return {
        "rank": workload.rank,
        "finish_cycles": finish,
        "finish_seconds": finish / NS_PER_S,
        "compute_cycles": compute,
        "comm_cycles": comm_total,
        "exposed_comm_cycles": exposed,
        "cpu_cycles": cpu_total,
        "exposed_cpu_cycles": exposed_cpu,
        "idle_cycles": idle,
        "wait_cycles": waiting,
        "overlap_pct": round(100.0 * overlap / comm_total, 3) if comm_total else 0.0,
        "nodes": len(nodes),
    }


def _communication_starts(result: Any) -> list[dict[int, int]]:
    orbits = getattr(result, "orbits", None)
    if orbits is not None:
        return orbit_communication_starts(result.workloads, orbits)
    return communication_starts(result.workloads, bool(result.inputs.get("symmetric_fast_path")))


# -- the whole report ----------------------------------------------------------------------------

def network_dimensions(result: Any) -> list[dict[str, Any]]:
    moved = list(result.network_stats.get("bytes_per_dim", []))
    topo = result.systems[0].backend.topology if result.systems else None
    dims = list(topo.dims) if topo is not None else []
    out = []
    for i in range(max(len(moved), len(dims))):
        entry: dict[str, Any] = {"dim": i}
        if i < len(dims):
            d = dims[i]
            entry.update(topology=d.kind.value, npus=d.npus_count, bandwidth_gb_s=d.bandwidth_gb_s,
                         latency_ns=d.latency_ns)
        entry["bytes"] = moved[i] if i < len(moved) else 0
        out.append(entry)
    return out


def _per_rank(result: Any, records: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[list]]:
    """Every rank's breakdown and collectives, and the collectives as parts for the summary:
    [records, the ranks that ran them alike]. A view of a representative's workload
    (simulation.RankView) that waited as it did has its figures, under its own rank and groups.
    Without ``records``: no collectives, and the parts hold rows (collective_records' ``rows``)."""
    begun = _communication_starts(result)
    ranks, colls, parts = [], [], []
    done: dict[int, tuple[dict[int, int], dict[str, Any], list[dict[str, Any]], list]] = {}
    # a workload written per orbit: the report lists the representatives' collectives only (each
    # stands for |G| records that differ in rank and group alone; the summary counts them all)
    reps_only = bool(result.inputs.get("per_orbit_files"))
    for w, b in zip(result.workloads, begun):
        viewed = getattr(w, "viewed", w)
        seen = done.get(id(viewed))
        if seen is not None and (seen[0] is b or seen[0] == b):
            rank = w.rank
            ranks.append(dict(seen[1], rank=rank))
            if not records:
                if not reps_only:
                    seen[3][1] += 1
                continue
            if not reps_only:  # its records are the representative's, in its rank and groups
                names = {pg: w.group_name(pg) for pg in {c["pg"] for c in seen[2]}}  # a few groups per rank
                colls.extend([dict(c, rank=rank, pg=names[c["pg"]]) for c in seen[2]])
                seen[3][1] += 1
            continue
        r, c = rank_breakdown(w, b), collective_records(w, b, rows=not records)
        part = [c, 1]
        if viewed is w:
            done[id(w)] = (b, r, c, part)
        ranks.append(r)
        if records:
            colls.extend(c)
        parts.append(part)
    return ranks, colls, parts


def build_report(result: Any, records: bool = True) -> dict[str, Any]:
    """The whole report; without ``records``, all but its collectives (one per rank and
    collective, which the terminal's table does not show): what format_summary reads."""
    ranks, colls, parts = _per_rank(result, records)
    fin = [r["finish_cycles"] for r in ranks]
    weight = result.orbits.size if result.inputs.get("per_orbit_files") else 1
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
            "compute_cycles": sum(r["compute_cycles"] for r in ranks),
            "exposed_comm_cycles": sum(r["exposed_comm_cycles"] for r in ranks),
            "cpu_cycles": sum(r["cpu_cycles"] for r in ranks),
            "exposed_cpu_cycles": sum(r["exposed_cpu_cycles"] for r in ranks),
            "idle_cycles": sum(r["idle_cycles"] for r in ranks),
            "wait_cycles": sum(r["wait_cycles"] for r in ranks),
            "collectives": sum(len(c) * k for c, k in parts) * weight,  # len(colls) * weight with records
            "events": result.events,
            "wall_seconds": round(result.wall_s, 6),
        },
        "collective_summary": (summarise_parts if records else summarise_rows)((c, k * weight) for c, k in parts),
        **({"collectives": colls} if records else {}),
        **({"collectives_of": f"the {len(result.orbits.reps)} representatives of a workload written per orbit; "
                              f"each record stands for {weight} (its images differ in rank and group only)"}
           if weight > 1 else {}),
        "network": {**result.network_stats, "dimensions": network_dimensions(result)},
    }


# -- the terminal ----------------------------------------------------------------------------------

def _ranges(values: list) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    for r, v in enumerate(values):
        if out and out[-1][2] == v and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r, v)
        else:
            out.append((r, r, v))
    return out


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "    -"


def format_breakdown(report: dict[str, Any], max_rows: int = 16) -> str:
    """The compact table: per rank (equal neighbours share a row), collectives, bytes per dimension.
    The four columns compute, exposed comm, exposed CPU and idle add up to finish; wait is the
    part of idle spent waiting for peers, CPU the time the CPU slot was busy."""
    lines = [f"{'rank':>9}  {'finish':>12}  {'compute':>17}  {'exposed comm':>17}  {'exposed CPU':>17}  "
             f"{'idle':>17}  {'of it wait':>17}  {'CPU':>12}  {'overlap':>7}"]
    keys = ("finish_cycles", "compute_cycles", "exposed_comm_cycles", "exposed_cpu_cycles", "idle_cycles",
            "wait_cycles", "cpu_cycles", "overlap_pct")
    rows = _ranges([tuple(r[k] for k in keys) for r in report["ranks"]])
    for a, b, (fin, comp, exp, exp_cpu, idle, wait, cpu, ov) in rows[:max_rows]:
        who = str(a) if a == b else f"{a}-{b}"
        cells = "  ".join(f"{v:>10} {_pct(v, fin)}" for v in (comp, exp, exp_cpu, idle, wait))
        lines.append(f"{who:>9}  {fin:>12}  {cells}  {cpu:>12}  {ov:>6.1f}%")
    if len(rows) > max_rows:
        lines.append(f"{'':>9}  ... {len(rows) - max_rows} more row(s) in --report")
    summary = report["collective_summary"]
    if summary:
        lines.append(f"{'collective':>15}  {'size':>10}  {'algorithm':>10}  {'ranks':>5}  {'count':>6}  "
                     f"{'mean cycles':>12}  {'of it wait':>10}  {'algbw GB/s':>10}  {'busbw GB/s':>10}")
        for c in summary[:max_rows]:
            bw = lambda v: f"{v:>10.3f}" if v is not None else f"{'-':>10}"  # noqa: E731
            lines.append(f"{c['type']:>15}  {_bytes(c['size_bytes']):>10}  {str(c['algorithm']):>10}  {c['group_size']:>5}  "
                         f"{c['count']:>6}  {c['mean_duration_cycles']:>12.1f}  {c['mean_wait_cycles']:>10.1f}  "
                         f"{bw(c['algbw_gb_s'])}  {bw(c['busbw_gb_s'])}")
        if len(summary) > max_rows:
            lines.append(f"{'':>15}  ... {len(summary) - max_rows} more kind(s) in --report")
    dims = report["network"].get("dimensions", [])
    if dims:
        lines.append("network: " + "; ".join(
            f"dim {d['dim']} {d.get('topology', '?')}({d.get('npus', '?')}) moved {_bytes(d['bytes'])}" for d in dims))
    lines += format_link_classes(report)
    return "\n".join(lines)


def format_link_classes(report: dict[str, Any]) -> list[str]:
    """On a topology file: bytes and utilisation per link class (npu-leaf, leaf-spine, ...), so
    the oversubscribed tier shows. Utilisation: bytes / (bandwidth × run time) of a directed link."""
    classes = report["network"].get("link_classes") or {}
    if not classes:
        return []
    out = [f"{'link class':>15}  {'dir links':>9}  {'GB/s':>8}  {'bytes':>10}  {'peak util':>9}  {'mean util':>9}"]
    for name, c in classes.items():
        out.append(f"{name:>15}  {c['directed_links']:>9}  {c['bandwidth_gb_s']:>8.4g}  {_bytes(c['bytes']):>10}  "
                   f"{100 * c['peak_utilisation']:>8.1f}%  {100 * c['mean_utilisation']:>8.1f}%")
    return out


def format_summary(result: Any, quiet: bool = False, per_rank_limit: int = 64,
                   report: dict[str, Any] | None = None) -> str:
    """ASTRA-sim's per-rank lines, then (given ``report``) the breakdown table, then the total
    line, which stays last: scripts read it."""
    lines = []
    fin = result.finish_ns
    if not quiet:
        if len(fin) <= per_rank_limit:
            lines += [f"sys[{r}] finished, {t} cycles ({t / NS_PER_S:.9g} s)" for r, t in enumerate(fin)]
        else:  # thousands of ranks: equal neighbours share a line
            for a, b, t in _ranges(fin):
                who = f"sys[{a}]" if a == b else f"sys[{a}..{b}]"
                lines.append(f"{who} finished, {t} cycles ({t / NS_PER_S:.9g} s)")
        if report is not None:
            lines.append(format_breakdown(report))
    end = max(fin) if fin else 0
    lines.append(
        f"total: {len(fin)} ranks on {result.inputs.get('topology')} ({result.backend}); "
        f"end {end} cycles ({end / NS_PER_S:.9g} s), min {min(fin) if fin else 0}, "
        f"mean {sum(fin) / len(fin) if fin else 0:.1f}; {result.events} events in {result.wall_s:.3f} s wall"
    )
    return "\n".join(lines)


# the JSON writer lives in system/report_json.py, imported where a report is written (start-up);
# its names are still read from here
_JSON_NAMES = frozenset({"write_json", "write_json_atomic", "dump_json", "_MIN_ROWS", "_SCALARS", "_BLOCK",
                         "_ROWS_AT_ONCE", "_Indented"})


def __getattr__(name: str) -> Any:
    if name in _JSON_NAMES:
        from system import report_json

        return getattr(report_json, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
