"""Collect one step of N ranks on this machine, and the ``run`` launcher for unmodified scripts.

``collect_world`` starts N processes of workload.collect.ddp_worker (torch.distributed over
127.0.0.1 on a free port, torchrun's environment variables) and ``run_script`` runs a user's
command with the step hooks of step_hook.py in every Python process it starts (through a
``sitecustomize`` module on PYTHONPATH; a ``sitecustomize`` of the environment is shadowed). Both leave, in
OUT, ``host.{rank}.json`` + ``device.{rank}.json`` per rank (for ``workload.convert pytorch``),
``step.{rank}.json`` and a ``collect.json`` with every rank's measured step time.

Threads: each rank gets ``--threads`` intra-op threads, by default 1. With torch's default
(one per core in every process) N ranks, their gloo threads and everything else on the machine
compete for the cores, and operator times measure that contention (issue seen: 177.5 ms against
4.96 ms per step for the MLP); one thread per rank measures the model.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from network.files import write_atomic
from workload.collect.errors import ModelSpecError
from workload.collect.step_hook import ENV_OUT, ENV_STEP, ENV_THREADS

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_THREADS = 1
#: written to a temporary folder put first on PYTHONPATH: Python imports it in every process it starts
SITECUSTOMIZE = '''"""Written by python -m workload.collect run: profile step K in every Python process."""
import os
import sys

if os.environ.get("DTSIM_COLLECT_STEP"):
    try:
        from workload.collect.step_hook import install_from_env

        install_from_env()
    except Exception as exc:  # never break the user's process; say why nothing is recorded
        print(f"workload.collect: step hooks not installed in {sys.argv[0] or 'python'}: {exc}", file=sys.stderr)
'''


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(out: Path, step: int, threads: int | None, site: str | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = ([site] if site else []) + [str(_PACKAGE_ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env.update({"PYTHONPATH": os.pathsep.join(paths), ENV_STEP: str(step), ENV_OUT: str(out.resolve())})
    if threads is not None:
        env[ENV_THREADS] = str(threads)
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def collect_world(model: str, world: int, backend: str, batch_size: int, out: str | os.PathLike, *,
                  iterations: int = 4, threads: int | None = None, device: str = "cpu",
                  loss: str | None = None, optimizer: str | None = None, timeout_s: float = 600) -> dict:
    """Train ``model`` with DDP on ``world`` local processes; profile the last of ``iterations`` steps."""
    if world < 1 or iterations < 1 or batch_size < 1:
        raise ModelSpecError(None, "--world/--iterations/--batch-size", "each must be at least 1")
    if backend == "nccl" and device != "cuda":
        raise ModelSpecError(None, "--backend", "nccl needs --device cuda (and a GPU per rank); use gloo on the CPU")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    threads = DEFAULT_THREADS if threads is None else threads
    _clear_steps(out)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="dtsim-world-") as logs:
        procs = []
        for rank in range(world):
            env = _env(out, iterations, threads, site=None)
            env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            cmd = [sys.executable, "-m", "workload.collect.ddp_worker", "--model", model, "--batch-size",
                   str(batch_size), "--backend", backend, "--iterations", str(iterations), "--device", device]
            cmd += (["--loss", loss] if loss else []) + (["--optimizer", optimizer] if optimizer else [])
            log = open(Path(logs) / f"rank{rank}.log", "w+")
            procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
        _wait_all(procs, timeout_s)
    meta = {"model": model, "world": world, "backend": backend, "batch_size": batch_size, "device": device,
            "iterations": iterations, "threads_per_rank": threads}
    return write_collect_json(out, meta, world)


def _wait_all(procs: list, timeout_s: float) -> None:
    """Wait for every rank; the first one that fails ends the others (they would wait for it forever)."""
    deadline = time.monotonic() + timeout_s
    try:
        while any(p.poll() is None for p, _ in procs):
            failed = [(r, p) for r, (p, _) in enumerate(procs) if p.returncode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        for p, _ in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    failed = [(r, p.returncode, log) for r, (p, log) in enumerate(procs) if p.returncode != 0]
    if not failed:
        return
    rank, code, log = min(failed, key=lambda f: (f[1] < 0, f[0]))    # a rank that failed, not one we killed
    log.seek(0)
    tail = [line for line in log.read().splitlines() if line.strip()][-3:]
    if code == 2:                                  # the worker printed an InputError: pass it on as it is
        message = (tail[-1] if tail else "").removeprefix("error: ").removeprefix("<command line>: ")
        raise ModelSpecError(None, "", message)
    if code < 0:
        raise ModelSpecError(None, "--world", f"the ranks did not finish within {timeout_s:.0f} s")
    raise RuntimeError(f"rank {rank} exited {code}: {' | '.join(tail)}")


def run_script(command: list[str], step: int, out: str | os.PathLike, threads: int | None = None) -> tuple[int, dict]:
    """Run ``command`` (``train.py ARGS`` or any launcher, e.g. ``torchrun ... train.py``) with hooks."""
    if step < 1:
        raise ModelSpecError(None, "--step", "must be at least 1")
    if not command:
        raise ModelSpecError(None, "run", "give the script after '--', e.g. run --step 3 -- train.py --lr 0.1")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # a script runs under script_runner, which skips the interpreter teardown once the script and its exit
    # handlers are done: torch can abort a finished process there and fail a complete collection
    cmd = ([sys.executable, "-m", "workload.collect.script_runner", *command] if command[0].endswith(".py")
           else list(command))
    if "RANK" not in os.environ:               # under torchrun the other ranks' files are theirs
        _clear_steps(out)
    with tempfile.TemporaryDirectory(prefix="dtsim-collect-") as site:
        Path(site, "sitecustomize.py").write_text(SITECUSTOMIZE)
        try:
            code = subprocess.call(cmd, env=_env(out, step, threads, site=site))
        except OSError as exc:
            raise ModelSpecError(None, "run", f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    # under torchrun each worker runs this launcher: it can vouch only for its own rank
    inside_launcher = "RANK" in os.environ
    world = None if inside_launcher else int(os.environ.get("WORLD_SIZE", "0") or 0) or None
    meta = {"command": command, "step": step, "threads_per_rank": threads, "exit_code": code}
    return code, write_collect_json(out, meta, world)


def _clear_steps(out: Path) -> None:
    """Step records of an earlier run in the same folder would count as ranks of this one."""
    for old in out.glob("step.*.json"):
        old.unlink()


def write_collect_json(out: Path, meta: dict, world: int | None) -> dict:
    """Gather step.{rank}.json into collect.json; a missing or unprofiled rank is an error."""
    ranks = []
    for path in sorted(out.glob("step.*.json"), key=lambda p: int(p.name.split(".")[1])
                       if p.name.split(".")[1].isdigit() else -1):
        try:
            ranks.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    meta = {**meta, "ranks": ranks, "host_trace": "host.{rank}.json", "device_trace": "device.{rank}.json"}
    write_atomic(out / "collect.json", json.dumps(meta, indent=1) + "\n")
    short = [r for r in ranks if not r.get("profiled")]
    if short:
        r = short[0]
        raise ModelSpecError(out / f"step.{r['rank']}.json", "steps_run", f"rank {r['rank']} ran "
                             f"{r['steps_run']} optimizer step(s), fewer than the step to profile "
                             f"({r['step']}); choose a smaller --step")
    if not ranks:
        raise ModelSpecError(out, "step.*.json", "no rank recorded a step: the command ran no optimizer "
                             "step in a Python process (is it a torch.optim training script?)")
    if world and len(ranks) < world:
        have = sorted(r["rank"] for r in ranks)
        raise ModelSpecError(out, "step.*.json", f"only ranks {have} recorded their step of {world}")
    return meta
