"""The README's commands do what the README says they do."""
from __future__ import annotations

import re
import shlex

from conftest import ROOT, run_cli


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_quickstart_runs_the_bundled_example() -> None:
    first = _bash_blocks()[0].strip()
    install, _, run = first.partition(" && ")
    assert install.startswith("python -m pip install -e .")
    args = shlex.split(run)
    assert args[:3] == ["python", "-m", "system.main"]
    r = run_cli(*args[3:])
    assert r.returncode == 0, r.stderr
    assert "sys[7] finished, 64440 cycles" in r.stdout


def test_test_command_is_what_ci_runs() -> None:
    second = _bash_blocks()[1].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert second in ci
