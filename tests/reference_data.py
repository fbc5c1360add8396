"""ASTRA-sim's reference cases as the tests use them, from the data committed under
tests/data/astra_sim_reference/ (its README gives the provenance).

The cycles, configurations and small example ETs are committed. The many-NPU all-reduce ETs of
the scaling cases (one COMM_COLL node per rank, up to 1,024 files) are written at test time by our
own writer (``workload.builder.write_collective_microbenchmark``), as generated_workloads.json
lists them; tests/test_reference_data.py checks, where ../shared exists, that they equal the files
ASTRA-sim's generator wrote.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from workload.builder import write_collective_microbenchmark

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "astra_sim_reference"
SHARED_ANCHORS = ROOT.parent / "shared" / "anchors" / "astra-sim"
GENERATED = DATA / "generated_workloads.json"
# files of DATA that describe the data rather than being a part of the anchor layout
_NOT_ANCHOR_FILES = ("README.md", "cases.json", "generated_workloads.json")


def generated_workloads() -> dict[str, dict]:
    """{workload prefix: {comm_type, npus, comm_size[, one_file_for_all_ranks]}}."""
    return json.loads(GENERATED.read_text())


def load_cases() -> list[dict]:
    """Every case with every rank's cycles spelled out (cases.json stores one value when all agree).
    A workload written as one file for all ranks is named by that file (``PREFIX.et``)."""
    cases = json.loads((DATA / "cases.json").read_text())
    one_file = {p for p, g in generated_workloads().items() if g.get("one_file_for_all_ranks")}
    for c in cases:
        if "per_rank_cycles" not in c:
            c["per_rank_cycles"] = [c["cycles_max"]] * c["ranks"]
        if c["workload"] in one_file:
            c["workload"] += ".et"
    return cases


def materialise(dest: Path) -> Path:
    """The anchor layout (paths as in cases.json) under ``dest``: the committed files plus the
    generated workloads. Returns ``dest``."""
    shutil.copytree(DATA, dest, ignore=lambda d, names: [n for n in names if n in _NOT_ANCHOR_FILES])
    for prefix, g in generated_workloads().items():
        (dest / prefix).parent.mkdir(parents=True, exist_ok=True)
        write_collective_microbenchmark(dest / prefix, g["npus"], g["comm_type"], g["comm_size"],
                                        shared=g.get("one_file_for_all_ranks", False))
    return dest
