"""One measured table printed the way every nccl-tests release and launcher prints it gives the same
fit as the plain table, within 2 % on every fitted number (the issue's acceptance), through the
command line and into the written files. vTrain's 8-GPU A100 table is the table; the layouts are
tests/nccl_layouts.py's ports of each release's printf formats (1.x prints ms with 3 decimals, the
one layout that loses digits)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dtsim_tools.calibrate.cli import main
from nccl_layouts import render, srun_label, tag_output
from network.calibrate.nccl_tests import read_nccl_tests

PLAIN = Path(__file__).parent / "data" / "vtrain" / "a100_AR_GPU8.csv"
(_T,) = read_nccl_tests(PLAIN, npus=8)
SIZES, TIMES = [r.size_bytes for r in _T.rows], [r.time_us for r in _T.rows]

LAYOUTS = {
    "v1": lambda: render(SIZES, TIMES, 8, "v1"),
    "v2_0": lambda: render(SIZES, TIMES, 8, "v2_0"),
    "v2_19": lambda: render(SIZES, TIMES, 8),
    "v2_19 -c 0": lambda: render(SIZES, TIMES, 8, check=False),
    "v2_19 -I 1": lambda: render(SIZES, TIMES, 8, per_iter=True),
    "v2_19 -S 1": lambda: render(SIZES, TIMES, 8, timestamps=True),
    "v2_19 in-place only": lambda: render(SIZES, TIMES, 8, in_place_only=True),
    "mpirun --tag-output": lambda: tag_output(render(SIZES, TIMES, 8)),
    "srun --label": lambda: srun_label(render(SIZES, TIMES, 8)),
    "srun --label, 1.x": lambda: srun_label(render(SIZES, TIMES, 8, "v1")),
}


def fitted_numbers(tmp: Path, table: Path, *extra: str) -> dict[str, float]:
    prefix = tmp / f"fit_{table.stem}"
    assert main(["--nccl-tests", str(table), "--npus", "8", "-o", str(prefix), *extra]) == 0
    net = yaml.safe_load(prefix.with_suffix(".yml").read_text())
    sysj = json.loads(prefix.with_suffix(".json").read_text())
    out = {"bandwidth": net["bandwidth"][0], "latency": net["latency"][0], "endpoint-delay": sysj["endpoint-delay"]}
    for k in ("collective-fixed-delay", "collective-copy-bw"):
        if k in sysj:
            out[k] = sysj[k]
    return out


def layout_file(tmp: Path, name: str) -> Path:
    p = tmp / (name.replace(" ", "_").replace("-", "").replace(",", "").replace(".", "") + ".txt")
    p.write_text(LAYOUTS[name]())
    return p


def agree(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=0.02), (k, got[k], want[k])


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_layout_gives_the_plain_tables_node_fit(tmp_path: Path, capsys, name: str) -> None:
    want = fitted_numbers(tmp_path, PLAIN, "--node", "nvswitch-a100")
    got = fitted_numbers(tmp_path, layout_file(tmp_path, name), "--node", "nvswitch-a100")
    capsys.readouterr()
    assert set(want) >= {"collective-fixed-delay", "collective-copy-bw"}
    agree(got, want)


@pytest.mark.parametrize("name", ["v1", "mpirun --tag-output"])
def test_the_simulator_fit_agrees_too(tmp_path: Path, capsys, name: str) -> None:
    # the simulator-in-the-loop fit (no --node) is slower: the lossiest layout and one launcher
    want = fitted_numbers(tmp_path, PLAIN, "--backend", "congestion-unaware")
    got = fitted_numbers(tmp_path, layout_file(tmp_path, name), "--backend", "congestion-unaware")
    capsys.readouterr()
    agree(got, want)
