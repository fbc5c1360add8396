"""``python -m workload.collect``: profile a shipped model on the CPU, then convert and simulate.

Needs torch (the ``collect`` extra); skipped without it. Kept small for a 2-core
CI machine: batch 8, two steps per model.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need

torch = need("torch", "collect")

from workload.collect.cli import main  # noqa: E402
from workload.collect.triosim_format import TENSOR_HEADER, TRACE_HEADER  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("forward", "backward", "optimizer")


@pytest.fixture(scope="module")
def mlp_trace(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("mlp")
    import io
    from contextlib import redirect_stderr
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["--model", "workload.collect.models:mlp", "--batch-size", "8", "--device", "cpu",
                     "--iterations", "2", "--threads", "1", "--out", str(out)])
    assert code == 0, err.getvalue()
    return out, err.getvalue()


def _read(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames), list(reader)


def _ids(text: str) -> list[int]:
    assert text.startswith("[") and text.endswith("]") and "," not in text, text
    return [int(v) for v in text[1:-1].split("; ")] if text != "[]" else []


def test_mlp_on_cpu_writes_csvs_in_triosims_format(mlp_trace) -> None:
    out, err = mlp_trace
    assert "CPU duration" in err                              # the tool says where times come from
    header, ops = _read(out / "trace.csv")
    t_header, tensors = _read(out / "tensor.csv")
    assert tuple(header) == TRACE_HEADER and tuple(t_header) == TENSOR_HEADER
    known = {int(t["TensorID"]): int(t["TensorNumElement"]) for t in tensors}
    assert [int(t["Index"]) for t in tensors] == list(range(len(tensors)))
    ids = [int(op["OperatorID"]) for op in ops]
    assert ids == sorted(set(ids))
    stages = [op["stage"] for op in ops]
    assert stages == sorted(stages, key=STAGES.index), "forward, then backward, then optimizer"
    assert set(stages) == set(STAGES)
    for op in ops:
        ins, outs = _ids(op["Operator_input"]), _ids(op["Operator_output"])
        assert [known[i] for i in ins] == _ids(op["InputSize"])
        assert [known[i] for i in outs] == _ids(op["OutputSize"])
        assert float(op["Operator_cudatimenooverlap"]) > 0
        assert op["Operator_cudatime"] == op["Operator_cudatimenooverlap"]      # CPU: one duration
        assert op["tpflag"] == ("1" if op["OperatorName"] in ("aten::linear", "autograd::engine::"
                                "evaluate_function: TBackward0") else "0")
    names = [op["OperatorName"] for op in ops]
    assert names[:5] == ["aten::linear", "aten::relu", "aten::linear", "aten::relu", "aten::linear"]
    assert names.count("autograd::engine::evaluate_function: AddmmBackward0") == 3
    assert "aten::_foreach_addcdiv_" in names and "aten::item" not in names
    weights = [t["TensorShape"] for t in tensors if t["TensorType"] == "weight"]
    assert weights[:3] == ["[512, 256]", "[512, 512]", "[10, 512]"]     # the linears' (then Adam's 0-d lerp weight)
    meta = json.loads((out / "collect.json").read_text())
    assert meta["time_source"] == "cpu" and meta["batch_size"] == 8 and meta["notes"] == []
    assert meta["timing_trace"] == "raw/profiler_trace_timing.json"
    assert (out / "raw" / "execution_trace.json").is_file() and (out / "raw" / "profiler_trace_timing.json").is_file()


def test_raw_files_convert_again_to_the_same_csvs(mlp_trace, tmp_path: Path) -> None:
    out, _ = mlp_trace
    raw = out / "raw"
    code = main(["convert", "--execution-trace", str(raw / "execution_trace.json"), "--profiler-trace",
                 str(raw / "profiler_trace.json"), "--timing-trace", str(raw / "profiler_trace_timing.json"),
                 "--cpu-times", "--out", str(tmp_path)])
    assert code == 0
    assert (tmp_path / "trace.csv").read_bytes() == (out / "trace.csv").read_bytes()
    assert (tmp_path / "tensor.csv").read_bytes() == (out / "tensor.csv").read_bytes()


def test_mlp_collect_convert_simulate_end_to_end(mlp_trace, tmp_path: Path) -> None:
    from workload.triosim import convert_triosim, load_trace

    out, _ = mlp_trace
    trace = load_trace(out)
    assert len(trace.operators) == len(_read(out / "trace.csv")[1])
    done = convert_triosim(out, batch_size=8, dp=2, tp=2, out_prefix=tmp_path / "mlp")
    assert done.ranks == 4
    net = tmp_path / "ring4.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    sim = subprocess.run([sys.executable, "-m", "system.main", "--workload", str(done.prefix), "--network",
                          str(net)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert sim.returncode == 0, sim.stderr
    finished = [line for line in sim.stdout.splitlines() if line.startswith("sys[") and "finished" in line]
    assert len(finished) == 4
    cycles = {int(line.split(",")[1].split()[0]) for line in finished}
    compute_ns = done.summary["per_rank"][0]["compute_ns"]
    assert len(cycles) == 1 and cycles.pop() > compute_ns > 0   # data- and tensor-parallel traffic adds time


@pytest.mark.parametrize("model, tp_ops", [("small_cnn", {"aten::conv2d": 2, "aten::linear": 1}),
                                           ("transformer_block", {"aten::embedding": 1, "aten::linear": 5})])
def test_other_shipped_models_collect(tmp_path: Path, model: str, tp_ops: dict, capsys) -> None:
    code = main(["--model", f"workload.collect.models:{model}", "--batch-size", "2", "--device", "cpu",
                 "--iterations", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "timing step ran other operators" in err     # step 1 builds Adam's state, step 2 does not
    _, ops = _read(tmp_path / "trace.csv")
    flagged = [op["OperatorName"] for op in ops if op["tpflag"] == "1" and op["stage"] == "forward"]
    assert {n: flagged.count(n) for n in set(flagged)} == tp_ops


def test_bad_model_reference_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["--model", "workload.collect.models:nope", "--batch-size", "2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--model" in err and "has no 'nope'" in err and "Traceback" not in err
    assert main(["--model", "no_such_module_xyz:f", "--batch-size", "2", "--out", str(tmp_path)]) == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_without_gpu_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["--model", "workload.collect.models:mlp", "--batch-size", "2", "--device", "cuda",
                 "--out", str(tmp_path)]) == 2
    assert "--device cpu" in capsys.readouterr().err
