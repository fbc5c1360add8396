"""Real-trace shapes the converter once got wrong, rebuilt small: misfiled parents, gloo's worker
threads, sparse all-reduces, an execution trace that lost a collective, and the fitted network.

Each trace is two ranks of a gloo job: an execution trace (host) and a Kineto trace (device) with
a ProfilerStep on the main thread and gloo's records on a worker thread.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from chakra_proto import et_def_pb2 as pb
from system.simulation import run_simulation
from workload.convert import main as convert_main
from workload.pytorch.converter import convert_pytorch
from workload.graph import load_graph
from workload.pytorch.network_fit import Measurement, busy_periods, fit_network, _Simulator

ET_SCHEMA = "1.1.1-chakra.0.0.4"
PG = "__torch__.torch.classes.c10d.ProcessGroup process_group"
MAIN, WORKER = 100, 900


class _Rank:
    """One rank's two traces, written op by op with explicit Kineto times (µs)."""

    def __init__(self, rank: int, world: int = 2, pg_config: list | None = None) -> None:
        self.rank, self.pid, self.world = rank, 300 + rank, world
        self.pg_config = pg_config or [{"pg_name": "0", "ranks": list(range(world)), "pg_size": world}]
        self.nodes: list[dict] = []
        self.events: list[dict] = []
        self.rf = 0
        self._node(1, "[pytorch|profiler|execution_trace|process]", 1, scope=7)
        self._node(2, "[pytorch|profiler|execution_trace|thread]", 1, scope=7)

    def _node(self, nid: int, name: str, parent: int, *, values=(), types=(), schema: str = "", scope: int = 0,
              outputs=((), ())) -> int:
        self.rf += 1
        attrs = [{"name": "rf_id", "type": "uint64", "value": self.rf}, {"name": "fw_parent", "type": "uint64", "value": 0},
                 {"name": "seq_id", "type": "int64", "value": -1}, {"name": "scope", "type": "uint64", "value": scope},
                 {"name": "tid", "type": "uint64", "value": 1}, {"name": "fw_tid", "type": "uint64", "value": 0},
                 {"name": "op_schema", "type": "string", "value": schema}]
        self.nodes.append({"id": nid, "name": name, "ctrl_deps": parent,
                           "inputs": {"values": list(values), "shapes": [[] for _ in values], "types": list(types),
                                      "strides": []},
                           "outputs": {"values": list(outputs[0]), "shapes": [[] for _ in outputs[0]],
                                       "types": list(outputs[1]), "strides": []}, "attrs": attrs})
        return self.rf

    def op(self, nid: int, name: str, parent: int, ts: float, dur: float, *, tid: int = MAIN, values=(), types=(),
           schema: str = "", outputs=((), ()), cat: str = "cpu_op") -> None:
        rf = self._node(nid, name, parent, values=values, types=types, schema=schema, outputs=outputs,
                        scope=7 if cat == "user_annotation" else 0)
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid, "ts": ts, "dur": dur,
                            "args": {"Record function id": rf}})

    host_name: str | None = None

    def write(self, folder: Path, step: tuple[float, float]) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": self.pid,
                            "tid": MAIN, "ts": step[0], "dur": step[1], "args": {}})
        (folder / f"host.{self.rank}.json").write_text(json.dumps({"schema": ET_SCHEMA, "pid": self.pid,
                                                                   "nodes": self.nodes}))
        (folder / f"device.{self.rank}.json").write_text(json.dumps(
            {"distributedInfo": {"rank": self.rank, "world_size": self.world, "backend": "gloo",
                                 "pg_config": self.pg_config},
             "traceEvents": self.events, **({"host_name": self.host_name} if self.host_name else {})}))


def _t(tid: int, storage: int, numel: int, itemsize: int = 4) -> list:
    return [tid, storage, 0, numel, itemsize, "cpu"]


def _allreduce(r: _Rank, nid: int, parent: int, ts: float, tensor: list, *, record_at: float, record_dur: float,
               record_parent: int | None = None, backend: str = "gloo:all_reduce", worker: int = WORKER) -> None:
    r.op(nid, "c10d::allreduce_", parent, ts, 10, values=[[tensor], "<Object>"],
         types=["GenericList[Tensor(float)]", "Object"], schema=f"c10d::allreduce_(Tensor[] tensors, {PG}) -> ()")
    r.op(nid + 1, backend, nid if record_parent is None else record_parent, record_at, record_dur, tid=worker,
         values=[tensor], types=["Tensor(float)"], cat="user_annotation")


def _convert(folder: Path, out: Path, ranks: int = 2) -> int:
    return convert_main(["pytorch", "--host-trace", str(folder / "host.{rank}.json"), "--device-trace",
                         str(folder / "device.{rank}.json"), "--ranks", str(ranks), "-o", str(out)])


def _collectives(path: Path) -> list[tuple[int, int]]:
    g = load_graph(path)
    return [(n.comm_type, n.comm_size) for n in sorted(g.nodes.values(), key=lambda n: n.id)
            if n.type == pb.COMM_COLL_NODE]


def test_an_op_filed_under_one_that_had_ended_is_not_lost(tmp_path) -> None:
    """The execution trace files the second all-reduce under the first (still 'open' on its
    stack); Kineto shows it started after the first ended. Both ranks keep both collectives."""
    for rank in range(2):
        r = _Rank(rank)
        r.op(3, "aten::mul", 2, 0, 100, values=[_t(1, 1, 256)], types=["Tensor(float)"])
        _allreduce(r, 10, 2, 200, _t(1, 1, 256), record_at=215, record_dur=50)
        parent_of_second = 10 if rank == 0 else 2          # rank 0's trace misfiles it
        _allreduce(r, 20, parent_of_second, 300, _t(2, 2, 512), record_at=315, record_dur=50)
        r.write(tmp_path, (0, 400))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    for rank in range(2):
        assert _collectives(tmp_path / "et" / f"g.{rank}.et") == [(pb.ALL_REDUCE, 1024), (pb.ALL_REDUCE, 2048)]


def test_gloo_worker_thread_work_is_not_host_time_and_its_gaps_are_not_work(tmp_path) -> None:
    """What gloo runs on its worker thread (its record, and the copies Kineto shows inside it but
    the execution trace files under the thread root) is the collective; the idle time before it
    on that thread is not host time of the rank."""
    for rank in range(2):
        r = _Rank(rank)
        r.op(3, "aten::mul", 2, 0, 100)
        _allreduce(r, 10, 2, 200, _t(1, 1, 256), record_at=5_000, record_dur=400)
        r.op(12, "aten::copy_", 2, 5_100, 50, tid=WORKER)           # inside gloo's record, filed at the root
        r.op(13, "aten::add", 2, 300, 100)
        r.write(tmp_path, (0, 6_000))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    g = load_graph(tmp_path / "et" / "g.0.et")
    cpu = {n.name: n.duration_ns for n in g.nodes.values() if n.is_cpu_op}
    assert "aten::copy_" not in cpu and "gloo:all_reduce" not in cpu
    # main-thread host time: the ops and the gaps between them on the main thread only
    assert cpu == {"aten::mul": 100_000, "c10d::allreduce_": 100_000 + 10_000, "aten::add": 90_000 + 100_000}


def test_work_inside_a_backend_record_the_execution_trace_lost_is_not_host_time(tmp_path) -> None:
    """gloo's record outlives the step, so the execution trace drops it and files the work Kineto
    shows inside it (a sparse all-reduce's coalescing and copies) at the worker thread's root;
    that work is still the collective's, not the rank's host time."""
    for rank in range(2):
        r = _Rank(rank)
        r.op(3, "aten::mul", 2, 0, 100)
        r.op(10, "c10d::allreduce_", 2, 200, 10, values=[[_t(1, 1, 256)], "<Object>"],
             types=["GenericList[Tensor(float)]", "Object"], schema=f"c10d::allreduce_(Tensor[] tensors, {PG}) -> ()")
        r.rf += 1                      # Kineto only: gloo's record, still running when the step ended
        r.events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": r.pid,
                         "tid": WORKER, "ts": 220, "dur": 9_000, "args": {"Record function id": r.rf}})
        r.op(12, "aten::coalesce", 2, 300, 3_000, tid=WORKER)       # inside it, filed at the thread root
        r.op(13, "aten::copy_", 2, 3_400, 2_000, tid=WORKER)
        r.op(14, "aten::add", 2, 400, 100)
        r.write(tmp_path, (0, 6_000))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    for rank in range(2):
        g = load_graph(tmp_path / "et" / f"g.{rank}.et")
        cpu = {n.name: n.duration_ns for n in g.nodes.values() if n.is_cpu_op}
        assert "aten::coalesce" not in cpu and "aten::copy_" not in cpu, cpu
        assert _collectives(tmp_path / "et" / f"g.{rank}.et") == [(pb.ALL_REDUCE, 1024)]


def test_time_before_the_first_operator_of_the_step_is_host_time(tmp_path) -> None:
    """ProfilerStep starts, the script runs 300 us of its own Python, then the first operator:
    those 300 us are the step's as every later gap on the main thread is."""
    for rank in range(2):
        r = _Rank(rank)
        r.op(3, "aten::mul", 2, 300, 100)
        _allreduce(r, 10, 2, 500, _t(1, 1, 256), record_at=504, record_dur=50)
        r.write(tmp_path, (0, 700))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    g = load_graph(tmp_path / "et" / "g.0.et")
    cpu = {n.name: n for n in g.nodes.values() if n.is_cpu_op}
    assert cpu["aten::mul"].duration_ns == 300_000 + 100_000
    # the all-reduce is issued where gloo's thread started it, 4 us into its 10 us launcher
    (coll,) = [n for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE]
    head, tail = cpu["c10d::allreduce_"], cpu["c10d::allreduce_ (after its backend started)"]
    assert (head.duration_ns, tail.duration_ns) == (100_000 + 4_000, 6_000)
    assert head.id in coll.parents and head.id in tail.parents and coll.id not in tail.parents


def test_sparse_all_reduce_is_an_all_gather_of_indices_and_values(tmp_path) -> None:
    """gloo's sparse all-reduce gathers every rank's indices and values; the execution trace
    records the sparse tensor without elements, and where it was made with its two parts."""
    nnz = (40, 60)
    for rank in range(2):
        r = _Rank(rank)
        sparse = [7, 0, 0, 0, 0, ""]
        r.op(3, "aten::_sparse_coo_tensor_unsafe", 2, 0, 50,
             values=[_t(5, 5, nnz[rank], 8), _t(6, 6, nnz[rank] * 16)], types=["Tensor(long int)", "Tensor(float)"],
             outputs=([sparse], ["Tensor(float)"]))
        _allreduce(r, 10, 2, 100, sparse, record_at=120, record_dur=300, backend="gloo:sparse_all_reduce")
        r.write(tmp_path, (0, 500))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    mean = math.ceil(sum(n * 8 + n * 16 * 4 for n in nnz) / 2)
    for rank in range(2):
        assert _collectives(tmp_path / "et" / f"g.{rank}.et") == [(pb.ALL_GATHER, mean)]


def test_sparse_tensor_of_unknown_size_is_refused(tmp_path, capsys) -> None:
    for rank in range(2):
        r = _Rank(rank)
        _allreduce(r, 10, 2, 100, [7, 0, 0, 0, 0, ""], record_at=120, record_dur=300,
                   backend="gloo:sparse_all_reduce")
        r.write(tmp_path, (0, 500))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 2
    err = capsys.readouterr().err
    assert "host.0.json" in err and "sparse tensor" in err and "Traceback" not in err
    assert not list((tmp_path / "et").glob("*.et")) if (tmp_path / "et").exists() else True


def test_a_collective_kineto_saw_but_the_execution_trace_lost_is_refused(tmp_path, capsys) -> None:
    for rank in range(2):
        r = _Rank(rank)
        _allreduce(r, 10, 2, 100, _t(1, 1, 256), record_at=120, record_dur=100)
        _allreduce(r, 20, 2, 300, _t(2, 2, 256), record_at=320, record_dur=100)
        if rank == 1:        # both ranks would still agree if each lost one; Kineto tells
            r.nodes = [n for n in r.nodes if n["id"] not in (20, 21)]
        r.write(tmp_path, (0, 500))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 2
    err = capsys.readouterr().err
    assert "device.1.json" in err and "Kineto shows 2 'c10d::allreduce_'" in err and "gives 1" in err


@pytest.mark.parametrize("host_names, expect_ns", [
    ((None, None), 40_000),             # no shared clock: the shortest span (rank 1 arrived last)
    (("vm", "vm"), 1_015_000 - 515_000),  # one machine: from the last start to the last end
    (("a", "b"), 40_000),               # two machines, two clocks
])
def test_broadcast_replays_the_transfer_after_the_last_rank_joined(tmp_path, host_names, expect_ns) -> None:
    for rank in range(2):
        r = _Rank(rank)
        r.host_name = host_names[rank]
        r.op(10, "c10d::broadcast_", 2, 100, 10, values=[[_t(1, 1, 6)], "<Object>", 0],
             types=["GenericList[Tensor(float)]", "Object", "Int"],
             schema=f"c10d::broadcast_(Tensor[] tensors, {PG}, int root_rank) -> ()")
        r.op(11, "gloo:broadcast", 10, (115, 515)[rank], (900, 40)[rank], tid=WORKER, values=[_t(1, 1, 6)],
             types=["Tensor(float)"], cat="user_annotation")
        r.write(tmp_path, (0, 1200))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    for rank in range(2):
        (b,) = [n for n in load_graph(tmp_path / "et" / f"g.{rank}.et").nodes.values() if n.type == pb.COMM_COLL_NODE]
        assert b.comm_type == pb.BROADCAST and b.duration_ns == expect_ns


def test_network_fit_recovers_a_known_ring(tmp_path) -> None:
    """Times made by the simulator on Ring(4) at 3 GB/s and 20 us per hop are fitted back."""
    sizes = [("ALL_REDUCE", 1 << 16), ("ALL_REDUCE", 1 << 20), ("ALL_GATHER", 1 << 18), ("REDUCE_SCATTER", 1 << 21)]
    sim = _Simulator(tmp_path, 4)
    ms = [Measurement(k, s, sim.time_ns((k, s), 20_000.0, 3.0)) for k, s in sizes]
    fit = fit_network(ms, 4)
    assert fit is not None and fit.npus == 4
    assert fit.bandwidth_gb_s == pytest.approx(3.0, rel=0.02) and fit.latency_ns == pytest.approx(20_000, rel=0.02)
    assert max(abs(e) for e in fit.errors) < 0.01


def test_busy_periods_are_maximal_runs_of_overlapping_spans() -> None:
    m = [Measurement("ALL_REDUCE", 1, 100, 0), Measurement("ALL_REDUCE", 2, 50, 90),   # overlap
         Measurement("ALL_REDUCE", 3, 10, 139),                                         # inside the second
         Measurement("ALL_REDUCE", 4, 10, 149),                                         # starts as it ends
         Measurement("ALL_REDUCE", 5, 10, None)]                                        # no shared clock
    alone, periods = busy_periods(list(reversed(m)))
    assert [[x.size for x in p] for p in periods] == [[1, 2, 3]]
    assert sorted(x.size for x in alone) == [4, 5]


def test_overlapping_collectives_are_fitted_as_busy_periods(tmp_path) -> None:
    """Collectives that overlap share the network: each one's span holds the others' transfer.
    Spans made by a work-conserving server from the simulator's own times on Ring(2) at 0.5 GB/s
    and 50 us per hop are fitted back, and only when the fit treats them as busy periods."""
    sim = _Simulator(tmp_path, 2)
    sizes = [1 << 18, 3 << 18, 1 << 20, 5 << 18]
    alone = {s: sim.time_ns(("ALL_REDUCE", s), 50_000.0, 0.5) for s in sizes}
    ms, clock = [], 0
    for first, second, lag in ((sizes[0], sizes[1], 0.2), (sizes[2], sizes[3], 0.6), (sizes[1], sizes[2], 0.1)):
        a0, a1 = clock, clock + int(lag * alone[first])
        end0 = a0 + alone[first]
        end1 = max(end0, a1) + alone[second]      # served in turn; the busy period ends here either way
        # what a trace shows when both run at once: each span lasts until (about) the period's end
        ms += [Measurement("ALL_REDUCE", first, end1 - a0 - 1, a0), Measurement("ALL_REDUCE", second, end1 - a1, a1)]
        clock = end1 + 10_000_000
    fit = fit_network(ms, 2)
    assert fit.bandwidth_gb_s == pytest.approx(0.5, rel=0.03) and fit.latency_ns == pytest.approx(50_000, rel=0.1)
    assert len(fit.busy_periods) == 3 and max(abs(sim / meas - 1) for _, meas, sim in fit.busy_periods) < 0.01
    assert "busy period" in fit.describe()
    # the same spans taken one by one (no shared clock) fit another network, and fit it badly
    blind = fit_network([Measurement(x.kind, x.size, x.time_ns) for x in ms], 2)
    assert not blind.busy_periods and abs(blind.bandwidth_gb_s / 0.5 - 1) > 0.15 and blind.latency_ns > 100_000
    assert max(abs(e) for e in blind.errors) > 0.1


def test_converter_writes_the_fitted_network_and_it_runs(tmp_path) -> None:
    for rank in range(2):
        r = _Rank(rank)
        for k, (numel, dur) in enumerate(((1 << 10, 300), (1 << 16, 500), (1 << 18, 1300))):
            _allreduce(r, 10 + 10 * k, 2, 2000 * k, _t(k + 1, k + 1, numel), record_at=2000 * k + 20,
                       record_dur=dur + 100 * (1 - rank))              # rank 1 arrived last: shortest
        r.write(tmp_path, (0, 6000))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    net = yaml.safe_load((tmp_path / "et" / "g.network.yml").read_text())
    assert net["topology"] == ["Ring"] and net["npus_count"] == [2] and "fitted" in net["description"]
    result = run_simulation(str(tmp_path / "et" / "g"), str(tmp_path / "et" / "g.network.yml"))
    assert result.end_ns > 0


PAIRS = [{"pg_name": "0", "ranks": [0, 1, 2, 3], "pg_size": 4}, {"pg_name": "1", "ranks": [0, 1], "pg_size": 2},
         {"pg_name": "2", "ranks": [2, 3], "pg_size": 2}]


def _two_groups(folder: Path, *, pair_thread_gap: int) -> None:
    """DDP's world all-reduces on the world group's two worker threads, then one all-reduce on
    the rank's pair group, which runs on the pair group's own (later) worker thread; every rank
    runs the same kinds and sizes, so only the threads tell the pair all-reduce from a world one."""
    for rank in range(4):
        r = _Rank(rank, 4, [c for c in PAIRS if rank in c["ranks"]])
        w0 = 1000 + 10 * rank
        _allreduce(r, 10, 2, 100, _t(1, 1, 1 << 16), record_at=110, record_dur=400, worker=w0)
        _allreduce(r, 20, 2, 200, _t(2, 2, 1 << 16), record_at=210, record_dur=400, worker=w0 + 1)
        _allreduce(r, 30, 2, 700, _t(3, 3, 1 << 10), record_at=710, record_dur=50, worker=w0 + 1 + pair_thread_gap)
        r.write(folder, (0, 800))


def test_gloo_pair_group_collectives_run_on_the_pair(tmp_path) -> None:
    _two_groups(tmp_path, pair_thread_gap=7)
    assert _convert(tmp_path, tmp_path / "et" / "g", ranks=4) == 0
    assert json.loads((tmp_path / "et" / "g.comm_groups.json").read_text()) == {"1": [0, 1], "2": [2, 3]}
    for rank in range(4):
        g = load_graph(tmp_path / "et" / f"g.{rank}.et")
        pgs = [n.pg_name for n in sorted(g.nodes.values(), key=lambda n: n.id) if n.type == pb.COMM_COLL_NODE]
        assert pgs == ["", "", "1" if rank < 2 else "2"]


def test_gloo_threads_started_together_are_one_group(tmp_path, capsys) -> None:
    """Consecutive thread ids were started by one group, so all three all-reduces ran on one
    group's threads: the world's or the pair's, the trace cannot tell. They stay the world's and
    the converter says it could not place them."""
    _two_groups(tmp_path, pair_thread_gap=1)
    capsys.readouterr()
    assert _convert(tmp_path, tmp_path / "et" / "g", ranks=4) == 0
    for rank in range(4):
        g = load_graph(tmp_path / "et" / f"g.{rank}.et")
        assert all(n.pg_name in ("", None) for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE)
    assert "simulated over the world" in capsys.readouterr().err


def test_a_rank_with_an_extra_collective_is_a_message_not_a_crash(tmp_path, capsys) -> None:
    """Both of rank 1's traces hold a third all-reduce that rank 0 never ran: the cross-rank check
    names it (it once crashed in its own message, 'Node' object has no attribute 'host_launcher')."""
    for rank in range(2):
        r = _Rank(rank)
        for k in range(2 + rank):
            _allreduce(r, 10 + 10 * k, 2, 100 + 200 * k, _t(k + 1, k + 1, 256), record_at=110 + 200 * k,
                       record_dur=100)
        r.write(tmp_path, (0, 1000))
    capsys.readouterr()
    assert _convert(tmp_path, tmp_path / "et" / "g") == 2
    err = capsys.readouterr().err
    assert "host.1.json" in err and "rank 1 runs 3 world collective(s) but rank 0" in err
    assert "Traceback" not in err and "internal error" not in err


def _p2p(r: _Rank, nid: int, kind: str, peer: int, ts: float, tensor: list, *, record_at: float,
         record_dur: float) -> None:
    """A blocking ``dist.send`` / ``dist.recv`` on gloo: the c10d op, then gloo's record on the
    calling (main) thread, open from the transfer's start until ``wait()`` returned."""
    op, arg = ("c10d::send", "dst") if kind == "send" else ("c10d::recv_", "src")
    r.op(nid, op, 2, ts, 10, values=[[tensor], "<Object>", peer, 0],
         types=["GenericList[Tensor(float)]", "Object", "Int", "Int"],
         schema=f"{op}(Tensor[] tensors, {PG}, int {arg}, int tag) -> __torch__.torch.classes.c10d.Work")
    r.op(nid + 1, f"gloo:{kind}", nid, record_at, record_dur, values=[tensor], types=["Tensor(float)"],
         cat="user_annotation")


def test_a_blocking_send_or_receive_on_the_main_thread_is_the_transfer_not_host_time(tmp_path) -> None:
    """gloo records a send or receive on the thread that called it, from the transfer's start until
    ``wait()`` returned: that span is the rank blocked on its peer, which the SEND/RECV node
    simulates, not host time. Counted as host time it came after the transfer again (a real
    2-stage pipeline: +24 %). Rank 1 receives what rank 0 sends after 1 ms of compute, so
    rank 1's 1.1 ms receive record is waiting; the op after each record waits for its transfer."""
    for rank in range(2):
        r = _Rank(rank)
        if rank == 0:
            r.op(3, "aten::mul", 2, 0, 1_000, values=[_t(1, 1, 256)], types=["Tensor(float)"])
            _p2p(r, 10, "send", 1, 1_000, _t(1, 1, 256), record_at=1_005, record_dur=100)
            r.op(12, "aten::add", 2, 1_110, 100, values=[_t(3, 3, 256)], types=["Tensor(float)"])
        else:
            _p2p(r, 10, "recv", 0, 0, _t(2, 2, 256), record_at=5, record_dur=1_100)
            r.op(12, "aten::add", 2, 1_110, 100, values=[_t(2, 2, 256)], types=["Tensor(float)"])
        r.write(tmp_path, (0, 1_300))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    for rank, comm_type in ((0, pb.COMM_SEND_NODE), (1, pb.COMM_RECV_NODE)):
        g = load_graph(tmp_path / "et" / f"g.{rank}.et")
        cpu = {n.name: n for n in g.nodes.values() if n.is_cpu_op}
        assert not [name for name in cpu if name.startswith("gloo:")], sorted(cpu)
        (p2p,) = [n for n in g.nodes.values() if n.type == comm_type]
        # host time after the record: the 5 us from its end to the add, and the add itself
        assert cpu["aten::add"].duration_ns == 5_000 + 100_000
        assert p2p.id in cpu["aten::add"].parents
    network = tmp_path / "net.yml"
    network.write_text("topology: [Ring]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [500.0]\n")
    res = run_simulation(str(tmp_path / "et" / "g"), str(network))
    # rank 1 finishes ~0.1 ms after rank 0's send (1.01 ms in), as measured; 2.2 ms counted twice
    assert 1_100_000 < max(res.finish_ns) < 1_300_000, res.finish_ns


TP_DP = [{"pg_name": "0", "ranks": [0, 1, 2, 3], "pg_size": 4}, {"pg_name": "1", "ranks": [0, 1], "pg_size": 2},
         {"pg_name": "2", "ranks": [2, 3], "pg_size": 2}, {"pg_name": "3", "ranks": [0, 2], "pg_size": 2},
         {"pg_name": "4", "ranks": [1, 3], "pg_size": 2}]


def _tp_dp(folder: Path, host: str | None) -> None:
    """Tensor-parallel pairs [0,1], [2,3] all-reduce an activation (the pairs 3 ms apart), then the
    data-parallel pairs [0,2], [1,3] all-reduce two gradients; the world runs nothing. By threads,
    kinds and sizes alone the first all-reduce could be one of the world's."""
    for rank in range(4):
        r = _Rank(rank, 4, [c for c in TP_DP if rank in c["ranks"]])
        r.host_name = host
        w0, t = 1000 + 10 * rank, (0 if rank < 2 else 3_000)
        _allreduce(r, 10, 2, 100 + t, _t(1, 1, 1 << 14), record_at=110 + t, record_dur=400, worker=w0)
        _allreduce(r, 20, 2, 6_000, _t(2, 2, 1 << 16), record_at=6_010, record_dur=400, worker=w0 + 5)
        _allreduce(r, 30, 2, 6_500, _t(3, 3, 1 << 10), record_at=6_510, record_dur=50, worker=w0 + 6)
        r.write(folder, (0, 7_000))


@pytest.mark.parametrize("host, expect", [
    ("vm", {0: ["1", "3", "3"], 1: ["1", "4", "4"], 2: ["2", "3", "3"], 3: ["2", "4", "4"]}),
    (None, {r: ["", "", ""] for r in range(4)}),       # no shared clock: the world's, with a warning
])
def test_gloo_groups_told_apart_by_when_their_members_ran(tmp_path, capsys, host, expect) -> None:
    """On one clock no member ends a collective before another starts it: pair [2,3]'s
    all-reduce began 2.6 ms after pair [0,1]'s had ended, so they were not one world all-reduce
    (which placed all five over the world, a 4-rank all-reduce for each pair's)."""
    _tp_dp(tmp_path, host)
    capsys.readouterr()
    assert _convert(tmp_path, tmp_path / "et" / "g", ranks=4) == 0
    for rank in range(4):
        g = load_graph(tmp_path / "et" / f"g.{rank}.et")
        pgs = [n.pg_name or "" for n in sorted(g.nodes.values(), key=lambda n: n.id) if n.type == pb.COMM_COLL_NODE]
        assert pgs == expect[rank], rank
    assert ("simulated over the world" in capsys.readouterr().err) == (host is None)


def test_a_job_of_group_collectives_only_gets_a_fitted_network(tmp_path) -> None:
    """The tensor- and data-parallel pairs' all-reduces are measurements too: a job with no
    collective of the world still gets its PREFIX.network.yml, and it runs."""
    _tp_dp(tmp_path, "vm")
    assert _convert(tmp_path, tmp_path / "et" / "g", ranks=4) == 0
    net = yaml.safe_load((tmp_path / "et" / "g.network.yml").read_text())
    assert net["npus_count"] == [4] and "from 6 measured collective(s)" in net["description"]
    assert max(run_simulation(str(tmp_path / "et" / "g"), str(tmp_path / "et" / "g.network.yml")).finish_ns) > 0


def test_network_fit_recovers_a_known_ring_from_group_collectives(tmp_path) -> None:
    """Times the simulator makes for collectives of pairs on Ring(4) at 3 GB/s and 20 us per hop
    (a pair of neighbours and one two hops apart) are fitted back."""
    keys = [("ALL_REDUCE", 1 << 16, (0, 1)), ("ALL_REDUCE", 1 << 20, (0, 2)), ("ALL_GATHER", 1 << 18, (1, 3)),
            ("REDUCE_SCATTER", 1 << 21, (2, 3))]
    sim = _Simulator(tmp_path, 4)
    ms = [Measurement(k, s, sim.time_ns((k, s, g), 20_000.0, 3.0), None, g) for k, s, g in keys]
    assert ms[1].time_ns != sim.time_ns(("ALL_REDUCE", 1 << 20), 20_000.0, 3.0)   # not the world's
    fit = fit_network(ms, 4)
    assert fit.bandwidth_gb_s == pytest.approx(3.0, rel=0.02) and fit.latency_ns == pytest.approx(20_000, rel=0.02)


def test_collectives_of_disjoint_groups_do_not_share_a_busy_period() -> None:
    m = [Measurement("ALL_REDUCE", 1, 100, 0, (0, 1)), Measurement("ALL_REDUCE", 2, 100, 50, (2, 3)),  # disjoint
         Measurement("ALL_REDUCE", 3, 100, 90, (1, 3)),         # meets both, overlaps both
         Measurement("ALL_REDUCE", 4, 10, 500, (0, 1)), Measurement("ALL_REDUCE", 5, 10, 505, (2, 3))]
    alone, periods = busy_periods(m)
    assert [[x.size for x in p] for p in periods] == [[1, 2, 3]]
    assert sorted(x.size for x in alone) == [4, 5]
    alone, periods = busy_periods([m[0], m[1]])
    assert periods == [] and len(alone) == 2


def test_a_record_is_paired_with_an_operator_it_can_run(tmp_path) -> None:
    """A manual ZeRO step: reduce-scatter the gradient into a shard, all-gather the shard back.
    gloo runs the reduce-scatter as ``gloo:all_reduce`` on a copy of the gradient, so the one
    record that reads the reduce-scatter's tensor (its output shard) is the all-gather's: taken by
    tensor, it gave the reduce-scatter the all-gather's time and left the all-gather unmeasured,
    and the network was fitted to that. A record pairs only with an operator it can run."""
    for rank in range(2):
        r = _Rank(rank)
        grad, shard, full, tmp = _t(1, 1, 1 << 14), _t(2, 2, 1 << 13), _t(3, 3, 1 << 14), _t(4, 4, 1 << 14)
        r.op(10, "c10d::_reduce_scatter_base_", 2, 100, 10, values=[shard, grad, "<Object>"],
             types=["Tensor(float)", "Tensor(float)", "Object"],
             schema=f"c10d::_reduce_scatter_base_(Tensor output, Tensor input, {PG}) -> ()")
        r.op(11, "gloo:all_reduce", 10, 115, 2_000, tid=WORKER, values=[tmp], types=["Tensor(float)"],
             cat="user_annotation")
        r.op(12, "aten::mul", 2, 2_200, 100, values=[shard], types=["Tensor(float)"])
        r.op(20, "c10d::_allgather_base_", 2, 2_400, 10, values=[full, shard, "<Object>"],
             types=["Tensor(float)", "Tensor(float)", "Object"],
             schema=f"c10d::_allgather_base_(Tensor output_tensor, Tensor input_tensor, {PG}) -> ()")
        r.op(21, "gloo:all_gather", 20, 2_415, 700, tid=WORKER, values=[full, shard],
             types=["Tensor(float)", "Tensor(float)"], cat="user_annotation")
        r.op(22, "aten::add", 2, 3_200, 100, values=[full], types=["Tensor(float)"])
        r.write(tmp_path, (0, 3_400))
    conv = convert_pytorch(str(tmp_path / "host.{rank}.json"), str(tmp_path / "device.{rank}.json"), 2,
                           tmp_path / "et" / "g")
    measured = sorted((p[0], p[2]) for p in conv.network_fit.points)
    assert measured == [("ALL_GATHER", 700_000.0), ("REDUCE_SCATTER", 2_000_000.0)]


def test_host_time_after_a_collective_ended_is_the_next_operators(tmp_path) -> None:
    """The gap before the first operator that uses an all-reduced tensor is the wait for the
    all-reduce until gloo's record of it ended; the 300 us after that (the thread waking, the
    script's Python) are host time, which the step paid (a loaded host: 4 ms of one rank's
    16.5 ms step, the simulated step -24 % without them)."""
    for rank in range(2):
        r = _Rank(rank)
        _allreduce(r, 10, 2, 100, _t(1, 1, 256), record_at=105, record_dur=1_000)    # ends at 1,105
        r.op(12, "aten::add", 2, 1_405, 100, values=[_t(1, 1, 256)], types=["Tensor(float)"])
        r.write(tmp_path, (0, 1_600))
    assert _convert(tmp_path, tmp_path / "et" / "g") == 0
    g = load_graph(tmp_path / "et" / "g.0.et")
    add = next(n for n in g.nodes.values() if n.name == "aten::add")
    (coll,) = [n for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE]
    assert coll.id in add.parents and add.duration_ns == 300_000 + 100_000


def test_a_pipeline_without_collectives_is_fitted_from_its_messages(tmp_path) -> None:
    """On one clock a send and its receive measure the network too: from the later of the two
    records' starts to the receive's end (a pipeline passes activations and gradients this way,
    and had no network fitted, simulating on a 50 GB/s ring: a real 2-stage run -22.7 %)."""
    for rank in range(2):
        r = _Rank(rank)
        r.host_name = "vm"
        for k, size in enumerate((1 << 14, 1 << 18)):
            t = 2_000 * k
            if rank == 0:
                _p2p(r, 10 + 10 * k, "send", 1, 100 + t, _t(1 + k, 1 + k, size), record_at=105 + t, record_dur=50)
            else:   # posted first: the transfer runs from the send's record (105) to the receive's end
                _p2p(r, 10 + 10 * k, "recv", 0, t, _t(1 + k, 1 + k, size), record_at=5 + t,
                     record_dur=100 + 100 * (k + 1))
        r.write(tmp_path, (0, 4_000))
    conv = convert_pytorch(str(tmp_path / "host.{rank}.json"), str(tmp_path / "device.{rank}.json"), 2,
                           tmp_path / "et" / "g")
    assert conv.network_path is not None
    assert sorted((p[0], p[1], p[2]) for p in conv.network_fit.points) == \
        [("SEND_RECV", 1 << 16, 100_000.0), ("SEND_RECV", 1 << 20, 200_000.0)]


def test_network_fit_recovers_a_known_ring_from_messages(tmp_path) -> None:
    keys = [("SEND_RECV", 1 << 16, (0, 1)), ("SEND_RECV", 1 << 20, (0, 1)), ("SEND_RECV", 1 << 18, (2, 0))]
    sim = _Simulator(tmp_path, 4)
    ms = [Measurement(k, s, sim.time_ns((k, s, g), 20_000.0, 3.0), None, g) for k, s, g in keys]
    fit = fit_network(ms, 4)
    assert fit.bandwidth_gb_s == pytest.approx(3.0, rel=0.02) and fit.latency_ns == pytest.approx(20_000, rel=0.02)
