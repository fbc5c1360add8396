"""Pairing a gloo run's dispatcher op (``c10d::allreduce_``) with its backend record
(``gloo:all_reduce``) by identity, never by Chakra's dependency edges (workload/host_comms.py).

The real files in tests/data/chakra_gloo are Chakra 21585d8's converter output of gloo runs; what
each rank ran comes from its Kineto trace (expected.json, written by kineto_counts.py there).
The hand-built ranks below repeat those files' node shapes (rf_id, tid, tensor records as
Python literals) with dependency edges that say nothing or mislead.
"""
from __future__ import annotations

import gzip
import json
import warnings
from collections import Counter
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb, write_et
from chakra_proto.attrs import attr_bool, attr_int64, attr_string
from chakra_proto.enums import COLLECTIVE_NAMES
from system.main import main, run_simulation
from system.report import build_report
from workload.errors import WorkloadError
from workload.graph import load_graph

DATA = Path(__file__).resolve().parents[1] / "data" / "chakra_gloo"
EXPECTED = json.loads((DATA / "expected.json").read_text())
RING = "topology: [ Ring ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
SIMULATED = {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL", "BROADCAST"}
ALLREDUCE_TYPES = "['GenericList[Tensor(float)]', 'Object', 'Object', 'None', 'Bool', 'Int']"
ALLREDUCE_SCHEMA = ("c10d::allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, "
                    "__torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? sparse_indices, bool async_op=True, "
                    "int timeout=-1) -> (Tensor[], __torch__.torch.classes.c10d.Work)")


def _load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_graph(path)


def _collectives(g) -> list:
    return sorted((n for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE), key=lambda n: n.id)


def _counts(g) -> dict[str, int]:
    return dict(Counter(COLLECTIVE_NAMES[n.comm_type] for n in _collectives(g)))


# --- real Chakra files -------------------------------------------------------------------------

REAL = [(name, int(rank)) for name in sorted(EXPECTED) for rank in EXPECTED[name]]


def _want(seen: dict) -> dict[str, int]:
    """The simulated collectives Kineto's counts call for: a gloo sparse all-reduce is the
    all-gather of indices and values that gloo runs (host_comms.py)."""
    want = Counter({k: v for k, v in seen["collectives"].items() if k in SIMULATED})
    sparse = min(seen["backend_records"].get("gloo:sparse_all_reduce", 0), want["ALL_REDUCE"])
    want["ALL_REDUCE"] -= sparse
    want["ALL_GATHER"] += sparse
    return {k: v for k, v in want.items() if v}


@pytest.mark.parametrize(("name", "rank"), REAL, ids=[f"{n}-r{r}" for n, r in REAL])
def test_real_chakra_file_has_the_collectives_kineto_saw(name: str, rank: int) -> None:
    seen = EXPECTED[name][str(rank)]
    want = _want(seen)
    assert sum(seen["backend_records"].values()) == sum(seen["collectives"].values())  # one record per op
    g = _load(DATA / name / f"chakra.{rank}.et.gz")
    assert _counts(g) == want
    for n in _collectives(g):
        assert n.comm_size > 1, n.describe()


def _unpacked(tmp_path: Path, name: str) -> tuple[Path, int]:
    files = sorted((DATA / name).glob("chakra.*.et.gz"))
    for f in files:
        (tmp_path / f.name[:-3]).write_bytes(gzip.decompress(f.read_bytes()))
    (tmp_path / "ring.yml").write_text(RING.format(n=len(files)))
    return tmp_path / "chakra", len(files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_run_simulates_with_every_rank_meeting_in_its_collectives(tmp_path: Path, name: str) -> None:
    prefix, world = _unpacked(tmp_path, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = build_report(run_simulation(prefix, tmp_path / "ring.yml"))
    per_rank = {r: [(c["type"], c["size_bytes"]) for c in rep["collectives"] if c["rank"] == r] for r in range(world)}
    for r in range(world):
        assert dict(Counter(t for t, _ in per_rank[r])) == _want(EXPECTED[name][str(r)])
        assert per_rank[r] == per_rank[0]  # the same collectives, in the order the program issued them


def test_real_sparse_all_reduce_is_sized_from_its_indices_and_values() -> None:
    """EmbeddingBag(50000, 32, sparse=True), 640 looked-up rows: the sparse gradient's record shows
    0 elements (its dense shape 50000 x 32 would be 6.4 MB); it sends 640 int64 indices and
    640 x 32 float values."""
    for rank in (0, 1):
        g = _load(DATA / "ddp_embbag_w2" / f"chakra.{rank}.et.gz")
        sizes = [(n.name, n.comm_size) for n in _collectives(g)]
        assert sizes == [("gloo:sparse_all_reduce", 640 * 8 + 640 * 32 * 4)] * 2 + [("gloo:all_reduce", 62852)]


def test_real_reduce_scatter_run_by_gloo_as_an_all_reduce_is_one_reduce_scatter() -> None:
    g = _load(DATA / "fsdp2_w2" / "chakra.0.et.gz")
    rs = [n for n in _collectives(g) if COLLECTIVE_NAMES[n.comm_type] == "REDUCE_SCATTER"]
    assert len(rs) == 5 and {n.name for n in rs} == {"gloo:all_reduce"}
    launchers = [n for n in g.nodes.values() if n.name == "c10d::_reduce_scatter_base_"]
    assert len(launchers) == 5 and all(n.type == pb.COMP_NODE and n.is_cpu_op for n in launchers)


# --- hand-built ranks --------------------------------------------------------------------------

class Rank:
    """Nodes as Chakra's converter writes a PyTorch trace: node ids and rf_ids of the execution
    trace, tensors as ``[id, storage, offset, numel, itemsize, device]`` literals."""

    def __init__(self) -> None:
        self.nodes: list[pb.Node] = []

    def op(self, nid: int, name: str, deps: list[int], *, rf: int | None = None, tid: int = 1, us: int = 10,
           values: str = "[]", shapes: str = "[]", types: str = "[]", schema: str = "", outputs: str = "[]") -> int:
        n = pb.Node(id=nid, name=name, type=pb.COMP_NODE)
        n.data_deps.extend(deps)
        n.ctrl_deps.extend(deps[:1])
        n.duration_micros = us
        n.inputs.values, n.inputs.shapes, n.inputs.types = values, shapes, types
        n.outputs.values, n.outputs.shapes, n.outputs.types = outputs, "[]", "[]"
        if rf is not None:
            n.attr.append(attr_int64("rf_id", rf))
        n.attr.extend([attr_int64("tid", tid), attr_string("op_schema", schema), attr_bool("is_cpu_op", True)])
        self.nodes.append(n)
        return nid

    def allreduce(self, nid: int, rf: int, numel: int, deps: list[int], tensor: int, **kw) -> int:
        t = f"[{tensor}, {tensor}, 0, {numel}, 4, 'cpu']"
        return self.op(nid, "c10d::allreduce_", deps, rf=rf, values=f"[[{t}], '<Object>', '<Object>', '<None>', True, -1]",
                       shapes=f"[[[{numel}]], [], [], [], [], []]", types=ALLREDUCE_TYPES, schema=ALLREDUCE_SCHEMA, **kw)

    def record(self, nid: int, rf: int, numel: int, deps: list[int], tensor: int, name: str = "gloo:all_reduce",
               **kw) -> int:
        t = f"[{tensor}, {tensor}, 0, {numel}, 4, 'cpu']"
        return self.op(nid, name, deps, rf=rf, values=f"[{t}]", shapes=f"[[{numel}]]", types="['Tensor(float)']",
                       **kw)

    def write(self, path: Path) -> Path:
        write_et(path, pb.GlobalMetadata(version="0.0.4"), sorted(self.nodes, key=lambda n: n.id))
        return path


BUCKETS = [393984, 262656, 131328]


def _ddp_rank(layout: str) -> Rank:
    """A backward pass of 3 buckets: a launcher per bucket (ids 10, 20, 30; rf_ids 100, 200, 300)
    inside a chain of compute ops, and its gloo record (rf_id one above its launcher's), whose
    dependency edges ``layout`` chooses:

    * ``honest``: each record depends on its launcher;
    * ``late``: as gloo ended them: bucket 0's record under the last launcher, the others under
      the optimizer step;
    * ``crossed``: record 0 depends on launcher 2, record 1 on launcher 0, record 2 on launcher 1;
    * ``none``: the records depend on nothing.
    """
    r = Rank()
    prev = r.op(1, "ProfilerStep#3", [], rf=1)
    launchers = []
    for i, numel in enumerate(BUCKETS):
        prev = r.op(10 * i + 9, "autograd::engine::evaluate_function: AddmmBackward0", [prev], rf=100 * i + 99, us=900)
        prev = r.allreduce(10 * (i + 1), 100 * (i + 1), numel, [prev], tensor=500 + i)
        launchers.append(prev)
    tail = r.op(40, "Optimizer.step#SGD.step", [prev], rf=400, us=500)
    parents = {"honest": [[launchers[0]], [launchers[1]], [launchers[2]]],
               "late": [[launchers[2]], [tail], [tail]],
               "crossed": [[launchers[2]], [launchers[0]], [launchers[1]]],
               "none": [[], [], []]}[layout]
    for i, numel in enumerate(BUCKETS):
        r.record(50 + i, 100 * (i + 1) + 1, numel, parents[i], tensor=500 + i)
    return r


@pytest.mark.parametrize("layout", ["honest", "late", "crossed", "none"])
def test_dependency_edges_do_not_change_the_pairing(tmp_path: Path, layout: str) -> None:
    g = _load(_ddp_rank(layout).write(tmp_path / "w.0.et"))
    coll = _collectives(g)
    assert [(n.id, n.comm_type, n.comm_size) for n in coll] == [
        (50 + i, pb.ALL_REDUCE, 4 * numel) for i, numel in enumerate(BUCKETS)]
    for i, n in enumerate(coll):  # each starts where its launcher started it
        assert n.parents[0] == 10 * (i + 1), (layout, n.parents)
        assert n.id in g.nodes[10 * (i + 1)].children
    launchers = [g.nodes[10 * (i + 1)] for i in range(3)]
    assert all(n.type == pb.COMP_NODE and n.is_cpu_op and n.duration_ns == 10_000 for n in launchers)


def test_misfiled_records_on_some_ranks_still_meet_in_program_order(tmp_path: Path) -> None:
    """Rank 0's records are honest, rank 1's are filed late, ranks 2 and 3 crossed: pairing through
    the edges counted 4 or 5 collectives on some ranks or ran them out of order (a stall)."""
    for rank, layout in enumerate(["honest", "late", "crossed", "crossed"]):
        _ddp_rank(layout).write(tmp_path / f"w.{rank}.et")
    (tmp_path / "ring.yml").write_text(RING.format(n=4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = build_report(run_simulation(tmp_path / "w", tmp_path / "ring.yml"))
    for r in range(4):
        assert [c["size_bytes"] for c in rep["collectives"] if c["rank"] == r] == [4 * n for n in BUCKETS]


def test_a_lone_launcher_and_a_lone_record_each_carry_one_collective(tmp_path: Path) -> None:
    """The trace observer stopped before gloo ended the last record (as on two ranks of
    ddp_mlp4_w4); a broadcast's record whose dispatcher op the file lacks carries its own."""
    r = Rank()
    root = r.op(1, "ProfilerStep#3", [], rf=1)
    t = "[9, 9, 0, 256, 4, 'cpu']"
    bcast = r.op(5, "gloo:broadcast", [root], rf=5, values=f"[{t}]", shapes="[[256]]", types="['Tensor(float)']")
    a = r.allreduce(10, 100, 1000, [bcast], tensor=7)
    r.record(11, 101, 1000, [a], tensor=7)
    b = r.allreduce(20, 200, 2000, [a], tensor=8)  # its record is not in the file
    r.op(30, "Optimizer.step#SGD.step", [b], rf=300)
    g = _load(r.write(tmp_path / "w.0.et"))
    assert [(n.id, COLLECTIVE_NAMES[n.comm_type], n.comm_size) for n in _collectives(g)] == [
        (5, "BROADCAST", 1024), (11, "ALL_REDUCE", 4000), (20, "ALL_REDUCE", 8000)]


def test_a_record_of_another_kind_after_a_launcher_is_its_own_collective(tmp_path: Path) -> None:
    r = Rank()
    a = r.allreduce(10, 100, 1000, [], tensor=7)
    r.record(11, 101, 1000, [a], tensor=7)
    r.record(12, 102, 64, [a], tensor=9, name="gloo:broadcast")
    g = _load(r.write(tmp_path / "w.0.et"))
    assert [(n.id, COLLECTIVE_NAMES[n.comm_type]) for n in _collectives(g)] == [(11, "ALL_REDUCE"), (12, "BROADCAST")]


def test_records_pair_on_their_own_thread(tmp_path: Path) -> None:
    """Two threads issue all-reduces at once: rf_ids interleave, each record follows its own
    thread's launcher."""
    r = Rank()
    r.allreduce(10, 100, 1000, [], tensor=7, tid=1)
    r.allreduce(20, 101, 3000, [], tensor=8, tid=2)
    r.record(11, 102, 1000, [20], tensor=7, tid=1)  # filed under the other thread's launcher
    r.record(21, 103, 3000, [10], tensor=8, tid=2)
    g = _load(r.write(tmp_path / "w.0.et"))
    assert [(n.id, n.comm_size, n.parents) for n in _collectives(g)] == [(11, 4000, (10,)), (21, 12000, (20,))]


def test_backend_record_after_intermediate_ops_pairs_with_its_launcher(tmp_path: Path) -> None:
    """Chakra's tests/data trace of schema 1.0.2: c10d::allgather_ (rf_id 15), record_param_comms
    (19) nested in it, then nccl:all_gather (20), whose only parent is record_param_comms: ten of
    them were read as 20 all-gathers."""
    r = Rank()
    prev = r.op(1, "ProfilerStep#1", [], rf=1)
    schema = ("c10d::allgather_(Tensor[][] output_tensors, Tensor[] input_tensors, "
              "__torch__.torch.classes.c10d.ProcessGroup process_group, int timeout=-1) -> Tensor[][]")
    for i in range(10):
        base = 100 * (i + 1)
        inp, outs = f"[{base}, {base}, 0, 1, 4, 'cuda:0']", f"[{base + 1}, {base + 1}, 0, 1, 4, 'cuda:0']"
        ag = r.op(base + 4, "c10d::allgather_", [prev], rf=base, values=f"[[[{outs}, {outs}]], [{inp}], '<Object>', -1]",
                  shapes="[[[[1], [1]]], [[1]], [], []]",
                  types="['GenericList[GenericList[Tensor(float),Tensor(float)]]', 'GenericList[Tensor(float)]', "
                        "'Object', 'Int']", schema=schema)
        rpc = r.op(base + 10, "record_param_comms", [prev], rf=base + 4)
        r.op(base + 11, "nccl:all_gather", [rpc], rf=base + 5, values=f"[{inp}]", shapes="[[1]]",
             types="['Tensor(float)']")
        prev = r.op(base + 20, "record_param_comms", [ag], rf=base + 12, values="[12, 0, 0, 'wait', [], [], 1]")
    g = _load(r.write(tmp_path / "w.0.et"))
    assert _counts(g) == {"ALL_GATHER": 10}
    assert {n.name for n in _collectives(g)} == {"nccl:all_gather"}
    assert all(n.comm_size == 4 for n in _collectives(g))


def test_reduce_scatter_run_as_all_reduce_is_one_reduce_scatter(tmp_path: Path) -> None:
    r = Rank()
    schema = ("c10d::_reduce_scatter_base_(Tensor output_tensor, Tensor input_tensor, "
              "__torch__.torch.classes.c10d.ProcessGroup process_group, "
              "__torch__.torch.classes.c10d.ReduceOp reduce_op, bool async_op=True, int timeout=-1)")
    rs = r.op(10, "c10d::_reduce_scatter_base_", [], rf=100,
              values="[[1, 1, 0, 500, 4, 'cpu'], [2, 2, 0, 1000, 4, 'cpu'], '<Object>', '<Object>', True, -1]",
              shapes="[[500], [1000], [], [], [], []]",
              types="['Tensor(float)', 'Tensor(float)', 'Object', 'Object', 'Bool', 'Int']", schema=schema)
    r.record(11, 104, 1000, [rs], tensor=3)  # gloo reduces a copy of the input: another tensor
    g = _load(r.write(tmp_path / "w.0.et"))
    assert [(n.id, COLLECTIVE_NAMES[n.comm_type], n.comm_size) for n in _collectives(g)] == [
        (11, "REDUCE_SCATTER", 4000)]


def test_without_rf_ids_the_order_is_the_node_ids(tmp_path: Path) -> None:
    r = Rank()
    a = r.allreduce(10, None, 1000, [], tensor=7)
    r.record(11, None, 1000, [], tensor=7)
    b = r.allreduce(20, None, 2000, [a], tensor=8)
    r.record(21, None, 2000, [a], tensor=8)  # filed under the wrong launcher
    assert b
    g = _load(r.write(tmp_path / "w.0.et"))
    assert [(n.id, n.comm_size, n.parents) for n in _collectives(g)] == [(11, 4000, (10,)), (21, 8000, (20,))]


def test_two_records_for_one_launcher_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    r = Rank()
    a = r.allreduce(10, 100, 1000, [], tensor=7)
    r.record(11, 101, 1000, [a], tensor=7)
    r.record(12, 102, 1000, [a], tensor=7)
    path = r.write(tmp_path / "w.0.et")
    with pytest.raises(WorkloadError) as err:
        load_graph(path)
    msg = str(err.value)
    assert str(path) in msg and "node 10 " in msg and "nodes 11, 12" in msg
    (tmp_path / "one.yml").write_text(RING.format(n=1))
    assert main(["--workload", str(path), "--network", str(tmp_path / "one.yml")]) == 2
    assert "backend records follow this dispatcher op" in capsys.readouterr().err


def _sparse_rank(with_parts: bool) -> Rank:
    """An EmbeddingBag's sparse gradient, all-reduced: its tensor record has no elements."""
    r = Rank()
    sp = "[70, 0, 0, 0, 0, '']"
    prev = r.op(1, "ProfilerStep#3", [], rf=1)
    if with_parts:
        prev = r.op(5, "aten::_sparse_coo_tensor_unsafe", [prev], rf=5,
                    values="[[60, 60, 0, 640, 8, 'cpu'], [61, 61, 0, 20480, 4, 'cpu'], [50000, 32], 6, 1, 'cpu', "
                           "'<None>', '<None>']", outputs=f"[{sp}]")
    a = r.op(10, "c10d::allreduce_", [prev], rf=100, values=f"[[{sp}], '<Object>', '<Object>', '<None>', True, -1]",
             shapes="[[[50000, 32]], [], [], [], [], []]", types=ALLREDUCE_TYPES, schema=ALLREDUCE_SCHEMA)
    r.op(11, "gloo:sparse_all_reduce", [a], rf=101, values=f"[{sp}]", shapes="[[50000, 32]]",
         types="['Tensor(float)']")
    if with_parts:  # after the collective: gloo's own coalesce, with more rows than it sent
        r.op(12, "aten::_values", [11], rf=102, values=f"[{sp}]", outputs="[[62, 62, 0, 40960, 4, 'cpu']]")
    return r


def test_sparse_all_reduce_is_sized_from_the_parts_before_it(tmp_path: Path) -> None:
    g = _load(_sparse_rank(True).write(tmp_path / "w.0.et"))
    assert [(n.name, n.comm_type, n.comm_size) for n in _collectives(g)] == [
        ("gloo:sparse_all_reduce", pb.ALL_GATHER, 640 * 8 + 20480 * 4)]


def test_sparse_all_reduce_without_its_parts_is_refused(tmp_path: Path) -> None:
    path = _sparse_rank(False).write(tmp_path / "w.0.et")
    with pytest.raises(WorkloadError) as err:
        load_graph(path)
    assert "node 11 " in str(err.value) and "indices" in str(err.value)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_host_comms_read_the_same_from_wire_and_from_protobuf(tmp_path: Path, name: str, monkeypatch) -> None:
    """Recognising host-side communication reads CPU operators' messages through
    chakra_proto.wire (no protobuf runtime); protobuf's own messages give the same run."""
    import workload.graph as graph

    prefix, _ = _unpacked(tmp_path, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_wire = build_report(run_simulation(prefix, tmp_path / "ring.yml"))
        monkeypatch.setattr(graph.wire, "decode", lambda data, cls: None)  # wire declines every message
        on_protobuf = build_report(run_simulation(prefix, tmp_path / "ring.yml"))
    for key in ("ranks", "collectives"):
        assert on_wire[key] == on_protobuf[key], key
    assert on_wire["collectives"]


def test_a_run_with_host_side_communication_does_not_import_protobuf(tmp_path: Path) -> None:
    import subprocess
    import sys

    prefix, _ = _unpacked(tmp_path, "ddp_mlp4_w4")
    code = ("import sys\nfrom system.main import main\n"
            f"rc = main(['--workload', {str(prefix)!r}, '--network', {str(tmp_path / 'ring.yml')!r}, '-q'])\n"
            "print(rc, 'google.protobuf' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.split()[-2:] == ["0", "False"], r.stderr[-2000:]
