"""What real converters write loads and runs (issue 12, item 1).

Chakra's PyTorch converter leaves control dependencies on nodes it dropped, on the node itself,
and (schema 1.0.1) control edges that close a cycle with the data dependencies; older versions
emit a CPU-op COMM_COLL_NODE without comm_type (the host-side launcher) next to the GPU kernel
node that carries the collective; its files hold METADATA nodes with process-group records and
attributes we do not read. Each defect is rebuilt here with our own writer; a real 2-rank DDP
step converted by Chakra runs in test_chakra_gloo.py, when ../shared has it.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb, write_et
from chakra_proto.attrs import attr_bool, attr_int64, attr_string, attr_uint64
from system.main import main, run_simulation
from system.report import build_report
from system.trace_export import CPU_TID, write_traces
from workload.builder import GraphBuilder
from workload.errors import WorkloadError
from workload.graph import load_graph

RING2 = "topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
PG_INIT = ('[{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "ranks": [], '
           '"group_size": 2, "group_count": 2}, {"pg_name": "1", "pg_desc": "dp", "backend_config": "cuda:nccl", '
           '"ranks": [0, 1], "group_size": 2, "group_count": 2}]')


def _load(path: Path) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = load_graph(path)
    return g, [str(w.message) for w in caught]


def _pytorch_attrs(node: pb.Node, rf_id: int, tid: int) -> None:
    """The attributes Chakra's converter copies from the PyTorch execution trace."""
    node.attr.extend([attr_int64("rf_id", rf_id), attr_int64("fw_parent", 0), attr_int64("seq_id", -1),
                      attr_int64("scope", 0), attr_int64("tid", tid), attr_int64("fw_tid", 0),
                      attr_string("op_schema", "aten::mm(Tensor self, Tensor mat2) -> Tensor")])


def _write(path: Path, b: GraphBuilder, schema: str = "1.0.1") -> Path:
    meta = pb.GlobalMetadata(version=schema, attr=[attr_string("schema", schema), attr_uint64("pid", 4242),
                                                   attr_string("time", "2023-12-14 11:55:01")])
    write_et(path, meta, b.nodes)
    return path


def test_dangling_and_self_control_dependencies_are_ignored_with_one_warning(tmp_path: Path) -> None:
    b = GraphBuilder()
    a = b.comp("a", 1000, is_cpu_op=True)
    c = b.comp("c", 2000, deps=[a])
    d = b.comp("d", 3000, deps=[c])
    b.nodes[a].ctrl_deps.append(90)         # the root thread node the converter removed
    b.nodes[c].ctrl_deps.extend([c, 91])    # itself, and another dropped node
    b.nodes[d].ctrl_deps.extend([92, 93, 94, 95])
    g, said = _load(_write(tmp_path / "w.et", b))
    assert len(said) == 1, said
    assert "ignored 7 control dependencies (1 on the node itself, 6 on nodes not in this file" in said[0]
    assert "first: 0->90, 1->1, 1->91, 2->92, 2->93" in said[0] and str(tmp_path / "w.et") in said[0]
    assert [g.nodes[i].parents for i in (a, c, d)] == [(), (a,), (c,)]  # the data dependencies stay
    assert g.roots == [a]


def test_control_edge_closing_a_cycle_with_data_edges_is_ignored(tmp_path: Path) -> None:
    """Schema 1.0.1: the CPU op ctrl-depends on its own GPU kernel, which data-depends on it."""
    b = GraphBuilder()
    op = b.comp("aten::mul", 43_000, is_cpu_op=True)
    kernel = b.comp("vectorized_elementwise_kernel", 40_000, deps=[op])
    after = b.comp("aten::add", 5_000, deps=[op], is_cpu_op=True)
    b.nodes[op].ctrl_deps.append(kernel)
    b.nodes[after].ctrl_deps.append(kernel)  # a sound control edge: kept
    g, said = _load(_write(tmp_path / "w.et", b))
    assert len(said) == 1 and "1 that would close a cycle" in said[0] and "first: 0->1" in said[0], said
    assert g.nodes[kernel].parents == (op,) and g.nodes[op].parents == ()
    assert set(g.nodes[after].parents) == {op, kernel}


def test_only_the_control_edges_against_the_order_are_ignored(tmp_path: Path) -> None:
    """A cycle of control edges alone: the one that points to a later node goes, the others stay."""
    b = GraphBuilder()
    for name in "xyz":
        b.comp(name, 1000, is_cpu_op=True)
    b.nodes[1].ctrl_deps.append(0)
    b.nodes[2].ctrl_deps.append(1)
    b.nodes[0].ctrl_deps.append(2)
    g, said = _load(_write(tmp_path / "w.et", b))
    assert len(said) == 1 and "ignored 1 control dependency" in said[0] and "first: 0->2" in said[0], said
    assert [g.nodes[i].parents for i in range(3)] == [(), (0,), (1,)]


@pytest.mark.parametrize("dep,problem", [(7, "depends on node 7 (data_deps), which is not in this file"),
                                         (1, "depends on itself in data_deps")])
def test_broken_data_dependency_stays_an_error(tmp_path: Path, dep: int, problem: str) -> None:
    b = GraphBuilder()
    b.comp("a", 1000)
    b.comp("b", 1000, deps=[0, dep])
    with pytest.raises(WorkloadError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_graph(_write(tmp_path / "w.et", b))


def test_data_cycle_stays_an_error(tmp_path: Path) -> None:
    b = GraphBuilder()
    b.comp("a", 1000, deps=[1])
    b.comp("b", 1000, deps=[0])
    b.nodes[0].ctrl_deps.append(1)
    with pytest.raises(WorkloadError, match="dependency cycle: 1 -> 0 -> 1|dependency cycle: 0 -> 1 -> 0"):
        load_graph(_write(tmp_path / "w.et", b))


def _ddp_rank(rank: int) -> GraphBuilder:
    """A schema-1.0.1-style rank: METADATA process groups, CPU ops, a host-side launcher
    (CPU-op COMM_COLL_NODE without comm_type) and the NCCL kernel node that carries the all-reduce."""
    b = GraphBuilder()
    meta = b._add("## process_group:init ##", pb.METADATA_NODE, [])
    meta.attr.append(attr_bool("is_cpu_op", True))
    meta.inputs.values = f"['{PG_INIT}']"  # the JSON list inside a Python list repr, as Chakra writes it
    fwd = b.comp("aten::linear", 30_000, deps=[meta.id], is_cpu_op=True)
    gemm = b.comp("sm90_xmma_gemm", 20_000, deps=[fwd])
    launcher = b._add("c10d::allreduce_(0)", pb.COMM_COLL_NODE, [fwd])
    launcher.duration_micros = 7
    launcher.attr.append(attr_bool("is_cpu_op", True))
    launcher.ctrl_deps.append(launcher.id)
    kernel = b.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                          "ALL_REDUCE", 1 << 20, deps=[launcher.id, gemm], duration_ns=9_000)
    b.nodes[kernel].attr.extend([attr_string("pg_name", "1"), attr_int64("stream", 20)])
    b.comp("optimizer.step", 4_000, deps=[kernel], is_cpu_op=True)
    for n in b.nodes:
        _pytorch_attrs(n, rf_id=100 + n.id, tid=1 if n.id != kernel else 7)
    return b


def test_host_launcher_runs_on_the_cpu_and_the_kernel_node_carries_the_collective(tmp_path: Path) -> None:
    for r in range(2):
        _write(tmp_path / f"ddp.{r}.et", _ddp_rank(r))
    g, said = _load(tmp_path / "ddp.0.et")
    launchers = [m for m in said if "host-side launchers" in m]
    assert len(launchers) == 1 and "1 communication node(s)" in launchers[0] and "node 3" in launchers[0], said
    assert g.nodes[3].type == pb.COMP_NODE and g.nodes[3].is_cpu_op and "launcher" in g.nodes[3].describe()
    (tmp_path / "ring.yml").write_text(RING2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_simulation(tmp_path / "ddp", tmp_path / "ring.yml")
    report = build_report(result)
    for w, r in zip(result.workloads, report["ranks"]):
        spans = {w.graph.nodes[nid].name: (s, e) for nid, s, e in w.records}
        s, e = spans["c10d::allreduce_(0)"]
        assert e - s == 7_000  # its own duration, on the CPU slot
        assert spans["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"][0] >= e
        assert r["cpu_cycles"] == 30_000 + 7_000 + 4_000
        assert sum(r[k] for k in ("compute_cycles", "exposed_comm_cycles", "exposed_cpu_cycles",
                                  "idle_cycles")) == r["finish_cycles"]
    # the kernel node's collective, on the group its METADATA node declares
    assert [(c["rank"], c["type"], c["size_bytes"], c["pg"], c["group_size"]) for c in report["collectives"]] == \
        [(0, "ALL_REDUCE", 1 << 20, "1", 2), (1, "ALL_REDUCE", 1 << 20, "1", 2)]
    write_traces(result, tmp_path / "traces")
    trace = json.loads((tmp_path / "traces" / "rank0.json").read_text())
    cpu = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == CPU_TID]
    assert cpu == ["aten::linear", "c10d::allreduce_(0)", "optimizer.step"]


def test_communication_fields_on_a_cpu_op_stay_an_error(tmp_path: Path) -> None:
    """A CPU op that names a collective is a contradiction, not a launcher."""
    b = GraphBuilder()
    c = b.collective("c10d::allreduce_", "ALL_REDUCE", 1 << 20)
    b.nodes[c].attr[0].CopyFrom(attr_bool("is_cpu_op", True))
    with pytest.raises(WorkloadError, match="comm_type cannot be a CPU op"):
        load_graph(_write(tmp_path / "w.et", b))


def test_a_trace_of_cpu_ops_reports_cpu_time_not_idle(tmp_path: Path) -> None:
    """CPU-only runs: Chakra's converter makes every op a CPU COMP node (its collectives too:
    test_chakra_gloo.py)."""
    for r in range(2):
        b = GraphBuilder()
        a = b.comp("aten::addmm", 40_000 + 10_000 * r, is_cpu_op=True)
        g = b.comp("aten::mse_loss", 25_000, deps=[a], is_cpu_op=True)
        b.comp("aten::add_", 5_000, deps=[g], is_cpu_op=True)
        b.write(tmp_path / "cpu", r)
    (tmp_path / "ring.yml").write_text(RING2)
    ranks = build_report(run_simulation(tmp_path / "cpu", tmp_path / "ring.yml"))["ranks"]
    for r in ranks:
        assert r["cpu_cycles"] == r["exposed_cpu_cycles"] == r["finish_cycles"] == 70_000 + 10_000 * r["rank"]
        assert r["idle_cycles"] == 0 and r["compute_cycles"] == 0
