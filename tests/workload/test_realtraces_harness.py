"""dtsim_tools/realtraces/harness.py: the parsing and comparison of the real-trace evaluation, on
small synthetic inputs (no torch), and one run of ``check`` over ../shared/anchors/realtraces-examples
(skipped without it; it asserts only that every case is reported, since the converter is changing)."""
from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from dtsim_tools.realtraces import harness as h

ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchors" / "realtraces-examples"


def _x(name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def _kineto(rank: int, world: int, step_ms: float, comms: list[dict] | None = None) -> dict:
    ev = [_x("ProfilerStep#3", 0.0, 5000.0, cat="user_annotation"),  # an earlier step
          _x("ProfilerStep#4", 10_000.0, step_ms * 1e3, cat="user_annotation"),
          _x("c10d::barrier", 9_000.0, 100.0), _x("gloo:barrier", 9_010.0, 50.0, tid=7, cat="user_annotation")]
    ev += comms if comms is not None else [
        _x("c10d::allreduce_", 11_000.0, 50.0), _x("gloo:all_reduce", 11_010.0, 900.0, tid=7, cat="user_annotation"),
        _x("c10d::broadcast_", 10_100.0, 20.0), _x("gloo:broadcast", 10_105.0, 30.0, tid=8, cat="user_annotation"),
        _x("c10d::wait", 12_000.0, 5.0), _x("aten::mm", 10_500.0, 100.0)]
    return {"distributedInfo": {"rank": rank, "world_size": world, "backend": "gloo"}, "traceEvents": ev}


def _write_json(path: Path, data: object, gz: bool = False) -> None:
    raw = json.dumps(data).encode()
    if gz:
        Path(str(path) + ".gz").write_bytes(gzip.compress(raw))
    else:
        path.write_bytes(raw)


def _write_et(path: Path, kinds: list[str | int]) -> None:
    """An ET of one compute node and one collective per entry (a name: COMM_COLL of that
    comm_type; 'SEND'/'RECV': those nodes)."""
    from chakra_proto import et_def_pb2 as pb
    from chakra_proto.attrs import attr_int64
    from chakra_proto.io import write_et

    nodes = [pb.Node(id=0, name="mm", type=pb.COMP_NODE, duration_micros=1)]
    for i, k in enumerate(kinds, 1):
        if k == "SEND":
            nodes.append(pb.Node(id=i, name="send", type=pb.COMM_SEND_NODE))
        elif k == "RECV":
            nodes.append(pb.Node(id=i, name="recv", type=pb.COMM_RECV_NODE))
        else:
            n = pb.Node(id=i, name=f"c10d::{k}", type=pb.COMM_COLL_NODE)
            n.attr.append(attr_int64("comm_type", getattr(pb, k)))
            nodes.append(n)
    write_et(path, pb.GlobalMetadata(version="0.0.4"), nodes)


def _case(root: Path, name: str, world: int, steps_ms: list[float], *, gz: bool = False, under_trace: bool = True,
          comms: list[dict] | None = None) -> Path:
    case = root / name
    t = case / "trace" if under_trace else case
    t.mkdir(parents=True)
    for r in range(world):
        _write_json(t / f"host.{r}.json", {"schema": "1.1.1-chakra.0.0.4", "nodes": []}, gz)
        _write_json(t / f"device.{r}.json", _kineto(r, world, steps_ms[r], comms), gz)
        _write_json(t / f"step.{r}.json", {"rank": r, "step": 4, "step_wall_s": [1.0, 0.010, 0.012, 0.020]}, gz)
        _write_json(t / f"timing.{r}.json", {"rank": r, "step_wall_s": [1.0, 0.010, 0.012, 0.020, 0.011, 0.009]}, gz)
    _write_json(t / "collect.json", {"command": ["torchrun", "train.py", "--model", "toy", "--steps", "6"],
                                     "step": 4, "exit_code": 0}, gz)
    return case


def test_comm_kind_names() -> None:
    k = h.comm_kind
    assert k("c10d::allreduce_") == "ALL_REDUCE" and k("gloo:sparse_all_reduce") == "ALL_REDUCE"
    assert k("c10d::_allgather_base_") == "ALL_GATHER" and k("c10d::_reduce_scatter_base_") == "REDUCE_SCATTER"
    assert k("c10d::broadcast_") == "BROADCAST" and k("c10d::alltoall_base_") == "ALL_TO_ALL"
    assert k("c10d::send") == "SEND" and k("c10d::recv_") == "RECV" and k("c10d::barrier") == "BARRIER"
    assert k("_c10d_functional::all_reduce") == "ALL_REDUCE" and k("_c10d_functional::wait_tensor") is None
    assert k("aten::mm") is None and k("ProfilerStep#4") is None and k("c10d::wait") is None


def test_kineto_rank_counts_inside_the_last_step_only() -> None:
    r = h.kineto_rank(_kineto(1, 2, 7.5))
    assert r["rank"] == 1 and r["profiler_step"] == "ProfilerStep#4" and r["profiler_step_ms"] == 7.5
    assert r["c10d"] == {"c10d::allreduce_": 1, "c10d::broadcast_": 1, "c10d::wait": 1}
    assert r["gloo"] == {"gloo:all_reduce": 1, "gloo:broadcast": 1}
    assert r["comm_outside_step"] == {"c10d::barrier": 1, "gloo:barrier": 1}
    assert r["expected_collectives"] == {"ALL_REDUCE": 1, "BROADCAST": 1}


def test_nested_c10d_ops_count_once_and_barriers_are_not_expected() -> None:
    comms = [_x("c10d::allreduce_coalesced_", 11_000.0, 100.0), _x("c10d::allreduce_", 11_010.0, 10.0),
             _x("c10d::allreduce_", 11_200.0, 10.0, tid=2), _x("c10d::barrier", 11_300.0, 10.0)]
    r = h.kineto_rank(_kineto(0, 2, 5.0, comms))
    assert r["c10d"]["c10d::allreduce_"] == 2
    assert r["expected_collectives"] == {"ALL_REDUCE": 2}


def test_no_profiler_step() -> None:
    r = h.kineto_rank({"traceEvents": [_x("aten::mm", 0, 1)]})
    assert r["profiler_step_ms"] is None and r["expected_collectives"] == {}


def test_find_cases_both_layouts_and_gzip(tmp_path) -> None:
    a = _case(tmp_path, "a_w2", 2, [5.0, 6.0])
    b = _case(tmp_path / "nested", "b_w2", 2, [5.0, 6.0], gz=True, under_trace=False)
    (tmp_path / "empty").mkdir()
    assert h.find_cases(tmp_path) == sorted([a, b])
    assert h.find_cases(a) == [a] and h.trace_dir(a) == a / "trace" and h.trace_dir(b) == b
    assert h.count_ranks(b) == 2


def test_measure_trace_dir_and_load_our_layout(tmp_path) -> None:
    case = _case(tmp_path, "toy_w2", 2, [5.0, 8.25])
    m = h.measure_trace_dir(case / "trace")
    assert m["layout"] == h.LAYOUT and m["ranks_count"] == 2 and m["max_profiler_step_ms"] == 8.25
    r0 = m["ranks"][0]
    assert r0["collector_steps"]["profiled_step_ms"] == 20.0 and r0["collector_steps"]["median_other_ms"] == 11.0
    assert r0["timing"]["profiled_step_ms"] == 20.0 and r0["timing"]["median_other_ms"] == 10.5
    assert h.unprofiled_ms(r0) == 10.5 and m["max_median_unprofiled_ms"] == 10.5
    s0 = json.loads((case / "trace" / "step.0.json").read_text())
    (case / "trace" / "step.0.json").write_text(json.dumps(dict(s0, unprofiled_median_s=0.0095, profiler_slowdown=2.1)))
    assert h.unprofiled_ms(h.measure_trace_dir(case / "trace")["ranks"][0]) == 9.5  # the collector's own median
    (case / "measured.json").write_text(json.dumps(dict(m, model="toy")))
    got = h.load_measured(case)
    assert got["model"] == "toy" and got["ranks"] == 2 and got["max_step_ms"] == 8.25
    assert [r["expected"] for r in got["per_rank"]] == [{"ALL_REDUCE": 1, "BROADCAST": 1}] * 2


def test_load_measured_without_measured_json_and_anchor_layout(tmp_path) -> None:
    case = _case(tmp_path, "x_w2", 2, [4.0, 3.0], gz=True, under_trace=False)
    got = h.load_measured(case)
    assert got["model"] == "toy" and got["max_step_ms"] == 4.0  # figures from the Kineto traces
    anchor = {"dir": "somewhere", "measured_max_profiler_step_ms": 39.5,
              "ranks": [{"rank": r, "profiler_step_ms": 39.5 - r, "kineto_gloo": {"gloo:sparse_all_reduce": 2},
                         "kineto_c10d": {"c10d::allreduce_": 3, "c10d::barrier": 1}} for r in range(2)]}
    (case / "measured.json").write_text(json.dumps(anchor))
    got = h.load_measured(case)
    assert got["max_step_ms"] == 39.5 and [r["step_ms"] for r in got["per_rank"]] == [39.5, 38.5]
    assert got["max_unprofiled_ms"] is None
    anchor["ranks"][0]["timing"] = {"median_other_ms": 15.0}
    anchor["ranks"][1]["timing"] = {"median_other_ms": 16.0}
    (case / "measured.json").write_text(json.dumps(anchor))
    assert h.load_measured(case)["max_unprofiled_ms"] == 16.0
    assert got["per_rank"][1]["expected"] == {"ALL_GATHER": 2, "ALL_REDUCE": 1}      # the sparse ones: gathers


def test_et_collectives(tmp_path) -> None:
    p = tmp_path / "w.0.et"
    _write_et(p, ["ALL_REDUCE", "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "SEND", "RECV"])
    assert h.et_collectives(p) == {"ALL_GATHER": 1, "ALL_REDUCE": 2, "RECV": 1, "REDUCE_SCATTER": 1, "SEND": 1}


def test_compare_collectives() -> None:
    e = [{"ALL_REDUCE": 3}, {"ALL_REDUCE": 3}]
    assert h.compare_collectives(e, [{"ALL_REDUCE": 3}, {"ALL_REDUCE": 3}]) == (True, "")
    ok, note = h.compare_collectives(e, [{"ALL_REDUCE": 1, "ALL_GATHER": 2}, {"ALL_REDUCE": 3}])
    assert ok == "count" and note.startswith("r0:") and "r1" not in note
    ok, note = h.compare_collectives(e, [{"ALL_REDUCE": 3}, {"ALL_REDUCE": 2}])
    assert ok is False and "r1: ET ALL_REDUCE=2 vs Kineto ALL_REDUCE=3" in note
    assert h.compare_collectives(e, [{"ALL_REDUCE": 3}, None])[0] is False
    assert h.compare_collectives(e, [{"ALL_REDUCE": 3}])[0] is False


def test_parse_report_and_error() -> None:
    rep = {"ranks": [{"rank": 1, "finish_cycles": 30_000_000, "finish_seconds": 0.03},
                     {"rank": 0, "finish_cycles": 25_000_000}],
           "totals": {"end_cycles": 30_000_000}, "collectives": [{"rank": 0}, {"rank": 1}, {"rank": 1}]}
    for text in (json.dumps(rep), "warning: something\n" + json.dumps(rep, indent=1) + "\n"):
        got = h.parse_report(text)
        assert got["finish_ms"] == [25.0, 30.0] and got["end_ms"] == 30.0
        assert got["collectives_per_rank"] == {0: 1, 1: 2}
    with pytest.raises(ValueError):
        h.parse_report("no report here")
    assert h.error_pct(30.0, 40.0) == -25.0 and h.error_pct(None, 40.0) is None and h.error_pct(1.0, 0) is None
    assert "npus_count: [ 4 ]" in h.ring_yml(4) and "bandwidth: [ 50.0 ]" in h.ring_yml(4)


def _row(**kw) -> dict:
    row = {"case": "c_w2", "model": "c", "ranks": 2, "convert_rc": 0, "sim_rc": 0, "collectives_ok": True,
           "collectives_note": "", "measured_ms": 40.0, "simulated_ms": 30.0, "error_pct": -25.0,
           "convert_stderr": "", "sim_stderr": "", "network": "Ring 2 x 50 GB/s, 500 ns"}
    row.update(kw)
    return row


def test_format_table_and_notes() -> None:
    rows = [_row(), _row(case="d_w4", ranks=4, convert_rc=1, sim_rc=None, collectives_ok=None, simulated_ms=None,
                         error_pct=None, convert_stderr="Traceback\nAttributeError: boom")]
    text = h.format_table(rows).splitlines()
    assert text[0].split(" | ")[0].strip() == "case" and len(text) == 4
    assert text[2].split("|")[-3].strip() == "-25.0" and text[2].endswith("ring")
    assert [c.strip() for c in text[3].split("|")][3:9] == ["1", "-", "-", "40.00", "-", "-"]
    assert h.format_notes(rows) == "d_w4: convert exit 1: AttributeError: boom"


def test_check_case_records_a_failing_converter(tmp_path, monkeypatch) -> None:
    case = _case(tmp_path, "toy_w2", 2, [5.0, 6.0])
    calls = []

    def fake_run(cmd, timeout, cwd=h.REPO):
        calls.append(cmd)
        return 1, "", "Traceback (most recent call last):\nAttributeError: 'Node' object has no attribute", 0.1

    monkeypatch.setattr(h, "_run", fake_run)
    row = h.check_case(case, work=tmp_path / "work")
    assert len(calls) == 1 and calls[0][1:4] == ["-m", "workload.convert", "pytorch"]
    assert "--ranks" in calls[0] and calls[0][calls[0].index("--ranks") + 1] == "2"
    assert row["convert_rc"] == 1 and row["sim_rc"] is None and row["measured_ms"] == 6.0
    assert "AttributeError" in row["convert_stderr"]


def test_check_case_simulates_and_compares(tmp_path, monkeypatch) -> None:
    case = _case(tmp_path, "toy_w2", 2, [5.0, 6.0])
    report = {"ranks": [{"rank": 0, "finish_cycles": 4_500_000}, {"rank": 1, "finish_cycles": 4_800_000}],
              "totals": {"end_cycles": 4_800_000}, "collectives": []}
    calls = []

    def fake_run(cmd, timeout, cwd=h.REPO):
        calls.append(cmd)
        if "workload.convert" in cmd:
            prefix = cmd[cmd.index("-o") + 1]
            _write_et(Path(f"{prefix}.0.et"), ["ALL_REDUCE", "BROADCAST"])
            _write_et(Path(f"{prefix}.1.et"), ["ALL_REDUCE"])
            return 0, "wrote 2 rank(s)", "", 0.1
        return 0, json.dumps(report), "", 0.1

    monkeypatch.setattr(h, "_run", fake_run)
    row = h.check_case(case, work=tmp_path / "work")
    assert row["convert_rc"] == 0 and row["sim_rc"] == 0
    assert row["simulated_ms"] == 4.8 and row["error_pct"] == pytest.approx(-20.0)
    assert row["collectives_ok"] is False and row["collectives_note"].startswith("r1:")
    net = Path(calls[1][calls[1].index("--network") + 1])
    assert net.read_text() == h.ring_yml(2) and row["network"].startswith("Ring 2")
    # a network the converter fitted is used instead
    calls.clear()
    real = fake_run

    def fitted_run(cmd, timeout, cwd=h.REPO):
        out = real(cmd, timeout, cwd)
        if "workload.convert" in cmd:
            Path(cmd[cmd.index("-o") + 1] + ".network.yml").write_text(h.ring_yml(2, 1.0))
        return out

    monkeypatch.setattr(h, "_run", fitted_run)
    row = h.check_case(case, network=tmp_path / "given.yml", work=tmp_path / "work")
    assert calls[1][calls[1].index("--network") + 1].endswith("et.network.yml") and row["network"].startswith("conv")


@pytest.mark.skipif(not ANCHORS.is_dir(), reason=f"{ANCHORS} is absent (clone beside ../shared for this layer)")
def test_check_runs_on_the_realtraces_anchors(tmp_path) -> None:
    out = io.StringIO()
    cases = h.find_cases(ANCHORS)
    rows = h.check(ANCHORS, work=tmp_path, out=out)
    assert cases and [r["case"] for r in rows] == [c.name for c in cases]
    text = out.getvalue()
    for r in rows:
        assert r["convert_rc"] is not None and not r.get("harness_error"), r
        assert r["measured_ms"] and r["measured_ms"] > 0
        assert r["case"] in text


def test_converter_warnings_are_grouped() -> None:
    err = ("warning: rank 0: 3 operation(s) name no process group; simulated over the world\n"
           "warning: rank 1: 3 operation(s) name no process group; simulated over the world\n"
           "Traceback: not a warning\nwarning: no PREFIX.network.yml written\n")
    assert h.converter_warnings(err) == ["3 operation(s) name no process group; simulated over the world (rank 0, rank 1)",
                                         "no PREFIX.network.yml written"]
    assert h.source_state().startswith("source: ")
