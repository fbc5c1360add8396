"""``python -m workload.collect convert``: profiler output -> TrioSim CSVs, without torch.

The golden case is TrioSim's own pair (VGG-13, batch 512, H100; schema 1.0.1, no
Record function ids): our CSVs must equal, byte for byte, what TrioSim's
tracer/dataprocess.py makes of it. A synthetic pair in the newer layout
(1.1.1-chakra.0.0.4 with Record function ids) covers what that one cannot: the
rf_id join, fractional microseconds, a kernel launched outside any operator,
and the tpflag rules.
"""
from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import NO_SHARED
from workload.collect import ProfilerTraceError, convert_pair
from workload.collect.cli import main
from workload.collect.triosim_format import TENSOR_HEADER, TRACE_HEADER, argument_kinds, format_us

ROOT = Path(__file__).resolve().parents[2]
# TrioSim's pair and its converter's output (README there); the JSON files are stored gzipped
VGG_REFERENCE = ROOT / "tests" / "data" / "triosim_vgg13_bs512"
VGG_NAMES = ("graph_vgg13-iter41.json", "profiler_vgg13-iter41.json")
BS128_SAMPLE = ROOT / "examples" / "triosim" / "vgg13"   # TrioSim's shipped sample_trace (byte copy)
SHARED_TRIOSIM = ROOT.parent / "shared" / "anchors" / "triosim"


@pytest.fixture(scope="module")
def vgg_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("vgg13")
    for name in VGG_NAMES:
        (d / name).write_bytes(gzip.decompress((VGG_REFERENCE / f"{name}.gz").read_bytes()))
    return d / VGG_NAMES[0], d / VGG_NAMES[1]


def test_vgg13_data_equals_the_shared_anchors(vgg_pair) -> None:
    if not SHARED_TRIOSIM.is_dir():
        pytest.skip(NO_SHARED)
    data = SHARED_TRIOSIM / "tracer" / "data"
    shared = [data / kind / name for kind, name in zip(("graph", "profiler"), VGG_NAMES)]
    assert [p.read_bytes() for p in vgg_pair] == [p.read_bytes() for p in shared]
    derived = SHARED_TRIOSIM / "derived" / "vgg13-bs512-h100-regenerated"
    for name in ("trace.csv", "tensor.csv"):
        assert (VGG_REFERENCE / name).read_bytes() == (derived / name).read_bytes()


# --------------------------------------------------------------------------- VGG-13, the real pair

def test_vgg13_pair_reproduces_triosim_csvs_byte_for_byte(vgg_pair, tmp_path: Path) -> None:
    result = convert_pair(*vgg_pair, tmp_path)
    assert (tmp_path / "trace.csv").read_bytes() == (VGG_REFERENCE / "trace.csv").read_bytes()
    assert (tmp_path / "tensor.csv").read_bytes() == (VGG_REFERENCE / "tensor.csv").read_bytes()
    assert (result.operators, result.tensor_rows, result.zero_time_dropped) == (77, 663, 32)
    assert result.join == "position" and result.unmatched == 0
    assert result.total_ns == 346_344_000                     # every kernel of the step, 346.344 ms


def test_vgg13_operators_names_order_times(vgg_pair, tmp_path: Path) -> None:
    """The same check as above, spelled out, so that a failure says which column moved."""
    convert_pair(*vgg_pair, tmp_path)
    ours = _rows(tmp_path / "trace.csv")
    ref = _rows(VGG_REFERENCE / "trace.csv")
    key = ("OperatorID", "OperatorName", "Operator_cudatime", "Operator_cudatimenooverlap", "stage", "tpflag")
    assert [tuple(r[k] for k in key) for r in ours] == [tuple(r[k] for k in key) for r in ref]
    assert ours[0]["OperatorName"] == "aten::conv2d" and ours[0]["Operator_cudatimenooverlap"] == "10643"
    assert [r["stage"] for r in ours].count("optimizer") == 7


def test_vgg13_nested_tpflag_rule_matches_triosims_shipped_sample(vgg_pair, tmp_path: Path) -> None:
    """--tpflag-rule nested also flags a linear's AddmmBackward0, as TrioSim's bs128 sample does."""
    convert_pair(*vgg_pair, tmp_path, tpflag_rule="nested")
    ours = _rows(tmp_path / "trace.csv")
    sample = _rows(BS128_SAMPLE / "trace.csv")
    assert [(r["OperatorName"], r["tpflag"]) for r in ours] == [(r["OperatorName"], r["tpflag"]) for r in sample]
    addmm = [r["tpflag"] for r in ours if r["OperatorName"].endswith("AddmmBackward0")]
    assert addmm == ["1", "1", "1"]


def _rows(path: Path) -> list[dict]:
    import csv
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# --------------------------------------------------------------------------- a synthetic modern pair

def _node(id_, name, parent, rf, *, tid=1, scope=0, seq=-1, schema="", ins=(), outs=()):
    def args(items):
        return {"values": [v for v, _, _ in items], "shapes": [s for _, s, _ in items],
                "types": [t for _, _, t in items], "strides": [[] for _ in items]}
    attrs = [("rf_id", "uint64", rf), ("fw_parent", "uint64", 0), ("seq_id", "int64", seq),
             ("scope", "uint64", scope), ("tid", "uint64", tid), ("fw_tid", "uint64", 0),
             ("op_schema", "string", schema)]
    return {"id": id_, "name": name, "ctrl_deps": parent, "inputs": args(ins), "outputs": args(outs),
            "attrs": [{"name": n, "type": t, "value": v} for n, t, v in attrs]}


def _t(tid, numel, shape):
    return ([tid, tid + 1000, 0, numel, 4, "cuda:0"], shape, "Tensor(float)")


X, W, B, Y, R, G, GW = _t(100, 8, [2, 4]), _t(101, 12, [3, 4]), _t(102, 3, [3]), _t(103, 6, [2, 3]), \
    _t(104, 6, [2, 3]), _t(105, 6, [2, 3]), _t(106, 12, [3, 4])
FOREACH_IN = ([W[0], B[0]], [W[1], B[1]], "GenericList[Tensor(float),Tensor(float)]")

SYNTHETIC_ET = {"schema": "1.1.1-chakra.0.0.4", "pid": 1, "time": "t", "start_ts": 0, "finish_ts": 1, "nodes": [
    _node(2, "[pytorch|profiler|execution_trace|thread]", 1, 0, scope=7),
    _node(3, "Optimizer.zero_grad#Adam.zero_grad", 2, 1, scope=7),
    _node(11, "aten::addmm", 10, 3, seq=6, schema="aten::addmm(Tensor self, Tensor mat1, Tensor mat2) -> Tensor",
          ins=[B, X, W], outs=[Y]),
    _node(10, "aten::linear", 2, 2, seq=5, ins=[X, W, B], outs=[Y],
          schema="aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"),
    _node(20, "aten::relu", 2, 4, seq=7, schema="aten::relu(Tensor self) -> Tensor", ins=[Y], outs=[R]),
    _node(30, "[pytorch|profiler|execution_trace|thread]", 1, 0, tid=2, scope=7),
    _node(33, "aten::mm", 32, 12, tid=2, schema="aten::mm(Tensor self, Tensor mat2) -> Tensor",
          ins=[G, X], outs=[GW]),
    _node(32, "AddmmBackward0", 31, 11, tid=2, scope=1, seq=6, ins=[G]),
    _node(31, "autograd::engine::evaluate_function: AddmmBackward0", 30, 10, tid=2),
    _node(41, "aten::_foreach_add_", 40, 21, ins=[FOREACH_IN, (1, [], "Int")],
          schema="aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()"),
    _node(42, "aten::item", 40, 22, schema="aten::item(Tensor self) -> Scalar", ins=[_t(107, 1, [])],
          outs=[(1, [], "Int")]),
    _node(43, "aten::mul_", 40, 23, schema="aten::mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
          ins=[W, (0.9, [], "Double")], outs=[W]),        # not _foreach: optimizer by its annotation
    _node(40, "Optimizer.step#Adam.step", 2, 20, scope=7),
    _node(1, "[pytorch|profiler|execution_trace|process]", 1, 0, tid=0, scope=7),
]}


def _op(name, tid, ts, dur, rf, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": rf, "Record function id": rf}}


def _launch(tid, ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts,
            "dur": 2, "args": {"correlation": corr}}


def _kernel(ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": f"k{corr}", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": 7}}


SYNTHETIC_KINETO = {"schemaVersion": 1, "traceEvents": [
    _op("Optimizer.zero_grad#Adam.zero_grad", 100, 1000, 5, 1, cat="user_annotation"),
    _op("aten::linear", 100, 1010, 50, 2), _op("aten::addmm", 100, 1020, 30, 3), _launch(100, 1025, 1),
    _kernel(1100.5, 20.25, 1),                                   # fractional: newer Kineto has ns
    _op("aten::relu", 100, 1070, 10, 4),                         # no kernel: zero time, left out
    _op("autograd::engine::evaluate_function: AddmmBackward0", 200, 1090, 40, 10),
    _op("AddmmBackward0", 200, 1092, 35, 11), _op("aten::mm", 200, 1094, 30, 12),
    _launch(200, 1100, 2), _launch(200, 1105, 3), _kernel(1130, 10, 2), _kernel(1145, 5, 3),
    _op("Optimizer.step#Adam.step", 100, 1135, 30, 20, cat="user_annotation"),
    _op("aten::_foreach_add_", 100, 1140, 10, 21), _launch(100, 1142, 4), _kernel(1160, 3, 4),
    _op("aten::item", 100, 1155, 2, 22), _op("aten::mul_", 100, 1158, 4, 23), _launch(100, 1159, 6),
    _kernel(1170, 2, 6),
    _launch(100, 1300, 5), _kernel(1310, 99, 5),                 # launched outside every operator
]}

SYNTHETIC_TRACE = """\
OperatorID,OperatorName,Operator_input,Operator_output,Operator_cudatime,Operator_cudatimenooverlap,InputSize,OutputSize,gpuid,stage,tpflag
1,aten::linear,[100; 101; 102],[103],20.25,20.25,[8; 12; 3],[6],0,forward,1
3,autograd::engine::evaluate_function: AddmmBackward0,[105; 100],[106],20,15,[6; 8],[12],0,backward,{addmm_flag}
4,aten::_foreach_add_,[101; 102],[],3,3,[12; 3],[],0,optimizer,0
6,aten::mul_,[101],[101],2,2,[12],[12],0,optimizer,0
"""
SYNTHETIC_TENSOR = """\
Index,TensorID,TensorShape,TensorNumElement,TensorEachByte,TensorType,TensorStorgeid,gpuid
0,100,"[2, 4]",8,4,input,1100,0
1,101,"[3, 4]",12,4,weight,1101,0
2,102,[3],3,4,bias=None,1102,0
3,103,"[2, 3]",6,4,output,1103,0
4,103,"[2, 3]",6,4,input,1103,0
5,104,"[2, 3]",6,4,output,1104,0
6,105,"[2, 3]",6,4,input,1105,0
7,100,"[2, 4]",8,4,mat2,1100,0
8,106,"[3, 4]",12,4,output,1106,0
9,101,"[3, 4]",12,4,input,1101,0
10,102,[3],3,4,input,1102,0
11,101,"[3, 4]",12,4,input,1101,0
12,101,"[3, 4]",12,4,output,1101,0
"""


def _write_pair(folder: Path, et: dict, kineto: dict) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "et.json").write_text(json.dumps(et))
    (folder / "kineto.json").write_text(json.dumps(kineto))
    return folder / "et.json", folder / "kineto.json"


@pytest.mark.parametrize("rule, addmm_flag", [("triosim", 0), ("nested", 1)])
def test_synthetic_modern_pair_joined_by_record_function_id(tmp_path: Path, rule: str, addmm_flag: int) -> None:
    et, kineto = _write_pair(tmp_path / "in", SYNTHETIC_ET, SYNTHETIC_KINETO)
    result = convert_pair(et, kineto, tmp_path / "out", tpflag_rule=rule)
    assert result.join == "rf_id"
    assert (tmp_path / "out" / "trace.csv").read_text() == SYNTHETIC_TRACE.format(addmm_flag=addmm_flag)
    assert (tmp_path / "out" / "tensor.csv").read_text() == SYNTHETIC_TENSOR
    assert result.zero_time_dropped == 1 and result.total_ns == 40_250      # 20.25 + 15 + 3 + 2 us


def test_synthetic_pair_without_record_function_ids_joins_by_position(tmp_path: Path) -> None:
    kineto = copy.deepcopy(SYNTHETIC_KINETO)
    for ev in kineto["traceEvents"]:
        ev["args"].pop("Record function id", None)
    kineto["traceEvents"].reverse()                   # file order must not matter
    et, kin = _write_pair(tmp_path / "in", SYNTHETIC_ET, kineto)
    result = convert_pair(et, kin, tmp_path / "out")
    assert result.join == "position"
    assert (tmp_path / "out" / "trace.csv").read_text() == SYNTHETIC_TRACE.format(addmm_flag=0)


def test_cpu_times_use_operator_durations(tmp_path: Path) -> None:
    kineto = copy.deepcopy(SYNTHETIC_KINETO)
    kineto["traceEvents"] = [e for e in kineto["traceEvents"] if e["cat"] in ("cpu_op", "user_annotation")]
    et, kin = _write_pair(tmp_path / "in", SYNTHETIC_ET, kineto)
    result = convert_pair(et, kin, tmp_path / "out", time_source="cpu")
    times = {r["OperatorName"]: r["Operator_cudatimenooverlap"] for r in _rows(tmp_path / "out" / "trace.csv")}
    assert times == {"aten::linear": "50", "aten::relu": "10", "aten::_foreach_add_": "10",
                     "aten::mul_": "4", "autograd::engine::evaluate_function: AddmmBackward0": "40"}
    assert result.time_source == "cpu" and result.zero_time_dropped == 0


def test_timing_trace_replaces_times_position_by_position(tmp_path: Path) -> None:
    fast = copy.deepcopy(SYNTHETIC_KINETO)
    for ev in fast["traceEvents"]:
        ev["dur"] = ev["dur"] / 2 if ev["cat"] == "cpu_op" else ev["dur"]
        ev["args"].pop("Record function id", None)
    et, kin = _write_pair(tmp_path / "in", SYNTHETIC_ET, SYNTHETIC_KINETO)
    (tmp_path / "in" / "fast.json").write_text(json.dumps(fast))
    convert_pair(et, kin, tmp_path / "out", time_source="cpu", timing_trace=tmp_path / "in" / "fast.json")
    times = [r["Operator_cudatimenooverlap"] for r in _rows(tmp_path / "out" / "trace.csv")]
    assert times == ["25", "5", "20", "5", "2"]


def test_argument_kinds_keep_triosims_quirks() -> None:
    kinds = argument_kinds("aten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, "
                           "SymInt[2] padding=[0, 0], int[2] dilation=1, int groups=1) -> Tensor")
    assert [k[1] for k in kinds[:3]] == ["input", "weight", "bias=None"]
    assert argument_kinds("aten::relu_(Tensor(a!) self) -> Tensor(a!)")[0][1] == "input)"   # ')' removed later
    assert [format_us(n) for n in (10_651_000, 1_184, 20_250, 0)] == ["10651", "1.184", "20.25", "0"]


def test_headers_are_triosims() -> None:
    assert ",".join(TENSOR_HEADER) == ("Index,TensorID,TensorShape,TensorNumElement,TensorEachByte,"
                                       "TensorType,TensorStorgeid,gpuid")
    assert ",".join(TRACE_HEADER) == (VGG_REFERENCE / "trace.csv").read_text().splitlines()[0]


# --------------------------------------------------------------------------- bad input: exit 2, one paragraph

def _convert(tmp_path: Path, et: Path, kineto: Path, *extra: str) -> list[str]:
    return ["convert", "--execution-trace", str(et), "--profiler-trace", str(kineto),
            "--out", str(tmp_path / "out"), *extra]


def _bad_input(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def test_malformed_profiler_json_exits_2(tmp_path: Path, capsys) -> None:
    et, kineto = _write_pair(tmp_path / "in", SYNTHETIC_ET, SYNTHETIC_KINETO)
    kineto.write_text(kineto.read_text()[:-40])
    _bad_input(capsys, _convert(tmp_path, et, kineto), str(kineto), "not valid JSON", "line 1")


def test_malformed_execution_trace_json_exits_2(tmp_path: Path, capsys) -> None:
    et, kineto = _write_pair(tmp_path / "in", SYNTHETIC_ET, SYNTHETIC_KINETO)
    et.write_text('{"schema": "1.0.1", "nodes": [,]}')
    _bad_input(capsys, _convert(tmp_path, et, kineto), str(et), "not valid JSON")


def test_profiler_trace_without_kernels_exits_2(tmp_path: Path, capsys) -> None:
    kineto = copy.deepcopy(SYNTHETIC_KINETO)
    kineto["traceEvents"] = [e for e in kineto["traceEvents"] if e["cat"] != "kernel"]
    et, kin = _write_pair(tmp_path / "in", SYNTHETIC_ET, kineto)
    _bad_input(capsys, _convert(tmp_path, et, kin), str(kin), "no GPU kernel events", "--cpu-times")
    assert not (tmp_path / "out" / "trace.csv").exists()


def test_execution_trace_of_wrong_schema_version_exits_2(tmp_path: Path, capsys) -> None:
    et = dict(SYNTHETIC_ET, schema="2.0.0-chakra.0.0.5")
    et_path, kin = _write_pair(tmp_path / "in", et, SYNTHETIC_KINETO)
    _bad_input(capsys, _convert(tmp_path, et_path, kin), str(et_path), "'2.0.0-chakra.0.0.5'", "1.0.1")


def test_execution_trace_nodes_not_matching_their_schema_exit_2(tmp_path: Path, capsys) -> None:
    et = dict(SYNTHETIC_ET, schema="1.0.1")             # flat layout announced, nested nodes given
    et_path, kin = _write_pair(tmp_path / "in", et, SYNTHETIC_KINETO)
    _bad_input(capsys, _convert(tmp_path, et_path, kin), str(et_path), "nodes[0]", "schema 1.0.1")


def test_pair_from_different_steps_exits_2(vgg_pair, tmp_path: Path, capsys) -> None:
    et, _ = _write_pair(tmp_path / "in", SYNTHETIC_ET, SYNTHETIC_KINETO)
    _bad_input(capsys, _convert(tmp_path, et, vgg_pair[1]), str(vgg_pair[1]), "position 1")


def test_missing_file_exits_2(tmp_path: Path, capsys) -> None:
    _bad_input(capsys, _convert(tmp_path, tmp_path / "nope.json", tmp_path / "none.json"), "nope.json",
               "file not found")


def test_convert_runs_without_torch_and_bad_input_has_no_traceback(vgg_pair, tmp_path: Path) -> None:
    """A `torch` that cannot be imported shadows the real one: convert must not care."""
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('torch is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), str(ROOT)]))
    run = [sys.executable, "-m", "workload.collect", "convert", "--execution-trace", str(vgg_pair[0])]
    ok = subprocess.run(run + ["--profiler-trace", str(vgg_pair[1]), "--out", str(tmp_path / "out")],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "out" / "trace.csv").read_bytes() == (VGG_REFERENCE / "trace.csv").read_bytes()
    bad = subprocess.run(run + ["--profiler-trace", str(vgg_pair[0]), "--out", str(tmp_path / "bad")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1 and "traceEvents" in bad.stderr
    collect = subprocess.run([sys.executable, "-m", "workload.collect", "--model", "workload.collect.models:mlp",
                              "--batch-size", "2", "--out", str(tmp_path / "c")],
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert collect.returncode == 2 and "pip install -e '.[collect]'" in collect.stderr and "Traceback" not in collect.stderr


def test_shipped_collector_output_loads_and_converts_without_torch(tmp_path: Path) -> None:
    """The example made by collect (transformer block, CPU) fits the TrioSim loader and a 2x2 layout."""
    from workload.triosim import convert_triosim, load_trace

    example = ROOT / "examples" / "collect" / "transformer_block-cpu-bs8"
    ops = _rows(example / "trace.csv")
    assert len(load_trace(example).operators) == len(ops) == 103
    flagged = {op["OperatorName"] for op in ops if op["tpflag"] == "1" and op["stage"] == "forward"}
    assert flagged == {"aten::embedding", "aten::linear"}
    done = convert_triosim(example, batch_size=8, dp=2, tp=2, out_prefix=tmp_path / "tblock")
    assert done.ranks == 4 and all(done.et_path(r).is_file() for r in range(4))


def test_profiler_trace_error_is_an_input_error() -> None:
    from network.errors import InputError
    assert issubclass(ProfilerTraceError, InputError)
    assert str(ProfilerTraceError("a.json", "traceEvents", "no kernels")) == "a.json: traceEvents: no kernels"
