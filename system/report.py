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

import json
import os
from itertools import chain, repeat

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from network.files import atomic_open, exists, is_file, path_str
from system.collective_records import (  # noqa: F401 (re-exported: report.py's public names)
    collective_group_size,
    collective_records,
    nccl_bandwidths,
    summarise_collectives,
    summarise_parts,
    summarise_rows,
)
from system.waiting import communication_starts, orbit_communication_starts

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

NS_PER_S = 1_000_000_000
_COMM_TYPES = {pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE}


def _covered(intervals: list[tuple[int, int]]) -> int:
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


def write_json(path: str | os.PathLike, data: Any, indent: int | None = 1) -> None:
    """``write_json_atomic``, except onto something that is not a regular file (``/dev/stdout``, a
    pipe), which cannot be renamed over and is written directly."""
    p = path_str(path)
    if not exists(p) or is_file(p):
        write_json_atomic(p, data, indent)
        return
    with open(p, "w") as f:
        dump_json(data, f, indent=indent)
        f.write("\n")


def write_json_atomic(path: str | os.PathLike, data: Any, indent: int | None = 1) -> None:
    """Write JSON atomically (temporary file, then rename): an interrupted run never leaves half
    a report. ``indent=None`` writes one line with json's default separators (``"rank": 0``).
    With an indent, a long list of records (the collectives: one per rank and collective) is
    written one record per line, which json's C encoder writes; its indenting encoder is pure
    Python, and took 0.6 s on the 11 MB report of a 128-rank ResNet-50 layout."""
    with atomic_open(path, "w") as f:
        dump_json(data, f, indent=indent)
        f.write("\n")


def dump_json(data: Any, fp: Any, indent: int | None = None) -> None:
    """``json.dump`` at the speed of json's C encoder (json.dump itself never uses it). With an
    indent, each list of at least 256 objects (the collectives: one per rank and collective) has
    one object per line; only the white space differs from ``json.dump(data, fp, indent=indent)``."""
    if indent is None:
        fp.write(json.dumps(data))
        return
    _Indented(fp, indent).dump(data)


_MIN_ROWS = 256  # a shorter list of records keeps the indented layout
_SCALARS = {str, int, float, bool, type(None)}  # exact types: a subclass (a namedtuple) takes the long way
_BLOCK = 1 << 16  # characters written at a time: the whole text would double the peak memory
_ROWS_AT_ONCE = 512  # records laid out by one call


class _Indented:
    """json's indented layout, written with its C encoder (json's indenting encoder is pure
    Python, a generator per container and a yield per value): a container whose values are all
    scalars is one C call whose item separator carries the line break and indent, a list of
    records one line per record; the other containers are laid out here."""

    def __init__(self, fp: Any, indent: int) -> None:
        self.fp = fp
        self.indent = indent
        self.parts: list[str] = []
        self.size = 0
        self.encoders: dict[str, Any] = {}
        self.compact = self.encoder(", ")  # json.dumps's own separators: a record's line

    def encoder(self, item_separator: str) -> Any:
        e = self.encoders.get(item_separator)
        if e is None:
            e = self.encoders[item_separator] = _c_make_encoder(
                {}, _default, json.encoder.encode_basestring_ascii, None, ": ", item_separator, False, False, True)
        return e

    def dump(self, data: Any) -> None:
        self.value(data, 0)
        self.fp.write("".join(self.parts))

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > _BLOCK:
            self.fp.write("".join(self.parts))
            self.parts.clear()
            self.size = 0

    def value(self, obj: Any, level: int) -> None:
        if isinstance(obj, dict):
            if not obj:
                self.put("{}")
            elif set(map(type, obj.values())) <= _SCALARS:
                self.flat(obj, level, "{", "}")
            else:
                self.nested_dict(obj, level)
        elif isinstance(obj, (list, tuple)):
            if not obj:
                self.put("[]")
            elif len(obj) >= _MIN_ROWS and all(map(isinstance, obj, repeat(dict))):
                self.rows(obj, level)
            elif set(map(type, obj)) <= _SCALARS:
                self.flat(obj, level, "[", "]")
            elif not self.indented_table(obj, level):
                self.nested_list(obj, level)
        else:
            self.put("".join(self.compact(obj, 0)))

    def flat(self, obj: Any, level: int, opening: str, closing: str) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        text = "".join(self.encoder("," + inner)(obj, 0))
        self.put(opening + inner + text[1:-1] + "\n" + " " * (self.indent * level) + closing)

    def nested_dict(self, obj: dict, level: int) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        sep = "{" + inner
        for k, v in obj.items():
            self.put(sep + self.key(k) + ": ")
            self.value(v, level + 1)
            sep = "," + inner
        self.put("\n" + " " * (self.indent * level) + "}")

    def nested_list(self, obj: Any, level: int) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        sep = "[" + inner
        for v in obj:
            self.put(sep)
            self.value(v, level + 1)
            sep = "," + inner
        self.put("\n" + " " * (self.indent * level) + "]")

    def key(self, k: Any) -> str:
        if isinstance(k, str):
            return json.encoder.encode_basestring_ascii(k)
        text = "".join(self.compact({k: None}, 0))  # json's spelling of a number, true, null as a key
        return text[1:-len(": null}")]

    def encoded(self, column: Any, kinds: set[type]) -> list[str]:
        """The values' JSON, by one call: a NUL between them, which json writes in a string as
        \\u0000. A column of floats (the bandwidths) has each distinct value encoded once: repr
        is slow, and ranks that ran a collective alike repeat its figures. Not where a zero is
        (0.0 == -0.0), nor where other kinds could compare equal (1 == 1.0 == True)."""
        values = dict.fromkeys(column) if kinds <= {float, type(None)} else None
        if values is None or 2 * len(values) > len(column) or 0.0 in values:
            return "".join(self.encoder("\0")(column, 0))[1:-1].split("\0")
        text = dict(zip(values, "".join(self.encoder("\0")(list(values), 0))[1:-1].split("\0")))
        return list(map(text.__getitem__, column))

    def indented_table(self, records: Any, level: int) -> bool:
        """A short list of records of one shape (the ranks), each laid out indented, by one
        %-format; False, having written nothing, for another list."""
        outer, inner, deeper = ("\n" + " " * (self.indent * (level + i)) for i in range(3))
        text = self.table(records, "," + inner, "{" + deeper, "," + deeper, inner + "}")
        if text is None:
            return False
        self.put("[" + inner + text + outer + "]")
        return True

    def rows(self, records: Any, level: int) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        compact, sep = self.compact, "," + inner
        self.put("[" + inner)
        for i in range(0, len(records), _ROWS_AT_ONCE):
            block = records[i:i + _ROWS_AT_ONCE]
            text = self.table(block, sep, "{", ", ", "}")
            if text is None:
                text = sep.join(["".join(compact(r, 0)) for r in block])
            self.put(sep + text if i else text)
        self.put("\n" + " " * (self.indent * level) + "]")

    def table(self, records: Any, sep: str, opening: str, item_sep: str, closing: str) -> str | None:
        """Records of one shape (plain dicts, the same keys in the same order, scalar values),
        ``sep``-joined, as one %-format of a row template (``opening``, the items ``item_sep``-
        joined, ``closing``): integers by %d, each other column encoded by one call, none of the
        keys encoded again (as a C encoder call per record does); None for records of another shape."""
        if set(map(type, records)) != {dict}:
            return None
        keys = list(records[0])
        if not keys or set(map(type, keys)) != {str}:  # 1 == 1.0 == True: equal keys, other spellings
            return None
        # all the keys in a row are the first record's, repeated: then each record has n of them in
        # that order (distinct keys: none has more, so none fewer), and column j of the values in a
        # row is every n-th from j, read and replaced in place rather than transposed and back
        if list(chain.from_iterable(records)) != keys * len(records):
            return None
        n = len(keys)
        values = list(chain.from_iterable(map(dict.values, records)))
        formats = []
        for j in range(n):
            column = values[j::n]
            kinds = set(map(type, column))
            if kinds == {int}:
                formats.append("%d")
            elif kinds == {str}:
                formats.append("%s")
                values[j::n] = map(json.encoder.encode_basestring_ascii, column)
            elif kinds <= _SCALARS:
                formats.append("%s")
                values[j::n] = self.encoded(column, kinds)
            else:
                return None
        row = opening + item_sep.join(self.key(k).replace("%", "%%") + ": " + f for k, f in zip(keys, formats)) + closing
        return sep.join([row] * len(records)) % tuple(values)


def _default(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def _python_encoder(markers: Any, default: Any, encoder: Any, indent: Any, key_separator: str,
                    item_separator: str, *flags: Any) -> Any:
    """An interpreter without json's C module: the same text, from json's Python encoder."""
    e = json.JSONEncoder(separators=(item_separator, key_separator), default=default)
    return lambda o, level: (e.encode(o),)


_c_make_encoder = json.encoder.c_make_encoder or _python_encoder
