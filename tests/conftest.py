"""Shared fixtures: where the repository, the bundled examples and ASTRA-sim's reference data live,
and how a test asks for an optional dependency."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from reference_data import SHARED_ANCHORS, load_cases, materialise

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
EXAMPLES = ROOT / "examples"
# CI installs every extra (README, .ci/run): there a missing one is a broken setup, not a reason to skip
IN_CI = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
# no test spawns a background build of the ns-3 backend's C++ (network/ns3/precompiled.py) into
# the user's cache: tests/network/test_ns3_precompiled.py builds one in a folder of its own
os.environ.setdefault("DTSIM_NS3_PRECOMPILE", "0")
NO_SHARED = (f"no ../shared beside this checkout ({SHARED} is missing): the cross-checks "
             "against the original ASTRA-sim/TrioSim anchor files are an extra layer")


def need(module: str, extra: str, *, import_it: bool = True) -> ModuleType | None:
    """``pytest.importorskip`` that fails under ``CI=true``. With ``import_it`` False only checks
    that the module is installed (``ns`` costs seconds to import). Works at module level too."""
    why = None
    try:
        if import_it:
            return importlib.import_module(module)
        if importlib.util.find_spec(module) is None:
            why = "is not installed"
    except ImportError as exc:
        why = f"does not import ({exc})"
    if why is None:
        return None
    msg = f"{module} {why}; install the extra: pip install -e '.[{extra}]'"
    if IN_CI:
        pytest.fail(f"CI=true and {msg}", pytrace=False)
    pytest.skip(msg, allow_module_level=True)


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m system.main`` as a user would."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "system.main", *args], capture_output=True, text=True,
                          env=e, cwd=cwd or ROOT, timeout=timeout)


@pytest.fixture(scope="session")
def anchors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ASTRA-sim's reference files in their original layout: tests/data/astra_sim_reference plus
    the many-NPU workloads written by our writer (tests/reference_data.py)."""
    return materialise(tmp_path_factory.mktemp("anchors") / "astra-sim")


@pytest.fixture(scope="session")
def reference_cases() -> list[dict]:
    return load_cases()


@pytest.fixture(scope="session")
def shared_anchors() -> Path:
    """The original anchor folder in ../shared, for the cross-checks that need it."""
    if not SHARED_ANCHORS.is_dir():
        pytest.skip(NO_SHARED)
    return SHARED_ANCHORS


@pytest.fixture
def batch_every_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ring batchers (Python's and the C core's) on phases of any length: the tests of their equality
    with the event path run them on small rings, which a run sends on the event path
    (ring_batch.MIN_STEPS, phase_batch.MIN_STEPS: faster there)."""
    from system.shortcuts import phase_batch, ring_batch

    monkeypatch.setattr(ring_batch, "MIN_STEPS", 1)
    monkeypatch.setattr(phase_batch, "MIN_STEPS", 1)  # the phases the C core joins too


@pytest.fixture
def example_args() -> list[str]:
    return [
        "--workload", str(EXAMPLES / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
        "--network", str(EXAMPLES / "network" / "Ring_8npus.yml"),
        "--system", str(EXAMPLES / "system" / "Ring_4chunks.json"),
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The differential corpus beyond CI's sample (marked ``corpus`` and ``slow``) runs when asked
    for: ``-m slow``, ``-m corpus`` or ``DTSIM_FULL_CORPUS=1``; the default run deselects it."""
    expr = config.option.markexpr or ""
    if os.environ.get("DTSIM_FULL_CORPUS") or "slow" in expr or "corpus" in expr:
        return
    rest = [item for item in items if item.get_closest_marker("corpus")]
    if rest:
        config.hook.pytest_deselected(items=rest)
        items[:] = [item for item in items if not item.get_closest_marker("corpus")]
