"""Reading the stdout of NVIDIA's nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ...).

A table is the block of rows under the column header ``#  size  count  type  redop  root  time
algbw  busbw  #wrong  time ...``: one row per message size, an out-of-place and an in-place
measurement. The preamble's ``#  Rank r ... on HOST device d`` lines give the ranks and, from the
distinct host names, the nodes. Older releases have no ``root`` column, print ``error`` instead
of ``#wrong``, or time in ms; the unit row ``(us)``/``(ms)`` says which (microseconds when it is
missing, as every release since 2.0 prints).

Everything else in the file (NCCL INFO lines, ``# Avg bus bandwidth``) is skipped. What is not
a table is an InputError naming the file and the line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Sequence
from pathlib import Path

from network.errors import InputError
from network.files import read_text

#: collective names, as the simulator's Chakra writer spells them, keyed by the nccl-tests binary
TOOLS = {
    "all_reduce_perf": "ALL_REDUCE",
    "all_gather_perf": "ALL_GATHER",
    "reduce_scatter_perf": "REDUCE_SCATTER",
    "alltoall_perf": "ALL_TO_ALL",
    "broadcast_perf": "BROADCAST",
    "reduce_perf": "REDUCE",
    "sendrecv_perf": "SENDRECV",
    "gather_perf": "GATHER",
    "scatter_perf": "SCATTER",
    "hypercube_perf": "HYPERCUBE",
}
_TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "half": 2, "float16": 2, "bfloat16": 2, "int32": 4,
               "uint32": 4, "int": 4, "float": 4, "float32": 4, "int64": 8, "uint64": 8, "double": 8,
               "float64": 8, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)")
_COLUMN_HEADER = re.compile(r"#\s*(size|bytes)\s+(count|N)\s+type\b")
_NUMBER = r"(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|N/A)"
_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+([A-Za-z_0-9]+)\s+([A-Za-z_]+)\s+(?:(-?\d+)\s+)?"
    rf"({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+)(?:\s+({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s+(\S+))?\s*$"
)


class NcclTestsError(InputError):
    """A file given as nccl-tests output is not one, or its table cannot be fitted."""


@dataclass(frozen=True)
class Row:
    """One message size: times in microseconds (None where nccl-tests printed N/A)."""

    line: int
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    out_of_place_us: float | None
    in_place_us: float | None

    @property
    def time_us(self) -> float:
        """The measured time we fit: out-of-place, or in-place where out-of-place is missing."""
        return self.out_of_place_us if self.out_of_place_us is not None else self.in_place_us  # type: ignore[return-value]


@dataclass(frozen=True)
class NcclTable:
    """One nccl-tests table: its collective, the rows in file order, and the header's facts."""

    path: str
    collective: str
    rows: tuple[Row, ...]
    ranks: int | None = None  # from the '#  Rank r ...' lines
    nodes: int | None = None  # distinct host names on those lines
    header_line: int = 0
    npus_override: int | None = field(default=None, compare=False)

    @property
    def npus(self) -> int | None:
        return self.npus_override or self.ranks

    @property
    def gpus_per_node(self) -> int | None:
        n = self.npus
        if n is None or not self.nodes or n % self.nodes:
            return None
        return n // self.nodes

    def name(self) -> str:
        return Path(self.path).name


def read_nccl_tests(path: str | os.PathLike, npus: int | None = None, min_rows: int = 2) -> list[NcclTable]:
    """All tables in one nccl-tests output file (usually one). ``npus`` overrides the header's ranks."""
    text = read_text(path, NcclTestsError)
    return parse_nccl_tests(text, path, npus=npus, min_rows=min_rows)


def parse_nccl_tests(text: str, path: str | os.PathLike, npus: int | None = None, min_rows: int = 2) -> list[NcclTable]:
    lines = text.splitlines()
    tool = _tool_from_text(lines) or _tool_from_name(Path(path).name)
    ranks: dict[int, str] = {}
    tables: list[NcclTable] = []
    current: list[Row] | None = None
    header_line = 0
    unit_us: float | None = None
    for no, raw in enumerate(lines, 1):
        m = _RANK.search(raw)
        if m:
            ranks[int(m.group(1))] = m.group(2)
            continue
        if _COLUMN_HEADER.search(raw):
            if current is not None:
                tables.append(_finish(current, path, tool, ranks, header_line, npus, min_rows, unit_us))
            current, header_line, unit_us = [], no, None
            continue
        if current is None:
            continue
        stripped = raw.strip()
        if stripped.startswith("#"):
            if "(us)" in stripped:
                unit_us = 1.0
            elif "(ms)" in stripped:
                unit_us = 1000.0
            continue
        if not stripped or not stripped[0].isdigit():
            continue  # interleaved log lines (NCCL INFO ...)
        row = _parse_row(stripped, no, path)
        current.append(row)
    if current is not None:
        tables.append(_finish(current, path, tool, ranks, header_line, npus, min_rows, unit_us))
    if not tables:
        where = "line 1" if lines else ""
        raise NcclTestsError(
            path, where,
            "not nccl-tests output: found no table (a column header '#  size  count  type  redop  root  time  "
            "algbw  busbw ...' followed by one row per message size), as all_reduce_perf and the other *_perf "
            "tools print it")
    return tables


def _parse_row(text: str, no: int, path: str | os.PathLike) -> Row:
    m = _ROW.match(text)
    if not m:
        raise NcclTestsError(
            path, f"line {no}",
            f"expected a nccl-tests row 'size count type redop [root] time algbw busbw #wrong [time algbw busbw "
            f"#wrong]', got {text[:80]!r}")
    g = m.groups()

    def num(s: str | None) -> float | None:
        return None if s is None or s == "N/A" else float(s)

    oop, ip = num(g[5]), num(g[9])
    if oop is None and ip is None:
        raise NcclTestsError(path, f"line {no}", "neither the out-of-place nor the in-place time is a number")
    for t in (oop, ip):
        if t is not None and t <= 0:
            raise NcclTestsError(path, f"line {no}", f"time {t:g} is not positive")
    return Row(no, int(g[0]), int(g[1]), g[2], g[3], None if g[4] is None else int(g[4]), oop, ip)


def _finish(rows: list[Row], path, tool: str | None, ranks: dict[int, str], header_line: int,
            npus: int | None, min_rows: int, unit_us: float | None) -> NcclTable:
    if len(rows) < min_rows:
        raise NcclTestsError(
            path, f"line {rows[0].line if rows else header_line}",
            f"the table has {len(rows)} row(s); a fit needs at least {min_rows} message sizes (run the test "
            "with -b/-e spanning several sizes, e.g. -b 1M -e 1G -f 2)")
    for prev, row in zip(rows, rows[1:]):
        if row.size_bytes <= prev.size_bytes:
            raise NcclTestsError(
                path, f"line {row.line}",
                f"size {row.size_bytes} B does not grow (the row before, line {prev.line}, has {prev.size_bytes} B); "
                "sizes must increase down the table")
    scale = unit_us if unit_us is not None else 1.0
    if scale != 1.0:
        rows = [Row(r.line, r.size_bytes, r.count, r.dtype, r.redop, r.root,
                    None if r.out_of_place_us is None else r.out_of_place_us * scale,
                    None if r.in_place_us is None else r.in_place_us * scale) for r in rows]
    n_ranks = len(ranks) or None
    collective = tool or _collective_from_columns(rows[0], n_ranks)
    nodes = len(set(ranks.values())) or None
    return NcclTable(str(path), collective, tuple(rows), n_ranks, nodes, header_line, npus)


def _tool_from_text(lines: list[str]) -> str | None:
    for raw in lines[:50]:
        m = re.search(r"Collective test starting:\s*(\w+)", raw)
        if m and m.group(1) in TOOLS:
            return TOOLS[m.group(1)]
        m = re.search(r"\b(\w+_perf)\b", raw)
        if m and m.group(1) in TOOLS:
            return TOOLS[m.group(1)]
    return None


def _tool_from_name(name: str) -> str | None:
    low = name.lower()
    for tool, coll in sorted(TOOLS.items(), key=lambda kv: -len(kv[0])):
        stem = tool[: -len("_perf")]
        if stem in low or stem.replace("_", "") in low.replace("_", ""):
            return coll
    return None


def _collective_from_columns(row: Row, ranks: int | None) -> str:
    """No tool name anywhere: the columns tell all-reduce (count × type size = size, a reduction,
    no root) from the gathers (count × type size × ranks = size)."""
    width = _TYPE_BYTES.get(row.dtype.lower())
    if row.root is not None and row.root >= 0:
        return "REDUCE" if row.redop not in ("none",) else "BROADCAST"
    if width and ranks and row.count * width * ranks == row.size_bytes:
        return "REDUCE_SCATTER" if row.redop != "none" else "ALL_GATHER"
    return "ALL_REDUCE"


def format_nccl_tests(sizes_bytes: Sequence[int], times_us: Sequence[float], ranks: int, tool: str = "all_reduce_perf",
                      hosts: int = 1, note: str = "", device: str = "GPU") -> str:
    """A table in nccl-tests' stdout layout (float sum, out-of-place times; in-place N/A), for tests
    and for synthesised tables; ``read_nccl_tests`` reads it back."""
    coll = TOOLS[tool]
    per_host = max(1, ranks // hosts)
    out = [f"# {note}" if note else "#", f"# Collective test starting: {tool}",
           f"# nThread 1 nGpus 1 minBytes {sizes_bytes[0]} maxBytes {sizes_bytes[-1]} step: 2(factor) "
           "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    out += [f"#  Rank {r:3d} Group  0 Pid {1000 + r:5d} on {'node' + str(r // per_host):>10} device {r % per_host:2d} "
            f"[0x{r % per_host:02x}] {device}" for r in range(ranks)]
    out += ["#",
            "#                                                              out-of-place                       in-place          ",
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       "]
    factor = {"ALL_REDUCE": 2 * (ranks - 1) / ranks, "ALL_GATHER": (ranks - 1) / ranks,
              "REDUCE_SCATTER": (ranks - 1) / ranks, "ALL_TO_ALL": (ranks - 1) / ranks}.get(coll, 1.0)
    gathers = coll in ("ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL")
    redop = "none" if coll in ("ALL_GATHER", "ALL_TO_ALL") else "sum"
    for size, t in zip(sizes_bytes, times_us):
        count = size // 4 // (ranks if gathers else 1)
        algbw = size / t / 1e3
        out.append(f"{size:12d}  {count:12d}     float  {redop:>6}      -1  {t:8.2f}  {algbw:6.2f}  {algbw * factor:6.2f}"
                   "      0      N/A     N/A     N/A    N/A")
    out += ["# Out of bounds values : 0 OK", "#"]
    return "\n".join(out) + "\n"
