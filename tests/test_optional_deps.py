"""Tests that need an optional extra skip without it on a developer's machine, but fail under
``CI=true``: CI installs every extra (README), so a missing one there is a broken setup."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import conftest
from conftest import ROOT

ABSENT = "dtsim_no_such_module"


def test_missing_extra_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", True)
    for import_it in (True, False):
        with pytest.raises(pytest.fail.Exception, match=f"CI=true and {ABSENT} is not installed|CI=true and "
                                                        f"{ABSENT} does not import"):
            conftest.need(ABSENT, "plot", import_it=import_it)


def test_missing_extra_skips_elsewhere_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install -e '\.\[plot\]'"):
        conftest.need(ABSENT, "plot")


def test_present_module_is_returned() -> None:
    assert conftest.need("json", "test") is sys.modules["json"]
    assert conftest.need("json", "test", import_it=False) is None


@pytest.mark.parametrize("value,expected", [("true", True), ("1", True), ("", False), ("false", False)])
def test_ci_is_read_from_the_environment(value: str, expected: bool) -> None:
    env = dict(os.environ, CI=value, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    r = subprocess.run([sys.executable, "-c", "import conftest; print(conftest.IN_CI)"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(expected)
