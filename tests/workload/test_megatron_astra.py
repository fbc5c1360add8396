"""Generated Megatron ET sets give ASTRA-sim's cycles (numbers measured with its binaries,
tests/workload/data/megatron_astra/cases.json says how), on every rank."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from system.simulation import run_simulation
from workload.generate import main as generate_main

DATA = Path(__file__).parent / "data" / "megatron_astra"
CASES = json.loads((DATA / "cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_generated_set_matches_astra_sim(case: dict, tmp_path: Path) -> None:
    prefix = tmp_path / case["name"]
    rc = generate_main(["megatron", "--astra-sim-compatible", "--compute-model", str(DATA / "compute.json"),
                        *case["flags"], "-o", str(prefix)])
    assert rc == 0
    backend = "congestion-aware" if case["binary"].endswith("_Aware") else "congestion-unaware"
    res = run_simulation(prefix, f"{prefix}.network.yml", f"{prefix}.system.json", backend=backend)
    assert res.finish_ns == case["astra_sim_cycles"]


def test_every_rank_simulated_gives_the_same_cycles(tmp_path: Path) -> None:
    """The orbit shortcut answered above; the every-rank path must agree with ASTRA-sim too."""
    case = CASES[0]
    prefix = tmp_path / "p"
    assert generate_main(["megatron", "--astra-sim-compatible", "--compute-model", str(DATA / "compute.json"),
                          *case["flags"], "-o", str(prefix)]) == 0
    res = run_simulation(prefix, f"{prefix}.network.yml", f"{prefix}.system.json", symmetry=False, batching=False)
    assert res.inputs["shortcut"] == "none"
    assert res.finish_ns == case["astra_sim_cycles"]
