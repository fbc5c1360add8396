"""--plot: a PNG with per-rank bars and a timeline (the plot extra); without matplotlib, exit 2
with the install hint before anything runs."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import need, run_cli
from system.main import main


def test_plot_writes_a_png(example_args: list[str], tmp_path: Path) -> None:
    need("matplotlib", "plot")
    out = tmp_path / "figs" / "run.png"
    r = run_cli(*example_args, "--plot", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert [p.name for p in out.parent.iterdir()] == ["run.png"]  # written atomically


def test_plot_without_matplotlib_exits_2_with_the_hint(example_args: list[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code = main([*example_args, "--plot", str(tmp_path / "p.png")])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("error: ") and "--plot" in err and "pip install matplotlib" in err and "pip install -e '.[plot]'" in err
    assert out == ""  # refused before the simulation ran
    assert not (tmp_path / "p.png").exists()
