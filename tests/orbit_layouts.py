"""dp x tp x pp layouts for the orbit tests (tests/system/test_orbits*.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from implementations import COLLECTIVES

from network.errors import InputError
from system.main import Deadlock, run_simulation

from system.config import SystemConfig
from system.report import build_report
from workload.builder import GraphBuilder


def _rank(s: int, d: int, t: int, dp: int, tp: int, dp_inner: bool) -> int:
    return (s * tp + t) * dp + d if dp_inner else (s * dp + d) * tp + t


def write_layout(tmp: Path, dp: int, tp: int, pp: int, micros: int, dp_inner: bool, stage_ns: list[int],
                 tp_coll: tuple[str, int], dp_coll: tuple[str, int], odd_rank: int | None = None,
                 reorder_group: str | None = None) -> tuple[Path, Path, int]:
    npus = dp * tp * pp
    groups: dict[int, list[int]] = {}
    gid = 1
    tp_of, dp_of = {}, {}
    for s in range(pp):
        for d in range(dp):
            if tp > 1:
                groups[gid] = [_rank(s, d, t, dp, tp, dp_inner) for t in range(tp)]
                for r in groups[gid]:
                    tp_of[r] = gid
                gid += 1
    for s in range(pp):
        for t in range(tp):
            groups[gid] = [_rank(s, d, t, dp, tp, dp_inner) for d in range(dp)]
            for r in groups[gid]:
                dp_of[r] = gid
            gid += 1
    if reorder_group == "rotate":
        g = groups[dp_of[0]]
        groups[dp_of[0]] = g[1:] + g[:1]
    elif reorder_group == "swap" and dp >= 3:
        g = groups[dp_of[0]]
        g[0], g[1] = g[1], g[0]
    for s in range(pp):
        for d in range(dp):
            for t in range(tp):
                r = _rank(s, d, t, dp, tp, dp_inner)
                b = GraphBuilder()
                prev: list[int] = []
                for m in range(micros):
                    if s > 0:
                        prev = [b.recv(f"rx{m}", _rank(s - 1, d, t, dp, tp, dp_inner), r, 4096 << m, 10 + m, deps=prev)]
                    ns = stage_ns[s] + (777 if r == odd_rank else 0)
                    prev = [b.comp(f"fwd{m}", ns, deps=prev)]
                    if tp > 1:
                        prev = [b.collective(f"tp{m}", tp_coll[0], tp_coll[1], deps=prev, pg_name=str(tp_of[r]))]
                    if s < pp - 1:
                        prev = [b.send(f"tx{m}", r, _rank(s + 1, d, t, dp, tp, dp_inner), 4096 << m, 10 + m, deps=prev)]
                b.collective("dp", dp_coll[0], dp_coll[1], deps=prev, pg_name=str(dp_of[r]))
                b.write(tmp / "w", r)
    (tmp / "groups.json").write_text(json.dumps({str(k): v for k, v in groups.items()}))
    return tmp / "w", tmp / "groups.json", npus


def _config(knobs: dict, impls: dict | None, ndims: int) -> SystemConfig:
    if impls is None:
        impls = {f"{c}-implementation": ["ring"] * ndims for c in COLLECTIVES}
    return SystemConfig.from_dict({**knobs, **impls})


def _report(result) -> dict:
    rep = build_report(result)
    # the terminal's report (no records) is the same less its records, views and orbits included
    assert build_report(result, records=False) == {k: v for k, v in rep.items() if k != "collectives"}
    del rep["inputs"], rep["totals"]["events"], rep["totals"]["wall_seconds"], rep["network"]["events"]
    rep["network"].pop("simulated_ranks", None)
    return rep




def check_against_event_path(spec: Path, net, cfg: SystemConfig, groups: Path, **kw):
    """Run with the shortcuts (``kw``: backend, batching) and with every message an event:
    the same refusal or stuck report, else the same ranks, traffic counters and report. Returns
    the shortcut run (None where both refused)."""
    backend = kw.get("backend")
    try:
        plain = run_simulation(spec, net, cfg, comm_groups=groups, backend=backend, symmetry=False, batching=False)
    except (Deadlock, InputError) as e:  # a drawn layout that is refused or stuck: the same with orbits
        with pytest.raises(type(e)) as caught:
            run_simulation(spec, net, cfg, comm_groups=groups, **kw)
        assert str(caught.value) == str(e)
        return None
    fast = run_simulation(spec, net, cfg, comm_groups=groups, **kw)
    assert fast.finish_ns == plain.finish_ns
    for key in ("messages", "bytes_sent", "bytes_received", "bytes_per_dim"):
        assert fast.network_stats[key] == plain.network_stats[key], key
    assert _report(fast) == _report(plain)
    return fast
