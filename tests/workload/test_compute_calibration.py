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
