"""Workloads written per orbit (``--per-orbit``, workload/orbit_files.py): one file per pipeline
stage and PREFIX.orbits.json give what every rank's files give, and a declaration that does not
hold is refused, never run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from system.main import main as sim_main
from system.report import build_report
from system.simulation import run_simulation
from workload.errors import WorkloadError
from workload.generate import main

SMALL = ["--num-layers", "4", "--hidden-size", "512", "--num-attention-heads", "8", "--seq-length", "256",
         "--global-batch-size", "16", "--micro-batch-size", "1"]
LAYOUTS = [
    # tp groups are servers of a rail-optimized cluster, congestion-aware
    ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--data-parallel-size", "4",
     "--gpus-per-node", "2", "--topology", "fat-tree", "--sequence-parallel", "--use-distributed-optimizer"],
    # interleaved stages, full recompute, built-in Switch dimensions, congestion-unaware
    ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--data-parallel-size", "2",
     "--gpus-per-node", "4", "--num-layers-per-virtual-pipeline-stage", "1", "--recompute-granularity", "full"],
]


def _both(tmp_path: Path, flags: list[str]) -> tuple[Path, Path]:
    a, b = tmp_path / "a" / "w", tmp_path / "b" / "w"
    assert main(["megatron", *SMALL, *flags, "-o", str(a)]) == 0
    assert main(["megatron", *SMALL, *flags, "--per-orbit", "-o", str(b)]) == 0
    return a, b


def _run(prefix: Path, **kw):
    return run_simulation(prefix, f"{prefix}.network.yml", f"{prefix}.system.json", **kw)


@pytest.mark.parametrize("flags", LAYOUTS)
def test_per_orbit_files_answer_as_every_rank_does(tmp_path: Path, flags: list[str]) -> None:
    a, b = _both(tmp_path, flags)
    ranks = len(list(a.parent.glob("w.*.et")))
    decl = json.loads(Path(f"{b}.orbits.json").read_text())
    assert sorted(int(p.name.split(".")[1]) for p in b.parent.glob("w.*.et")) == decl["representatives"]
    assert len(decl["representatives"]) == 2  # one per pipeline stage
    every = _run(a, symmetry=False, batching=False)
    orbit = _run(b)
    assert orbit.inputs["shortcut"] == "orbits" and orbit.inputs["simulated_ranks"] == 2
    assert orbit.npus_count == ranks
    assert orbit.finish_ns == every.finish_ns
    ra, rb = build_report(every), build_report(orbit)
    for r, rep in ((every, ra), (orbit, rb)):  # the terminal's report: the same less its records
        assert build_report(r, records=False) == {k: v for k, v in rep.items() if k != "collectives"}
    assert rb["ranks"] == ra["ranks"]
    assert rb["collective_summary"] == ra["collective_summary"]
    assert rb["totals"]["collectives"] == ra["totals"]["collectives"]
    assert len(rb["collectives"]) * (ranks // 2) == len(ra["collectives"])
    assert rb["network"]["bytes_per_dim"] == ra["network"]["bytes_per_dim"]
    assert rb["network"].get("link_classes") == ra["network"].get("link_classes")


def test_a_declaration_the_network_breaks_is_refused(tmp_path: Path, capsys) -> None:
    """The same per-orbit files on a fat-tree of leaves of 4 GPUs: rotating a data-parallel group
    (ranks 0, 2, 4, 6) takes leaf 0's GPUs onto two leaves, which is no automorphism, and without
    per-rank files nothing else can run: exit 2."""
    _, b = _both(tmp_path, LAYOUTS[0])
    net = tmp_path / "odd.yml"
    net.write_text("topology-generator: { shape: fat-tree, npus-per-leaf: 4, leaves: 4 }\nnpus_count: [2, 8]\n"
                   "backend: congestion-aware\n")
    rc = sim_main(["--workload", str(b), "--network", str(net), "--system", f"{b}.system.json"])
    err = capsys.readouterr().err
    assert rc == 2 and "written per orbit" in err and "orbits.json" in err
    assert "without --per-orbit" in err


@pytest.mark.parametrize("change, what", [
    (lambda d: d.update(ranks=4), "key 'ranks'"),
    (lambda d: d.update(representatives=[0, 99]), "key 'representatives'"),
    (lambda d: d.update(rotate=[[12345]]), "not in the communicator-group configuration"),
    (lambda d: d.update(rotate=[d["rotate"][0][:1]]), "hold every rank exactly once"),
    (lambda d: d.update(representatives=[1, d["representatives"][1]]), "its file is missing"),
    # one rotation fewer: more orbits than files, each file would have to stand for another orbit
    (lambda d: d.update(rotate=d["rotate"][:1]), "each orbit needs the file of its first rank"),
])
def test_a_malformed_declaration_names_its_fault(tmp_path: Path, change, what: str) -> None:
    _, b = _both(tmp_path, LAYOUTS[1])
    path = Path(f"{b}.orbits.json")
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(WorkloadError) as e:
        _run(b)
    assert what in str(e.value) and "orbits.json" in str(e.value)


def test_a_missing_representative_file_and_verify_are_refused(tmp_path: Path) -> None:
    _, b = _both(tmp_path, LAYOUTS[1])
    with pytest.raises(WorkloadError, match="--verify-shortcuts needs every rank's file"):
        _run(b, verify_shortcuts=True)
    rep = json.loads(Path(f"{b}.orbits.json").read_text())["representatives"][-1]
    Path(f"{b}.{rep}.et").unlink()
    with pytest.raises(WorkloadError, match="its file is missing"):
        _run(b)


def test_every_rank_is_refused_where_its_files_would_not_fit(tmp_path: Path, capsys) -> None:
    big = ["--num-layers", "64", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "2048",
           "--global-batch-size", "16384", "--micro-batch-size", "1", "--tensor-model-parallel-size", "8",
           "--pipeline-model-parallel-size", "16", "--data-parallel-size", "1024"]
    assert main(["megatron", *big, "-o", str(tmp_path / "w")]) == 2
    assert "--per-orbit" in capsys.readouterr().err
    assert not list(tmp_path.glob("w.*.et"))
