"""dtsim-validate vtrain: rows read, predicted, errors printed; bad input exit 2; no fitting on
multi-node rows."""
from __future__ import annotations

from pathlib import Path

import pytest

from dtsim_tools.validate.cli import main
from dtsim_tools.validate.vtrain import read_rows

DATA = Path(__file__).parent / "data" / "vtrain" / "ground_truth_single_3rows.csv"


def test_rows_become_megatron_configs() -> None:
    rows = read_rows(DATA)
    assert [r.line for r in rows] == [2, 3, 4]
    c = rows[0].config
    assert (c.pipeline_model_parallel_size, c.micro_batches, c.recompute_granularity) == (2, 2, "full")


def test_prints_per_row_and_mean_error(capsys: pytest.CaptureFixture) -> None:
    assert main(["vtrain", str(DATA)]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.strip()[:1].isdigit()]
    assert len(rows) == 3
    errs = [abs(float(line.rsplit(None, 1)[1].rstrip("%"))) for line in rows]
    mae = float(out[-1].split(":")[1].split("%")[0])
    assert mae == pytest.approx(sum(errs) / 3, abs=0.01)


def test_refuses_to_fit_on_multi_node_rows(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    multi = tmp_path / "multi.csv"
    multi.write_text("Parameters (billion),# GPUs,global batch,micro batch,hidden size,attention heads,# layers,"
                     "sequence length,tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
                     "3.6,16,128,8,512,8,2,256,1,16,1,100.0\n")
    assert main(["vtrain", str(multi), "--fit", str(tmp_path / "m.json")]) == 2
    assert "multi-node" in capsys.readouterr().err


@pytest.mark.parametrize("text,named", [("a,b\n1,2\n", "line 1"),
                                        ("\ufeff" + DATA.read_text(encoding="utf-8-sig").splitlines()[0] +
                                         "\n8,32,4,x,16,24,1024,2,2,2,1.0\n", "line 2"),
                                        (DATA.read_text(encoding="utf-8-sig").splitlines()[0] +
                                         "\n8,30,4,2048,16,24,1024,2,2,2,1.0\n", "--global-batch-size")])
def test_bad_csv_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture, text: str, named: str) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text, encoding="utf-8")
    assert main(["vtrain", str(p)]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and named in err


def test_fit_lowers_the_error_on_the_rows_it_fits(tmp_path: Path) -> None:
    """The compute-model fit (network.calibrate's Nelder-Mead on log-scaled knobs) ends no worse
    than where it starts, on the rows it was given, and writes knobs that load."""
    import json

    from dtsim_tools.validate.fit import KNOBS

    assert main(["vtrain", str(DATA), "--json", str(tmp_path / "before.json")]) == 0
    start = json.loads((tmp_path / "before.json").read_text())["mae_pct"]
    assert main(["vtrain", str(DATA), "--fit", str(tmp_path / "m.json"), "--fit-iters", "4"]) == 0
    knobs = json.loads((tmp_path / "m.json").read_text())
    assert set(KNOBS) <= set(knobs)
    assert main(["vtrain", str(DATA), "--compute-model", str(tmp_path / "m.json"), "--json",
                 str(tmp_path / "after.json")]) == 0
    assert json.loads((tmp_path / "after.json").read_text())["mae_pct"] <= start + 1e-9
