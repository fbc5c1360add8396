"""Golden cases: every congestion-aware run of ASTRA-sim in tests/data/astra_sim_reference/cases.json,
run through the command line in-process, per-rank cycles compared exactly. The aware backend has no
symmetric shortcut, so these run the general path (every rank simulated).

Paths in cases.json are relative to the anchor layout (the ``anchors`` fixture). Case A4's system
JSON names its custom-collective ET prefix relative to the ASTRA-sim repository root
(``examples/system/custom_collectives/...``); the anchors keep it under
``system/examples/custom_collectives/...``, so every case runs from a scratch directory in which
``examples/system`` points there (tests/data/astra_sim_reference/README.md).
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from network.config import NetworkConfig
from reference_data import DATA, load_cases
from system.main import ExitCode, main

CASES = load_cases()

# ASTRA-sim's "no-finish" cases (semantics §9.2: track-local-mem with traces that lack
# inputs/outputs never completes, exit 0). Reproducing that quirk ends stuck here (exit 3);
# refusing it, as the system layer does now, must give ASTRA-sim's own result with
# track-local-mem 0: 57156 on every rank, measured with ASTRA-sim 518bd51's aware binary on
# system/derived/hgx_h100_8gpu_notrack.json (data README). Either is accepted, nothing else.
NO_FINISH_REFUSED = {"D_aware_inputs_hgx_h100_8gpu_allreduce": 57156}
# slower than a few seconds here: 1 GB chunks through 256 NPUs, or 256-NPU switch traffic
SLOW = {"S_aware_Ring256_all_reduce_1024MB_Ring_4chunks", "S_aware_Switch256_all_reduce_1024MB_Ring_4chunks",
        "S_aware_Ring256_all_reduce_1MB_Ring_4chunks", "S_aware_Switch256_all_reduce_1MB_Ring_4chunks"}


def _cases() -> list:
    out = []
    for case in CASES:
        if case["backend"] != "aware":
            continue
        marks = []
        if case["case"] in SLOW:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(case, marks=marks, id=case["case"]))
    return out


def _flags(command: str) -> list[str]:
    """The command line's flags other than the four configuration files."""
    skip = ("--workload-configuration=", "--system-configuration=", "--network-configuration=",
            "--remote-memory-configuration=")
    words = shlex.split(command[command.index("AstraSim_"):])  # A4 starts with a "(cwd = ...)" note
    return [a for a in words[1:] if not a.startswith(skip)]


@pytest.mark.parametrize("case", _cases())
def test_aware_matches_astra_sim(case, anchors, tmp_path, monkeypatch, capsys):
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "system").symlink_to(anchors / "system" / "examples")
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "report.json"
    argv = [
        "--workload", str(anchors / case["workload"]),
        "--network", str(anchors / case["network"]),
        "--system", str(anchors / case["system"]),
        "--remote-memory-configuration", str(anchors / "remote_memory" / "no_memory_expansion.json"),
        "--backend", "congestion-aware",
        "--report", str(report),
        "--quiet",
        *_flags(case["command"]),
    ]
    rc = main(argv)
    err = capsys.readouterr().err
    if case["status"] == "no-finish":
        if rc == ExitCode.STUCK:  # the quirk reproduced
            return
        assert rc == ExitCode.OK, err
        expected = [NO_FINISH_REFUSED[case["case"]]] * NetworkConfig.from_file(argv[3]).topology.npus_count
    else:
        assert case["status"] == "ok"
        assert rc == ExitCode.OK, err
        expected = case["per_rank_cycles"]
    data = json.loads(report.read_text())
    assert data["backend"] == "congestion-aware"
    assert [r["finish_cycles"] for r in data["ranks"]] == expected
    if data["inputs"]["symmetric_fast_path"]:  # one representative rank: the general path agrees too
        assert main([*argv, "--no-symmetry"]) == ExitCode.OK
        data = json.loads(report.read_text())
        assert data["inputs"]["symmetric_fast_path"] is False
        assert [r["finish_cycles"] for r in data["ranks"]] == expected


def _contention_free_multi_dim_cases() -> list:
    """ASTRA-sim's unaware multi-dimensional cases in which the aware model cannot add delay:
    no Switch dimension, ring algorithms only, one active chunk per dimension. Each rank then
    has one message in flight per dimension, to a ring neighbour, on its own directed link, so
    the aware backend (dimension-order routing, docs/network-backends.md) must give the unaware
    cycles exactly. ASTRA-sim has no aware multi-dimensional reference of its own."""
    out = []
    for case in CASES:
        if case["backend"] != "unaware" or case["status"] != "ok":
            continue
        topo = yaml.safe_load((DATA / case["network"]).read_text())["topology"]
        system = json.loads((DATA / case["system"]).read_text())
        impls = {v for k, vs in system.items() if k.endswith("-implementation")
                 for v in (vs if isinstance(vs, list) else [vs])}
        if (isinstance(topo, list) and len(topo) > 1 and "Switch" not in topo and impls == {"ring"}
                and system.get("active-chunks-per-dimension", 1) == 1 and "queues" not in case["command"]):
            out.append(pytest.param(case, id=case["case"]))
    return out


@pytest.mark.parametrize("case", _contention_free_multi_dim_cases())
def test_aware_multi_dim_without_contention_equals_unaware_reference(case, anchors, tmp_path, capsys):
    report = tmp_path / "report.json"
    rc = main([
        "--workload", str(anchors / case["workload"]),
        "--network", str(anchors / case["network"]),
        "--system", str(anchors / case["system"]),
        "--backend", "congestion-aware", "--report", str(report), "--quiet",
    ])
    assert rc == ExitCode.OK, capsys.readouterr().err
    data = json.loads(report.read_text())
    assert [r["finish_cycles"] for r in data["ranks"]] == case["per_rank_cycles"]
    assert data["network"]["max_link_queue"] == 0
