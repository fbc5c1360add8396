"""Profile one training step of a PyTorch model and convert it (needs torch).

The step is ``zero_grad; loss(model(x), y).backward(); optimizer.step()``, the
one TrioSim's tracer/datacollect.py profiles. After ``iterations - 1`` warm-up
steps the last one runs under ``torch.profiler`` with an
``ExecutionTraceObserver``; both files are kept under ``OUT/raw/`` and then
converted by :func:`workload.collect.convert.convert_pair`, the same code the
``convert`` subcommand runs.

On the CPU one more step is profiled without the observer, and its operator
durations are the ones written: the observer records every argument of every
operator and about doubles host times (measured on the MLP: 4.4 ms against
2.2 ms per step). GPU kernel times do not depend on it.

torch is imported here only, and this module only when collecting.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from network.extras import install_hint
from workload.collect.convert import ConvertResult, convert_pair
from workload.collect.errors import ModelSpecError, TimingTraceMismatch
from workload.collect.spec import ModelSpec, load_model_spec

ET_FILE = "execution_trace.json"
KINETO_FILE = "profiler_trace.json"
TIMING_FILE = "profiler_trace_timing.json"


@dataclass(frozen=True)
class CollectResult:
    result: ConvertResult
    device: str
    execution_trace: Path
    profiler_trace: Path
    timing_trace: Path | None
    torch_version: str
    notes: tuple[str, ...] = ()


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ModelSpecError(None, "collect", "profiling needs torch, an optional extra: "
                             f"{install_hint('collect', 'torch==2.13.0')}; the 'convert' "
                             "subcommand works without it") from None
    return torch


def collect(model_ref: str, batch_size: int, out_dir: str | os.PathLike, *, device: str | None = None,
            iterations: int = 4, loss: str | None = None, optimizer: str | None = None,
            tpflag_rule: str = "triosim", seed: int = 0, threads: int | None = None) -> CollectResult:
    """Profile the last of ``iterations`` training steps and write TrioSim CSVs to out_dir."""
    torch = _import_torch()
    if batch_size < 1 or iterations < 1 or (threads is not None and threads < 1):
        raise ModelSpecError(None, "--batch-size/--iterations/--threads", "each must be at least 1")
    device = _pick_device(torch, device)
    raw = Path(out_dir) / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    et_path, kineto_path = raw / ET_FILE, raw / KINETO_FILE
    timing_path = raw / TIMING_FILE if device == "cpu" else None
    previous_threads = torch.get_num_threads()
    try:                                       # the thread count is process-wide: put it back
        if threads is not None:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        step = _training_step(torch, load_model_spec(model_ref, batch_size), device, loss, optimizer, model_ref)
        for _ in range(iterations - 1):
            step()
        _profile_one_step(torch, step, device, kineto_path, et_path)
        if timing_path is not None:
            _profile_one_step(torch, step, device, timing_path, None)
    finally:
        torch.set_num_threads(previous_threads)
    result, timing_path, notes = _convert(et_path, kineto_path, timing_path, out_dir, tpflag_rule,
                                          "gpu" if device == "cuda" else "cpu")
    return CollectResult(result, device, et_path, kineto_path, timing_path, torch.__version__, notes)


def _convert(et_path: Path, kineto_path: Path, timing_path: Path | None, out_dir: str | os.PathLike,
             tpflag_rule: str, source: str) -> tuple[ConvertResult, Path | None, tuple[str, ...]]:
    try:
        return convert_pair(et_path, kineto_path, out_dir, time_source=source, tpflag_rule=tpflag_rule,
                            timing_trace=timing_path), timing_path, ()
    except TimingTraceMismatch as exc:         # e.g. the profiled step was the first: Adam made its state
        note = (f"the timing step ran other operators than the profiled one ({exc.problem}); the times "
                "written are those of the profiled step, inflated by the execution-trace observer; "
                "use --iterations 2 or more")
        return convert_pair(et_path, kineto_path, out_dir, time_source=source,
                            tpflag_rule=tpflag_rule), None, (note,)


def _training_step(torch: Any, spec: ModelSpec, device: str, loss: str | None, optimizer: str | None,
                   ref: str) -> Callable[[], None]:
    """zero_grad; loss(model(x), y).backward(); optimizer.step(), as TrioSim's datacollect.py."""
    model, inputs, target, loss_fn, opt = _prepare(torch, spec, device, loss, optimizer, ref)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(*inputs), target).backward()
        opt.step()
    return step


def _pick_device(torch: Any, device: str | None) -> str:
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelSpecError(None, "--device", "cuda asked for, but torch sees no GPU "
                             f"(torch {torch.__version__}); use --device cpu")
    if device not in ("cuda", "cpu"):
        raise ModelSpecError(None, "--device", f"expected cuda or cpu, got {device!r}")
    return device


def _prepare(torch: Any, spec: ModelSpec, device: str, loss: str | None, optimizer: str | None,
             ref: str) -> tuple:
    if not isinstance(spec.model, torch.nn.Module):
        raise ModelSpecError(None, "--model", f"{ref} gave a {type(spec.model).__name__}, not an nn.Module")
    model = spec.model.to(device).train()
    raw_inputs = spec.example_input if isinstance(spec.example_input, tuple) else (spec.example_input,)
    if not raw_inputs or not all(isinstance(t, torch.Tensor) for t in raw_inputs):
        raise ModelSpecError(None, "--model", f"{ref}: example_input must be a tensor or a tuple of tensors")
    inputs = tuple(t.to(device) for t in raw_inputs)
    loss_fn = _loss(torch, loss or spec.loss or "cross_entropy")
    target = spec.target
    if target is None:
        with torch.no_grad():
            out = model(*inputs)
        target = (torch.randint(0, out.shape[-1], out.shape[:-1]) if loss_fn.wants_classes
                  else torch.randn(out.shape))
    opt = _optimizer(torch, optimizer or spec.optimizer or "adam", model)
    return model, inputs, target.to(device), loss_fn, opt


class _Loss:
    def __init__(self, fn: Any, wants_classes: bool) -> None:
        self.fn, self.wants_classes = fn, wants_classes

    def __call__(self, output: Any, target: Any) -> Any:
        if self.wants_classes:                 # (..., classes) logits against (...) class ids
            return self.fn(output.reshape(-1, output.shape[-1]), target.reshape(-1))
        return self.fn(output, target)


def _loss(torch: Any, choice: Any) -> _Loss:
    if callable(choice):
        return _Loss(choice, False)
    if choice == "cross_entropy":
        return _Loss(torch.nn.CrossEntropyLoss(), True)
    if choice == "mse":
        return _Loss(torch.nn.MSELoss(), False)
    raise ModelSpecError(None, "--loss", f"expected cross_entropy or mse, got {choice!r}")


def _optimizer(torch: Any, choice: Any, model: Any) -> Any:
    params = list(model.parameters())
    if callable(choice):
        return choice(params)
    # foreach=True on every device: the CUDA default, so CPU traces show the same
    # aten::_foreach_* optimizer operators as GPU ones.
    if choice == "adam":
        return torch.optim.Adam(params, lr=1e-3, foreach=True)
    if choice == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, foreach=True)
    if choice == "sgd":
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=True)
    raise ModelSpecError(None, "--optimizer", f"expected adam, adamw or sgd, got {choice!r}")


def _profile_one_step(torch: Any, step: Any, device: str, kineto_path: Path, et_path: Path | None) -> None:
    """One step under torch.profiler, with the execution-trace observer when et_path is given."""
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    if device == "cuda":
        torch.cuda.synchronize()
    observer = None if et_path is None else ExecutionTraceObserver().register_callback(str(et_path))
    with profile(activities=activities, record_shapes=True, execution_trace_observer=observer) as prof:
        step()
        if device == "cuda":
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(kineto_path))
