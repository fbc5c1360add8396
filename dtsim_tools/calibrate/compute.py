"""``dtsim-calibrate compute``: fit the Megatron generator's compute model
(workload/megatron/compute.py) to measured operator times.

    dtsim-calibrate compute --triosim examples/triosim/vgg13 --gpu h100 -o vgg_h100.json
    dtsim-calibrate compute --operators my_kernels.csv --gpu a100 -o a100.json
    dtsim-calibrate compute --kineto trace.json --gpu h100 --dtype tf32 -o h100.json
    dtsim-calibrate compute --triosim DIR --gpu h100 --model vgg_h100.json     # only compare

Two kinds of measured tables:

* ``--triosim DIR``: a TrioSim trace (``trace.csv`` + ``tensor.csv``, one GPU's operators with
  their measured CUDA time in µs; docs/triosim.md). A convolution is an implicit GEMM
  (M = N·H_out·W_out, N = C_out, K = C_in/groups·k_h·k_w, from its tensors' shapes), a linear
  layer a GEMM; their backward ops take the shapes of the forward op they mirror (autograd runs
  them in reverse order) and do the input-gradient and the weight-gradient GEMM (the weight
  gradient alone where the input needs none: a first layer on the data). Every other operator
  is a memory-bound kernel that reads its inputs and writes its outputs.
* ``--kineto TRACE.json``: a PyTorch profiler trace (Chrome JSON, ``record_shapes=True``), the
  one Holistic Trace Analysis reads. Each GPU kernel is paired with its launch (``correlation``)
  and the launch with the CPU operators around it on its thread; the kernel's time goes to the
  outermost GEMM operator there (``aten::conv2d``/``convolution``/``convolution_backward``,
  ``aten::linear``/``addmm``/``mm``/``bmm``/``matmul``, shapes from ``Input Dims``, a
  convolution's stride, padding, dilation and groups from ``Concrete Inputs``), else to the
  innermost ``aten::`` operator, a memory-bound kernel that reads its inputs and writes one
  output as large as the largest (Kineto records no output shapes).
* ``--operators CSV``: rows ``kind,m,n,k,batch,bytes,flops,time_us`` (``kind`` gemm or memory;
  a GEMM's bytes and FLOPs follow from m, n, k and batch when left empty; ``--dtype-bytes``).

The knobs (``gemm_eff``, ``gemm_half_dim``, ``mem_eff``, ``overhead_ns``) minimise the total
absolute error over the total measured time (a long operator weighs as much as many short ones
of its length), by Nelder-Mead on log-scaled knobs; ``host_ns`` and the dtype are kept (per-
operator GPU times say nothing of the host). ``-o`` writes the JSON that ``workload.generate
megatron --compute-model`` reads. Exit codes: 0 done, 1 internal error, 2 bad input.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from network.calibrate.model import nelder_mead
from network.errors import InputError
from workload.megatron.compute import ComputeModel, Op, gemm, memory
from workload.megatron.gpus import GpuPreset

KNOBS = ("gemm_eff", "gemm_half_dim", "mem_eff", "overhead_ns")
_BOUNDS = {"gemm_eff": (0.01, 1.0), "mem_eff": (0.01, 1.0), "gemm_half_dim": (1.0, 1e5), "overhead_ns": (0.0, 1e6)}
_CONV = ("aten::conv2d", "aten::convolution", "aten::conv1d", "aten::conv3d")
_LINEAR = ("aten::linear", "aten::addmm", "aten::mm", "aten::matmul")
_BACKWARD = {"ConvolutionBackward0": "conv", "AddmmBackward0": "linear", "MmBackward0": "linear"}


@dataclass(frozen=True)
class Measured:
    """One operator: its kernels (as compute-model ops) and its measured GPU time."""

    name: str
    ops: tuple[Op, ...]
    measured_ns: float

    @property
    def is_gemm(self) -> bool:
        return any(op.gemm is not None for op in self.ops)


def predict_ns(m: Measured, model: ComputeModel, gpu: GpuPreset) -> float:
    return sum(model.time_ns(op, gpu) for op in m.ops)


# -- TrioSim traces --------------------------------------------------------------------------------

def _ids(cell: str) -> list[int]:
    cell = cell.strip().strip("[]")
    return [int(x) for x in cell.replace(";", " ").split()] if cell else []


def read_triosim(folder: str | Path) -> list[Measured]:
    d = Path(folder)
    trace, tensors = d / "trace.csv", d / "tensor.csv"
    for p in (trace, tensors):
        if not p.is_file():
            raise InputError(p, "", "expected a TrioSim trace folder holding trace.csv and tensor.csv")
    shape: dict[int, tuple[int, ...]] = {}
    elem: dict[int, int] = {}
    with open(tensors, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            try:
                tid = int(row["TensorID"])
                dims = json.loads(row["TensorShape"]) if row["TensorShape"].startswith("[") else []
                shape.setdefault(tid, tuple(int(x) for x in dims))
                elem.setdefault(tid, int(row["TensorEachByte"]))
            except (KeyError, ValueError, TypeError) as e:
                raise InputError(tensors, f"row {i + 2}", f"expected TensorID, TensorShape, TensorEachByte: {e}") from None
    out: list[Measured] = []
    forward: dict[str, list[tuple[tuple[int, int, int], int]]] = {"conv": [], "linear": []}
    pending: list[tuple[int, str, str, float]] = []  # backward GEMM ops, matched once every forward is read
    with open(trace, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            where = f"row {i + 2}"
            try:
                name = row["OperatorName"]
                t_ns = float(row["Operator_cudatime"]) * 1000.0
                ins, outs = _ids(row["Operator_input"]), _ids(row["Operator_output"])
            except (KeyError, ValueError) as e:
                raise InputError(trace, where, f"expected OperatorName, Operator_input, Operator_output, "
                                 f"Operator_cudatime: {e}") from None
            kind = next((k for suffix, k in _BACKWARD.items() if name.endswith(suffix)), None)
            eb = elem.get(outs[0], 4) if outs else 4
            if name in _CONV and len(ins) >= 2 and ins[0] in shape and ins[1] in shape and outs and outs[0] in shape:
                dims = _conv_gemm(shape[ins[0]], shape[ins[1]], shape[outs[0]])
                forward["conv"].append((dims, eb))
                out.append(Measured(name, (gemm(name, *dims, elem_bytes=eb),), t_ns))
            elif name in _LINEAR and len(ins) >= 2 and ins[0] in shape and ins[1] in shape:
                dims = _linear_gemm(shape[ins[0]], shape[ins[1]])
                forward["linear"].append((dims, eb))
                out.append(Measured(name, (gemm(name, *dims, elem_bytes=eb),), t_ns))
            elif kind is not None:
                pending.append((len(out), kind, name, t_ns))
                out.append(Measured(name, (), t_ns))
            else:
                nbytes = sum(_nbytes(t, shape, elem) for t in ins + outs)
                out.append(Measured(name, (memory(name, nbytes),), t_ns))
    # autograd runs the backward ops in reverse order of their forward ones
    seen = {"conv": 0, "linear": 0}
    for idx, kind, name, t_ns in pending:
        fwd = forward[kind]
        j = len(fwd) - 1 - seen[kind]
        seen[kind] += 1
        if j < 0:
            raise InputError(trace, name, f"a {kind} backward op with no forward op left to mirror")
        (m, n, k), eb = fwd[j]
        ops = [gemm(f"{name} wgrad", k, n, m, elem_bytes=eb)]
        if j > 0:  # not the first layer: the data it reads needs no gradient
            ops.append(gemm(f"{name} dgrad", m, k, n, elem_bytes=eb))
        out[idx] = Measured(name, tuple(ops), t_ns)
    if not out:
        raise InputError(trace, "", "no operators")
    return out


def _conv_gemm(x: tuple[int, ...], w: tuple[int, ...], y: tuple[int, ...]) -> tuple[int, int, int]:
    spatial = 1
    for v in y[2:]:
        spatial *= v
    k = 1
    for v in w[1:]:
        k *= v
    return y[0] * spatial, w[0], k


def _linear_gemm(x: tuple[int, ...], w: tuple[int, ...]) -> tuple[int, int, int]:
    m = 1
    for v in x[:-1]:
        m *= v
    # aten::linear's weight is (out, in); mm's second operand (in, out)
    n = w[0] if w[-1] == x[-1] else w[-1]
    return m, n, x[-1]


def _nbytes(tid: int, shape: dict[int, tuple[int, ...]], elem: dict[int, int]) -> float:
    s = shape.get(tid)
    if s is None:
        return 0.0
    n = 1
    for v in s:
        n *= v
    return float(n * elem.get(tid, 4))


# -- PyTorch profiler traces ------------------------------------------------------------------------

_GEMM_OPS = ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::convolution_backward",
             "aten::linear", "aten::addmm", "aten::mm", "aten::bmm", "aten::matmul")
_ELEM = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "half": 2, "bfloat16": 2}


def read_kineto(path: str | Path) -> list[Measured]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(p, "", f"expected a PyTorch profiler trace (Chrome JSON): {e}") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise InputError(p, "", "expected a Chrome trace with 'traceEvents'")
    ops_by_tid: dict[tuple, list[dict]] = {}
    launches: dict[int, dict] = {}
    kernels: list[dict] = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat == "cpu_op":
            ops_by_tid.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        elif cat == "cuda_runtime" and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = e
        elif cat == "kernel" and "correlation" in e.get("args", {}):
            kernels.append(e)
    if not kernels:
        raise InputError(p, "", "no GPU kernels: profile with CUDA activities (and record_shapes=True)")
    gpu_ns: dict[int, float] = {}  # id of the CPU operator event -> its kernels' time
    chosen: dict[int, dict] = {}
    for k in kernels:
        launch = launches.get(k["args"]["correlation"])
        if launch is None:
            continue
        ts = launch["ts"]
        around = [o for o in ops_by_tid.get((launch.get("pid"), launch.get("tid")), ())
                  if o["ts"] <= ts <= o["ts"] + o.get("dur", 0)]
        if not around:
            continue
        around.sort(key=lambda o: (o["ts"], -o.get("dur", 0)))  # outermost first
        gemms = [o for o in around if o["name"] in _GEMM_OPS]
        atens = [o for o in around if o["name"].startswith("aten::")]
        op = gemms[0] if gemms else (atens[-1] if atens else around[-1])
        chosen[id(op)] = op
        gpu_ns[id(op)] = gpu_ns.get(id(op), 0.0) + 1000.0 * float(k.get("dur", 0))
    out = []
    for key, op in sorted(chosen.items(), key=lambda kv: kv[1]["ts"]):
        ops = _kineto_ops(op)
        if ops is not None and gpu_ns[key] > 0:
            out.append(Measured(op["name"], ops, gpu_ns[key]))
    if not out:
        raise InputError(p, "", "no CPU operator with recorded shapes launched the GPU kernels (record_shapes=True)")
    return out


def _ints(text: str) -> list[int]:
    text = str(text).strip().strip("[]")
    return [int(x) for x in text.replace(",", " ").split()] if text else []


def _kineto_ops(op: dict) -> tuple[Op, ...] | None:
    args = op.get("args", {})
    dims = args.get("Input Dims") or []
    types = args.get("Input type") or []
    concrete = args.get("Concrete Inputs") or [""] * len(dims)
    name = op["name"]
    eb = _ELEM.get(types[0] if types else "float", 4)
    try:
        if name in ("aten::mm", "aten::matmul") and len(dims) >= 2 and len(dims[0]) >= 2:
            a, b = dims[0], dims[1]
            m = 1
            for v in a[:-1]:
                m *= v
            return (gemm(name, m, b[-1], a[-1], eb),)
        if name == "aten::bmm":
            a, b = dims[0], dims[1]
            return (gemm(name, a[1], b[2], a[2], eb, a[0]),)
        if name == "aten::addmm":
            a, b = dims[1], dims[2]
            return (gemm(name, a[0], b[1], a[1], eb),)
        if name == "aten::linear":
            return (gemm(name, *_linear_gemm(tuple(dims[0]), tuple(dims[1])), elem_bytes=eb),)
        if name in ("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution"):
            x, w = dims[0], dims[1]
            stride, pad, dil = (_ints(concrete[i]) for i in (3, 4, 5))
            groups = int(concrete[8] if name == "aten::convolution" else concrete[6] or 1)
            return (gemm(name, *_conv_dims(x, w, stride, pad, dil, groups), elem_bytes=eb),)
        if name == "aten::convolution_backward":
            x, w = dims[1], dims[2]  # dims[0]: the output gradient
            stride, pad, dil = (_ints(concrete[i]) for i in (4, 5, 6))
            groups = int(concrete[9] or 1)
            mask = [v.strip() == "True" for v in str(concrete[10]).strip("[]").split(",")]
            m, n, k = _conv_dims(x, w, stride, pad, dil, groups)
            out = []
            if mask and mask[0]:
                out.append(gemm(f"{name} dgrad", m, k, n, eb))
            if len(mask) > 1 and mask[1]:
                out.append(gemm(f"{name} wgrad", k, n, m, eb))
            return tuple(out) or None
    except (IndexError, ValueError, TypeError):
        return None  # shapes missing or of another form: not counted
    sizes = []
    for d, t in zip(dims, types):
        if isinstance(d, list) and d:
            n = 1
            for v in d:
                n *= v
            sizes.append(n * _ELEM.get(t, 4))
    if not sizes:
        return None
    return (memory(name, float(sum(sizes) + max(sizes))),)


def _conv_dims(x: list[int], w: list[int], stride: list[int], pad: list[int], dil: list[int],
               groups: int) -> tuple[int, int, int]:
    """(M, N, K) of a convolution as an implicit GEMM, output size from stride, padding, dilation."""
    spatial = 1
    for i, size in enumerate(x[2:]):
        k = w[2 + i]
        s = stride[i] if i < len(stride) else (stride[0] if stride else 1)
        p = pad[i] if i < len(pad) else (pad[0] if pad else 0)
        d = dil[i] if i < len(dil) else (dil[0] if dil else 1)
        spatial *= (size + 2 * p - d * (k - 1) - 1) // s + 1
    k = 1
    for v in w[1:]:
        k *= v
    return x[0] * spatial, w[0], k


# -- a plain table -----------------------------------------------------------------------------------

def read_operators(path: str | Path, dtype_bytes: int = 2) -> list[Measured]:
    p = Path(path)
    out = []
    try:
        f = open(p, newline="")
    except OSError as e:
        raise InputError(p, "", f"cannot read ({e.strerror or e})") from None
    with f:
        for i, row in enumerate(csv.DictReader(f)):
            where = f"row {i + 2}"
            try:
                kind = row["kind"].strip()
                t_ns = float(row["time_us"]) * 1000.0

                def num(key: str, default: float = 0.0) -> float:
                    v = (row.get(key) or "").strip()
                    return float(v) if v else default

                if kind == "gemm":
                    op = gemm(f"gemm {i}", int(num("m")), int(num("n")), int(num("k")), dtype_bytes, int(num("batch", 1)))
                    if num("bytes"):
                        op = Op(op.name, op.flops, num("bytes"), op.gemm)
                elif kind == "memory":
                    op = memory(f"memory {i}", num("bytes"), num("flops"))
                else:
                    raise ValueError(f"kind {kind!r} is neither gemm nor memory")
            except (KeyError, ValueError) as e:
                raise InputError(p, where, f"expected kind,m,n,k,batch,bytes,flops,time_us: {e}") from None
            if not t_ns > 0 or (op.gemm is not None and min(op.gemm) <= 0):
                raise InputError(p, where, "expected time_us > 0 and m, n, k, batch >= 1 for a GEMM")
            out.append(Measured(op.name, (op,), t_ns))
    if not out:
        raise InputError(p, "", "no rows")
    return out


# -- the fit -----------------------------------------------------------------------------------------

def total_error(rows: Sequence[Measured], model: ComputeModel, gpu: GpuPreset) -> float:
    """Σ |predicted - measured| / Σ measured."""
    return sum(abs(predict_ns(r, model, gpu) - r.measured_ns) for r in rows) / sum(r.measured_ns for r in rows)


def vector_model(x: np.ndarray, base: ComputeModel, knobs: Sequence[str], bounds: dict[str, tuple[float, float]],
                 source: str) -> ComputeModel:
    """The model whose ``knobs`` the search vector ``x`` gives: efficiencies through a logistic,
    the rest as log(1 + value), each clamped to its bounds (Nelder-Mead searches unbounded)."""
    vals = {}
    for k, v in zip(knobs, x):
        lo, hi = bounds[k]
        raw = 1 / (1 + math.exp(-v)) if k.endswith("_eff") else math.exp(v) - 1.0
        vals[k] = float(min(hi, max(lo, raw)))
    return base.with_values(**vals, source=source)


def model_vector(m: ComputeModel, knobs: Sequence[str]) -> np.ndarray:
    """``vector_model``'s inverse."""
    out = []
    for k in knobs:
        v = getattr(m, k)
        out.append(math.log(v / (1 - v)) if k.endswith("_eff") and v < 1 else 5.0 if k.endswith("_eff")
                   else math.log(v + 1.0))
    return np.array(out)


def fit(rows: Sequence[Measured], gpu: GpuPreset, base: ComputeModel, evals: int = 600) -> tuple[ComputeModel, float]:
    def model(x: np.ndarray) -> ComputeModel:
        return vector_model(x, base, KNOBS, _BOUNDS, "dtsim-calibrate compute")

    def objective(x: np.ndarray) -> float:
        return total_error(rows, model(x), gpu)

    best_x = model_vector(base, KNOBS)
    best = objective(best_x)
    for start in (base, base.with_values(gemm_eff=0.5, gemm_half_dim=64.0, mem_eff=0.6, overhead_ns=2000.0)):
        x, err = nelder_mead(objective, model_vector(start, KNOBS), step=0.5, max_evals=evals, tol=1e-7)
        if err < best:
            best_x, best = x, err
    return model(best_x), best


def _table(rows: Sequence[Measured], model: ComputeModel, gpu: GpuPreset) -> str:
    groups: dict[str, list[Measured]] = {}
    for r in rows:
        groups.setdefault("GEMM" if r.is_gemm else "memory", []).append(r)
    lines = [f"{'operators':>10}  {'count':>5}  {'measured ms':>11}  {'predicted ms':>12}  {'error':>7}"]
    for name, rs in groups.items():
        meas = sum(r.measured_ns for r in rs) / 1e6
        pred = sum(predict_ns(r, model, gpu) for r in rs) / 1e6
        lines.append(f"{name:>10}  {len(rs):>5}  {meas:>11.3f}  {pred:>12.3f}  {100 * (pred / meas - 1):>+6.1f}%")
    meas = sum(r.measured_ns for r in rows) / 1e6
    pred = sum(predict_ns(r, model, gpu) for r in rows) / 1e6
    lines.append(f"{'all':>10}  {len(rows):>5}  {meas:>11.3f}  {pred:>12.3f}  {100 * (pred / meas - 1):>+6.1f}%"
                 f"   (sum |error| / sum measured: {100 * total_error(rows, model, gpu):.1f} %)")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtsim-calibrate compute",
                                description="Fit the Megatron generator's compute model to measured operator times.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--triosim", metavar="DIR", help="a TrioSim trace folder (trace.csv + tensor.csv)")
    src.add_argument("--kineto", metavar="TRACE.json", help="a PyTorch profiler trace with CUDA kernels and shapes")
    src.add_argument("--operators", metavar="CSV", help="rows kind,m,n,k,batch,bytes,flops,time_us")
    p.add_argument("--gpu", required=True, help="the GPU the times were measured on (a100, h100, ...)")
    p.add_argument("--dtype", help="peak FLOP/s of this dtype (default: --model's, else fp32 for a TrioSim trace, "
                                   "else bf16); PyTorch runs fp32 convolutions as tf32 unless told otherwise")
    p.add_argument("--dtype-bytes", type=int, default=2, help="bytes per element of --operators GEMMs (default 2)")
    p.add_argument("--model", metavar="JSON", help="start from (or, without -o, only compare) these knobs")
    p.add_argument("-o", "--output", metavar="JSON", help="write the fitted compute model here")
    return p


def main(argv: list[str] | None = None) -> int:
    from workload.megatron.gpus import gpu_preset

    try:
        a = build_parser().parse_args(argv)
    except SystemExit as e:
        return 0 if e.code in (0, None) else 2
    try:
        gpu = gpu_preset(a.gpu)
        rows = read_triosim(a.triosim) if a.triosim else read_kineto(a.kineto) if a.kineto else \
            read_operators(a.operators, a.dtype_bytes)
        base = ComputeModel.from_file(a.model) if a.model else ComputeModel()
        if a.dtype or not a.model:
            base = base.with_values(dtype=a.dtype or ("fp32" if a.triosim or a.kineto else base.dtype))
        base.time_ns(rows[0].ops[0] if rows[0].ops else memory("probe", 1.0), gpu)  # the dtype has a peak
        if a.output:
            model, err = fit(rows, gpu, base)
            Path(a.output).write_text(json.dumps(model.to_json(), indent=1) + "\n")
            print(f"fitted on {len(rows)} operators: " + ", ".join(f"{k}={getattr(model, k):.4g}" for k in KNOBS)
                  + f" ({model.dtype} peak {gpu.peak_flops[model.dtype] / 1e12:g} TFLOP/s) -> {a.output}")
        else:
            model = base
        print(_table(rows, model, gpu))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
