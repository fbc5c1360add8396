"""``dtsim-calibrate compute`` (dtsim_tools/calibrate/compute.py): the Megatron generator's compute
model fitted to measured operator times."""
from __future__ import annotations

import json
from pathlib import Path

from dtsim_tools.calibrate.cli import main
from dtsim_tools.calibrate.compute import Measured, fit, predict_ns, read_triosim, total_error
from workload.generate import main as generate
from workload.megatron.compute import ComputeModel, gemm, memory
from workload.megatron.gpus import gpu_preset

ROOT = Path(__file__).resolve().parents[2]
VGG = ROOT / "examples" / "triosim" / "vgg13"
RESNET = ROOT / "examples" / "triosim" / "resnet50"


def test_the_fit_recovers_the_knobs_that_made_the_times() -> None:
    gpu = gpu_preset("a100")
    truth = ComputeModel(gemm_eff=0.62, gemm_half_dim=220.0, mem_eff=0.71, overhead_ns=3500.0)
    ops = [gemm("g", m, n, k) for m in (64, 512, 4096) for n in (128, 1024, 8192) for k in (256, 4096)]
    ops += [memory("m", b) for b in (1e4, 1e6, 1e8, 5e8)]
    rows = [Measured(op.name, (op,), truth.time_ns(op, gpu)) for op in ops]
    start = ComputeModel()
    assert total_error(rows, start, gpu) > 0.1
    model, err = fit(rows, gpu, start)
    assert err < 0.01
    for op in ops:  # the same times, knob by knob close to the truth
        assert abs(model.time_ns(op, gpu) / truth.time_ns(op, gpu) - 1) < 0.03
    assert abs(model.gemm_eff - 0.62) < 0.05 and abs(model.mem_eff - 0.71) < 0.05


def test_a_triosim_trace_reads_as_gemms_and_memory_kernels() -> None:
    rows = read_triosim(VGG)
    convs = [r for r in rows if r.name == "aten::conv2d"]
    back = [r for r in rows if r.name.endswith("ConvolutionBackward0")]
    assert len(convs) == len(back) == 10
    # the first convolution: 128 images of 224 x 224, 3 -> 64 channels, 3 x 3: an implicit GEMM
    assert convs[0].ops[0].gemm == (1, 128 * 224 * 224, 64, 27)
    # its backward (the last one) computes the weight gradient only; the others two GEMMs
    assert len(back[-1].ops) == 1 and all(len(b.ops) == 2 for b in back[:-1])
    assert back[-1].ops[0].flops == convs[0].ops[0].flops
    assert all(not r.is_gemm for r in rows if r.name == "aten::relu_")


def test_calibrating_on_vgg13_fits_it_and_feeds_the_generator(tmp_path: Path, capsys) -> None:
    out = tmp_path / "vgg_h100.json"
    assert main(["compute", "--triosim", str(VGG), "--gpu", "h100", "--dtype", "tf32", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fitted on 77 operators" in text and "GEMM" in text
    model = ComputeModel.from_file(out)
    gpu = gpu_preset("h100")
    rows = read_triosim(VGG)
    before = total_error(rows, ComputeModel(dtype="tf32"), gpu)
    after = total_error(rows, model, gpu)
    assert after < before and after < 0.25
    assert abs(sum(predict_ns(r, model, gpu) for r in rows) / sum(r.measured_ns for r in rows) - 1) < 0.15
    assert json.loads(out.read_text())["dtype"] == "tf32"
    prefix = tmp_path / "w"
    assert generate(["megatron", "--num-layers", "2", "--hidden-size", "512", "--num-attention-heads", "8",
                     "--seq-length", "256", "--global-batch-size", "4", "--micro-batch-size", "1", "--gpu", "h100",
                     "--compute-model", str(out), "-o", str(prefix)]) == 0
    summary = json.loads(Path(f"{prefix}.megatron.json").read_text())
    assert summary["compute_model"]["gemm_eff"] == model.gemm_eff


def test_comparing_without_fitting_and_bad_tables(tmp_path: Path, capsys) -> None:
    assert main(["compute", "--triosim", str(RESNET), "--gpu", "h100", "--dtype", "tf32"]) == 0
    assert "396" in capsys.readouterr().out
    assert main(["compute", "--triosim", str(tmp_path), "--gpu", "h100"]) == 2
    assert "trace.csv" in capsys.readouterr().err
    bad = tmp_path / "ops.csv"
    bad.write_text("kind,m,n,k,batch,bytes,flops,time_us\ngemm,128,128,128,1,,,12\nconv,1,1,1,1,,,3\n")
    assert main(["compute", "--operators", str(bad), "--gpu", "a100", "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "row 3" in err and "neither gemm nor memory" in err
    assert not (tmp_path / "m.json").exists()
    assert main(["compute", "--operators", str(bad), "--gpu", "z900"]) == 2


def _kineto(tmp_path: Path, gpu: ComputeModel) -> Path:
    """A profiler trace as PyTorch writes one (cpu_op, cuda_runtime and kernel events paired by
    correlation id), with kernel times the model ``gpu`` gives: a convolution (stride 2, padding
    1) inside aten::conv2d > aten::convolution, its backward, a linear layer, a ReLU, and an
    operator without shapes, which is left out."""
    h100 = gpu_preset("h100")
    events, corr, ts = [], [1000], [0]

    def op(name: str, dims: list, concrete: list, kernels: list[float], types: list | None = None, inner=None):
        start = ts[0]
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": start, "dur": 100,
                       "args": {"Input Dims": dims, "Input type": types or ["float"] * len(dims),
                                "Concrete Inputs": concrete}})
        if inner is not None:
            events.append({"ph": "X", "cat": "cpu_op", "name": inner, "pid": 1, "tid": 1, "ts": start + 1,
                           "dur": 98, "args": {}})
        for i, ns in enumerate(kernels):
            corr[0] += 1
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": start + 10 + i, "dur": 2, "args": {"correlation": corr[0]}})
            events.append({"ph": "X", "cat": "kernel", "name": f"k{corr[0]}", "pid": 0, "tid": 7,
                           "ts": start + 200 + i, "dur": ns / 1000.0, "args": {"correlation": corr[0]}})
        ts[0] += 1000

    conv = gemm("c", 64 * 56 * 56, 128, 64 * 9, 4)  # x [64,64,112,112], w [128,64,3,3], stride 2 -> 56 x 56
    op("aten::conv2d", [[64, 64, 112, 112], [128, 64, 3, 3], [128], [], [], [], []],
       ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"], [gpu.time_ns(conv, h100)], inner="aten::convolution")
    dgrad, wgrad = gemm("d", 64 * 56 * 56, 64 * 9, 128, 4), gemm("w", 64 * 9, 128, 64 * 56 * 56, 4)
    op("aten::convolution_backward", [[64, 128, 56, 56], [64, 64, 112, 112], [128, 64, 3, 3]] + [[]] * 8,
       ["", "", "", "[128]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"],
       [gpu.time_ns(dgrad, h100), gpu.time_ns(wgrad, h100)])
    lin = gemm("l", 256, 1000, 4096, 4)
    op("aten::linear", [[256, 4096], [1000, 4096], [1000]], ["", "", ""], [gpu.time_ns(lin, h100)], inner="aten::addmm")
    relu = memory("r", 2 * 64 * 128 * 56 * 56 * 4.0)
    op("aten::relu_", [[64, 128, 56, 56]], [""], [gpu.time_ns(relu, h100)])
    op("aten::copy_", [], [], [5000.0])
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_pytorch_trace_reads_shapes_and_kernel_times(tmp_path: Path) -> None:
    from dtsim_tools.calibrate.compute import read_kineto

    truth = ComputeModel(gemm_eff=0.55, gemm_half_dim=90.0, mem_eff=0.85, overhead_ns=2500.0, dtype="tf32")
    rows = read_kineto(_kineto(tmp_path, truth))
    assert [r.name for r in rows] == ["aten::conv2d", "aten::convolution_backward", "aten::linear", "aten::relu_"]
    assert rows[0].ops[0].gemm == (1, 64 * 56 * 56, 128, 576)  # the outermost GEMM op, output from stride
    assert [o.gemm for o in rows[1].ops] == [(1, 64 * 56 * 56, 576, 128), (1, 576, 128, 64 * 56 * 56)]
    assert rows[2].ops[0].gemm == (1, 256, 1000, 4096)
    gpu = gpu_preset("h100")
    for r in rows:  # the kernels' time, each on its operator (to Kineto's µs with 3 decimals)
        assert abs(predict_ns(r, truth, gpu) - r.measured_ns) < 1.0


def test_kineto_and_triosim_of_one_gpu_agree(shared_anchors: Path, tmp_path: Path) -> None:
    """TrioSim's H100 VGG-13 runs: its profiler trace (batch 512) and its converted CSV (batch 128,
    another run) read by the two readers give knobs that predict each other within 25 %."""
    from dtsim_tools.calibrate.compute import read_kineto

    gpu = gpu_preset("h100")
    kin = read_kineto(shared_anchors.parent / "triosim" / "tracer" / "data" / "profiler" / "profiler_vgg13-iter41.json")
    csv = read_triosim(VGG)
    base = ComputeModel(dtype="tf32")
    from_kin, _ = fit(kin, gpu, base)
    from_csv, _ = fit(csv, gpu, base)
    assert total_error(csv, from_kin, gpu) < 0.25 and total_error(kin, from_csv, gpu) < 0.25
    assert abs(from_kin.gemm_eff - from_csv.gemm_eff) < 0.1
