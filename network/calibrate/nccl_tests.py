"""Reading the results of NVIDIA's nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ...).

A table is the block of rows under the column header ``#  size  count  type  redop  root  time
algbw  busbw  #wrong  time ...``: one row per message size, an out-of-place and an in-place
measurement. The header's own words say where the columns are, so every release reads the same
way: 1.x (``bytes N type op ... res``, times in ms and no unit row), 2.0 (``error``, a ``(us)``
unit row), 2.x (``root``, ``#wrong``), ``-S 1`` (a timestamp after the last column), ``-I 1``
(four per-iteration columns after each measurement), ``-c 0`` (``N/A`` for #wrong), in-place
only (out-of-place left blank), several runs in one file, ``mpirun --tag-output`` and
``srun --label`` prefixes. ``-J`` JSON reports and CSV tables are read by ``nccl_formats``.

Every row is checked against itself: algbw = size / time and busbw = algbw x the bus factor
(nccl-tests' definitions), so a wrong unit, swapped columns or another GPU count is an
InputError naming the row, as is a nonzero #wrong. The preamble's ``#  Rank r ... on HOST
device d`` lines give the ranks and, from the distinct host names, the nodes.
"""
from __future__ import annotations

import math
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
# '#  Rank  0 Group  0 Pid 1234 on host device  0 [...]' (2.x); 2.0 has no Group, 1.x no Pid either
_RANK = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)")
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:\s)")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")
_CSV_HEADER = re.compile(r"^size(\(B\))?\s*,", re.IGNORECASE)
#: no GPU holds a buffer this large: a bigger size is a corrupted row, not a measurement
MAX_BYTES = 1 << 44


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
    """All tables in one nccl-tests output file (stdout of any release, ``-J`` JSON, or a CSV of
    its columns). ``npus`` overrides the header's ranks."""
    text = read_text(path, NcclTestsError)
    return parse_nccl_tests(text, path, npus=npus, min_rows=min_rows)


def parse_nccl_tests(text: str, path: str | os.PathLike, npus: int | None = None, min_rows: int = 2) -> list[NcclTable]:
    if text.lstrip().startswith("{"):
        from network.calibrate.nccl_formats import parse_json_report
        raw = parse_json_report(text, path)
    elif _CSV_HEADER.match(text.lstrip()):
        from network.calibrate.nccl_formats import parse_csv
        raw = parse_csv(text, path)
    else:
        raw = _parse_stdout(text, path)
    if not raw:
        raise NcclTestsError(
            path, "line 1" if text else "",
            "not nccl-tests output: found no table (a column header '#  size  count  type  redop  root  time  "
            "algbw  busbw ...' followed by one row per message size), as all_reduce_perf and the other *_perf "
            "tools print it")
    name_tool = _tool_from_name(Path(path).name)
    return [_finish(t, path, name_tool, npus, min_rows) for t in raw]


@dataclass
class RawTable:
    """A table as read, before the checks: its header facts and the rows' fields."""

    header_line: int
    tool: str | None
    ranks: dict[int, str]
    unit_us: float | None  # None: the file does not say
    legacy: bool  # nccl-tests 1.x: ms, and a gather's algbw counts (n-1)/n of the size
    rows: list["RawRow"]
    cputime: bool = False  # -C 1: the time is CPU time, the bandwidths GPU time (they need not agree)


@dataclass
class RawRow:
    line: int
    text: str
    size: int
    count: int
    dtype: str
    redop: str
    root: int | None
    groups: tuple[tuple[float | None, float | None, float | None] | None, tuple | None]  # (time, algbw, busbw) oop, ip
    where: str = ""  # how a message names the row when it has no line (a JSON report's results[i])

    @property
    def place(self) -> str:
        return self.where or f"line {self.line}"


def _strip_prefix(raw: str) -> str:
    """``mpirun --tag-output`` ('[1,0]<stdout>:') and ``srun --label`` ('0: ') put a tag before
    every line; nccl-tests' own lines never start with digits and a colon."""
    m = _PREFIX.match(raw)
    return raw[m.end():] if m else raw


def _parse_stdout(text: str, path) -> list[RawTable]:
    tables: list[RawTable] = []
    ranks: dict[int, str] = {}
    tool: str | None = None
    current: RawTable | None = None
    columns: list[str] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = _strip_prefix(raw).rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            body = stripped.lstrip("#").strip()
            words = body.split()
            m = _RANK.match(body)
            if m:
                if current is not None:  # a new run's preamble: its ranks are its own
                    ranks, current = {}, None
                ranks[int(m.group(1))] = m.group(2)
                continue
            m = re.search(r"Collective test starting:\s*(\w+)", body) or re.match(r"(\w+_perf)\b", body)
            if m and m.group(1) in TOOLS:
                if current is not None:
                    ranks, current = {}, None
                tool = TOOLS[m.group(1)]
                continue
            if words and words[0] in ("size", "bytes") and any(w in ("time", "cputime") for w in words):
                columns = words
                legacy = words[0] == "bytes"
                current = RawTable(no, tool, ranks, None, legacy, [], "cputime" in words)
                tables.append(current)
                continue
            if current is not None and not current.rows and words and words[0] == "(B)":
                if "(us)" in words:
                    current.unit_us = 1.0
                elif "(ms)" in words:
                    current.unit_us = 1000.0
            continue
        if current is None or not stripped[0].isdigit():
            continue  # log lines (NCCL INFO ...), summaries
        current.rows.append(_parse_row(stripped, no, path, columns))
    return [t for t in tables if t.rows or t is tables[-1]]


def quote(text: str, limit: int = 200) -> str:
    """A row as the message quotes it: runs of blanks squeezed, the middle cut if still long."""
    t = " ".join(text.split())
    if len(t) > limit:
        t = t[: limit // 2 - 2] + " ... " + t[-(limit // 2 - 3):]
    return repr(t)


def _parse_row(text: str, no: int, path, columns: list[str]) -> RawRow:
    tokens = text.split()
    where = f"line {no}"
    n_lead = next(i for i, c in enumerate(columns) if c in ("time", "cputime"))
    group = 8 if "i_min" in columns else 4
    layout = " ".join(columns[:n_lead]) + " then per measurement: " + " ".join(columns[n_lead:n_lead + group])
    # -S 1 appends the local time, '%Y-%m-%d %H:%M:%S', after the last measurement
    if len(tokens) >= 2 and _DATE.match(tokens[-2]) and _CLOCK.match(tokens[-1]):
        tokens = tokens[:-2]
    rest = tokens[n_lead:]
    if len(tokens) < n_lead or len(rest) not in (group, 2 * group):
        raise NcclTestsError(path, where, f"expected a nccl-tests row with the header's columns ({layout}; one "
                             f"or two measurements), got {len(tokens)} fields: {quote(text)}")
    lead = dict(zip(columns[:n_lead], tokens[:n_lead]))
    try:
        size = int(tokens[0])
        count = int(tokens[1])
    except ValueError:
        raise NcclTestsError(path, where, f"size and count must be integers, got {tokens[0]!r} and {tokens[1]!r}: "
                             f"{quote(text)}") from None
    root_text = lead.get("root")
    if root_text is None and columns[3] == "root":  # 1.x broadcast and reduce print the root where redop goes
        root_text = tokens[3]
    root = int(root_text) if root_text is not None and re.fullmatch(r"-?\d+", root_text) else None
    redop = lead.get("redop", lead.get("op", "none" if columns[3] == "root" else "?"))
    groups = []
    for k in range(len(rest) // group):
        fields = rest[k * group:(k + 1) * group]
        groups.append(_measurement(fields, columns[n_lead:n_lead + group], text, where, path))
    if len(groups) == 1:
        # one measurement under a two-measurement header: nccl-tests' trace replay leaves the
        # out-of-place columns blank and prints in-place only (writeBenchMarkLineNullBody)
        two = columns[n_lead:].count("time") + columns[n_lead:].count("cputime") >= 2
        groups = [None, groups[0]] if two else [groups[0], None]
    return RawRow(no, text, size, count, tokens[2], redop, root, (groups[0], groups[1]))


def _measurement(fields: list[str], names: list[str], text: str, where: str, path):
    vals: list[float | None] = []
    for name, tok in zip(names[:3], fields[:3]):
        if tok == "N/A":
            vals.append(None)
            continue
        try:
            v = float(tok)
        except ValueError:
            raise NcclTestsError(path, where, f"column {name!r} is {tok!r}, expected a number or N/A: {quote(text)}") from None
        if not math.isfinite(v) or v < 0:
            raise NcclTestsError(path, where, f"column {name!r} is {tok!r}, expected a non-negative number: {quote(text)}")
        vals.append(v)
    wrong = fields[3]
    if wrong != "N/A":
        try:
            w = float(wrong)
        except ValueError:
            raise NcclTestsError(path, where, f"column {names[3]!r} is {wrong!r}, expected a count of wrong elements "
                                 f"or N/A: {quote(text)}") from None
        if w != 0:
            raise NcclTestsError(path, where, f"{names[3]} is {wrong}: nccl-tests found wrong results at this size, "
                                 f"so its times do not measure a working collective; fix the run first: {quote(text)}")
    if vals[0] is None:
        return None
    return (vals[0], vals[1], vals[2])


def _finish(raw: RawTable, path, name_tool: str | None, npus: int | None, min_rows: int) -> NcclTable:
    where0 = f"line {raw.header_line}"
    if len(raw.rows) < min_rows:
        raise NcclTestsError(
            path, f"line {raw.rows[0].line if raw.rows else raw.header_line}",
            f"the table has {len(raw.rows)} row(s); a fit needs at least {min_rows} message sizes (run the test "
            "with -b/-e spanning several sizes, e.g. -b 1M -e 1G -f 2)")
    for prev, row in zip(raw.rows, raw.rows[1:]):
        if row.size <= prev.size:
            raise NcclTestsError(
                path, f"line {row.line}",
                f"size {row.size} B does not grow (the row before, line {prev.line}, has {prev.size} B); "
                "sizes must increase down the table")
    n_ranks = len(raw.ranks) or None
    n = n_ranks or npus  # the Rank lines are the table's own word; --npus disagreeing is caught later
    probe = Row(raw.rows[0].line, raw.rows[0].size, raw.rows[0].count, raw.rows[0].dtype, raw.rows[0].redop,
                raw.rows[0].root, 1.0, None)
    collective = raw.tool or name_tool or _collective_from_columns(probe, n)
    # nccl-tests 1.x printed milliseconds and no unit row; every 2.x release prints '(us)'
    scale = raw.unit_us if raw.unit_us is not None else (1000.0 if raw.legacy else 1.0)
    rows = []
    for r in raw.rows:
        if r.size > MAX_BYTES:
            raise NcclTestsError(path, r.place, f"size {r.size} B is more than any GPU holds (the limit "
                                 f"here is 2^{MAX_BYTES.bit_length() - 1} B); is the size column corrupted? {quote(r.text)}")
        if r.size <= 0:
            raise NcclTestsError(path, r.place, f"size {r.size} B is not positive: {quote(r.text)}")
        times = []
        for g in r.groups:
            if g is None:
                times.append(None)
                continue
            _cross_check(g, r, scale, raw, collective, n, path)
            times.append(g[0] * scale)
        if times[0] is None and times[1] is None:
            raise NcclTestsError(path, r.place, "neither the out-of-place nor the in-place time is a number: "
                                 f"{quote(r.text)}")
        rows.append(Row(r.line, r.size, r.count, r.dtype, r.redop, r.root, times[0], times[1]))
    nodes = len(set(raw.ranks.values())) or None
    return NcclTable(str(path), collective, tuple(rows), n_ranks, nodes, raw.header_line, npus)


def _close(printed: float, expected: float) -> bool:
    # the columns are printed with 2 decimals (fewer when wide): 0.011 GB/s absolute, 3 % relative
    return abs(printed - expected) <= 0.011 + 0.03 * expected


def _cross_check(g: tuple, r: RawRow, scale: float, raw: RawTable, collective: str, n: int | None, path) -> None:
    """time, algbw and busbw must tell one story (algbw = size / time with GB = 10^9 B, busbw =
    algbw x nccl-tests' bus factor): a wrong unit, swapped columns or a table of other GPU counts
    show here, not as a fit to nonsense."""
    t, algbw, busbw = g
    unit = {1.0: "us", 1000.0: "ms", 1e-3: "ns"}.get(scale, f"x{scale:g} us")
    where = r.place
    if t <= 0:
        raise NcclTestsError(path, where, f"time {t:g} is not positive: {quote(r.text)}")
    size_over_time = r.size / (t * scale * 1e3)  # GB/s
    share = 1.0
    if raw.legacy and collective in ("ALL_GATHER", "REDUCE_SCATTER"):
        if n is None:
            algbw = None  # 1.x counted (n-1)/n of a gather's size: unknown without n
        else:
            share = (n - 1) / n
    if algbw is not None and not raw.cputime and not _close(algbw, size_over_time * share):
        hint = ""
        for other, name in ((scale * 1000, "ms" if scale == 1 else "a unit 1000x larger"),
                            (scale / 1000, "ns" if scale == 1 else "a unit 1000x smaller")):
            if _close(algbw, r.size / (t * other * 1e3) * share):
                hint = f" the times look like {name}, not {unit} (nccl-tests 1.x printed ms with no unit row)"
        if not hint:
            hint = " are the time and algbw columns swapped, or the row edited?"
        raise NcclTestsError(path, where, f"time {t:g} {unit} and algbw {algbw:g} GB/s disagree: size / time = "
                             f"{size_over_time * share:.4g} GB/s (GB = 10^9 B);{hint} {quote(r.text)}")
    factor = _bus_factor(collective, n)
    if factor is None and busbw is not None and algbw is not None and algbw >= 1.0:
        # no GPU count given: busbw / algbw must still be the bus factor of some whole count
        ratio = busbw / algbw
        span = 2.0 if collective == "ALL_REDUCE" else 1.0 if collective in ("ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL") else None
        if span is not None:
            guess = round(span / (span - ratio)) if ratio < span else 0
            if guess >= 1:
                n, factor = guess, _bus_factor(collective, guess)
            else:
                raise NcclTestsError(path, where, f"busbw {busbw:g} / algbw {algbw:g} = {ratio:.3g} is no GPU count's "
                                     f"bus factor for {collective} (below {span:g}): is a column swapped? {quote(r.text)}")
    if busbw is not None and factor is not None and not raw.cputime and not _close(busbw, size_over_time * factor):
        base = f"algbw {algbw:g} GB/s" if algbw is not None else f"size / time = {size_over_time:.4g} GB/s"
        raise NcclTestsError(path, where, f"busbw {busbw:g} GB/s does not match {base} x {factor:.4g} (the bus factor "
                             f"of {collective} on {n} GPUs): was the table measured on another GPU count, or is a "
                             f"column swapped? {quote(r.text)}")


def _bus_factor(collective: str, n: int | None) -> float | None:
    """nccl-tests' busbw / algbw (its README, 'Performance'), None where unknown."""
    if n is None or n < 1:
        return None
    return {"ALL_REDUCE": 2 * (n - 1) / n, "ALL_GATHER": (n - 1) / n, "REDUCE_SCATTER": (n - 1) / n,
            "ALL_TO_ALL": (n - 1) / n, "BROADCAST": 1.0, "REDUCE": 1.0, "SENDRECV": 1.0}.get(collective)


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
