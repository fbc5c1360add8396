"""From a real PyTorch DDP job to a simulation, on the CPU: collect N ranks, convert, simulate.

``python -m workload.collect --world N --backend gloo`` trains a shipped model with DDP on N local
processes and writes each rank's execution trace and Kineto trace; ``workload.convert pytorch``
turns them into Chakra ETs; the simulator runs them on a fast ring. Needs torch (the collect
extra). Each collection starts N Python processes that import torch (a few seconds each).
"""
from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import need  # noqa: E402

torch = need("torch", "collect")

from system.report import build_report  # noqa: E402
from system.simulation import run_simulation  # noqa: E402
from workload.collect.cli import main as collect_main  # noqa: E402
from workload.convert import main as convert_main  # noqa: E402

MODEL = "workload.collect.models:small_cnn"     # compute-heavy, 100 KB of gradients: the host time dominates


def _collect(out: Path, world: int, batch: int = 16) -> str:
    err = io.StringIO()
    with redirect_stderr(err):
        code = collect_main(["--model", MODEL, "--batch-size", str(batch), "--world", str(world), "--backend", "gloo",
                             "--iterations", "2", "--out", str(out)])
    assert code == 0, err.getvalue()
    return err.getvalue()


def _ring(tmp: Path, npus: int) -> Path:
    p = tmp / f"ring{npus}.yml"
    p.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    return p


def _convert_and_simulate(traces: Path, world: int, tmp: Path) -> dict:
    prefix = tmp / "et" / "step"
    assert convert_main(["pytorch", "--host-trace", str(traces / "host.{rank}.json"), "--device-trace",
                         str(traces / "device.{rank}.json"), "--ranks", str(world), "-o", str(prefix)]) == 0
    return build_report(run_simulation(prefix, _ring(tmp, world)))


def _kineto(traces: Path, r: int) -> list[dict]:
    return json.loads((traces / f"device.{r}.json").read_text())["traceEvents"]


def _check_counts(report: dict, traces: Path, world: int) -> None:
    """As many ALL_REDUCE per rank as its trace has gloo:all_reduce events (and BROADCAST as
    gloo:broadcast: DDP re-sends its bucket order in the second iteration)."""
    for r in range(world):
        names = [e.get("name") for e in _kineto(traces, r)]
        mine = [c["type"] for c in report["collectives"] if c["rank"] == r]
        assert names.count("gloo:all_reduce") >= 1, r
        assert mine.count("ALL_REDUCE") == names.count("gloo:all_reduce"), (r, mine)
        assert mine.count("BROADCAST") == names.count("gloo:broadcast"), (r, mine)
        assert len(mine) == names.count("gloo:all_reduce") + names.count("gloo:broadcast")


@pytest.fixture(scope="module")
def ddp2(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("ddp2")
    return out, _collect(out, 2)


def test_two_rank_gloo_step_simulates_coupled_and_close_to_measured(ddp2, tmp_path) -> None:
    traces, err = ddp2
    assert "threads: 1 intra-op thread(s) per process (the default" in err       # says what it chose
    meta = json.loads((traces / "collect.json").read_text())
    assert meta["threads_per_rank"] == 1 and [r["rank"] for r in meta["ranks"]] == [0, 1]
    assert all(r["profiled"] and r["profiled_step_wall_s"] > 0 and r["threads"] == 1 for r in meta["ranks"])
    # the ranks begin the profiled step together (one clock here): a barrier alone left them 24-26 ms
    # apart; what is left is the scheduler's (a loaded 2-core machine: up to ~4 ms seen)
    starts = [min(e["ts"] for e in _kineto(traces, r) if str(e.get("name", "")).startswith("ProfilerStep#"))
              for r in (0, 1)]
    assert abs(starts[0] - starts[1]) < 10_000, starts                            # us
    assert all(0 <= r["start_lateness_s"] < 0.010 for r in meta["ranks"]), meta["ranks"]
    report = _convert_and_simulate(traces, 2, tmp_path)
    _check_counts(report, traces, 2)
    last = [max((c for c in report["collectives"] if c["rank"] == r), key=lambda c: c["end_cycles"]) for r in (0, 1)]
    assert abs(last[0]["end_cycles"] - last[1]["end_cycles"]) <= 10_000         # the ranks are coupled
    steps = [max(e["dur"] for e in _kineto(traces, r) if str(e.get("name", "")).startswith("ProfilerStep#"))
             for r in (0, 1)]
    end_us = report["totals"]["end_cycles"] / 1e3
    # the simulated step replays the ops' own durations; the measured ProfilerStep also holds the
    # time the two ranks sat descheduled on a loaded 2-core machine, so it may only be longer
    assert 0.5 * max(steps) <= end_us <= 1.25 * max(steps), (end_us, steps)


def test_cpu_times_of_a_ddp_trace_convert_to_triosim_ddp(ddp2, tmp_path) -> None:
    traces, _ = ddp2
    csvs = tmp_path / "tri"
    with redirect_stderr(io.StringIO()):
        assert collect_main(["convert", "--execution-trace", str(traces / "host.0.json"), "--profiler-trace",
                             str(traces / "device.0.json"), "--cpu-times", "--out", str(csvs)]) == 0
    stages = [line.rsplit(",", 2)[1] for line in (csvs / "trace.csv").read_text().splitlines()[1:]]
    assert "forward" not in stages[stages.index("backward"):]          # DDP's post-backward ops are backward
    assert convert_main(["triosim", "--trace-dir", str(csvs), "--batch-size", "16", "--dp", "2",
                         "--dp-mode", "ddp", "-o", str(tmp_path / "et" / "dp2")]) == 0


SCRIPT = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 32)
for _ in range(int(sys.argv[1])):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
"""


def test_run_profiles_step_k_of_an_unmodified_script(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "traces"
    printed = io.StringIO()
    with redirect_stderr(io.StringIO()), redirect_stdout(printed):
        assert collect_main(["run", "--step", "2", "--out", str(out), "--", str(script), "5"]) == 0
    meta = json.loads((out / "collect.json").read_text())
    assert [(r["rank"], r["step"], r["steps_run"], r["profiled"]) for r in meta["ranks"]] == [(0, 2, 5, True)]
    # the steps after the profiled one are timed too (step 1 warms up): the profiler's cost shows
    (r,) = meta["ranks"]
    assert r["unprofiled_steps"] == 3 and len(r["step_wall_s"]) == 5
    assert r["unprofiled_median_s"] == pytest.approx(sorted(r["step_wall_s"][2:])[1], abs=1e-6)
    assert r["profiler_slowdown"] == pytest.approx(r["profiled_step_wall_s"] / r["unprofiled_median_s"], rel=1e-2)
    assert "so the profiler slowed the step" in printed.getvalue()
    assert any(e.get("name") == "ProfilerStep#2" for e in _kineto(out, 0))
    assert convert_main(["pytorch", "--host-trace", str(out / "host.{rank}.json"), "--device-trace",
                         str(out / "device.{rank}.json"), "--ranks", "1", "-o", str(tmp_path / "et" / "s")]) == 0


@pytest.mark.slow
def test_four_rank_gloo_step(tmp_path) -> None:
    traces = tmp_path / "ddp4"
    _collect(traces, 4, batch=8)
    report = _convert_and_simulate(traces, 4, tmp_path)
    _check_counts(report, traces, 4)
    ends = [max(c["end_cycles"] for c in report["collectives"] if c["rank"] == r) for r in range(4)]
    assert max(ends) - min(ends) <= 10_000                                       # coupled


TORCH_TEARDOWN_ABORTS = (b"terminate called without an active exception", b"___pthread_mutex_lock: Assertion")


def _torchrun(args: list[str], timeout_s: float) -> tuple[int | None, bytes]:
    """Run torchrun in its own session: (exit code, stderr), or (None, stderr so far) when it is still
    running after ``timeout_s``, when the launcher and its workers are killed together."""
    import os
    import signal
    import subprocess

    p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[2], start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout_s)
        return p.returncode, err
    except subprocess.TimeoutExpired:
        # torchrun starts its workers in sessions of their own: kill the launcher's whole tree
        for pid in [*_descendants(p.pid), p.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, err = p.communicate()
        return None, err


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


@pytest.mark.slow
def test_run_under_torchrun(tmp_path) -> None:
    from workload.collect.world import free_port

    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n"
                      "from torch.nn.parallel import DistributedDataParallel as DDP\n"
                      + SCRIPT.replace("model = ", "model = DDP(").replace("Linear(64, 4))", "Linear(64, 4)))"))
    tries = []
    for attempt in range(3):
        out = tmp_path / f"traces{attempt}"  # a killed try's files are not this one's
        code, err = _torchrun(["--nproc-per-node", "2", "--master-port", str(free_port()), "-m", "workload.collect",
                               "run", "--step", "2", "--out", str(out), "--", str(script), "3"], timeout_s=180)
        tries.append("hung" if code is None else f"exit {code}")
        # what proves nothing about the collection either way, and is tried again: torch's gloo and
        # profiler threads aborting a finished worker in teardown (script_runner now skips the
        # interpreter's; torch's own exit handlers remain), and a gloo worker that hangs on a loaded
        # machine (seen once in some thirty CI-like runs, never twice in a row)
        if code == 0 or (code is not None and not any(s in err for s in TORCH_TEARDOWN_ABORTS)):
            break
    assert code == 0, f"tries: {tries}\n" + err.decode(errors="replace")[-3000:]
    _check_counts(_convert_and_simulate(out, 2, tmp_path), out, 2)


@pytest.mark.slow
def test_a_real_pipeline_blocking_on_send_and_recv_is_not_host_time(tmp_path) -> None:
    """Two pipeline stages of dtsim_tools/realtraces/train.py pass activations and gradients with
    blocking ``dist.send`` / ``dist.recv``. gloo records each on the calling thread until ``wait()``
    returned: time the rank was blocked on its peer, which the SEND and RECV nodes simulate. Each
    rank's CPU nodes then hold its step less those records (they held the whole step: the
    transfers counted twice), no CPU node is a gloo record, and every transfer is waited for."""
    from chakra_proto import et_def_pb2 as pb
    from workload.collect.world import free_port
    from workload.graph import load_graph

    train = Path(__file__).resolve().parents[2] / "dtsim_tools" / "realtraces" / "train.py"
    for attempt in range(3):
        out = tmp_path / f"traces{attempt}"
        code, err = _torchrun(["--nproc-per-node", "2", "--master-port", str(free_port()), "-m", "workload.collect",
                               "run", "--step", "2", "--threads", "1", "--out", str(out), "--", str(train),
                               "--model", "pipeline", "--steps", "3"], timeout_s=180)
        if code == 0 or (code is not None and not any(s in err for s in TORCH_TEARDOWN_ABORTS)):
            break
    assert code == 0, err.decode(errors="replace")[-3000:]
    prefix = tmp_path / "et" / "step"
    assert convert_main(["pytorch", "--host-trace", str(out / "host.{rank}.json"), "--device-trace",
                         str(out / "device.{rank}.json"), "--ranks", "2", "-o", str(prefix)]) == 0
    for r in range(2):
        events = _kineto(out, r)
        (step,) = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
        lo, hi = step["ts"], step["ts"] + step["dur"]
        blocked = sum(e["dur"] for e in events if e.get("tid") == step["tid"] and e.get("ph") == "X"
                      and str(e.get("name", "")).startswith(("gloo:send", "gloo:recv")) and lo <= e["ts"] <= hi)
        g = load_graph(tmp_path / "et" / f"step.{r}.et")
        cpu = [n for n in g.nodes.values() if n.is_cpu_op]
        assert not [n.name for n in cpu if n.name.startswith("gloo:")]
        p2p = [n for n in g.nodes.values() if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)]
        assert len(p2p) == 8                                            # 4 micro-batches, each way
        waited = {p for n in g.nodes.values() for p in n.parents}
        assert all(n.id in waited for n in p2p)
        cpu_us = sum(n.duration_ns for n in cpu) / 1000
        assert blocked > 0 and cpu_us <= step["dur"] - 0.9 * blocked, (r, cpu_us, step["dur"], blocked)
    finish = run_simulation(prefix, _ring(tmp_path, 2)).finish_ns
    assert len(finish) == 2 and min(finish) > 0
