"""--trace-out: one Kineto JSON per rank with every field HTA needs (docs/formats.md §B),
checked without HTA itself."""
from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import EXAMPLES, run_cli
from intervals import intersection_length, length, union
from system.main import run_simulation
from system.report import build_report
from system.waiting import communication_starts
from system.trace_export import COMM_STREAM, COMPUTE_STREAM, compute_kernel_name, rank_trace
from workload.builder import GraphBuilder

SYSTEM = EXAMPLES / "system" / "Ring_4chunks.json"
RING4 = "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n"
HTA_RANK_RE = re.compile(r"\"rank\":\s+(\d+)")  # hta.common.trace_parser: first match in the file
HTA_COMM_RE = re.compile(r"^nccl.*Kernel")  # hta.utils.utils.NCCL_KERNEL_RE
HTA_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _overlap_workload(d: Path) -> Path:
    for r in range(4):
        b = GraphBuilder()
        f = b.comp("fwd_gemm", 20_000 + 1000 * r)
        g1 = b.comp("bwd_layer2", 15_500, deps=[f])
        ar = b.collective("grad_ar", "ALL_REDUCE", 1 << 20, deps=[g1])
        g2 = b.comp("bwd_layer1", 30_250, deps=[g1])
        cpu = b.comp("launch", 3_000, deps=[g2], is_cpu_op=True)
        ag = b.collective("param_ag", "ALL_GATHER", 256 << 10, deps=[ar])
        b.comp("cudaMemcpyAsync-like Sync step", 4_000, deps=[ag, cpu])
        b.write(d / "w", r)
    (d / "ring.yml").write_text(RING4)
    return d / "w"


def check_hta_fields(path: Path, rank: int, world: int) -> dict:
    """Every requirement HTA 0.5.0 has on a trace file; returns the parsed trace."""
    text = path.read_text()
    assert text.startswith('{"distributedInfo": {"rank": %d, ' % rank), text[:80]
    assert int(HTA_RANK_RE.search(text).group(1)) == rank
    trace = json.loads(text)
    assert next(iter(trace)) == "distributedInfo"
    assert trace["distributedInfo"]["world_size"] == world
    events = trace["traceEvents"]
    assert events and not any("ProfilerStep" in e["name"] for e in events)
    timed = [e for e in events if e["ph"] == "X"]
    for e in timed:
        assert {"cat", "ph", "name", "pid", "tid", "ts", "dur", "args"} <= e.keys(), e
        assert e["dur"] >= 0 and e["ts"] >= 0
        if e["cat"] in GPU_CATS:
            assert e["args"]["stream"] == e["tid"] != -1
        else:  # CPU ops and the waits before communication: off the GPU streams HTA reads
            assert e["cat"] in ("cpu_op", "user_annotation") and "stream" not in e["args"]
    by_stream: dict[tuple, list] = {}
    for e in timed:
        by_stream.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for ivs in by_stream.values():  # serialised per stream (else HTA's idle time goes negative)
        ivs.sort()
        assert all(b[0] >= a[1] - 1e-9 for a, b in zip(ivs, ivs[1:])), ivs
    return trace


def test_traces_have_what_hta_needs(tmp_path: Path) -> None:
    prefix = _overlap_workload(tmp_path)
    r = run_cli("--workload", str(prefix), "--network", str(tmp_path / "ring.yml"), "--system", str(SYSTEM),
                "--trace-out", str(tmp_path / "traces"), "--quiet")
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert files == [f"rank{i}.json" for i in range(4)]  # nothing else: HTA reads every .json there
    for rank in range(4):
        trace = check_hta_fields(tmp_path / "traces" / f"rank{rank}.json", rank, 4)
        kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
        comm = [e for e in kernels if HTA_COMM_RE.match(e["name"])]
        comp = [e for e in kernels if not HTA_COMM_RE.match(e["name"])]
        assert [e["name"] for e in comm] == ["ncclDevKernel_AllReduce_RING", "ncclDevKernel_AllGather_RING"]
        assert {e["tid"] for e in comm} == {COMM_STREAM} and {e["tid"] for e in comp} == {COMPUTE_STREAM}
        assert comm[0]["args"]["bytes"] == 1 << 20 and comm[0]["args"]["busbw (GB/s)"] > 0
        assert all(not HTA_NOT_COMPUTE_RE.match(e["name"]) for e in comp)  # HTA counts them as compute
        assert comp[0] == {**comp[0], "name": "fwd_gemm", "ts": 0.0, "dur": 20 + rank, "pid": rank}
        cpu = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
        assert [e["name"] for e in cpu] == ["launch"] and cpu[0]["dur"] == 3.0


def test_trace_figures_equal_the_report(tmp_path: Path) -> None:
    """The breakdown recomputed from the trace alone, as HTA does, is the report's (to the ns)."""
    prefix = _overlap_workload(tmp_path)
    result = run_simulation(prefix, tmp_path / "ring.yml", SYSTEM)
    rep = build_report(result)
    begun = communication_starts(result.workloads)
    assert any(begun), "the skewed ranks wait for each other in this workload"
    for w, rr, b in zip(result.workloads, rep["ranks"], begun):
        trace = rank_trace(w, 4, comm_starts=b)
        ns = lambda e: (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))  # noqa: E731
        gpu = [e for e in trace["traceEvents"] if e.get("cat") in GPU_CATS]
        comp = union(ns(e) for e in gpu if not HTA_NOT_COMPUTE_RE.match(e["name"]))
        comm = union(ns(e) for e in gpu if HTA_COMM_RE.match(e["name"]))
        every = union(ns(e) for e in gpu)
        assert length(comp) == rr["compute_cycles"]
        assert length(every) - length(comp) == rr["exposed_comm_cycles"]
        # the GPU idles while the CPU works, too: HTA's idle is our idle + exposed CPU
        assert every[-1][1] - every[0][0] - length(every) == rr["idle_cycles"] + rr["exposed_cpu_cycles"]
        assert round(100 * intersection_length(comp, comm) / length(comm), 3) == rr["overlap_pct"]


def test_concurrent_receives_get_streams_of_their_own(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        if r == 1:  # two receives posted at once, and a send: three overlapping transfers
            b.recv("from0", src=0, dst=1, size=1 << 20, tag=1)
            b.recv("from2", src=2, dst=1, size=1 << 20, tag=2)
            b.send("to3", src=1, dst=3, size=1 << 20, tag=3)
        elif r == 3:
            b.recv("from1", src=1, dst=3, size=1 << 20, tag=3)
        else:
            c = b.comp("c", 7_000)
            b.send("to1", src=r, dst=1, size=1 << 20, tag=1 if r == 0 else 2, deps=[c])
        b.write(tmp_path / "p2p", r)
    (tmp_path / "ring.yml").write_text(RING4)
    result = run_simulation(tmp_path / "p2p", tmp_path / "ring.yml", SYSTEM)
    trace = rank_trace(result.workloads[1], 4)
    (tmp_path / "rank1.json").write_text(json.dumps(trace))
    check_hta_fields(tmp_path / "rank1.json", 1, 4)
    p2p = sorted((e["name"], e["args"]["peer"]) for e in trace["traceEvents"] if e["ph"] == "X")
    assert p2p == [("ncclDevKernel_Recv", 0), ("ncclDevKernel_Recv", 2), ("ncclDevKernel_Send", 3)]
    streams = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert streams == {COMM_STREAM, COMM_STREAM + 1, COMM_STREAM + 2}  # all three overlap at time 0


def test_symmetric_run_writes_every_rank(example_args: list[str], tmp_path: Path) -> None:
    r = run_cli(*example_args, "--trace-out", str(tmp_path / "t"), "--quiet")
    assert r.returncode == 0, r.stderr
    for rank in range(8):
        trace = check_hta_fields(tmp_path / "t" / f"rank{rank}.json", rank, 8)
        (k,) = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        assert k["name"] == "ncclDevKernel_AllReduce_RING" and k["dur"] == 64.44 and k["pid"] == rank


def test_compute_names_are_kept_clear_of_hta_patterns() -> None:
    for name in ("gemm", "aten::mm", "", "cudaMemcpyAsync", "Memset (Device)", "cudaStreamSynchronize",
                 "ncclKernel_fake", "my Memcpy thing"):
        out = compute_kernel_name(name)
        assert out and not HTA_NOT_COMPUTE_RE.match(out), (name, out)
    assert compute_kernel_name("aten::mm") == "aten::mm"
    assert compute_kernel_name("cudaStreamSynchronize") == "cudaStreamsynchronize"


def test_remote_memory_becomes_memcpy_on_a_comm_stream(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        b.comp("gemm", 10_000)
        b.memory("load_weights", "load", 1 << 20)
        b.write(tmp_path / "mem", r)
    (tmp_path / "ring.yml").write_text(RING4)
    (tmp_path / "mem.json").write_text('{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, '
                                       '"remote-mem-bw": 100}')
    result = run_simulation(tmp_path / "mem", tmp_path / "ring.yml", SYSTEM, remote_memory=tmp_path / "mem.json")
    trace = rank_trace(result.workloads[2], 4)
    (tmp_path / "rank2.json").write_text(json.dumps(trace))
    check_hta_fields(tmp_path / "rank2.json", 2, 4)
    (mem,) = [e for e in trace["traceEvents"] if e.get("cat") == "gpu_memcpy"]
    assert mem["name"].startswith("Memcpy ") and mem["tid"] == COMM_STREAM and mem["args"]["bytes"] == 1 << 20
    rr = build_report(result)["ranks"][2]
    assert rr["comm_cycles"] == round(mem["dur"] * 1000) and rr["compute_cycles"] == 10_000
