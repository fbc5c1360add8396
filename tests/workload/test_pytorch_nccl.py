"""``workload.convert pytorch`` on NCCL-shaped traces written by the test (no torch, no GPU needed).

The step (below) has compute kernels on stream 7, NCCL all-reduces on
stream 20 over a TP group and the world, a send/recv pair on stream 21 and a host wait for the
device; these tests check what each becomes, and that the simulation keeps the overlap and the
waits the traces show.

The traces: small PyTorch trace pairs (execution trace + Kineto trace per rank) in torch 2.13's layout.

The NCCL-shaped step, per rank of 4 (times in µs; TP groups {0,1} and {2,3}, DP = the world):

    aten::mm          10-30    launches gemm 40-240 on stream 7
    c10d::allreduce_  35-60    (TP group, 4 MiB of the mm's output) ncclDevKernel_AllReduce 240-540, stream 20
    aten::mm          65-80    launches gemm 245-445 on stream 7: overlaps the all-reduce
    c10d::allreduce_  85-100   (world, 2 MiB) ncclDevKernel_AllReduce 545-745, stream 20
    aten::add_        105-115  reads the first all-reduce's tensor: its kernel 545-555 waits for it
    c10d::send/recv_  120-135  even rank -> odd rank, 4 KiB, ncclDevKernel_SendRecv 750-800, stream 21
    aten::item        140-900  a memcpy, then cudaStreamSynchronize 145-895 (a host wait)
    aten::zero_       905-910  host only
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb
from workload.collect.execution_trace import execution_trace_from_doc
from system.simulation import run_simulation
from workload.convert import main as convert_main
from workload.graph import load_graph

MiB = 1 << 20

ET_SCHEMA = "1.1.1-chakra.0.0.4"


class _Host:
    def __init__(self) -> None:
        self.nodes: list[dict] = []
        self.rf = 0

    def add(self, nid: int, name: str, parent: int, *, inputs=None, outputs=None, schema: str = "",
            scope: int = 0, rf: int | None = None) -> int:
        ins = inputs or {"values": [], "shapes": [], "types": []}
        outs = outputs or {"values": [], "shapes": [], "types": []}
        if rf is None:
            self.rf += 1
            rf = self.rf
        attrs = [{"name": "rf_id", "type": "uint64", "value": rf}, {"name": "fw_parent", "type": "uint64", "value": 0},
                 {"name": "seq_id", "type": "int64", "value": -1}, {"name": "scope", "type": "uint64", "value": scope},
                 {"name": "tid", "type": "uint64", "value": 1}, {"name": "fw_tid", "type": "uint64", "value": 0},
                 {"name": "op_schema", "type": "string", "value": schema}]
        self.nodes.append({"id": nid, "name": name, "ctrl_deps": parent, "inputs": {**ins, "strides": []},
                           "outputs": {**outs, "strides": []}, "attrs": attrs})
        return rf


def _tensor(tid: int, storage: int, numel: int, itemsize: int = 4) -> list:
    return [tid, storage, 0, numel, itemsize, "cuda:0"]


def _io(*tensors: list, listed: bool = False) -> dict:
    if listed:
        return {"values": [list(tensors)], "shapes": [[[t[3]] for t in tensors]],
                "types": ["GenericList[" + ",".join("Tensor(float)" for _ in tensors) + "]"]}
    return {"values": list(tensors), "shapes": [[t[3]] for t in tensors], "types": ["Tensor(float)"] * len(tensors)}


def _groups(rank: int) -> list[dict]:
    tp = [0, 1] if rank < 2 else [2, 3]
    return [{"pg_name": "0", "pg_desc": "default_pg", "ranks": [0, 1, 2, 3], "pg_size": 4},
            {"pg_name": "1" if rank < 2 else "2", "pg_desc": "tp", "ranks": tp, "pg_size": 2}]


def write_nccl_pair(folder: Path, rank: int, world: int = 4) -> tuple[Path, Path]:
    """host.{rank}.json and device.{rank}.json of the NCCL step above."""
    pid, tid = 100 + rank, 1000 + rank
    h = _Host()
    h.nodes.append({"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1,
                    "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []},
                    "attrs": [{"name": "rf_id", "type": "uint64", "value": 0}, {"name": "scope", "type": "uint64", "value": 7}]})
    h.add(2, "[pytorch|profiler|execution_trace|thread]", 1, scope=7, rf=0)
    pg_init = [{"pg_name": g["pg_name"], "ranks": g["ranks"], "group_size": g["pg_size"]} for g in _groups(rank)]
    h.add(3, "## process_group:init ##", 2, inputs={"values": [json.dumps(pg_init)], "shapes": [[]], "types": ["String"]},
          scope=7)
    ev: list[dict] = []
    corr = [0]

    def cpu(rf: int, name: str, ts: float, dur: float, args: dict | None = None, cat: str = "cpu_op") -> None:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                   "args": {"Record function id": rf, **(args or {})}})

    def launch(ts: float, kernel: str, stream: int, k_ts: float, k_dur: float, cat: str = "kernel",
               runtime: str = "cudaLaunchKernel", kargs: dict | None = None) -> None:
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": runtime, "pid": pid, "tid": tid, "ts": ts, "dur": 2,
                   "args": {"correlation": corr[0]}})
        ev.append({"ph": "X", "cat": cat, "name": kernel, "pid": 0, "tid": stream, "ts": k_ts, "dur": k_dur,
                   "args": {"stream": stream, "correlation": corr[0], "device": 0, **(kargs or {})}})

    tp = "1" if rank < 2 else "2"
    step = h.add(4, "ProfilerStep#5", 2, scope=7)
    cpu(step, "ProfilerStep#5", 0, 1000, cat="user_annotation")
    mm = "aten::mm(Tensor self, Tensor mat2) -> Tensor"
    cpu(h.add(5, "aten::mm", 4, inputs=_io(_tensor(1, 10, 1 << 20), _tensor(2, 11, 1 << 20)),
              outputs=_io(_tensor(3, 12, 1 << 20)), schema=mm), "aten::mm", 10, 20)
    launch(20, "ampere_sgemm_128x64_tn", 7, 40, 200)
    ar = ("c10d::allreduce_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup process_group, "
          "__torch__.torch.classes.c10d.ReduceOp reduce_op, Tensor? sparse_indices, bool async_op=True, "
          "int timeout=-1) -> (Tensor[], __torch__.torch.classes.c10d.Work)")
    cpu(h.add(6, "c10d::allreduce_", 4, inputs=_io(_tensor(3, 12, 1 << 20), listed=True), schema=ar),
        "c10d::allreduce_", 35, 25)
    record = {"Collective name": "allreduce", "dtype": "Float", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
              "Group size": 2, "Process Group Name": tp, "Process Group Ranks": str(_groups(rank)[1]["ranks"])}
    cpu(h.add(7, "record_param_comms", 6), "record_param_comms", 40, 15, record)
    h.add(8, "nccl:all_reduce", 6, scope=7)
    launch(50, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 20, 240, 300,
           runtime="cudaLaunchKernelExC", kargs={"Collective name": "allreduce", "Process Group Name": tp})
    cpu(h.add(9, "aten::mm", 4, inputs=_io(_tensor(4, 13, 1 << 19), _tensor(5, 14, 1 << 19)),
              outputs=_io(_tensor(6, 15, 1 << 19)), schema=mm), "aten::mm", 65, 15)
    launch(70, "ampere_sgemm_128x64_tn", 7, 245, 200)
    cpu(h.add(10, "c10d::allreduce_", 4, inputs=_io(_tensor(6, 15, 1 << 19), listed=True), schema=ar),
        "c10d::allreduce_", 85, 15)
    cpu(h.add(11, "record_param_comms", 10), "record_param_comms", 87, 10,
        {**record, "In msg nelems": 1 << 19, "Group size": 4, "Process Group Name": "0"})
    launch(95, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 20, 545, 200)
    add = "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
    cpu(h.add(12, "aten::add_", 4, inputs=_io(_tensor(3, 12, 1 << 20), _tensor(1, 10, 1 << 20)),
              outputs=_io(_tensor(3, 12, 1 << 20)), schema=add), "aten::add_", 105, 10)
    launch(110, "vectorized_elementwise_kernel", 7, 545, 10)
    if rank % 2 == 0:
        p2p, schema = "c10d::send", ("c10d::send(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup "
                                     "process_group, int dst, int tag) -> __torch__.torch.classes.c10d.Work")
        values = [[_tensor(7, 16, 1024)], "<Object>", rank + 1, 0]
    else:
        p2p, schema = "c10d::recv_", ("c10d::recv_(Tensor[] tensors, __torch__.torch.classes.c10d.ProcessGroup "
                                      "process_group, int src, int tag) -> __torch__.torch.classes.c10d.Work")
        values = [[_tensor(7, 16, 1024)], "<Object>", rank - 1, 0]
    cpu(h.add(13, p2p, 4, inputs={"values": values, "shapes": [[[1024]], [], [], []],
                                  "types": ["GenericList[Tensor(float)]", "Object", "Int", "Int"]}, schema=schema),
        p2p, 120, 15)
    cpu(h.add(17, "record_param_comms", 13), "record_param_comms", 122, 10,
        {"Collective name": p2p.split("::")[1].rstrip("_"), "dtype": "Float", "In msg nelems": 1024,
         "Process Group Name": "0"})
    launch(130, "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 21, 750, 50)
    cpu(h.add(14, "aten::item", 4, inputs=_io(_tensor(8, 17, 1)), schema="aten::item(Tensor self) -> Scalar"),
        "aten::item", 140, 760)
    cpu(h.add(15, "aten::_local_scalar_dense", 14, inputs=_io(_tensor(8, 17, 1)),
              schema="aten::_local_scalar_dense(Tensor self) -> Scalar"), "aten::_local_scalar_dense", 141, 758)
    launch(142, "Memcpy DtoH (Device -> Pageable)", 7, 560, 1, cat="gpu_memcpy", runtime="cudaMemcpyAsync")
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": pid, "tid": tid,
               "ts": 145, "dur": 750, "args": {}})
    cpu(h.add(16, "aten::zero_", 4, inputs=_io(_tensor(9, 18, 64)), outputs=_io(_tensor(9, 18, 64)),
              schema="aten::zero_(Tensor(a!) self) -> Tensor(a!)"), "aten::zero_", 905, 5)
    host = {"schema": ET_SCHEMA, "pid": pid, "time": "2026-12-01 00:00:00", "start_ts": 0, "finish_ts": 1,
            "nodes": h.nodes}
    device = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world,
                                                      "pg_count": 2, "pg_config": _groups(rank)},
              "traceEvents": ev}
    folder.mkdir(parents=True, exist_ok=True)
    hp, dp = folder / f"host.{rank}.json", folder / f"device.{rank}.json"
    hp.write_text(json.dumps(host))
    dp.write_text(json.dumps(device))
    return hp, dp



def _ring(tmp: Path, npus: int) -> Path:
    p = tmp / f"ring{npus}.yml"
    p.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return p


def _convert(folder: Path, ranks: int, out: Path, host: str = "host.{rank}.json",
             device: str = "device.{rank}.json") -> int:
    return convert_main(["pytorch", "--host-trace", str(folder / host), "--device-trace", str(folder / device),
                         "--ranks", str(ranks), "-o", str(out)])


@pytest.fixture(scope="module")
def nccl(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("nccl")
    for r in range(4):
        write_nccl_pair(folder, r)
    assert _convert(folder, 4, folder / "et" / "step") == 0
    return folder, folder / "et" / "step"


def _attrs(node) -> dict:
    out = {}
    for a in node.attr:
        out[a.name] = getattr(a, a.WhichOneof("value"))
    return out


def test_nccl_kernels_become_collectives_on_their_groups(nccl) -> None:
    folder, prefix = nccl
    assert json.loads(Path(f"{prefix}.comm_groups.json").read_text()) == {"1": [0, 1], "2": [2, 3]}
    for r in range(4):
        g = load_graph(f"{prefix}.{r}.et")
        colls = [n for n in g.nodes.values() if n.type == pb.COMM_COLL_NODE]
        assert [(n.comm_type, n.comm_size, n.pg_name) for n in colls] == [
            (pb.ALL_REDUCE, 4 * MiB, "1" if r < 2 else "2"), (pb.ALL_REDUCE, 2 * MiB, "")]
        assert all(n.name.startswith("ncclDevKernel_AllReduce") and not n.is_cpu_op for n in colls)
        p2p = [n for n in g.nodes.values() if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)]
        assert len(p2p) == 1 and p2p[0].comm_size == 4096
        if r % 2 == 0:
            assert p2p[0].type == pb.COMM_SEND_NODE and (p2p[0].comm_src, p2p[0].comm_dst) == (r, r + 1)
        else:
            assert p2p[0].type == pb.COMM_RECV_NODE and (p2p[0].comm_src, p2p[0].comm_dst) == (r - 1, r)
        kernels = sorted(n.duration_ns for n in g.nodes.values() if n.type == pb.COMP_NODE and not n.is_cpu_op)
        assert kernels == [1_000, 10_000, 200_000, 200_000]            # memcpy, add_, two gemms
        cpu = [n for n in g.nodes.values() if n.is_cpu_op]
        names = [n.name for n in cpu]
        assert names[:2] == ["aten::mm", "c10d::allreduce_"] and names[-1] == "aten::zero_"
        assert "aten::item (after device sync)" in names
        # the host wait is not CPU time: 760 us of item minus the 750 us cudaStreamSynchronize
        item = sum(n.duration_ns for n in cpu if n.name.startswith("aten::item"))
        assert item == 10_000


def test_simulation_keeps_the_overlap_and_the_waits(nccl, tmp_path) -> None:
    _, prefix = nccl
    result = run_simulation(prefix, _ring(tmp_path, 4))
    assert all(w.is_finished for w in result.workloads)
    for w in result.workloads:
        nodes = w.graph.nodes
        times = {nid: (s, e) for nid, s, e in w.records}
        by_name: dict[str, list[tuple[int, int]]] = {}
        for nid in sorted(times):
            name = nodes[nid].name
            by_name.setdefault(name if " (" in name else name.split("(")[0], []).append(times[nid])
        gemm1, gemm2 = by_name["ampere_sgemm_128x64_tn"]
        ar_tp, ar_world = by_name["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
        add = by_name["vectorized_elementwise_kernel"][0]
        assert ar_tp[0] >= gemm1[1]                       # NCCL's stream waits for the compute before it
        assert ar_tp[0] < gemm2[1] and gemm2[0] < ar_tp[1]  # and overlaps the compute after it
        assert add[0] >= ar_tp[1]                         # the add_ reads the all-reduced tensor
        after_sync = by_name["aten::item (after device sync)"][0]
        gpu_ends = [e for nid, (s, e) in times.items() if not nodes[nid].is_cpu_op and nid < min(
            n for n in nodes if nodes[n].name == "aten::item (after device sync)")]
        assert after_sync[0] >= max(gpu_ends)


def test_gzipped_traces_are_read(nccl, tmp_path) -> None:
    folder, _ = nccl
    for r in range(4):
        for kind in ("host", "device"):
            (tmp_path / f"{kind}.{r}.json.gz").write_bytes(gzip.compress((folder / f"{kind}.{r}.json").read_bytes()))
    assert _convert(tmp_path, 4, tmp_path / "gz") == 0                     # the .json pattern finds .json.gz
    assert _convert(tmp_path, 4, tmp_path / "gz2", "host.{rank}.json.gz", "device.{rank}.json.gz") == 0
    assert load_graph(tmp_path / "gz.0.et").nodes.keys() == load_graph(tmp_path / "gz2.0.et").nodes.keys()


@pytest.mark.parametrize("case, expect", [
    ("kineto_as_host", "give it as --device-trace"),
    ("host_as_device", "give it as --host-trace"),
    ("missing_rank", "rank 4's host trace is missing"),
    ("unknown_schema", "schema version '9.9.9' is not supported"),
    ("ranks_swapped", "this is rank 1's trace, given as rank 0's"),
    ("world_size", "pass --ranks 4"),
    ("et_lost_a_collective", "device.3.json: 'c10d::allreduce_' at ts"),
    ("collectives_disagree", "host.3.json: rank 3 runs 0 world collective(s)"),
])
def test_wrong_inputs_exit_2_naming_the_file_and_the_fix(nccl, tmp_path, capsys, case, expect) -> None:
    folder, _ = nccl
    work = tmp_path / "in"
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns("et"))
    host, device, ranks = "host.{rank}.json", "device.{rank}.json", 4
    if case == "kineto_as_host":
        host = device
    elif case == "host_as_device":
        device = host
    elif case == "missing_rank":
        ranks = 5
    elif case == "unknown_schema":
        doc = json.loads((work / "host.2.json").read_text())
        (work / "host.2.json").write_text(json.dumps({**doc, "schema": "9.9.9"}))
    elif case == "ranks_swapped":
        (work / "device.0.json").write_bytes((folder / "device.1.json").read_bytes())
    elif case == "world_size":
        ranks = 2
    elif case in ("et_lost_a_collective", "collectives_disagree"):     # rank 3 lost its world all-reduce
        doc = json.loads((work / "host.3.json").read_text())
        lost = {n.rf_id for n in execution_trace_from_doc(work / "host.3.json", doc).nodes.values()
                if n.id in (10, 11)}
        doc["nodes"] = [n for n in doc["nodes"] if n["id"] not in (10, 11)]
        (work / "host.3.json").write_text(json.dumps(doc))
        if case == "collectives_disagree":         # ... in both traces: only the other ranks tell
            kin = json.loads((work / "device.3.json").read_text())
            kin["traceEvents"] = [e for e in kin["traceEvents"]
                                  if (e.get("args") or {}).get("Record function id") not in lost]
            (work / "device.3.json").write_text(json.dumps(kin))
    capsys.readouterr()
    assert _convert(work, ranks, tmp_path / "out", host, device) == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err
    assert not list(tmp_path.glob("out.*.et"))                     # nothing half-written


# -- a host backend (gloo-shaped: no kernels, the backend's records on its own thread) ---------------

def _gloo_pair(folder: Path, rank: int) -> None:
    pid, tid = 200 + rank, 2000 + rank
    h = _Host()
    h.nodes.append({"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1,
                    "inputs": {"values": [], "shapes": [], "types": []}, "outputs": {"values": [], "shapes": [], "types": []},
                    "attrs": [{"name": "rf_id", "type": "uint64", "value": 0}]})
    h.add(2, "[pytorch|profiler|execution_trace|thread]", 1, scope=7, rf=0)
    ev: list[dict] = []
    t = [0.0]

    def op(nid: int, name: str, values: list, types: list, schema: str, dur: float = 20, backend: str | None = None,
           outputs: dict | None = None) -> None:
        rf = h.add(nid, name, 2, inputs={"values": values, "shapes": [[] for _ in values], "types": types},
                   outputs=outputs, schema=f"{name}({schema}) -> ()")
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid, "ts": t[0], "dur": dur,
                   "args": {"Record function id": rf}})
        if backend:                      # gloo's record: a child in the ET, on gloo's thread in Kineto
            brf = h.add(nid + 100, backend, nid, scope=7)
            ev.append({"ph": "X", "cat": "user_annotation", "name": backend, "pid": pid, "tid": 9, "ts": t[0] + 5,
                       "dur": 500, "args": {"Record function id": brf}})
        t[0] += dur + 10

    pg = "__torch__.torch.classes.c10d.ProcessGroup process_group"
    op(3, "c10d::broadcast_", [[_tensor(1, 1, 1000)], "<Object>", 0], ["GenericList[Tensor(float)]", "Object", "Int"],
       f"Tensor[] tensors, {pg}, int root_rank", backend="gloo:broadcast")
    op(4, "c10d::_allgather_base_", [_tensor(2, 2, 512), _tensor(3, 3, 256), "<Object>"],
       ["Tensor(float)", "Tensor(float)", "Object"], f"Tensor output_tensor, Tensor input_tensor, {pg}",
       backend="gloo:all_gather")
    op(5, "c10d::reduce_scatter_", [[_tensor(4, 4, 256)], [[_tensor(5, 5, 256), _tensor(6, 6, 256)]], "<Object>"],
       ["GenericList[Tensor(float)]", "GenericList[GenericList[Tensor(float),Tensor(float)]]", "Object"],
       f"Tensor[] output_tensors, Tensor[][] input_tensors, {pg}", backend="gloo:reduce_scatter")
    op(6, "c10d::alltoall_base_", [_tensor(7, 7, 512), _tensor(8, 8, 512), "<Object>", [], []],
       ["Tensor(float)", "Tensor(float)", "Object", "GenericList[]", "GenericList[]"],
       f"Tensor output, Tensor input, {pg}, int[] output_split_sizes, int[] input_split_sizes",
       backend="gloo:all_to_all")
    peer = ("c10d::send", "int dst") if rank == 0 else ("c10d::recv_", "int src")
    op(7, peer[0], [[_tensor(9, 9, 100, 2)], "<Object>", 1 - rank, 3], ["GenericList[Tensor(c10::BFloat16)]", "Object",
       "Int", "Int"], f"Tensor[] tensors, {pg}, {peer[1]}, int tag")
    op(8, "c10d::barrier", [_tensor(10, 10, 1), "<Object>"], ["Tensor(float)", "Object"], f"Tensor tensor, {pg}")
    op(9, "aten::copy_", [_tensor(11, 11, 512), _tensor(2, 2, 512)], ["Tensor(float)", "Tensor(float)"],
       "Tensor(a!) self, Tensor src", dur=1000)             # reads the all-gather's output: waits for it
    (folder / f"host.{rank}.json").write_text(json.dumps({"schema": ET_SCHEMA, "pid": pid, "nodes": h.nodes}))
    (folder / f"device.{rank}.json").write_text(json.dumps(
        {"distributedInfo": {"rank": rank, "world_size": 2, "backend": "gloo",
                             "pg_config": [{"pg_name": "0", "ranks": [0, 1], "pg_size": 2}]}, "traceEvents": ev}))


def test_host_backend_collectives_keep_cpu_time_and_sizes(tmp_path, capsys) -> None:
    for r in range(2):
        _gloo_pair(tmp_path, r)
    capsys.readouterr()
    assert _convert(tmp_path, 2, tmp_path / "et" / "g") == 0
    assert "1 BARRIER operation(s) are kept as host time only" in capsys.readouterr().err
    for r in range(2):
        g = load_graph(tmp_path / "et" / f"g.{r}.et")
        comm = [n for n in g.nodes.values() if not n.is_cpu_op]
        assert [(n.type, n.comm_type if n.type == pb.COMM_COLL_NODE else None, n.comm_size) for n in comm] == [
            (pb.COMM_COLL_NODE, pb.BROADCAST, 4000), (pb.COMM_COLL_NODE, pb.ALL_GATHER, 1024),  # per-rank input
            (pb.COMM_COLL_NODE, pb.REDUCE_SCATTER, 2048), (pb.COMM_COLL_NODE, pb.ALL_TO_ALL, 2048),  # whole input
            (pb.COMM_SEND_NODE if r == 0 else pb.COMM_RECV_NODE, None, 200)]
        assert (comm[-1].comm_src, comm[-1].comm_dst, comm[-1].comm_tag) == (0, 1, 3)
        cpu = {n.name: n for n in g.nodes.values() if n.is_cpu_op}
        # 10 us since the last op + 5 us until gloo's thread starts the transfer: the collective is issued
        # there; the launcher's other 15 us run on the main thread beside it
        assert "gloo:all_gather" not in cpu and cpu["c10d::_allgather_base_"].duration_ns == 15_000
        tail = cpu["c10d::_allgather_base_ (after its backend started)"]
        assert tail.duration_ns == 15_000 and cpu["c10d::_allgather_base_"].id in tail.parents
        assert all(cpu[f"c10d::{k}"].id in n.parents for k, n in
                   zip(("broadcast_", "_allgather_base_", "reduce_scatter_", "alltoall_base_"), comm))
        assert comm[1].id in cpu["aten::copy_"].parents              # the host waits where the data is used
    result = run_simulation(tmp_path / "et" / "g", _ring(tmp_path, 2))
    assert all(w.is_finished for w in result.workloads)


def test_astra_sim_compatible_writes_whole_microseconds(nccl, tmp_path) -> None:
    folder, prefix = nccl
    out = tmp_path / "astra" / "step"
    assert convert_main(["pytorch", "--host-trace", str(folder / "host.{rank}.json"),
                 "--device-trace", str(folder / "device.{rank}.json"), "--ranks", "4", "-o", str(out),
                 "--astra-sim-compatible"]) == 0
    for r in range(4):
        exact = load_graph(f"{prefix}.{r}.et")
        compat = load_graph(f"{out}.{r}.et")
        assert exact.nodes.keys() == compat.nodes.keys()
        for node in compat.nodes.values():
            assert node.duration_ns % 1000 == 0              # nothing finer than ASTRA-sim reads
        total_exact = sum(n.duration_ns for n in exact.nodes.values())
        total_compat = sum(n.duration_ns for n in compat.nodes.values())
        assert abs(total_compat - total_exact) <= 500        # rounded once over the whole rank, not per node


def test_operators_under_a_record_the_trace_never_wrote_stay_on_their_thread(tmp_path) -> None:
    """A profiler stopped from an optimizer step post-hook (``collect run --step K``) closes the
    execution trace while ``Optimizer.step#...`` is still open: that record is never written, but
    the operators inside it are. They are the step's host time, not orphans to drop."""
    from workload.collect.execution_trace import execution_trace_from_doc

    h = _Host()
    h.add(1, "[pytorch|profiler|execution_trace|process]", 1)
    h.add(2, "[pytorch|profiler|execution_trace|thread]", 1)
    h.add(3, "aten::mm", 2)
    h.add(5, "aten::_foreach_add_", 4)          # its parent 4 (Optimizer.step#Adam.step) is missing
    h.add(6, "aten::_foreach_mul_", 4)
    et = execution_trace_from_doc(tmp_path / "host.0.json", {"schema": ET_SCHEMA, "pid": 1, "nodes": h.nodes})
    root = et.nodes[2]
    assert [k.name for k in et.kids(root)] == ["aten::mm", "aten::_foreach_add_", "aten::_foreach_mul_"]
