"""Profile optimizer step K of any training script, on every rank, without touching its code.

A global optimizer step post-hook (``torch.optim.optimizer.register_optimizer_step_post_hook``)
counts the steps of the first optimizer that steps; when step K-1 ends it starts
``torch.profiler`` with an ``ExecutionTraceObserver`` and a ``ProfilerStep#K`` annotation, when
step K ends it stops and writes, in OUT:

* ``host.{rank}.json``: the execution trace (host side);
* ``device.{rank}.json``: the Kineto trace (device side, ``distributedInfo`` included);
* ``step.{rank}.json``: the wall time of every step, measured between hooks: those up to K, and
  those the script runs after K (unprofiled, rewritten at exit), so that the profiler's own cost
  shows: the execution trace observer and Kineto slow a CPU step 1.2-3x, and the traces hold the
  slowed step (``unprofiled_median_s``, ``profiler_slowdown``).

``install_from_env`` reads ``DTSIM_COLLECT_STEP`` and ``DTSIM_COLLECT_OUT``; the ``sitecustomize`` that
world.run_script writes calls it in every Python process that ``python -m workload.collect run``
starts, so ``torchrun`` workers and ``mp.spawn`` children are profiled too. The rank is
``torch.distributed``'s when it is initialised, else ``$RANK``, else 0.
"""
from __future__ import annotations

import atexit
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

ENV_STEP, ENV_OUT, ENV_THREADS = "DTSIM_COLLECT_STEP", "DTSIM_COLLECT_OUT", "DTSIM_COLLECT_THREADS"


def current_rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0") or 0)


#: how far ahead of the slowest rank's clock reading the ranks agree to start the profiled step
START_MARGIN_S = 0.25


def line_up_ranks(step: int, margin_s: float = START_MARGIN_S) -> float | None:
    """Start the profiled step on every rank at one instant; returns how late this rank was (s).

    Starting the profiler takes a while, and not as long on every rank. A barrier does not line
    the ranks up again: gloo lets a rank leave its barrier as soon as its own messages are in,
    and a rank whose worker thread is starved leaves late (24 ms after the other on a 2-rank
    GRU, 26 ms across 4 ranks), so that rank begins the step late and the others' first
    collective waits for it inside the step, which the simulator, starting every rank at 0,
    rightly never shows. So the ranks agree on an instant of the wall clock, the latest of
    their readings plus a margin, and each sleeps until it. On one machine that is one clock
    (the skew left is the scheduler's, well under a millisecond); across machines it is as good
    as their clock synchronisation. The readings go through the process group's key-value store,
    not a collective, so the trace holds no collective of ours; this lies before the
    ProfilerStep annotation, which bounds the step. None when there is no process group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    rank, world = dist.get_rank(), dist.get_world_size()
    store = dist.distributed_c10d._get_default_store()
    keys = [f"dtsim_collect/step{step}/start/{r}" for r in range(world)]
    store.set(keys[rank], repr(time.time() + margin_s))
    store.wait(keys)
    target = max(float(store.get(k).decode()) for k in keys)
    while (left := target - time.time()) > 0.002:
        time.sleep(left - 0.001)
    while time.time() < target:     # the last ms spinning: sleep wakes up late
        pass
    return time.time() - target


class StepProfiler:
    """Profiles the step-th optimizer step (1-based) of this process."""

    def __init__(self, step: int, out_dir: str | os.PathLike) -> None:
        if step < 1:
            raise ValueError("step must be at least 1")
        self.step, self.out = step, Path(out_dir)
        self.count, self.first = 0, None
        self.times: list[float] = []
        self.t_last = time.perf_counter()
        self.prof: Any = None
        self.observer: Any = None
        self.annotation: Any = None
        self.rank: int | None = None
        self.handle: Any = None
        self.done = False
        self.start_lateness_s: float | None = None

    def install(self) -> "StepProfiler":
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.handle = register_optimizer_step_post_hook(self._after_step)
        atexit.register(self._at_exit)
        if self.step == 1:
            self._start()
        return self

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self.first is None:
            self.first = id(optimizer)
        if id(optimizer) != self.first:
            return
        self._sync()
        now = time.perf_counter()
        self.times.append(now - self.t_last)
        self.t_last = now
        self.count += 1
        if self.done:
            return
        if self.count == self.step - 1:
            self._start()
        elif self.count == self.step:
            self._stop()

    def _start(self) -> None:
        import torch
        from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

        self.rank = current_rank()
        self.out.mkdir(parents=True, exist_ok=True)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        self.observer = ExecutionTraceObserver().register_callback(str(self.out / f"host.{self.rank}.json"))
        self.prof = profile(activities=activities, record_shapes=True, execution_trace_observer=self.observer)
        self.prof.start()
        self.start_lateness_s = line_up_ranks(self.step)
        self.annotation = torch.autograd.profiler.record_function(f"ProfilerStep#{self.step}")
        self.annotation.__enter__()
        self.t_last = time.perf_counter()

    def _stop(self) -> None:
        self.annotation.__exit__(None, None, None)
        self._sync()
        self.prof.stop()
        self.observer.unregister_callback()        # closes the JSON now, not when the object dies
        self.prof.export_chrome_trace(str(self.out / f"device.{self.rank}.json"))
        self.done = True
        self._write_steps()
        self.t_last = time.perf_counter()          # writing the traces is not the next step's time

    def _write_steps(self) -> None:
        import torch

        rank = self.rank if self.rank is not None else current_rank()
        profiled = self.times[self.step - 1] if self.done else None
        # step 1 warms up (allocations, lazy init, DDP's first bucket rebuild): not a steady step
        others = [t for i, t in enumerate(self.times) if i not in (0, self.step - 1)]
        median = statistics.median(others) if others else None
        record = {"rank": rank, "step": self.step, "steps_run": self.count, "profiled": self.done,
                  "step_wall_s": [round(t, 6) for t in self.times],
                  "profiled_step_wall_s": round(profiled, 6) if profiled is not None else None,
                  "unprofiled_median_s": round(median, 6) if median is not None else None,
                  "unprofiled_steps": len(others),
                  "profiler_slowdown": round(profiled / median, 3) if profiled and median else None,
                  "threads": torch.get_num_threads(), "torch": torch.__version__, "pid": os.getpid(),
                  "start_lateness_s": (round(self.start_lateness_s, 6)
                                       if self.start_lateness_s is not None else None)}
        path = self.out / f"step.{rank}.json"
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, path)

    def _at_exit(self) -> None:
        if self.done:
            if self.count > self.step:          # the unprofiled steps after the profiled one
                self._write_steps()
        elif self.count:                        # the script stopped early: say how far it got
            if self.prof is not None:
                self.prof.stop()
            self._write_steps()

    @staticmethod
    def _sync() -> None:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()


def install_from_env() -> StepProfiler | None:
    step = os.environ.get(ENV_STEP)
    if not step:
        return None
    threads = os.environ.get(ENV_THREADS)
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    return StepProfiler(int(step), os.environ.get(ENV_OUT) or ".").install()
