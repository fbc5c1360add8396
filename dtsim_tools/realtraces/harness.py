"""Evaluation of the PyTorch-trace pipeline on real multi-rank runs.

``collect``: run dtsim_tools/realtraces/train.py under torchrun through ``workload.collect run``
and write, per case, ``CASE/trace/`` (what the collector wrote) and ``CASE/measured.json`` (per rank:
Kineto's ``ProfilerStep#K``, the ``c10d::*`` / ``gloo:*`` events inside it, unprofiled step times).

``check``: per case, ``workload.convert pytorch`` then ``system.main --report -``, and compare the
simulated step (the last rank's finish) with the measured one (the slowest rank's ProfilerStep),
and the collectives in the converted ETs with the ``c10d::*`` operators Kineto saw in the step.

A case folder is any folder holding ``host.0.json[.gz]`` directly or under ``trace/``. Two layouts
of ``measured.json`` are read: ours (``"layout": "dtsim-realtraces/1"``) and the anchors'
(``../shared/anchors/realtraces-examples``, ``measured_max_profiler_step_ms``); without one the
figures are taken from the Kineto traces. Nothing here imports torch.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[2]
TRAIN = Path(__file__).resolve().with_name("train.py")
MODELS = ("lstm", "cnn_bn", "embbag_sparse", "embbag_dense", "fsdp1", "fsdp2", "grad_accum", "two_groups", "pipeline")
LAYOUT = "dtsim-realtraces/1"
#: collectives the simulator runs (others, barrier / reduce / gather / scatter, stay host time)
SIMULATED = ("ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL", "BROADCAST", "SEND", "RECV")
_KEYWORDS = (("alltoall", "ALL_TO_ALL"), ("allgather", "ALL_GATHER"), ("reducescatter", "REDUCE_SCATTER"),
             ("allreduce", "ALL_REDUCE"), ("broadcast", "BROADCAST"), ("send", "SEND"), ("recv", "RECV"),
             ("barrier", "BARRIER"), ("reduce", "REDUCE"), ("gather", "GATHER"), ("scatter", "SCATTER"))
#: Chakra's CollectiveCommType numbers (chakra_proto/enums.py), written out so this needs no import
_COMM_TYPE = {0: "ALL_REDUCE", 1: "REDUCE", 2: "ALL_GATHER", 3: "GATHER", 4: "SCATTER", 5: "BROADCAST",
              6: "ALL_TO_ALL", 7: "REDUCE_SCATTER", 8: "REDUCE_SCATTER", 9: "BARRIER"}
_COMM_SEND, _COMM_RECV, _COMM_COLL = 5, 6, 7
DEFAULT_BW_GB_S, DEFAULT_LAT_NS = 50.0, 500.0


# ---------------------------------------------------------------------------------------------- files

def open_json(path: str | os.PathLike) -> Any:
    """JSON from ``path``, or from ``path.gz`` when ``path`` is missing; gzip by content."""
    p = Path(path)
    if not p.exists() and Path(str(p) + ".gz").exists():
        p = Path(str(p) + ".gz")
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def _exists(path: Path) -> bool:
    return path.exists() or Path(str(path) + ".gz").exists()


def trace_dir(case: Path) -> Path | None:
    """Where a case's trace files lie: the folder itself or its ``trace/``; None if neither."""
    for d in (case, case / "trace"):
        if _exists(d / "host.0.json"):
            return d
    return None


def find_cases(root: str | os.PathLike) -> list[Path]:
    """Case folders under ``root`` (``root`` itself if it is one), sorted; a case's own folders are
    not searched further."""
    root = Path(root)
    if trace_dir(root) is not None:
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root):
        d = Path(dirpath)
        if d != root and trace_dir(d) is not None:
            found.append(d)
            dirnames[:] = []
            continue
        dirnames.sort()
    return sorted(found)


def count_ranks(tdir: Path) -> int:
    n = 0
    while _exists(tdir / f"host.{n}.json"):
        n += 1
    return n


# --------------------------------------------------------------------------------------- Kineto side

def comm_kind(name: str) -> str | None:
    """ALL_REDUCE, ..., SEND, RECV, BARRIER, REDUCE, ... from 'c10d::_allgather_base_' or
    'gloo:all_reduce'; None for other names and for waits."""
    if "::" in name:
        prefix, op = name.rsplit("::", 1)
        if not prefix.endswith(("c10d", "c10d_functional")):
            return None
    elif ":" in name:
        prefix, op = name.split(":", 1)
        if prefix not in ("gloo", "nccl", "mpi", "ucc"):
            return None
    else:
        return None
    low = "".join(ch for ch in op.lower() if "a" <= ch <= "z")
    if "wait" in low or not low:
        return None
    for key, kind in _KEYWORDS:
        if key in low:
            return kind
    return None


def profiler_step(events: Iterable[dict]) -> dict | None:
    """The ``ProfilerStep#K`` event with the largest K (the profiled step), or None."""
    best, best_k = None, -1
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and name.startswith("ProfilerStep#"):
            try:
                k = int(name.split("#", 1)[1])
            except ValueError:
                k = 0
            if k > best_k:
                best, best_k = e, k
    return best


def _outermost_c10d(events: list[dict]) -> list[dict]:
    """c10d operators not nested inside another c10d operator of the same thread."""
    by_tid: dict[Any, list[dict]] = {}
    for e in events:
        by_tid.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    out = []
    for evs in by_tid.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        end = -1.0
        for e in evs:
            ts = float(e["ts"])
            if ts < end:
                continue
            out.append(e)
            end = ts + float(e.get("dur", 0))
    return out


def kineto_rank(trace: dict | list) -> dict:
    """One rank's figures from its Kineto trace (the dict, or its ``traceEvents``)."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    info = trace.get("distributedInfo", {}) if isinstance(trace, dict) else {}
    step = profiler_step(events)
    out: dict[str, Any] = {"rank": info.get("rank"), "profiler_step": None, "profiler_step_ms": None,
                           "step_start_us": None, "c10d": {}, "gloo": {}, "comm_outside_step": {},
                           "expected_collectives": {}, "pg_config": info.get("pg_config", [])}
    if step is None:
        return out
    t0, t1 = float(step["ts"]), float(step["ts"]) + float(step.get("dur", 0))
    out.update(profiler_step=step["name"], profiler_step_ms=round(float(step.get("dur", 0)) / 1e3, 6),
               step_start_us=t0)
    c10d, gloo, outside = Counter(), Counter(), Counter()
    inside_c10d = []
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        is_c10d, is_gloo = "c10d" in name.split("::")[0] and "::" in name, name.startswith("gloo:")
        if not (is_c10d or is_gloo):
            continue
        if t0 <= float(e["ts"]) < t1:
            (c10d if is_c10d else gloo)[name] += 1
            if is_c10d:
                inside_c10d.append(e)
        else:
            outside[name] += 1
    out["c10d"], out["gloo"], out["comm_outside_step"] = dict(c10d), dict(gloo), dict(outside)
    out["expected_collectives"] = sparse_as_gathers(
        expected_from_c10d(e["name"] for e in _outermost_c10d(inside_c10d)), gloo)
    return out


def sparse_as_gathers(expected: dict[str, int], gloo: dict[str, int]) -> dict[str, int]:
    """gloo runs an all-reduce of sparse tensors as all-gathers of their indices and values
    (``gloo:sparse_all_reduce``), and the converter writes it as one ALL_GATHER
    (workload/sparse_tensors.py)."""
    out = dict(expected)
    sparse = min(gloo.get("gloo:sparse_all_reduce", 0), out.get("ALL_REDUCE", 0))
    if sparse:
        out["ALL_REDUCE"] -= sparse
        out["ALL_GATHER"] = out.get("ALL_GATHER", 0) + sparse
    return {k: v for k, v in sorted(out.items()) if v}


def expected_from_c10d(names: Iterable[str] | dict[str, int]) -> dict[str, int]:
    """The collectives a converted rank should hold: its c10d operators of a simulated kind."""
    items = names.items() if isinstance(names, dict) else ((n, 1) for n in names)
    out: Counter = Counter()
    for name, k in items:
        kind = comm_kind(name)
        if kind in SIMULATED:
            out[kind] += k
    return dict(sorted(out.items()))


def _wall_ms(values: list[float] | None, profiled: int | None) -> dict | None:
    """Step wall times (s) -> ms, the profiled one and the median of the others but the first."""
    if not values:
        return None
    ms = [round(v * 1e3, 3) for v in values]
    others = [m for i, m in enumerate(ms) if i != profiled and i > 0]
    return {"all_ms": ms, "profiled_step_ms": ms[profiled] if profiled is not None and profiled < len(ms) else None,
            "median_other_ms": round(statistics.median(others), 3) if others else None}


def measure_trace_dir(tdir: Path, ranks: int | None = None, step: int | None = None) -> dict:
    """measured.json (our layout) from a folder of collector output."""
    n = ranks or count_ranks(tdir)
    collect = open_json(tdir / "collect.json") if _exists(tdir / "collect.json") else {}
    step = step or collect.get("step")
    rows = []
    for r in range(n):
        row = kineto_rank(open_json(tdir / f"device.{r}.json"))
        row["rank"] = r if row["rank"] is None else row["rank"]
        if _exists(tdir / f"step.{r}.json"):
            s = open_json(tdir / f"step.{r}.json")
            row["collector_steps"] = _wall_ms(s.get("step_wall_s"), (s.get("step") or step or 0) - 1)
            if row["collector_steps"] is not None and s.get("unprofiled_median_s") is not None:
                # the collector's own figures (it times the steps after the profiled one too)
                row["collector_steps"].update(unprofiled_median_ms=round(s["unprofiled_median_s"] * 1e3, 3),
                                              profiler_slowdown=s.get("profiler_slowdown"))
        if _exists(tdir / f"timing.{r}.json"):
            t = open_json(tdir / f"timing.{r}.json")
            row["timing"] = _wall_ms(t.get("step_wall_s"), (step - 1) if step else None)
        rows.append(row)
    steps = [r["profiler_step_ms"] for r in rows if r["profiler_step_ms"] is not None]
    unprof = [unprofiled_ms(r) for r in rows]
    unprof = [u for u in unprof if u is not None]
    return {"layout": LAYOUT, "trace_dir": str(tdir), "ranks_count": n, "step": step,
            "command": collect.get("command"), "collector_exit_code": collect.get("exit_code"),
            "ranks": rows, "max_profiler_step_ms": max(steps) if steps and len(steps) == n else None,
            "max_median_unprofiled_ms": max(unprof) if unprof else None}


def unprofiled_ms(rank_row: dict) -> float | None:
    """A rank's typical unprofiled step: the collector's median, else train.py's timing median,
    else the median of the collector's other steps (our layout); the anchors' ``timing``/``step``."""
    c, t = rank_row.get("collector_steps") or {}, rank_row.get("timing") or {}
    for v in (c.get("unprofiled_median_ms"), t.get("median_other_ms"), c.get("median_other_ms"),
              (rank_row.get("step") or {}).get("median_other_ms")):
        if v is not None:
            return v
    return None


def _model_from_command(cmd: list | None) -> str | None:
    if cmd and "--model" in cmd:
        i = cmd.index("--model")
        if i + 1 < len(cmd):
            return str(cmd[i + 1])
    return None


def load_measured(case: Path) -> dict:
    """A case's measured figures, in one shape for both layouts of measured.json (or none):
    ``{"model", "ranks", "max_step_ms", "per_rank": [{"rank", "step_ms", "expected": {KIND: n}}]}``."""
    tdir = trace_dir(case)
    assert tdir is not None, case
    m = open_json(case / "measured.json") if (case / "measured.json").exists() else None
    collect = open_json(tdir / "collect.json") if _exists(tdir / "collect.json") else {}
    if m is None or (m.get("layout") != LAYOUT and "measured_max_profiler_step_ms" not in m):
        m = measure_trace_dir(tdir)
    per_rank = []
    if m.get("layout") == LAYOUT:
        for r in m["ranks"]:
            per_rank.append({"rank": r["rank"], "step_ms": r["profiler_step_ms"], "unprofiled_ms": unprofiled_ms(r),
                             "expected": r.get("expected_collectives")
                             or sparse_as_gathers(expected_from_c10d(r.get("c10d", {})), r.get("gloo", {}))})
        max_ms, n = m.get("max_profiler_step_ms"), m.get("ranks_count") or len(per_rank)
    else:  # the anchors' layout
        for r in m["ranks"]:
            per_rank.append({"rank": r["rank"], "step_ms": r.get("profiler_step_ms"), "unprofiled_ms": unprofiled_ms(r),
                             "expected": sparse_as_gathers(expected_from_c10d(r.get("kineto_c10d", {})),
                                                           r.get("kineto_gloo", {}))})
        max_ms, n = m.get("measured_max_profiler_step_ms"), len(per_rank)
    model = m.get("model") or _model_from_command(m.get("command") or collect.get("command")) or case.name
    unprof = [r["unprofiled_ms"] for r in per_rank if r["unprofiled_ms"] is not None]
    return {"model": model, "ranks": n, "max_step_ms": max_ms, "per_rank": per_rank,
            "max_unprofiled_ms": max(unprof) if unprof and len(unprof) == len(per_rank) else None}


# ----------------------------------------------------------------------------------------- ET side

def et_collectives(path: str | os.PathLike) -> dict[str, int]:
    """Collectives per kind in one Chakra ET (COMM_COLL by comm_type; SEND; RECV)."""
    from chakra_proto.io import read_et  # the ET framing; kept out of the module's imports
    from chakra_proto.attrs import attr_map, attr_value

    _, nodes = read_et(path)
    out: Counter = Counter()
    for n in nodes:
        if n.type == _COMM_SEND:
            out["SEND"] += 1
        elif n.type == _COMM_RECV:
            out["RECV"] += 1
        elif n.type == _COMM_COLL:
            a = attr_map(n).get("comm_type")
            out[_COMM_TYPE.get(attr_value(a) if a is not None else -1, "UNKNOWN")] += 1
    return dict(sorted(out.items()))


def compare_collectives(expected: list[dict[str, int]], got: list[dict[str, int] | None]) -> tuple[bool | str, str]:
    """Per rank, the ET's collectives against the c10d operators Kineto saw: (True when every rank
    holds them by kind and number (a gloo sparse all-reduce counts as the ALL_GATHER it is
    written as); "count" when only the numbers agree; False otherwise; a note naming the ranks
    that differ)."""
    bad, kinds_only = [], True
    for r, (e, g) in enumerate(zip(expected, got)):
        if g is None:
            bad.append(f"r{r}: no ET")
            kinds_only = False
            continue
        e2 = {k: v for k, v in e.items() if v}
        g2 = {k: v for k, v in g.items() if v}
        if e2 != g2:
            bad.append(f"r{r}: ET {_fmt_counts(g2)} vs Kineto {_fmt_counts(e2)}")
            kinds_only &= sum(e2.values()) == sum(g2.values())
    if len(expected) != len(got):
        bad.append(f"{len(got)} ET ranks vs {len(expected)} measured")
        kinds_only = False
    if not bad:
        return True, ""
    return ("count" if kinds_only else False), "; ".join(bad)


def _fmt_counts(c: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(c.items())) or "none"


# ------------------------------------------------------------------------------------------ simulate

def ring_yml(n: int, bw: float = DEFAULT_BW_GB_S, lat: float = DEFAULT_LAT_NS) -> str:
    return f"topology: [ Ring ]\nnpus_count: [ {n} ]\nbandwidth: [ {bw} ]\nlatency: [ {lat} ]\n"


def parse_report(text: str) -> dict:
    """system.main's JSON report (from ``--report -`` on stdout, possibly after other lines):
    ``{"finish_ms": [per rank], "end_ms": max}``."""
    text = text.strip()
    try:
        rep = json.loads(text)
    except json.JSONDecodeError:
        i = text.find("{")
        if i < 0:
            raise ValueError("no JSON report in the simulator's output") from None
        rep, _ = json.JSONDecoder().raw_decode(text[i:])
    ranks = sorted(rep.get("ranks", []), key=lambda r: r["rank"])
    fin = [r["finish_seconds"] * 1e3 if "finish_seconds" in r else r["finish_cycles"] / 1e6 for r in ranks]
    end = rep.get("totals", {}).get("end_cycles")
    return {"finish_ms": fin, "end_ms": end / 1e6 if end is not None else (max(fin) if fin else None),
            "collectives_per_rank": dict(Counter(c["rank"] for c in rep.get("collectives", [])))}


def error_pct(simulated: float | None, measured: float | None) -> float | None:
    if simulated is None or not measured:
        return None
    return 100.0 * (simulated - measured) / measured


def _tail(s: str, lines: int = 6) -> str:
    return "\n".join(s.strip().splitlines()[-lines:])


def _run(cmd: list[str], timeout: float, cwd: Path = REPO) -> tuple[int, str, str, float]:
    t = time.monotonic()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return 124, out, err + f"\n(timed out after {timeout:.0f} s)", time.monotonic() - t


def _work_dir(case: Path, work: Path | None) -> Path:
    if work is not None:
        return work / case.name
    if os.access(case, os.W_OK):
        return case
    return Path(tempfile.gettempdir()) / "realtraces-check" / case.name


def check_case(case: Path, network: Path | None = None, work: Path | None = None,
               timeout: float = 600.0) -> dict:
    """Convert, simulate and compare one case; never raises for a failing step (it is recorded)."""
    case = Path(case)
    tdir = trace_dir(case)
    assert tdir is not None, f"{case}: no host.0.json[.gz] there or under trace/"
    meas = load_measured(case)
    n = meas["ranks"] or count_ranks(tdir)
    wd = _work_dir(case, work)
    etdir = wd / "et"
    if etdir.exists():
        shutil.rmtree(etdir)
    etdir.mkdir(parents=True)
    prefix = etdir / "et"
    row: dict[str, Any] = {"case": case.name, "path": str(case), "model": meas["model"], "ranks": n,
                           "measured_ms": meas["max_step_ms"], "unprofiled_ms": meas["max_unprofiled_ms"],
                           "measured_per_rank_ms": [r["step_ms"] for r in meas["per_rank"]],
                           "expected_collectives": [r["expected"] for r in meas["per_rank"]],
                           "convert_rc": None, "convert_stderr": "", "sim_rc": None, "sim_stderr": "",
                           "network": None, "simulated_ms": None, "simulated_per_rank_ms": None,
                           "et_collectives": None, "collectives_ok": None, "collectives_note": "",
                           "error_pct": None}
    cmd = [sys.executable, "-m", "workload.convert", "pytorch", "--host-trace", str(tdir / "host.{rank}.json"),
           "--device-trace", str(tdir / "device.{rank}.json"), "--ranks", str(n), "-o", str(prefix)]
    rc, out, err, secs = _run(cmd, timeout)
    row.update(convert_rc=rc, convert_stdout=_tail(out, 3 + n), convert_stderr=_tail(err, 200), convert_s=round(secs, 2))
    if rc != 0:
        return row
    got = [et_collectives(p) if (p := Path(f"{prefix}.{r}.et")).exists() else None for r in range(n)]
    row["et_collectives"] = got
    row["collectives_ok"], row["collectives_note"] = compare_collectives(row["expected_collectives"], got)
    fitted = Path(f"{prefix}.network.yml")
    if fitted.exists():
        net, row["network"] = fitted, f"converter's {fitted.name}"
    elif network is not None:
        net, row["network"] = Path(network), str(network)
    else:
        net = etdir / f"ring{n}.yml"
        net.write_text(ring_yml(n))
        row["network"] = f"Ring {n} x {DEFAULT_BW_GB_S:g} GB/s, {DEFAULT_LAT_NS:g} ns"
    cmd = [sys.executable, "-m", "system.main", "--workload", str(prefix), "--network", str(net), "--report", "-"]
    rc, out, err, secs = _run(cmd, timeout)
    row.update(sim_rc=rc, sim_stderr=_tail(err) if rc else "", sim_s=round(secs, 2))
    if rc == 0:
        try:
            rep = parse_report(out)
        except ValueError as e:
            row["sim_stderr"] = str(e)
            return row
        row.update(simulated_ms=rep["end_ms"], simulated_per_rank_ms=rep["finish_ms"])
        row["error_pct"] = error_pct(rep["end_ms"], meas["max_step_ms"])
    return row


# --------------------------------------------------------------------------------------------- table

COLUMNS = ("case", "model", "ranks", "convert rc", "sim rc", "collectives ok?", "measured ms", "simulated ms",
           "error %", "unprofiled ms", "network")


def _cell(row: dict, col: str) -> str:
    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    return {"case": row["case"], "model": str(row["model"]), "ranks": str(row["ranks"]),
            "convert rc": num(row["convert_rc"], "d"), "sim rc": num(row["sim_rc"], "d"),
            "collectives ok?": {None: "-", True: "yes", False: "NO", "count": "count only"}[row["collectives_ok"]],
            "measured ms": num(row["measured_ms"], ".2f"), "simulated ms": num(row["simulated_ms"], ".2f"),
            "error %": num(row["error_pct"], "+.1f"), "unprofiled ms": num(row.get("unprofiled_ms"), ".2f"),
            "network": "-" if not row.get("network") else ("fitted" if row["network"].startswith("converter")
                                                            else "ring" if row["network"].startswith("Ring ")
                                                            else "given")}[col]


def format_table(rows: list[dict]) -> str:
    cells = [[_cell(r, c) for c in COLUMNS] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(COLUMNS)]

    def line(xs: list[str] | tuple[str, ...]) -> str:
        last = len(xs) - 1
        return " | ".join(x.ljust(w) if i < 2 or i == last else x.rjust(w)
                          for i, (x, w) in enumerate(zip(xs, widths))).rstrip()

    out = [line(COLUMNS), "-+-".join("-" * w for w in widths)] + [line(x) for x in cells]
    return "\n".join(out)


def converter_warnings(stderr: str) -> list[str]:
    """The converter's distinct warnings, 'rank N: ' taken out (one line per kind, with its ranks)."""
    seen: dict[str, list[str]] = {}
    for line in stderr.splitlines():
        line = line.strip()
        if not line.lower().startswith("warning:"):
            continue
        text = line.split(":", 1)[1].strip()
        rank = ""
        if text.startswith("rank ") and ":" in text:
            rank, text = (x.strip() for x in text.split(":", 1))
        seen.setdefault(text, []).append(rank)
    return [f"{t} ({', '.join(r for r in ranks if r)})" if any(ranks) else t for t, ranks in seen.items()]


def source_state() -> str:
    """The commit the converter and simulator come from, and whether their folders differ from it."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "workload", "system",
                                "network", "chakra_proto"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "source: unknown (no git)"
    changed = [ln[3:] for ln in dirty.splitlines() if ln.strip()]
    return f"source: {head or '?'}" + (f" + uncommitted changes in {', '.join(changed)}" if changed else "")


def format_notes(rows: list[dict]) -> str:
    notes = []
    for r in rows:
        for w in converter_warnings(r.get("convert_stderr", "")):
            notes.append(f"{r['case']}: convert warning: {w}")
        if r["convert_rc"] not in (0, None):
            last = r["convert_stderr"].strip().splitlines()[-1:] or ["(no stderr)"]
            notes.append(f"{r['case']}: convert exit {r['convert_rc']}: {last[0][:300]}")
        if r["collectives_ok"] is False:
            notes.append(f"{r['case']}: collectives differ: {r['collectives_note']}")
        elif r["collectives_ok"] == "count":
            notes.append(f"{r['case']}: same number of collectives, other kinds: {r['collectives_note']}")
        if r["sim_rc"] not in (0, None):
            last = r["sim_stderr"].strip().splitlines()[-1:] or ["(no stderr)"]
            notes.append(f"{r['case']}: simulate exit {r['sim_rc']}: {last[0][:300]}")
    return "\n".join(notes)


def check(root: str | os.PathLike, network: Path | None = None, work: Path | None = None,
          timeout: float = 600.0, out=sys.stdout) -> list[dict]:
    cases = find_cases(root)
    if not cases:
        raise SystemExit(f"check: no case folder (host.0.json[.gz] directly or under trace/) in {root}")
    rows = []
    state = source_state()
    for c in cases:
        try:
            rows.append(check_case(c, network, work, timeout))
        except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
            rows.append({"case": c.name, "path": str(c), "model": "?", "ranks": "?", "convert_rc": None,
                         "sim_rc": None, "collectives_ok": None, "measured_ms": None, "simulated_ms": None,
                         "error_pct": None, "convert_stderr": "", "sim_stderr": "",
                         "harness_error": f"{type(e).__name__}: {e}"})
        print(f"  {c.name}: convert {rows[-1]['convert_rc']}, simulate {rows[-1]['sim_rc']}", file=sys.stderr,
              flush=True)
    print(state, file=out)
    print(format_table(rows), file=out)
    notes = format_notes(rows) + "".join(f"\n{r['case']}: harness error: {r['harness_error']}"
                                         for r in rows if r.get("harness_error"))
    if notes.strip():
        print("\n" + notes.strip(), file=out)
    out.flush()
    return rows


# ------------------------------------------------------------------------------------------- collect

def case_name(model: str, ranks: int) -> str:
    return f"{model}_w{ranks}"


def collect_command(model: str, ranks: int, tdir: Path, steps: int = 8, step: int = 4,
                    batch: int | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "workload.collect", "run", "--step", str(step), "--threads", "1",
           "--out", str(tdir), "--", "torchrun", "--standalone", "--nproc-per-node", str(ranks), str(TRAIN),
           "--model", model, "--steps", str(steps), "--timing-dir", str(tdir)]
    if batch is not None:
        cmd += ["--batch", str(batch)]
    return cmd


def collect_case(model: str, ranks: int, out: Path, steps: int = 8, step: int = 4, batch: int | None = None,
                 retries: int = 2, timeout: float = 900.0) -> dict:
    """Run one case (again, up to ``retries`` times, if the job fails: gloo's teardown sometimes
    ends a worker in std::terminate) and write CASE/measured.json. Returns a status dict."""
    case = out / case_name(model, ranks)
    tdir = case / "trace"
    case.mkdir(parents=True, exist_ok=True)
    cmd = collect_command(model, ranks, tdir, steps, step, batch)
    tries = []
    log = case / "collect.log"
    log.write_text("")
    for attempt in range(retries + 1):
        if tdir.exists():
            shutil.rmtree(tdir)
        rc, o, e, secs = _run(cmd, timeout)
        with log.open("a") as f:  # every try's output, so a failed first try stays readable
            f.write(f"$ {' '.join(cmd)}\n# try {attempt + 1}: exit {rc} after {secs:.1f} s\n{o}\n{e}\n")
        tries.append({"rc": rc, "seconds": round(secs, 1)})
        if rc == 0 and all(_exists(tdir / f"device.{r}.json") for r in range(ranks)):
            break
    status = {"case": case.name, "model": model, "ranks": ranks, "tries": tries, "ok": tries[-1]["rc"] == 0}
    if status["ok"]:
        m = measure_trace_dir(tdir, ranks, step)
        m.update(model=model, case=case.name, steps=steps, batch=batch, tries=tries)
        (case / "measured.json").write_text(json.dumps(m, indent=1))
        status["max_profiler_step_ms"] = m["max_profiler_step_ms"]
    return status


# ------------------------------------------------------------------------------------------------ cli

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="realtraces", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="run train.py cases under workload.collect run")
    c.add_argument("--models", default="all", help=f"comma list of {','.join(MODELS)} (default: all)")
    c.add_argument("--ranks", default="2", help="comma list, e.g. 2,4")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--steps", type=int, default=8)
    c.add_argument("--step", type=int, default=4, help="the profiled step")
    c.add_argument("--batch", type=int, default=None)
    c.add_argument("--retries", type=int, default=2)
    c.add_argument("--timeout", type=float, default=900.0, help="seconds per try")
    k = sub.add_parser("check", help="convert, simulate and compare every case under DIR")
    k.add_argument("dir", type=Path)
    k.add_argument("--network", type=Path, default=None,
                   help="network YAML when the converter writes none (default: Ring N x 50 GB/s, 500 ns)")
    k.add_argument("--work", type=Path, default=None,
                   help="write the ETs to WORK/CASE/et (default: CASE/et, or a temp folder for read-only cases)")
    k.add_argument("--json", type=Path, default=None, help="write every case's details here")
    k.add_argument("--timeout", type=float, default=600.0, help="seconds per convert / simulate")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.cmd == "collect":
        models = list(MODELS) if a.models == "all" else [m.strip() for m in a.models.split(",") if m.strip()]
        unknown = [m for m in models if m not in MODELS]
        if unknown:
            print(f"collect: unknown model(s) {unknown}; choose from {','.join(MODELS)}", file=sys.stderr)
            return 2
        ranks = [int(r) for r in a.ranks.split(",") if r.strip()]
        failed = 0
        for n in ranks:
            for m in models:
                s = collect_case(m, n, a.out, a.steps, a.step, a.batch, a.retries, a.timeout)
                failed += not s["ok"]
                ms = s.get("max_profiler_step_ms")
                print(f"{s['case']}: {'ok' if s['ok'] else 'FAILED'} tries={[t['rc'] for t in s['tries']]} "
                      f"step={'-' if ms is None else f'{ms:.2f} ms'}", flush=True)
        return 1 if failed else 0
    rows = check(a.dir, a.network, a.work, a.timeout)
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"source": source_state(), "cases": rows}, indent=1, default=str))
    return 0
