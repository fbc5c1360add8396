"""The main command as a user runs it: output, report, aliases, bad input (exit 2), stuck (exit 3)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb, read_et, write_et
from conftest import EXAMPLES, run_cli
from workload.builder import GraphBuilder


def test_bundled_example_runs(example_args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = run_cli(*example_args, "--report", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:8] == [f"sys[{i}] finished, 64440 cycles (6.444e-05 s)" for i in range(8)]
    assert "end 64440 cycles" in lines[-1]
    rep = json.loads(out.read_text())
    assert rep["ranks"][0] == {**rep["ranks"][0], "rank": 0, "finish_cycles": 64440, "finish_seconds": 6.444e-05}
    assert [x["rank"] for x in rep["ranks"]] == list(range(8))
    for x in rep["ranks"]:
        assert x["compute_cycles"] + x["exposed_comm_cycles"] + x["idle_cycles"] == x["finish_cycles"]


def test_astra_sim_flag_aliases(anchors: Path) -> None:
    r = run_cli(
        f"--workload-configuration={anchors}/workload/microbenchmarks/reduce_scatter/4npus_1MB/reduce_scatter",
        f"--system-configuration={anchors}/system/examples/native_collectives/Ring_4chunks.json",
        f"--remote-memory-configuration={anchors}/remote_memory/no_memory_expansion.json",
        f"--network-configuration={anchors}/network/examples/Ring_4npus.yml",
    )
    assert r.returncode == 0, r.stderr
    assert "sys[3] finished, 22240 cycles" in r.stdout


def test_help_explains_every_flag() -> None:
    r = run_cli("--help")
    assert r.returncode == 0
    for flag in ("--workload", "--network", "--system", "--backend", "--report", "congestion-unaware",
                 "--comm-group-configuration", "--remote-memory-configuration", "--num-queues-per-dim"):
        assert flag in r.stdout


def test_two_runs_print_identical_output(example_args: list[str], tmp_path: Path) -> None:
    a = run_cli(*example_args, env={"PYTHONHASHSEED": "1"})
    b = run_cli(*example_args, env={"PYTHONHASHSEED": "2"})
    strip = lambda s: s.rsplit(";", 1)[0]  # the wall-clock time differs
    assert a.returncode == b.returncode == 0
    assert strip(a.stdout) == strip(b.stdout)


def test_backend_key_in_yaml(example_args: list[str], tmp_path: Path) -> None:
    net = tmp_path / "net.yml"
    net.write_text((EXAMPLES / "network" / "Ring_8npus.yml").read_text() + "backend: congestion-aware\n")
    args = list(example_args)
    args[args.index("--network") + 1] = str(net)
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert "(congestion-aware)" in r.stdout


# -- bad input: exit 2, one paragraph naming the file, never a traceback -------------------------

def _assert_bad(r, *fragments: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ")
    for f in fragments:
        assert f in r.stderr, (f, r.stderr)


def _copy_example(tmp_path: Path) -> Path:
    d = tmp_path / "wl"
    shutil.copytree(EXAMPLES / "workload" / "all_reduce_8npus_1MB", d)
    return d / "all_reduce"


def _with(example_args: list[str], flag: str, value: str) -> list[str]:
    args = list(example_args)
    args[args.index(flag) + 1] = value
    return args


def test_missing_workload(example_args: list[str], tmp_path: Path) -> None:
    _assert_bad(run_cli(*_with(example_args, "--workload", str(tmp_path / "nope"))), str(tmp_path / "nope"), "not found")


def test_truncated_et(example_args: list[str], tmp_path: Path) -> None:
    prefix = _copy_example(tmp_path)
    f = Path(f"{prefix}.3.et")
    f.write_bytes(f.read_bytes()[:-5])
    _assert_bad(run_cli(*_with(example_args, "--workload", str(prefix))), str(f), "truncated")


def test_non_protobuf_et(example_args: list[str], tmp_path: Path) -> None:
    prefix = _copy_example(tmp_path)
    f = Path(f"{prefix}.0.et")
    f.write_bytes(b"\x0bhello world, not a protobuf at all\n")
    _assert_bad(run_cli(*_with(example_args, "--workload", str(prefix))), str(f), "not a Chakra ET file")


def _write_graph(prefix: Path, npus: int, edit) -> None:  # noqa: ANN001
    for r in range(npus):
        b = GraphBuilder()
        a = b.comp("a", 1000)
        b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[a])
        edit(b.nodes)
        b.write(prefix, r)


def test_cyclic_dependency(example_args: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "cyc"
    _write_graph(prefix, 8, lambda nodes: nodes[0].data_deps.append(1))
    _assert_bad(run_cli(*_with(example_args, "--workload", str(prefix))), f"{prefix}.0.et", "cycle", "0 -> 1")


def test_dependency_on_missing_node(example_args: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "dang"
    _write_graph(prefix, 8, lambda nodes: nodes[1].data_deps.append(42))
    _assert_bad(run_cli(*_with(example_args, "--workload", str(prefix))), f"{prefix}.0.et", "node 1", "node 42")


def test_collective_without_size(example_args: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "nosize"
    _write_graph(prefix, 8, lambda nodes: nodes[1].attr.pop(2))  # is_cpu_op, comm_type, [comm_size]
    _assert_bad(run_cli(*_with(example_args, "--workload", str(prefix))), "node 1", "comm_size")


def test_unknown_node_type(example_args: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "ut"
    _write_graph(prefix, 8, lambda nodes: setattr(nodes[0], "type", 42))
    _assert_bad(run_cli(*_with(example_args, "--workload", str(prefix))), "node 0", "unknown node type 42")


@pytest.mark.parametrize("yaml_text,fragments", [
    ("topology: [Ring]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\nfoo: 1\n", ["key 'foo'", "unknown key"]),
    ("topology: [Ring, Ring]\nnpus_count: [8]\nbandwidth: [50, 50]\nlatency: [500, 500]\n", ["npus_count", "1 entries", "has 2"]),
    ("topology: [Torus]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n", ["Torus", "Ring, FullyConnected or Switch"]),
    ("topology: [Ring]\nnpus_count: [8]\nbandwidth: [-1]\nlatency: [500]\n", ["bandwidth", "> 0"]),
    ("topology: [Ring\n", ["not valid YAML", "line"]),
])
def test_bad_network_yaml(example_args: list[str], tmp_path: Path, yaml_text: str, fragments: list[str]) -> None:
    net = tmp_path / "net.yml"
    net.write_text(yaml_text)
    _assert_bad(run_cli(*_with(example_args, "--network", str(net))), str(net), *fragments)


def test_rank_count_differs_from_et_files(example_args: list[str], tmp_path: Path) -> None:
    net = tmp_path / "net16.yml"
    net.write_text("topology: [Ring]\nnpus_count: [16]\nbandwidth: [50]\nlatency: [500]\n")
    _assert_bad(run_cli(*_with(example_args, "--network", str(net))), "16 NPUs", "8 rank file(s)")


def test_bad_system_json(example_args: list[str], tmp_path: Path) -> None:
    s = tmp_path / "sys.json"
    s.write_text('{"scheduling-policy": "LIFO", "preferred-dataset-splits": "four"}')
    _assert_bad(run_cli(*_with(example_args, "--system", str(s))), str(s), "preferred-dataset-splits", "integer")


# -- stuck: exit 3 with what each rank waits for ---------------------------------------------------

def test_collectives_in_different_orders_are_reported_stuck(example_args: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "order"
    for r in range(8):
        b = GraphBuilder()
        first, second = ("ALL_REDUCE", "ALL_GATHER") if r else ("ALL_GATHER", "ALL_REDUCE")
        x = b.collective("x", first, 1 << 20)
        b.collective("y", second, 1 << 20, deps=[x])
        b.write(prefix, r)
    r = run_cli(*_with(example_args, "--workload", str(prefix)))
    assert r.returncode == 3, r.stderr
    assert "stuck" in r.stderr and "rank 0:" in r.stderr and "rank 7:" in r.stderr
    assert "ALL_GATHER" in r.stderr and "never completed" in r.stderr and "waits for node(s) 0" in r.stderr


def test_receive_without_send_is_reported_stuck(example_args: list[str], tmp_path: Path) -> None:
    prefix = tmp_path / "p2p"
    for r in range(8):
        b = GraphBuilder()
        if r == 1:
            b.recv("r", src=0, dst=1, size=4096, tag=7)
        else:
            b.comp("c", 1000)
        b.write(prefix, r)
    r = run_cli(*_with(example_args, "--workload", str(prefix)))
    assert r.returncode == 3
    assert "rank 1:" in r.stderr and "no matching send from rank 0 with tag 7" in r.stderr
    assert "receive on rank 1 from rank 0" in r.stderr


# -- one-step TrioSim: a trace folder as --workload ------------------------------------------------

def test_triosim_folder_one_step(tmp_path: Path) -> None:
    base = ["--network", str(EXAMPLES / "network" / "triosim_like.yml"),
            "--system", str(EXAMPLES / "triosim" / "triosim_like_system.json"), "--quiet"]
    one_npu = ["--network", str(EXAMPLES / "network" / "Ring_1npu.yml"), *base[2:]]
    single = run_cli("--workload", str(EXAMPLES / "triosim" / "vgg13"), "--batch-size", "128", *one_npu)
    assert single.returncode == 0, single.stderr
    assert "end 94038000 cycles" in single.stdout  # Σ Operator_cudatimenooverlap, exactly
    half = run_cli("--workload", str(EXAMPLES / "triosim" / "vgg13"), "--batch-size", "128",
                   "--batch-size-sim", "64", *one_npu)
    assert "end 47019000 cycles" in half.stdout
    dp = run_cli("--workload", str(EXAMPLES / "triosim" / "vgg13"), "--batch-size", "128", "--dp", "8",
                 "--triosim-out", str(tmp_path / "vgg" / "p"), *base)
    assert dp.returncode == 0, dp.stderr
    assert (tmp_path / "vgg" / "p.7.et").exists()
    end = int(dp.stdout.split("end ")[1].split()[0])
    assert end > 94038000


def test_triosim_folder_without_triosim_out_leaves_no_files(tmp_path: Path) -> None:
    """The converted Chakra files go to a temporary folder that the run removes (they were left
    behind, a folder per run)."""
    r = run_cli("--workload", str(EXAMPLES / "triosim" / "vgg13"), "--batch-size", "128", "--dp", "8", "--quiet",
                "--network", str(EXAMPLES / "network" / "triosim_like.yml"), env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert not list(tmp_path.glob("dtsim-triosim-*"))
    bad = run_cli("--workload", str(EXAMPLES / "triosim" / "vgg13"), "--batch-size", "128", "--dp", "8", "--quiet",
                  "--network", str(EXAMPLES / "network" / "triosim_like.yml"), "--max-events", "3",
                  env={"TMPDIR": str(tmp_path)})
    assert bad.returncode == 2 and not list(tmp_path.glob("dtsim-triosim-*"))


def test_layout_flags_need_a_trace_folder(example_args: list[str]) -> None:
    _assert_bad(run_cli(*example_args, "--dp", "8"), "--dp", "TrioSim trace folder")


def test_layout_must_match_the_network() -> None:
    r = run_cli("--workload", str(EXAMPLES / "triosim" / "vgg13"), "--batch-size", "128", "--dp", "4",
                "--network", str(EXAMPLES / "network" / "triosim_like.yml"))
    _assert_bad(r, "dp×tp×pp = 4", "8 NPUs")
