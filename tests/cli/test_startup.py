"""Start-up: a plain run imports only what it uses (issue 13: a tiny workload must not pay for
imports it does not use; the target is 0.1 s over the bare interpreter for 16 ranks).

Wall times are too noisy to assert on shared CI machines, so the test names the modules a plain
analytical run must not import, each for what it would cost: a regression shows up as a name.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workload.builder import write_collective_microbenchmark

ROOT = Path(__file__).resolve().parents[2]
UNUSED = {
    # the TrioSim converter, the plotter, the trace exporter: only when asked for
    "workload.triosim.converter": "converter", "workload.triosim.trace": "converter", "system.plot": "--plot",
    "system.trace_export": "--trace-out", "numpy": "plots", "gzip": "compressed ETs", "traceback": "--debug",
    "csv": "converter", "fractions": "converter",
    # the protobuf runtime (~30 ms): a few ET nodes are read by chakra_proto/wire.py
    "google.protobuf": "wire.py", "chakra_proto.et_def_pb2": "wire.py", "workload.builder": "the ET writer",
    # PyYAML (~25 ms): a flat network file (or a JSON one) is read by network/flat_yaml.py
    "yaml": "flat_yaml.py",
    "system.outputs": "output flags only", "workload.input_kind": "error messages only",
    # dataclasses pulls inspect, ast, dis, tokenize (~13 ms): the configs are NamedTuples
    "dataclasses": "NamedTuple", "inspect": "NamedTuple", "ast": "host-side comms only",
    "workload.host_comms": "CPU operators and sends/receives without a peer only", "workload.comm_names": "host_comms",
    # a physical graph (topology-file / topology-generator) only
    "network.graph": "graphs", "network.graph_routes": "graphs", "network.topology_file": "graphs",
    "network.topology_gen": "graphs", "network.graph_topology": "graphs", "network.analytical.graph_links": "graphs",
    # the orbit shortcut's network: only where orbits run; a workload written per orbit's declaration
    "system.shortcuts.orbit_network": "orbits", "workload.orbit_files": "a PREFIX.orbits.json only",
    # the progress bar: only where stderr is a terminal (subprocess output here is a pipe)
    "system.progress": "a terminal only",
    # argparse with gettext and locale (19 M instructions with building the parser): a plain command
    # line is parsed by system/quick_args.py; argparse's formatter would look the width up through
    # shutil (+ bz2, lzma: 0.7 MB) unless told it (system.main._help_formatter)
    "argparse": "quick_args.py", "gettext": "argparse", "locale": "argparse", "shutil": "argparse's formatter",
    # pathlib, with urllib.parse and ipaddress (~4 ms, 0.6 MB of peak RSS): network/files.py's path functions
    "pathlib": "network/files.py",
    # typing (15 M instructions, 0.5 MB): annotations only, under a module's own TYPE_CHECKING = False
    "typing": "annotations", "network.api": "annotations (a typing.Protocol)",
    # contextlib (3 M instructions): network.files.atomic_open is a class
    "contextlib": "atomic_open",
    # json (5.6 M instructions: its regular expressions): configs are read by network.files.loads_json,
    # reports written by system/report_json.py
    "json": "loads_json", "system.report_json": "--report only",
    # enum (17 M instructions, ~1 M more a class) and re (8 M): choices are network/choices.py's,
    # rank files and flat YAML are read with str methods
    "enum": "network/choices.py", "re": "workload.loader, network.flat_yaml",
    # not a module: a call of the built-in compile() other than the importer's (a module read from
    # its source where no .pyc is written) makes the interpreter's 119 AST classes on the first
    # call (~10 M instructions; exec and eval of a string do not), as Node.clone's generator did
    "compile()": "workload.graph.Node.clone is written out",
}
CASES = {  # network suffix, system file, flags
    "symmetric, default system": (".yml", None, []),
    "symmetric, ASTRA-sim JSON system": (".yaml", "examples/system/Ring_4chunks.json", []),
    "every rank simulated": (".yml", "examples/system/Ring_4chunks.json", ["--no-symmetry"]),
    "every rank simulated, congestion-aware": (".yml", None, ["--no-symmetry", "--backend", "congestion-aware"]),
    "congestion-aware": (".yml", None, ["--backend", "congestion-aware"]),
    "network as JSON": (".json", None, []),
}


@pytest.mark.parametrize("case", CASES)
def test_a_small_run_does_not_import_what_it_does_not_use(tmp_path: Path, case: str) -> None:
    suffix, system, flags = CASES[case]
    spec = write_collective_microbenchmark(tmp_path / "ar", 16, "ALL_REDUCE", 1 << 20)
    net = tmp_path / f"net{suffix}"
    net.write_text('{"topology": ["Ring"], "npus_count": [16], "bandwidth": [50.0], "latency": [500.0]}\n'
                   if suffix == ".json" else
                   "topology: [ Ring ]\nnpus_count: [ 16 ]\nbandwidth: [ 50.0 ]  # GB/s\nlatency: [ 500.0 ]  # ns\n")
    argv = ["--workload", str(spec), "--network", str(net), "--quiet", *flags]
    if system:
        argv += ["--system", str(ROOT / system)]
    code = (
        "import builtins, sys\n"
        "compiled, _compile = [], builtins.compile\n"
        "def _counting(*args, **kwargs):\n"
        "    if not sys._getframe(1).f_code.co_filename.startswith('<frozen importlib'):\n"
        "        compiled.append(args[1] if len(args) > 1 else kwargs.get('filename'))\n"
        "    return _compile(*args, **kwargs)\n"
        "builtins.compile = _counting\n"
        "from system.main import main\n"
        f"rc = main({argv!r})\n"
        f"loaded = [m for m in {sorted(UNUSED)!r} if m in sys.modules] + (['compile()'] if compiled else [])\n"
        "import json\n"
        "print(json.dumps([rc, loaded]))\n"
    )
    # -S: without site-packages (a plain run needs none of them) and without what their .pth files
    # import at start-up, which would hide our own imports of the same modules
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    rc, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0 and "end 99640 cycles" in out.stdout  # ASTRA-sim's 16-NPU 1 MB ring all-reduce
    assert loaded == [], {m: UNUSED[m] for m in loaded}


def test_runs_with_more_files_do_not_import_pathlib(tmp_path: Path) -> None:
    """No pathlib (see UNUSED) where the cases above do not go either: a folder as
    --workload, communicator groups, remote memory, a JSON report, host-side CPU ops and gloo
    collectives (workload/host_comms.py), and ETs run from a shared prefix's first file."""
    import gzip

    write_collective_microbenchmark(tmp_path / "ar" / "ar", 16, "ALL_REDUCE", 1 << 20)
    (tmp_path / "gloo").mkdir()
    for r in range(4):
        src = ROOT / "tests" / "data" / "chakra_gloo" / "ddp_bn_w4" / f"chakra.{r}.et.gz"
        (tmp_path / "gloo" / f"chakra.{r}.et").write_bytes(gzip.decompress(src.read_bytes()))
    for n in (4, 16):
        (tmp_path / f"ring{n}.yml").write_text(f"topology: [ Ring ]\nnpus_count: [ {n} ]\nbandwidth: [ 50.0 ]\n"
                                               "latency: [ 500.0 ]\n")
    (tmp_path / "groups.json").write_text('{"1": [0, 1, 2, 3, 4, 5, 6, 7]}\n')
    (tmp_path / "mem.json").write_text('{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 10, '
                                       '"remote-mem-bw": 50}\n')
    runs = [
        ["--workload", f"{tmp_path}/ar/", "--network", f"{tmp_path}/ring16.yml", "--comm-group-configuration",
         f"{tmp_path}/groups.json", "--remote-memory-configuration", f"{tmp_path}/mem.json", "--report",
         f"{tmp_path}/out/r.json", "--backend", "congestion-aware", "--no-symmetry", "--no-batching"],
        ["--workload", f"{tmp_path}/gloo/chakra", "--network", f"{tmp_path}/ring4.yml",
         "--report", f"{tmp_path}/g.json"],
        ["--workload", f"{tmp_path}/ar/ar.0.et", "--network", f"{tmp_path}/ring16.yml"],
    ]
    code = (
        "import sys, json\n"
        "from system.main import main\n"
        f"rcs = [main([*argv, '--quiet']) for argv in {runs!r}]\n"
        "print(json.dumps([rcs, 'pathlib' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    rcs, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert rcs == [0, 0, 0], out.stderr
    assert "recognised" in out.stderr and (tmp_path / "out" / "r.json").is_file() and (tmp_path / "g.json").is_file()
    assert not loaded, "a run imported pathlib"


def test_sends_that_name_their_peer_do_not_import_host_comms(tmp_path: Path) -> None:
    """host_comms.py changes CPU operators and sends/receives without a peer only: a workload of
    sends and receives that name theirs runs without it, one that omits a peer imports it."""
    from workload.builder import GraphBuilder

    (tmp_path / "ring2.yml").write_text("topology: [ Ring ]\nnpus_count: [ 2 ]\nbandwidth: [ 50.0 ]\n"
                                        "latency: [ 500.0 ]\n")
    ends = {}
    for peers in (True, False):
        prefix = tmp_path / f"peers_{peers}" / "w"
        for rank in range(2):
            b = GraphBuilder()
            c = b.comp("c", 1000)
            (b.send if rank == 0 else b.recv)("p2p", 0, 1, 1 << 16, 7, deps=[c])
            if not peers:  # neither peer nor tag, as Chakra's converter writes them
                kept = [a for a in b.nodes[-1].attr if a.name not in ("comm_src", "comm_dst", "comm_tag")]
                del b.nodes[-1].attr[:]
                b.nodes[-1].attr.extend(kept)
            b.write(prefix, rank)
        argv = ["--workload", str(prefix), "--network", str(tmp_path / "ring2.yml")]
        code = (
            "import sys, json\n"
            "from system.main import main\n"
            f"rc = main({argv!r})\n"
            "print(json.dumps([rc, 'workload.host_comms' in sys.modules]))\n"
        )
        out = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
        rc, loaded = json.loads(out.stdout.strip().splitlines()[-1])
        assert rc == 0 and loaded is not peers, out.stdout  # without peers: host_comms names the other rank of two
        ends[peers] = next(line for line in out.stdout.splitlines() if line.startswith("total:")).split(";")[0]
    assert ends[True] == ends[False]


def test_the_triosim_package_still_offers_its_names_lazily() -> None:
    import workload.triosim as t

    assert callable(t.convert_triosim) and callable(t.is_trace_dir) and t.Layout.__name__ == "Layout"
    assert callable(t.add_layout_arguments) and "convert_triosim" in dir(t)


def test_chakra_proto_still_offers_the_generated_module() -> None:
    code = "import chakra_proto\nprint(chakra_proto.et_def_pb2.Node.DESCRIPTOR.full_name)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ChakraProtoMsg.Node"
