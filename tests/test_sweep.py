"""dtsim_tools/sweep.py (dtsim-sweep): a grid of configurations run in parallel (local processes or Dask), one CSV row each."""
from __future__ import annotations

import csv
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, IN_CI, ROOT, need
from workload.builder import GraphBuilder

from dtsim_tools import sweep
from dtsim_tools.sweep_point import parse_size

RING_4CHUNKS = str(EXAMPLES / "system" / "Ring_4chunks.json")
TIMING = ("sim_wall_s", "wall_s")


def small_grid(folder: Path) -> Path:
    """8 points: 1 MiB all-reduce on rings of 4 and 8 NPUs at four bandwidths (congestion-unaware)."""
    return _write(folder / "small.yaml", {
        "base": {"workload": {"collective": "ALL_REDUCE", "size": "1MiB"},
                 "network": {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]},
                 "system": RING_4CHUNKS},
        "vary": {"network.npus_count": [4, 8], "network.bandwidth": [25, 50, 100, 200]},
        "plot": {"x": "network.bandwidth"},
    })


def _write(path: Path, grid: dict) -> Path:
    path.write_text(yaml.safe_dump(grid, sort_keys=False))
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory) -> tuple[Path, list[dict[str, str]]]:
    d = tmp_path_factory.mktemp("sweep")
    grid = small_grid(d)
    argv = ["--grid", str(grid), "--out", str(d / "out.csv"), "--workers", "2", "-q"]
    try:
        import matplotlib  # noqa: F401
        argv += ["--plot", str(d / "out.png")]
    except ImportError:
        if IN_CI:  # CI installs the plot extra: a sweep without its plot would hide that
            raise
    assert sweep.main(argv) == sweep.ExitCode.OK
    return grid, _rows(d / "out.csv")


def test_local_sweep_one_row_per_point(local_sweep) -> None:
    grid, rows = local_sweep
    assert [int(r["point"]) for r in rows] == list(range(8))
    assert {r["status"] for r in rows} == {"ok"} and {r["exit_code"] for r in rows} == {"0"}
    assert [(r["network.npus_count"], r["network.bandwidth"]) for r in rows[:5]] == [
        ("4", "25"), ("4", "50"), ("4", "100"), ("4", "200"), ("8", "25")]  # first vary key slowest
    # ASTRA-sim's Ring_8npus / Ring_4chunks / 1 MB all-reduce, the bundled example: 64,440 cycles
    ring8_50 = next(r for r in rows if r["network.npus_count"] == "8" and r["network.bandwidth"] == "50")
    assert ring8_50["end_cycles"] == "64440"
    for r in rows:
        assert r["npus"] == r["network.npus_count"] and r["backend"] == "congestion-unaware"
        assert int(r["max_rank_cycles"]) == int(r["end_cycles"]) >= float(r["mean_rank_cycles"]) > 0
        assert int(r["events"]) > 0 and float(r["wall_s"]) > 0 and r["message"] == ""
    if (grid.parent / "out.png").exists():
        assert (grid.parent / "out.png").stat().st_size > 10_000


def test_physics_more_bandwidth_never_slower_more_npus_never_faster(local_sweep) -> None:
    _, rows = local_sweep
    end = {(int(r["network.npus_count"]), float(r["network.bandwidth"])): int(r["end_cycles"]) for r in rows}
    for n in (4, 8):
        times = [end[n, bw] for bw in (25, 50, 100, 200)]
        assert times == sorted(times, reverse=True) and len(set(times)) == 4, times
    for bw in (25, 50, 100, 200):
        assert end[8, bw] > end[4, bw]  # a ring all-reduce takes 2(N-1) steps


def test_dask_cluster_gives_the_same_rows(local_sweep, tmp_path) -> None:
    need("dask.distributed", "dask")
    from dask.distributed import LocalCluster

    grid, local_rows = local_sweep
    # separate worker processes: the realistic case (dtsim installed, scripts/ shipped by upload_file)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      protocol="tcp") as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        code = sweep.main(["--grid", str(grid), "--scheduler", cluster.scheduler_address,
                           "--out", str(tmp_path / "dask.csv"), "-q"])
    assert code == sweep.ExitCode.OK
    strip = lambda rows: [{k: v for k, v in r.items() if k not in TIMING} for r in rows]  # noqa: E731
    assert strip(_rows(tmp_path / "dask.csv")) == strip(local_rows)


def test_failed_points_are_rows_not_the_end_of_the_sweep(tmp_path, capsys) -> None:
    lonely = GraphBuilder()
    lonely.recv("never_sent", src=1, dst=0, size=1024, tag=7)
    lonely.write(tmp_path / "stuck", rank=0)
    busy = GraphBuilder()
    busy.comp("work", duration_ns=1000)
    busy.write(tmp_path / "stuck", rank=1)
    grid = _write(tmp_path / "bad_points.yaml", {
        "base": {"workload": {"collective": "ALL_REDUCE", "size": 65536},
                 "network": {"topology": "Ring", "npus_count": 2, "bandwidth": 50, "latency": 500}},
        "vary": {"case": [
            {"label": "fine"},
            {"label": "negative-bandwidth", "network.bandwidth": -1},
            {"label": "no-such-collective", "workload.collective": "ALL_TO_NONE"},
            {"label": "bad-size", "workload.size": "lots"},
            {"label": "auto-npus-without-layout", "network.npus_count": "auto"},
            {"label": "deadlock", "workload": {"et": "stuck"}},
        ]},
    })
    out = tmp_path / "out.csv"
    assert sweep.main(["--grid", str(grid), "--out", str(out), "--workers", "1"]) == sweep.ExitCode.POINTS_FAILED
    rows = {r["case"]: r for r in _rows(out)}
    assert len(rows) == 6 and rows["fine"]["status"] == "ok"
    expect = {"negative-bandwidth": ("bad_input", "2", "bandwidth"),
              "no-such-collective": ("bad_input", "2", "ALL_TO_NONE"),
              "bad-size": ("bad_input", "2", "workload.size"),
              "auto-npus-without-layout": ("bad_input", "2", "auto"),
              "deadlock": ("stuck", "3", "rank 0")}
    for case, (status, code, word) in expect.items():
        assert (rows[case]["status"], rows[case]["exit_code"]) == (status, code), rows[case]
        assert word in rows[case]["message"] and "\n" not in rows[case]["message"]
    assert "network.yml: dimension 0, key 'bandwidth'" in rows["negative-bandwidth"]["message"]
    assert "5 failed" in capsys.readouterr().err


def test_triosim_layout_axis_and_the_kept_point_reruns_alone(tmp_path, capsys) -> None:
    grid = _write(tmp_path / "layouts.yaml", {
        "base": {"workload": {"triosim": str(EXAMPLES / "triosim" / "vgg13"), "batch_size": 128},
                 "network": {"topology": "Ring", "npus_count": "auto", "bandwidth": 50, "latency": 500},
                 "system": RING_4CHUNKS},
        "vary": {"workload.dp": [2, 4], "workload.dp_mode": ["sync", "ddp"]},
    })
    out = tmp_path / "out.csv"
    work = tmp_path / "work"
    assert sweep.main(["--grid", str(grid), "--out", str(out), "--workers", "1", "--work-dir", str(work), "-q"]) == 0
    rows = _rows(out)
    assert [r["npus"] for r in rows] == ["2", "2", "4", "4"] and {r["status"] for r in rows} == {"ok"}
    from system.main import main as simulate

    argv = shlex.split((work / "point-0003" / "command.sh").read_text())
    assert argv[:3] == ["python", "-m", "system.main"]
    capsys.readouterr()
    assert simulate([*argv[3:], "--quiet"]) == 0
    assert f"end {rows[3]['end_cycles']} cycles" in capsys.readouterr().out


BAD_GRIDS = {  # case -> (how to break the small grid, the key the message must name)
    "unknown top key": (lambda g: g.update(vray={}), "'vray'"),
    "no network": (lambda g: g["base"].pop("network"), "'base.network'"),
    "typo in a key": (lambda g: g.update(vary={"network.bandwith": [1, 2]}), "'vary.network.bandwith'"),
    "not a section": (lambda g: g.update(vary={"netwrk.bandwidth": [1]}), "'vary.netwrk.bandwidth'"),
    "unknown system key": (lambda g: g.update(vary={"system.preferred-splits": [1]}), "'vary.system.preferred-splits'"),
    "values not a list": (lambda g: g.update(vary={"network.bandwidth": 50}), "'vary.network.bandwidth'"),
    "empty list": (lambda g: g.update(vary={"network.latency": []}), "'vary.network.latency'"),
    "index out of range": (lambda g: g.update(vary={"network.bandwidth.3": [1]}), "'vary.network.bandwidth.3'"),
    "two workload kinds": (lambda g: g.update(vary={"workload.et": ["x"]}), "workload of point 0"),
    "plot x not varied": (lambda g: g["plot"].update(x="network.latency"), "'plot.x'"),
    "plot y not a result": (lambda g: g["plot"].update(y="speed"), "'plot.y'"),
}


@pytest.mark.parametrize("case", list(BAD_GRIDS))
def test_bad_grid_exits_2_naming_file_and_key(case, tmp_path, capsys) -> None:
    need("matplotlib", "plot") if "plot y" in case else None
    grid = yaml.safe_load(small_grid(tmp_path).read_text())
    breaks, key = BAD_GRIDS[case]
    breaks(grid)
    path = _write(tmp_path / "bad.yaml", grid)
    assert sweep.main(["--grid", str(path), "--plot", str(tmp_path / "p.png"), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and key in err, err


def test_bad_yaml_and_missing_file_exit_2(tmp_path, capsys) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("base:\n  network: [unclosed\n")
    assert sweep.main(["--grid", str(bad)]) == 2
    assert f"{bad}: line 3, column 1: not valid YAML" in capsys.readouterr().err
    assert sweep.main(["--grid", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: file not found" in capsys.readouterr().err


def test_scheduler_without_dask_says_how_to_install(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    assert sweep.main(["--grid", str(small_grid(tmp_path)), "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    assert "pip install -e '.[dask]'" in capsys.readouterr().err


def test_example_grids(tmp_path, capsys) -> None:
    example = EXAMPLES / "sweep" / "bandwidth_splits.yaml"
    assert sweep.main(["--grid", str(example), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("point,network.backend,system.all-reduce-implementation,"
                        "system.preferred-dataset-splits,network.bandwidth") and len(lines) == 61
    assert sweep.main(["--grid", str(example), "--out", str(tmp_path / "bs.csv"), "--workers", "1", "-q"]) == 0
    series: dict[tuple, list[int]] = {}
    for r in _rows(tmp_path / "bs.csv"):
        key = (r["network.backend"], r["system.all-reduce-implementation"], r["system.preferred-dataset-splits"])
        series.setdefault(key, []).append(int(r["end_cycles"]))  # bandwidth rising within a series
    assert len(series) == 12
    for key, times in series.items():
        if key[0] == "congestion-unaware":  # more bandwidth is never slower
            assert times == sorted(times, reverse=True), (key, times)
    assert sweep.main(["--grid", str(EXAMPLES / "sweep" / "vgg13_layouts.yaml"), "--dry-run"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 17


@pytest.mark.parametrize("text,size", [(4096, 4096), ("1MiB", 1 << 20), ("64 KiB", 65536), ("1.5GB", 1_500_000_000),
                                       (1e6, 1_000_000)])
def test_sizes(text, size) -> None:
    assert parse_size(text, None, "workload.size") == size
