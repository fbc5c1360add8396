"""Chakra files of CPU-only (gloo) runs: communication that is only CPU operators (issue 12).

Chakra's PyTorch converter finds communication only in NCCL kernel names, so a gloo run's
collectives arrive as CPU COMP nodes: ``c10d::allreduce_`` and its data-dependent child
``gloo:all_reduce``, with tensor inputs as Python literals and the op schema in an attribute.
Its NCCL send/recv kernel nodes carry neither peer nor tag. The fixtures rebuild those node
shapes with our own writer (taken from a real 2-rank DDP step converted by Chakra 21585d8);
the last test runs that step itself when ../shared has it.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb
from chakra_proto.attrs import attr_bool, attr_int64, attr_string
from conftest import SHARED
from system.main import main, run_simulation
from system.report import build_report
from workload.builder import GraphBuilder
from workload.errors import WorkloadError
from workload.graph import load_graph
from workload.loader import load_workload_graphs

RING = "topology: [ Ring ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
CHAKRA_REAL = SHARED / "anchors" / "chakra-real"
ALLREDUCE_SCHEMA = ("c10d::allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, "
                    "__torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? sparse_indices, bool async_op=True, "
                    "int timeout=-1) -> (Tensor[], __torch__.torch.classes.c10d.Work)")
ALLGATHER_SCHEMA = ("c10d::allgather_(Tensor[][] output_tensors, Tensor[] input_tensors, "
                    "__torch__.torch.classes.c10d.ProcessGroup process_group, bool async_op=True, int timeout=-1) "
                    "-> (Tensor[][], __torch__.torch.classes.c10d.Work)")
SEND_SCHEMA = ("c10d::send(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, int dstRank, "
               "int tag) -> __torch__.torch.classes.c10d.Work")
RECV_SCHEMA = ("c10d::recv_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, int srcRank, "
               "int tag) -> __torch__.torch.classes.c10d.Work")
PG_INIT = ('[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cpu:gloo,cuda:gloo", "ranks": [], '
           '"group_size": 2, "group_count": 1}]')


def _op(b: GraphBuilder, name: str, us: int, deps: list[int], *, values: str = "[]", shapes: str = "[]",
        types: str = "[]", schema: str = "", cpu: bool = True, ntype: int = pb.COMP_NODE) -> int:
    """A node as Chakra's converter writes a PyTorch operator: data and control dependency on its
    parent, inputs as Python literals, the execution trace's attributes."""
    n = b._add(name, ntype, deps, ctrl_deps=deps[:1])
    n.duration_micros = us
    n.inputs.values, n.inputs.shapes, n.inputs.types = values, shapes, types
    n.outputs.values, n.outputs.shapes, n.outputs.types = "[]", "[]", "[]"
    n.attr.extend([attr_int64("rf_id", n.id), attr_int64("fw_parent", 0), attr_int64("seq_id", -1),
                   attr_int64("scope", 7 if name.startswith("gloo:") else 0), attr_int64("tid", 1),
                   attr_int64("fw_tid", 0), attr_string("op_schema", schema), attr_bool("is_cpu_op", cpu),
                   attr_int64("stream", 0)])
    return n.id


def _tensor(tid: int, numel: int) -> tuple[str, str]:
    return f"[{tid}, {tid}, 0, {numel}, 4, 'cpu']", f"[{numel}]"


def _all_reduce(b: GraphBuilder, dep: int, numel: int, launch_us: int, gloo_us: int) -> int:
    """c10d::allreduce_ (the dispatcher op) and gloo:all_reduce (the backend's record), as in the real file."""
    t, s = _tensor(100 + len(b.nodes), numel)
    c = _op(b, "c10d::allreduce_", launch_us, [dep], values=f"[[{t}], '<Object>', '<Object>', '<None>', True, -1]",
            shapes=f"[[{s}], [], [], [], [], []]",
            types="['GenericList[Tensor(float)]', 'Object', 'Object', 'None', 'Bool', 'Int']", schema=ALLREDUCE_SCHEMA)
    return _op(b, "gloo:all_reduce", gloo_us, [c], values=f"[{t}]", shapes=f"[{s}]", types="['Tensor(float)']")


def _ddp_rank(r: int, buckets: list[int]) -> GraphBuilder:
    """A backward pass with one gloo all-reduce per bucket, then an optimizer step; rank 1's
    compute and gloo records take longer (it waited for rank 0 in the real run)."""
    b = GraphBuilder()
    prev = _op(b, "ProfilerStep#3", 1, [])
    for i, numel in enumerate(buckets):
        prev = _op(b, "autograd::engine::evaluate_function: AddmmBackward0", 1000 + 400 * r + 100 * i, [prev])
        prev = _all_reduce(b, prev, numel, 700 + 300 * r, 3000 + 9000 * r)
    prev = _op(b, "Optimizer.step#SGD.step", 500, [prev])
    meta = _op(b, "## process_group:init ##", 0, [prev], values=f"['{PG_INIT}']", shapes="[[]]", types="['String']",
               ntype=pb.METADATA_NODE)
    assert meta
    return b


def _load(path: Path) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = load_graph(path)
    return g, [str(w.message) for w in caught]


def test_gloo_records_become_collectives_and_their_launchers_keep_cpu_time(tmp_path: Path) -> None:
    path = _ddp_rank(0, [393984, 262656, 262656]).write(tmp_path / "w", 0)
    g, msgs = _load(path)
    coll = [n for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE]
    assert [(n.name, n.comm_type, n.comm_size, n.is_cpu_op) for n in coll] == [
        ("gloo:all_reduce", pb.ALL_REDUCE, 393984 * 4, False), ("gloo:all_reduce", pb.ALL_REDUCE, 262656 * 4, False),
        ("gloo:all_reduce", pb.ALL_REDUCE, 262656 * 4, False)]
    launchers = [n for n in g.nodes.values() if n.name == "c10d::allreduce_"]
    assert all(n.type == pb.COMP_NODE and n.is_cpu_op and n.duration_ns == 700_000 for n in launchers)
    assert all(n.pg_name == "" for n in coll)  # the world: the ops name no group
    recognised = [m for m in msgs if "recognised" in m]
    assert len(recognised) == 1 and "recognised 3 communication operator(s)" in recognised[0]
    assert "ALL_REDUCE 3" in recognised[0]


def test_two_gloo_ranks_are_coupled_by_their_all_reduces(tmp_path: Path) -> None:
    buckets = [393984, 262656, 262656]
    for r in range(2):
        _ddp_rank(r, buckets).write(tmp_path / "w", r)
    (tmp_path / "ring.yml").write_text(RING.format(n=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = build_report(run_simulation(tmp_path / "w", tmp_path / "ring.yml"))
    finish = [r["finish_cycles"] for r in rep["ranks"]]
    own = [1 + 500 + sum(1000 + 400 * r + 100 * i + 700 + 300 * r for i in range(3)) for r in range(2)]
    assert own[1] - own[0] == 2100  # us: uncoupled, rank 0 would finish 2.1 ms earlier
    assert min(finish) > own[1] * 1000  # coupled: rank 0 waits for the slower rank 1 at every bucket
    assert abs(finish[0] - finish[1]) < 5000  # and both end with the last all-reduce (+ the same tail)
    per_rank = {r: [c for c in rep["collectives"] if c["rank"] == r] for r in range(2)}
    for r in range(2):
        assert [c["type"] for c in per_rank[r]] == ["ALL_REDUCE"] * len(buckets)
        assert [c["size_bytes"] for c in per_rank[r]] == [4 * n for n in buckets]
    assert all(abs(a["end_cycles"] - b["end_cycles"]) < 5000 for a, b in zip(per_rank[0], per_rank[1]))


def test_other_collectives_lone_ops_and_kept_ones(tmp_path: Path) -> None:
    b = GraphBuilder()
    root = _op(b, "ProfilerStep#1", 1, [])
    inp, s_in = _tensor(7, 1000)
    out = ", ".join(_tensor(8 + i, 1000)[0] for i in range(2))
    ag = _op(b, "c10d::allgather_", 50, [root], values=f"[[[{out}]], [{inp}], '<Object>', True, -1]",
             shapes=f"[[[[1000], [1000]]], [{s_in}], [], [], []]",
             types="['GenericList[GenericList[Tensor(float)]]', 'GenericList[Tensor(float)]', 'Object', 'Bool', "
                   "'Int']", schema=ALLGATHER_SCHEMA)
    lone = _op(b, "c10d::broadcast_", 40, [ag], values="[[[9, 9, 0, 256, 4, 'cpu']], '<Object>', 0, 0, True, -1]",
               shapes="[[[256]], [], [], [], [], []]",
               types="['GenericList[Tensor(float)]', 'Object', 'Int', 'Int', 'Bool', 'Int']")
    # shapes and types only (values elided): the size is numel x element size
    bare = _op(b, "gloo:all_reduce", 30, [lone], values="['<Tensor>']", shapes="[[16, 8]]", types="['Tensor(half)']")
    barrier = _op(b, "gloo:barrier", 20, [bare])
    _op(b, "c10d::wait", 10, [barrier])
    g, msgs = _load(b.write(tmp_path / "w.0.et"))
    n = g.nodes
    assert (n[ag].type, n[ag].comm_type, n[ag].comm_size) == (pb.COMM_COLL_NODE, pb.ALL_GATHER, 4000)
    assert (n[lone].comm_type, n[lone].comm_size, n[lone].duration_ns) == (pb.BROADCAST, 1024, 40_000)
    assert (n[bare].comm_type, n[bare].comm_size) == (pb.ALL_REDUCE, 16 * 8 * 2)
    assert n[barrier].type == pb.COMP_NODE and n[barrier].is_cpu_op and n[barrier].duration_ns == 20_000
    (msg,) = [m for m in msgs if "recognised" in m]
    assert "recognised 3" in msg and "kept as CPU time (not simulated): BARRIER 1" in msg


def test_a_file_with_communication_nodes_keeps_its_host_ops_as_cpu_time(tmp_path: Path) -> None:
    """NCCL: the kernel node carries the collective; its c10d op must not count it twice."""
    b = GraphBuilder()
    c = _op(b, "c10d::allreduce_", 30, [], values="[[[1, 1, 0, 64, 4, 'cuda:0']], '<Object>']",
            shapes="[[[64]], []]", types="['GenericList[Tensor(float)]', 'Object']", schema=ALLREDUCE_SCHEMA)
    k = b.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                     "ALL_REDUCE", 256, deps=[c])
    g, msgs = _load(b.write(tmp_path / "w.0.et"))
    assert g.nodes[c].type == pb.COMP_NODE and g.nodes[c].is_cpu_op
    assert [n.id for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE] == [k]
    assert not any("recognised" in m for m in msgs)


def _gloo_p2p(b: GraphBuilder, kind: str, peer: int, tag: int, numel: int, dep: int) -> int:
    t, s = _tensor(50, numel)
    schema = SEND_SCHEMA if kind == "send" else RECV_SCHEMA
    c = _op(b, f"c10d::{'send' if kind == 'send' else 'recv_'}", 20, [dep],
            values=f"[[{t}], '<Object>', {peer}, {tag}]", shapes=f"[[{s}], [], [], []]",
            types="['GenericList[Tensor(float)]', 'Object', 'Int', 'Int']", schema=schema)
    return _op(b, f"gloo:{kind}", 40, [c], values=f"[{t}]", shapes=f"[{s}]", types="['Tensor(float)']")


def test_gloo_send_and_recv_take_peer_and_tag_from_their_launcher(tmp_path: Path) -> None:
    for r in range(2):
        b = GraphBuilder()
        root = _op(b, "ProfilerStep#1", 5 + 100 * r, [])
        p2p = _gloo_p2p(b, "send" if r == 0 else "recv", 1 - r, 7, 4096, root)
        _op(b, "aten::add_", 10, [p2p])
        b.write(tmp_path / "pp", r)
    (tmp_path / "ring.yml").write_text(RING.format(n=2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graphs = load_workload_graphs(tmp_path / "pp", 2)
        send, recv = graphs[0].nodes[2], graphs[1].nodes[2]
        assert (send.type, send.comm_dst, send.comm_tag, send.comm_size) == (pb.COMM_SEND_NODE, 1, 7, 16384)
        assert (recv.type, recv.comm_src, recv.comm_tag, recv.comm_size) == (pb.COMM_RECV_NODE, 0, 7, 16384)
        rep = build_report(run_simulation(tmp_path / "pp", tmp_path / "ring.yml"))
    finish = [r["finish_cycles"] for r in rep["ranks"]]
    assert finish[1] > 125_000  # the receive waits for the data (its own ops take 125 us)


def _nccl_p2p(b: GraphBuilder, kind: str, args: str | None) -> int:
    """Chakra's shape: c10d op -> record_param_comms -> ncclDevKernel_SendRecv node with comm_size only."""
    schema = SEND_SCHEMA if kind == "send" else RECV_SCHEMA
    c = _op(b, f"c10d::{'send' if kind == 'send' else 'recv_'}", 20, [],
            values=args or "[[[1, 1, 0, 256, 4, 'cuda:0']], '<Object>']",
            types="['GenericList[Tensor(float)]', 'Object', 'Int', 'Int']", schema=schema if args else "")
    rec = _op(b, "record_param_comms", 5, [c])
    k = _op(b, "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 30, [rec], cpu=False,
            ntype=pb.COMM_SEND_NODE if kind == "send" else pb.COMM_RECV_NODE)
    b.nodes[k].attr.append(attr_int64("comm_size", 1024))
    return k


def test_nccl_send_recv_without_peer_fields_take_them_from_the_c10d_op(tmp_path: Path) -> None:
    b = GraphBuilder()
    k = _nccl_p2p(b, "send", "[[[1, 1, 0, 256, 4, 'cuda:0']], '<Object>', 3, 5]")
    g, _ = _load(b.write(tmp_path / "w.0.et"))
    assert (g.nodes[k].comm_dst, g.nodes[k].comm_tag) == (3, 5) and not g.unknown_peers


def test_nccl_send_recv_without_any_peer_two_ranks_infer_more_ranks_refuse(tmp_path: Path, capsys) -> None:
    for r in range(2):
        b = GraphBuilder()
        _nccl_p2p(b, "send" if r == 0 else "recv", None)
        b.write(tmp_path / "two", r)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphs = load_workload_graphs(tmp_path / "two", 2)
    assert (graphs[0].nodes[2].comm_dst, graphs[1].nodes[2].comm_src) == (1, 0)
    assert sum("the world has 2 ranks" in str(w.message) for w in caught) == 2
    for r in range(4):
        b = GraphBuilder()
        _nccl_p2p(b, "send", None)
        b.write(tmp_path / "four", r)
    with pytest.raises(WorkloadError) as e:
        load_workload_graphs(tmp_path / "four", 4)
    text = str(e.value)
    assert "four.0.et" in text and "node 2" in text and "COMM_SEND_NODE needs attribute 'comm_dst'" in text
    assert "add comm_dst and comm_tag" in text
    (tmp_path / "ring4.yml").write_text(RING.format(n=4))
    assert main(["--workload", str(tmp_path / "four"), "--network", str(tmp_path / "ring4.yml")]) == 2
    assert "Traceback" not in capsys.readouterr().err


# -- the extra layer: the real run, when ../shared has it ----------------------------------------------

@pytest.mark.skipif(not (CHAKRA_REAL / "mlp_w2" / "et").is_dir(),
                    reason=f"needs the Chakra converter output at {CHAKRA_REAL} (beside the clone)")
def test_real_gloo_ddp_step_is_coupled(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.json"
    code = main(["--workload", str(CHAKRA_REAL / "mlp_w2" / "et" / "chakra_trace"),
                 "--network", str(CHAKRA_REAL / "Ring_2npus.yml"), "--report", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    for r in range(2):
        assert f"chakra_trace.{r}.et: ignored 1 control dependency" in err       # node 0 was removed
        assert f"chakra_trace.{r}.et: recognised 3 communication operator(s)" in err
    rep = json.loads(out.read_text())
    for r in rep["ranks"]:  # CPU ops and gloo all-reduces: idle only while waiting for the peer
        assert r["cpu_cycles"] > 0.5 * r["finish_cycles"] and r["idle_cycles"] == r["wait_cycles"]
        assert r["cpu_cycles"] + r["exposed_comm_cycles"] + r["idle_cycles"] == r["finish_cycles"]
    for r in range(2):
        colls = [c for c in rep["collectives"] if c["rank"] == r]
        assert [c["type"] for c in colls] == ["ALL_REDUCE"] * 3 and all(c["name"] == "gloo:all_reduce" for c in colls)
    ends = {r: [c["end_cycles"] for c in rep["collectives"] if c["rank"] == r] for r in range(2)}
    finish = [r["finish_cycles"] for r in rep["ranks"]]
    # coupled: rank 1 (37.5 ms alone on the CPU before the step's first bucket) holds rank 0 back
    assert abs(finish[0] - finish[1]) < 0.01 * max(finish)
    assert all(abs(a - b) < 0.01 * max(finish) for a, b in zip(ends[0], ends[1]))
