"""nccl-tests results that are not its stdout: the ``-J FILE.json`` report (nccl-tests 2.17.6+,
src/util.cu ``jsonOutputInit``/``writeBenchmarkLineBody``) and a CSV of its columns (vTrain's
``trace/*/AR_GPU*_LUT`` files: ``size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)``).

Both become the same ``RawTable`` as the stdout reader's, so the same checks (sizes grow, time
against algbw and busbw, #wrong) apply to every format.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import PurePath

from network.calibrate.nccl_tests import TOOLS, NcclTestsError, RawRow, RawTable, quote

_UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def parse_json_report(text: str, path: str | os.PathLike) -> list[RawTable]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise NcclTestsError(path, f"line {e.lineno}, column {e.colno}", f"not valid JSON ({e.msg}); a nccl-tests "
                             "-J report is one JSON object") from None
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        raise NcclTestsError(path, "", "a JSON file here must be nccl-tests' -J report: an object with a 'results' "
                             "list (one entry per size)")
    args = doc.get("args") or []
    tool = TOOLS.get(PurePath(str(args[0])).name) if args else None
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    ranks = {}
    for d in config.get("devices") or []:
        if isinstance(d, dict) and isinstance(d.get("rank"), int):
            ranks[d["rank"]] = str(d.get("hostname", "?"))
    table = RawTable(0, tool, ranks, 1.0, False, [])
    for i, r in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(r, dict):
            raise NcclTestsError(path, where, f"expected an object per size, got {r!r:.80}")
        try:
            size, count = int(r["size"]), int(r["count"])
            root = int(str(r.get("root", "-1")).strip())
        except (KeyError, ValueError, TypeError) as e:
            raise NcclTestsError(path, where, f"needs integer 'size', 'count' and 'root' ({e})") from None
        groups = tuple(_json_measurement(r.get(k), path, f"{where}.{k}") for k in ("out_of_place", "in_place"))
        text = json.dumps({k: r.get(k) for k in ("size", "out_of_place", "in_place")})
        table.cputime = table.cputime or any(isinstance(r.get(k), dict) and "cpu_time" in r[k]
                                             for k in ("out_of_place", "in_place"))
        table.rows.append(RawRow(i, text, size, count, str(r.get("type", "?")), str(r.get("redop", "?")), root, groups, where))
    return [table]


def _json_measurement(m, path, where: str):
    if m is None:
        return None
    if not isinstance(m, dict):
        raise NcclTestsError(path, where, f"expected an object with time, alg_bw, bus_bw, nwrong; got {m!r:.80}")
    wrong = m.get("nwrong")
    if wrong not in (None, 0, 0.0):
        raise NcclTestsError(path, where, f"nwrong is {wrong}: nccl-tests found wrong results at this size, so its "
                             "times do not measure a working collective")
    vals = []
    for key in ("cpu_time" if "cpu_time" in m else "time", "alg_bw", "bus_bw"):
        v = m.get(key)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or v != v or v < 0):
            raise NcclTestsError(path, where, f"{key} is {v!r}, expected a non-negative number")
        vals.append(None if v is None else float(v))
    return None if vals[0] is None else tuple(vals)


def parse_csv(text: str, path: str | os.PathLike) -> list[RawTable]:
    lines = text.splitlines()
    first = next(i for i, x in enumerate(lines) if x.strip())
    names = [c.strip().lower() for c in lines[first].split(",")]
    times = [i for i, c in enumerate(names) if c.startswith("time")]
    if not times:
        raise NcclTestsError(path, f"line {first + 1}", "a CSV table needs a time column, e.g. 'time(us)'")
    units = set()
    for i in times:
        m = re.fullmatch(r"time\s*\((ns|us|ms|s)\)", names[i])
        if not m:
            raise NcclTestsError(path, f"line {first + 1}", f"column {names[i]!r}: expected time(ns), time(us) or "
                                 "time(ms), the unit in brackets")
        units.add(m.group(1))
    if len(units) > 1:
        raise NcclTestsError(path, f"line {first + 1}", f"the time columns mix units {sorted(units)}")
    # each measurement is a time column and the bandwidth columns after it
    spans = [(t, times[k + 1] if k + 1 < len(times) else len(names)) for k, t in enumerate(times)]
    if len(spans) > 2:
        raise NcclTestsError(path, f"line {first + 1}", "expected one or two measurements (out-of-place, in-place)")
    table = RawTable(first + 1, None, {}, _UNIT_US[units.pop()], False, [])
    for no, line in enumerate(lines[first + 1:], first + 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(names):
            raise NcclTestsError(path, f"line {no}", f"expected {len(names)} comma-separated fields like the header, "
                                 f"got {len(cells)}: {quote(line)}")
        try:
            size, count = int(cells[0]), int(cells[1]) if names[1] == "count" else 0
            groups = []
            for a, b in spans:
                cols = dict(zip(names[a:b], cells[a:b]))
                bw = {k.split("(")[0]: float(v) for k, v in cols.items() if not k.startswith("time") and v != "N/A"}
                t = None if cells[a] == "N/A" else float(cells[a])
                groups.append(None if t is None else (t, bw.get("algbw"), bw.get("busbw")))
        except ValueError:
            raise NcclTestsError(path, f"line {no}", f"expected integers for size and count and numbers for the "
                                 f"times and bandwidths: {quote(line)}") from None
        if len(groups) == 1:
            groups.append(None)
        dtype = cells[2] if len(names) > 2 and names[2] == "type" else "?"
        table.rows.append(RawRow(no, line, size, count, dtype, "?", None, (groups[0], groups[1])))
    return [table]
