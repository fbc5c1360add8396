"""The calibrator end to end: fit with the simulator in the loop, write files system.main reads,
predict held-out GPU counts. Tables are synthesised from NCCL's ring cost model (a base latency,
a latency per ring step, bytes over bus bandwidth) in nccl-tests' layout, so nothing here needs
../shared; the committed measured preset table is the one measured case."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from calibrate_output import geomeans
from conftest import need
from dtsim_tools.calibrate.cli import main
from network.calibrate.nccl_tests import format_nccl_tests

ROOT = Path(__file__).resolve().parents[2]
SIZES = [1 << k for k in range(20, 31, 2)]  # 1 MiB .. 1 GiB, every other power of two


def nccl_ring_us(n: int, size: int, base: float = 10.0, step: float = 1.5, busbw_gb_s: float = 300.0) -> float:
    return base + 2 * (n - 1) * step + 2 * (n - 1) / n * size / (busbw_gb_s * 1e3)


def table(tmp: Path, n: int, hosts: int = 1, sizes=SIZES, **model) -> str:
    p = tmp / f"ar_{n}gpu_{hosts}nodes.txt"
    p.write_text(format_nccl_tests(sizes, [nccl_ring_us(n, s, **model) for s in sizes], n, hosts=hosts))
    return str(p)


def test_fit_one_node_and_predict_other_gpu_counts(tmp_path: Path, capsys) -> None:
    fit = table(tmp_path, 4)
    held = [table(tmp_path, n) for n in (2, 3)]
    prefix = tmp_path / "node"
    assert main(["--nccl-tests", fit, "--npus", "4", "-o", str(prefix), "--validate", *held]) == 0
    out = capsys.readouterr().out
    errs = geomeans(out)
    assert errs["ar_4gpu_1nodes.txt"] <= 5.0
    assert errs["ar_2gpu_1nodes.txt"] <= 10.0 and errs["ar_3gpu_1nodes.txt"] <= 10.0
    # the files are what system.main reads, and it reproduces the printed simulated time
    net = (prefix.with_suffix(".yml")).read_text()
    assert "npus_count: [4]" in net and "backend: congestion-aware" in net
    sysj = json.loads(prefix.with_suffix(".json").read_text())
    assert sysj["all-reduce-implementation"] == ["ring"] and sysj["endpoint-delay"] >= 1
    from system.simulation import run_simulation
    from workload.builder import write_collective_microbenchmark
    w = write_collective_microbenchmark(tmp_path / "ar64m", 4, "ALL_REDUCE", 64 << 20, shared=True)
    r = run_simulation(w, prefix.with_suffix(".yml"), prefix.with_suffix(".json"))
    printed = re.search(r"\n\s+64 MiB\s+[\d.]+\s+([\d.]+)", out)
    assert printed and r.end_ns / 1e3 == pytest.approx(float(printed.group(1)), abs=0.01)


def test_two_nodes_give_two_levels_from_the_rank_lines(tmp_path: Path, capsys) -> None:
    # inside a node 300 GB/s busbw; the 2-node table is slower and later (a network between)
    sizes = [1 << k for k in range(20, 31, 2)]
    p = tmp_path / "ar_8gpu_2nodes.txt"
    p.write_text(format_nccl_tests(sizes, [40 + 2 * 7 * 1.5 + 1.75 * s / 60e3 for s in sizes], 8, hosts=2))
    prefix = tmp_path / "cluster"
    assert main(["--nccl-tests", str(p), "--npus", "8", "-o", str(prefix), "--backend", "congestion-unaware"]) == 0
    out = capsys.readouterr().out
    assert geomeans(out)["ar_8gpu_2nodes.txt"] <= 10.0
    net = prefix.with_suffix(".yml").read_text()
    assert "npus_count: [4, 2]" in net and "topology: [Switch, Switch]" in net


def test_plot_is_written(tmp_path: Path, capsys) -> None:
    need("matplotlib", "plot")
    sizes = SIZES[:3]
    out_png = tmp_path / "fit.png"
    assert main(["--nccl-tests", table(tmp_path, 4, sizes=sizes), "--npus", "4", "-o", str(tmp_path / "f"),
                 "--backend", "congestion-unaware", "--plot", str(out_png)]) == 0
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_needs_a_gpu_count(tmp_path: Path, capsys) -> None:
    bare = tmp_path / "nohdr.txt"
    bare.write_text("\n".join(x for x in Path(table(tmp_path, 2)).read_text().splitlines() if "Rank" not in x))
    args = ["--nccl-tests", table(tmp_path, 4, sizes=SIZES[:3]), "--npus", "4", "-o", str(tmp_path / "f"),
            "--backend", "congestion-unaware", "--validate"]
    assert main(args + [str(bare)]) == 2
    assert "FILE:N" in capsys.readouterr().err
    assert main(args + [f"{bare}:2"]) == 0
    assert "nohdr.txt: ALL_REDUCE on 2 NPUs" in capsys.readouterr().out


def test_measured_h100_preset_table_fits_within_5_percent(tmp_path: Path, capsys) -> None:
    measured = ROOT / "examples" / "network" / "presets" / "measured" / "hgx_h100_8gpu_all_reduce.txt"
    assert main(["--nccl-tests", str(measured), "--npus", "8", "-o", str(tmp_path / "h100")]) == 0
    assert geomeans(capsys.readouterr().out)["hgx_h100_8gpu_all_reduce.txt"] <= 5.0


def test_reducing_and_plain_tables_together_fix_the_reduction_cost(tmp_path: Path, capsys) -> None:
    # equal busbw for all collectives (NCCL hides the reduction): the all-gather table tells the fit so
    sizes = SIZES[1::2]
    files = {}
    for tool, steps in (("all_reduce_perf", 6), ("all_gather_perf", 3), ("reduce_scatter_perf", 3)):
        p = tmp_path / f"{tool}.txt"
        p.write_text(format_nccl_tests(sizes, [10 + steps * 1.5 + steps / 4 * s / 300e3 for s in sizes], 4, tool=tool))
        files[tool] = str(p)
    assert main(["--nccl-tests", files["all_reduce_perf"], files["all_gather_perf"], "--npus", "4",
                 "-o", str(tmp_path / "j"), "--backend", "congestion-unaware",
                 "--validate", files["reduce_scatter_perf"]]) == 0
    out = capsys.readouterr().out
    assert "REDUCE_SCATTER on 4 NPUs" in out and geomeans(out)["reduce_scatter_perf.txt"] <= 5.0


def test_in_place_column_is_used_when_asked(tmp_path: Path, capsys) -> None:
    p = Path(__file__).parent / "data" / "nccl_tests_4gpu_all_reduce.txt"
    assert main(["--nccl-tests", str(p), "--npus", "4", "-o", str(tmp_path / "ip"), "--in-place",
                 "--backend", "congestion-unaware"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"1 MiB\s+19\.87\s", out) and "20.11" not in out
