"""Shared fixtures: where the repository, the bundled examples and ../shared anchors live."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
ANCHORS = SHARED / "anchors" / "astra-sim"
EXAMPLES = ROOT / "examples"


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m system.main`` as a user would."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "system.main", *args], capture_output=True, text=True,
                          env=e, cwd=cwd or ROOT, timeout=timeout)


@pytest.fixture(scope="session")
def anchors() -> Path:
    if not ANCHORS.is_dir():
        pytest.fail(f"the shared anchors are missing at {ANCHORS}; clone beside ../shared as CI does")
    return ANCHORS


@pytest.fixture(scope="session")
def reference_cases(anchors: Path) -> list[dict]:
    return json.loads((anchors / "results.json").read_text())


@pytest.fixture
def example_args() -> list[str]:
    return [
        "--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
        "--network", str(EXAMPLES / "network" / "Ring_8npus.yml"),
        "--system", str(EXAMPLES / "system" / "Ring_4chunks.json"),
    ]
