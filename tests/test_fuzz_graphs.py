"""Property fuzzing with Hypothesis: random small graphs, networks and system configs, run
through the command line in-process. Whatever the input, the run ends with exit 0, 2 or 3,
never an internal error, never a hang; a finished run is also checked for what it claims.

The budget is fixed and derandomized (same examples on every run, no example database), so CI is
deterministic. Run longer with ``DTSIM_FUZZ_SCALE=50 python -m pytest tests/test_fuzz_graphs.py``
(and ``DTSIM_FUZZ_SEED=<n>`` for other examples than CI's).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings, strategies as st

from chakra_proto import encode_et_bytes, et_def_pb2 as pb
from chakra_proto.attrs import attr_bool, attr_bool_list, attr_int64, attr_string
from system.main import main

SCALE = float(os.environ.get("DTSIM_FUZZ_SCALE", "1"))
SEED = os.environ.get("DTSIM_FUZZ_SEED")
WALL_LIMIT = "5"  # --max-wall-seconds for every run: a hang becomes exit 2
HARD_LIMIT_S = 15.0  # a run that returns later than this is a hang the budget missed


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=None, database=None,
                    derandomize=SEED is None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def run(argv: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = int(main(argv))
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


def assert_clean(code: int, stderr: str, seconds: float) -> None:
    event(f"exit {code}")  # pytest --hypothesis-show-statistics shows the mix
    assert code in (0, 2, 3), f"exit {code}:\n{stderr}"
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    assert seconds < HARD_LIMIT_S, f"took {seconds:.1f} s"
    if code == 2:
        assert stderr.splitlines()[-1].startswith("error: "), stderr
    if code == 3:
        assert "stuck: " in stderr, stderr


# -- strategies -------------------------------------------------------------------------------

NASTY_INTS = st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63 - 1, -(2**63)])
SMALL_SIZES = st.one_of(st.integers(0, 1 << 20), NASTY_INTS)
TOPOLOGIES = ["Ring", "FullyConnected", "Switch"]
IMPLS = ["ring", "direct", "direct2", "halvingDoubling", "doubleBinaryTree", "oneRing", "oneDirect",
         "oneHalvingDoubling"]


@st.composite
def networks(draw) -> dict:
    dims = draw(st.sampled_from([[2], [3], [4], [8], [2, 2], [2, 3], [4, 2]]))
    return {
        "topology": [draw(st.sampled_from(TOPOLOGIES)) for _ in dims],
        "npus_count": dims,
        "bandwidth": [draw(st.sampled_from([0.5, 25, 50, 400.0])) for _ in dims],
        "latency": [draw(st.sampled_from([0, 1, 500, 10_000])) for _ in dims],
    }


@st.composite
def systems(draw, dims: int) -> dict:
    cfg: dict = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO", "EXPLICIT"])),
        "preferred-dataset-splits": draw(st.integers(1, 8)),
        "active-chunks-per-dimension": draw(st.integers(1, 4)),
        "endpoint-delay": draw(st.sampled_from([0, 10, 1000])),
        "collective-optimization": draw(st.sampled_from(["baseline", "localBWAware"])),
        "local-mem-bw": draw(st.sampled_from([50, 1600, 1600, 0])),
        "peak-perf": draw(st.sampled_from([1, 900, 900, 0])),
        "roofline-enabled": draw(st.sampled_from([0, 1])),
    }
    for coll in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        if draw(st.integers(0, 9)):  # now and then leave one out
            cfg[f"{coll}-implementation"] = [draw(st.sampled_from(IMPLS)) for _ in range(draw(st.integers(1, dims)))]
    return cfg


NODE_KINDS = [pb.COMP_NODE] * 4 + [pb.COMM_COLL_NODE] * 4 + [pb.COMM_SEND_NODE, pb.COMM_RECV_NODE,
                                                              pb.MEM_LOAD_NODE, pb.METADATA_NODE, pb.INVALID_NODE]
# METADATA nodes' inputs.values: PyTorch process groups; the last ones are spoilers
PG_METADATA = ["", '["[{\"pg_name\": \"3\", \"ranks\": []}]"]', '["[{\"pg_name\": \"3\", \"ranks\": [0, 1]}]"]']
BAD_PG_METADATA = ['["[{\"pg_name\": \"3\", \"ranks\": [0, 1, 1]}]"]', '["[{\"pg_name\": \"3\", \"ranks\": [0, 99]}]"]',
                   '["[{\"pg_name\": \"x\"}]"]', '["' + "[" * 3000 + '"]', "not json at all"]
COLLS = [pb.ALL_REDUCE, pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL, pb.BROADCAST]
# At most one spoiler per scenario, so that the rest of the graph still runs and the spoiled
# node is reached (several at once mostly stop at the first validation error).
SPOILERS = ["drop_attr", "wrong_type", "negative", "dangling", "cycle", "bad_peer", "bad_metadata", "odd_rank"]


@st.composite
def node_specs(draw, index: int) -> dict:
    """One well-formed node, described independently of the rank (a rank fills in its peers)."""
    kind = draw(st.sampled_from(NODE_KINDS))
    deps = draw(st.lists(st.integers(0, max(0, index - 1)), max_size=2)) if index else []
    return {"kind": kind, "deps": sorted(set(deps)), "size": draw(SMALL_SIZES),
            "duration": draw(st.one_of(st.integers(0, 100_000), st.sampled_from([2**40]))),
            "coll": draw(st.sampled_from(COLLS)), "peer": -1,
            "tag": draw(st.integers(0, 3)), "ops": draw(st.one_of(st.none(), st.integers(0, 10**9))),
            "involved": draw(st.one_of(st.none(), st.lists(st.booleans(), min_size=1, max_size=3))),
            "pg": draw(st.sampled_from([None, None, None, "0", "1", "3"])),
            "pg_meta": draw(st.sampled_from(PG_METADATA)), "spoil": None}


def _size(spec: dict) -> int:
    return min(abs(spec["size"]), 2**63 - 1)  # int64 attributes


def build_node(spec: dict, nid: int, rank: int, npus: int) -> pb.Node:
    n = pb.Node(id=nid, name=f"n{nid}", type=spec["kind"])
    n.data_deps.extend(spec["deps"])
    n.duration_micros = spec["duration"] // 1000
    n.attr.append(attr_bool("is_cpu_op", False))
    kind = spec["kind"]
    if kind == pb.COMP_NODE:
        n.attr.append(attr_int64("duration_ns", spec["duration"]))
        if spec["ops"] is not None:
            n.attr.extend([attr_int64("num_ops", spec["ops"]), attr_int64("tensor_size", _size(spec) % (1 << 30))])
    elif kind == pb.COMM_COLL_NODE:
        n.attr.extend([attr_int64("comm_type", spec["coll"]), attr_int64("comm_size", _size(spec))])
        if spec["involved"] is not None:
            n.attr.append(attr_bool_list("involved_dim", spec["involved"]))
        if spec["pg"] is not None:
            n.attr.append(attr_string("pg_name", spec["pg"]))
    elif kind in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
        # peer -1: the ring neighbour (a pattern that pairs up); otherwise a fixed rank
        step = 1 if kind == pb.COMM_SEND_NODE else -1
        peer = (rank + step) % npus if spec["peer"] < 0 else spec["peer"]
        src, dst = (rank, peer) if kind == pb.COMM_SEND_NODE else (peer, rank)
        n.attr.extend([attr_int64("comm_src", src), attr_int64("comm_dst", dst),
                       attr_int64("comm_tag", spec["tag"]), attr_int64("comm_size", _size(spec) % (1 << 24))])
    elif kind == pb.METADATA_NODE and spec["pg_meta"]:
        n.inputs.values = spec["pg_meta"]
    elif kind == pb.MEM_LOAD_NODE:
        n.attr.append(attr_int64("tensor_size", _size(spec) % (1 << 30)))
    spoil = spec["spoil"]
    if spoil == "drop_attr" and len(n.attr) > 1:
        del n.attr[-1]
    elif spoil == "wrong_type" and len(n.attr) > 1:
        n.attr[-1].CopyFrom(attr_string(n.attr[-1].name, "oops"))
    elif spoil == "negative":
        n.attr.append(attr_int64("comm_size" if kind != pb.COMP_NODE else "duration_ns", -5))
        n.attr.insert(1, n.attr.pop())  # first match wins: put it before the good one
    elif spoil == "dangling":  # a dangling or self control dependency is only a warning
        n.data_deps.append(nid + 1000)
    elif spoil == "cycle":
        n.data_deps.append(nid)
    return n


@st.composite
def scenarios(draw) -> dict:
    net = draw(networks())
    npus = 1
    for d in net["npus_count"]:
        npus *= d
    sysc = draw(systems(len(net["npus_count"])))
    specs = [draw(node_specs(i)) for i in range(draw(st.integers(1, 7)))]
    odd_rank = odd_specs = None
    spoil = draw(st.one_of(st.none(), st.sampled_from(SPOILERS)))
    if spoil == "odd_rank":  # one rank runs another graph
        odd_rank = draw(st.integers(0, npus - 1))
        odd_specs = [draw(node_specs(i)) for i in range(draw(st.integers(1, 4)))]
    elif spoil is not None:
        at = draw(st.integers(0, len(specs) - 1))
        if spoil == "bad_peer":
            specs[at] = {**specs[at], "kind": draw(st.sampled_from([pb.COMM_SEND_NODE, pb.COMM_RECV_NODE])),
                         "peer": draw(st.sampled_from([0, 1, 9]))}
        elif spoil == "bad_metadata":
            specs[at] = {**specs[at], "kind": pb.METADATA_NODE, "pg_meta": draw(st.sampled_from(BAD_PG_METADATA))}
        else:
            specs[at] = {**specs[at], "spoil": spoil}
    memory = draw(st.sampled_from([None, "PER_NPU_MEMORY_EXPANSION", "MEMORY_POOL", "NO_MEMORY_EXPANSION"]))
    groups = draw(st.sampled_from([None, {"1": [0, 1]}, {"1": list(range(npus))}]))
    return {"net": net, "npus": npus, "system": sysc, "specs": specs, "odd_rank": odd_rank,
            "odd_specs": odd_specs, "memory": memory, "groups": groups,
            "backend": draw(st.sampled_from(["congestion-unaware", "congestion-aware"])),
            "symmetry": draw(st.booleans())}


def write_scenario(s: dict, d: Path) -> list[str]:
    (d / "net.yml").write_text(yaml.safe_dump(s["net"]))
    (d / "sys.json").write_text(json.dumps(s["system"]))
    meta = pb.GlobalMetadata(version="0.0.4")
    for r in range(s["npus"]):
        specs = s["odd_specs"] if r == s["odd_rank"] else s["specs"]
        nodes = [build_node(spec, i, r, s["npus"]) for i, spec in enumerate(specs)]
        (d / f"w.{r}.et").write_bytes(encode_et_bytes(meta, nodes))
    argv = ["--workload", str(d / "w"), "--network", str(d / "net.yml"), "--system", str(d / "sys.json"),
            "--backend", s["backend"], "--max-wall-seconds", WALL_LIMIT, "--max-events", "2000000",
            "--quiet", "--report", str(d / "report.json")]
    if s["memory"]:
        (d / "mem.json").write_text(json.dumps({"memory-type": s["memory"], "remote-mem-latency": 100,
                                                "remote-mem-bw": 10}))
        argv += ["--remote-memory-configuration", str(d / "mem.json")]
    if s["groups"]:
        (d / "groups.json").write_text(json.dumps(s["groups"]))
        argv += ["--comm-group-configuration", str(d / "groups.json")]
    if not s["symmetry"]:
        argv.append("--no-symmetry")
    return argv


@fuzz_settings(800)
@given(scenarios())
def test_random_graphs_and_configs_never_crash_or_hang(s: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        argv = write_scenario(s, Path(tmp))
        code, _, err, seconds = run(argv)
        assert_clean(code, err, seconds)
        if code == 0:
            report = json.loads((Path(tmp) / "report.json").read_text())
            finish = [r["finish_cycles"] for r in report["ranks"]]
            assert len(finish) == s["npus"] and all(isinstance(f, int) and f >= 0 for f in finish)
        else:
            assert not (Path(tmp) / "report.json").exists(), "a failed run left a report"


@fuzz_settings(200)
@given(scenarios())
def test_symmetric_fast_path_agrees_with_every_rank_simulated(s: dict) -> None:
    """The representative-rank shortcut must not change the answer, nor turn an error into a result."""
    s = {**s, "backend": "congestion-unaware", "odd_rank": None, "groups": None, "memory": None}
    with tempfile.TemporaryDirectory() as tmp:
        argv = write_scenario({**s, "symmetry": True}, Path(tmp))
        fast = run(argv)
        slow = run(argv + ["--no-symmetry"])
    for code, _, err, seconds in (fast, slow):
        assert_clean(code, err, seconds)
    assert fast[0] == slow[0], (fast[2], slow[2])
    if fast[0] == 0:
        assert fast[1].rsplit(";", 1)[0] == slow[1].rsplit(";", 1)[0]  # all but the wall time


# -- config files full of wrong values ------------------------------------------------------------

NASTY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), NASTY_INTS,
              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
              st.sampled_from(["Ring", "ring", "LIFO", "1e3", "direct0", "PER_NPU_MEMORY_EXPANSION"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
)
NET_KEYS = ["topology", "npus_count", "bandwidth", "latency", "backend", "ns3", "congestion_aware"]
SYS_KEYS = ["scheduling-policy", "endpoint-delay", "active-chunks-per-dimension", "preferred-dataset-splits",
            "collective-optimization", "local-mem-bw", "roofline-enabled", "peak-perf", "all-reduce-implementation",
            "all-gather-implementation", "replay-only", "track-local-mem", "per-node-custom-implementation",
            "all-reduce-implementation-custom", "L", "boost-mode"]
MEM_KEYS = ["memory-type", "remote-mem-latency", "remote-mem-bw", "num-npus-per-node", "num-nodes"]


def _dump(data: object, yaml_form: bool) -> str:
    if yaml_form:
        return yaml.safe_dump(data)
    return json.dumps(data, allow_nan=True)


@st.composite
def spoiled(draw, base: dict, keys: list[str]) -> dict:
    """A good config with a few keys replaced by nasty values (or removed)."""
    data = dict(base)
    for key in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True)):
        if draw(st.integers(0, 5)) == 0:
            data.pop(key, None)
        else:
            data[key] = draw(NASTY)
    return data


GOOD_NET = {"topology": ["Ring"], "npus_count": [4], "bandwidth": [50], "latency": [500]}
GOOD_SYS = {"scheduling-policy": "LIFO", "preferred-dataset-splits": 4, "local-mem-bw": 1600,
            "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"]}
GOOD_MEM = {"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 10}


def _small_workload(d: Path) -> None:
    meta = pb.GlobalMetadata(version="0.0.4")
    for r in range(4):
        nodes = [pb.Node(id=0, name="c", type=pb.COMP_NODE, duration_micros=1),
                 pb.Node(id=1, name="ar", type=pb.COMM_COLL_NODE, data_deps=[0]),
                 pb.Node(id=2, name="ld", type=pb.MEM_LOAD_NODE, data_deps=[1])]
        nodes[1].attr.extend([attr_int64("comm_type", pb.ALL_REDUCE), attr_int64("comm_size", 65536)])
        nodes[2].attr.append(attr_int64("tensor_size", 4096))
        (d / f"w.{r}.et").write_bytes(encode_et_bytes(meta, nodes))


@fuzz_settings(600)
@given(which=st.sampled_from(["network", "system", "memory", "groups"]), yaml_form=st.booleans(),
       data=st.data())
def test_config_files_with_wrong_values_are_rejected_cleanly(which: str, yaml_form: bool, data) -> None:
    net, sysc, mem, groups = GOOD_NET, GOOD_SYS, GOOD_MEM, None
    if which == "network":
        net = data.draw(spoiled(GOOD_NET, NET_KEYS))
    elif which == "system":
        sysc = data.draw(spoiled(GOOD_SYS, SYS_KEYS))
    elif which == "memory":
        mem = data.draw(spoiled(GOOD_MEM, MEM_KEYS))
    else:
        groups = data.draw(st.one_of(NASTY, st.dictionaries(st.sampled_from(["1", "2", "0", "x"]), NASTY)))
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        _small_workload(d)
        (d / "net.yml").write_text(_dump(net, True))
        sys_name = "sys.yml" if yaml_form else "sys.json"
        (d / sys_name).write_text(_dump(sysc, yaml_form))
        (d / "mem.json").write_text(_dump(mem, False))
        argv = ["--workload", str(d / "w"), "--network", str(d / "net.yml"), "--system", str(d / sys_name),
                "--remote-memory-configuration", str(d / "mem.json"), "--quiet",
                "--max-wall-seconds", WALL_LIMIT]
        if groups is not None:
            (d / "groups.json").write_text(_dump(groups, False))
            argv += ["--comm-group-configuration", str(d / "groups.json")]
        code, _, err, seconds = run(argv)
    assert_clean(code, err, seconds)
    if code == 2:
        assert str(d) in err or "<command line>" in err, f"the message names no file:\n{err}"
