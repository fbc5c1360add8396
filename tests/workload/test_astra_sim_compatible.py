"""``--astra-sim-compatible``: files with only what ASTRA-sim reads, so both simulators agree (issue 14, item 9).

ASTRA-sim replays a COMP node for duration_micros × 1000 ns (1 ns when 0) and ignores our
``duration_ns``; the expected cycles below are computed that way from the files themselves.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from chakra_proto import et_def_pb2 as pb, read_et
from conftest import EXAMPLES
from system.main import main as sim_main
from system.simulation import run_simulation
from workload.builder import PRIVATE_ATTRIBUTES, GraphBuilder, make_astra_sim_compatible
from workload.convert import main as convert_main
from workload.triosim import load_trace
from workload.triosim.rank_graph import round_half_up

VGG = EXAMPLES / "triosim" / "vgg13"
ONE_NPU = EXAMPLES / "network" / "Ring_1npu.yml"


def _astra_sim_compute_ns(path: Path) -> int:
    """What ASTRA-sim charges for the compute of one rank's file."""
    _, nodes = read_et(path)
    return sum(max(1, n.duration_micros * 1000) for n in nodes if n.type == pb.COMP_NODE)


def test_converted_files_hold_only_what_astra_sim_reads(tmp_path: Path) -> None:
    # bsRatio 128/3 makes every operator time a fraction of a microsecond away from whole
    args = ["triosim", "--trace-dir", str(VGG), "--batch-size", "128", "--batch-size-sim", "3", "--dp", "2",
            "--tp", "2"]
    assert convert_main([*args, "-o", str(tmp_path / "exact" / "v")]) == 0
    assert convert_main([*args, "--astra-sim-compatible", "-o", str(tmp_path / "compat" / "v")]) == 0
    for rank in range(4):
        meta, nodes = read_et(tmp_path / "compat" / f"v.{rank}.et")
        assert list(meta.attr) == []
        names = {a.name for n in nodes for a in n.attr}
        assert not names & PRIVATE_ATTRIBUTES and "comm_size" in names
        assert all(n.duration_micros > 0 for n in nodes if n.type == pb.COMP_NODE)  # 0 µs nodes left out
        _, exact = read_et(tmp_path / "exact" / f"v.{rank}.et")
        exact_ns = sum(int(a.uint64_val) for n in exact for a in n.attr if a.name == "duration_ns")
        compat_us = sum(n.duration_micros for n in nodes if n.type == pb.COMP_NODE)
        assert compat_us == round_half_up(Fraction(exact_ns, 1000))  # cut from the running total, not per node


def test_our_simulator_gives_the_astra_sim_cycles_of_a_compatible_file(tmp_path: Path, capsys) -> None:
    ops = load_trace(VGG).operators
    total_us = sum((op.time_us for op in ops), Fraction(0)) * 3 / 128
    base = ["--workload", str(VGG), "--batch-size", "128", "--batch-size-sim", "3", "--network", str(ONE_NPU),
            "--quiet", "--triosim-out"]
    assert sim_main([*base, str(tmp_path / "compat" / "v"), "--astra-sim-compatible"]) == 0
    compat = capsys.readouterr().out
    assert sim_main([*base, str(tmp_path / "exact" / "v")]) == 0
    exact = capsys.readouterr().out
    astra_sim_ns = _astra_sim_compute_ns(tmp_path / "compat" / "v.0.et")
    assert astra_sim_ns == round_half_up(total_us) * 1000
    assert f"end {astra_sim_ns} cycles" in compat
    assert f"end {round_half_up(total_us * 1000)} cycles" in exact and astra_sim_ns % 1000 == 0


def test_the_builder_helper_rounds_the_running_total(tmp_path: Path) -> None:
    b = GraphBuilder()
    first = b.comp("a", 1499)
    second = b.comp("b", 1499, deps=[first])
    b.comp("c", 2, deps=[second])
    path = b.write(tmp_path / "w.0.et", astra_sim_compatible=True)
    _, nodes = read_et(path)
    assert [n.duration_micros for n in nodes] == [1, 2, 0]  # 1.499, 2.998, 3.000 µs rounded half up
    assert not {a.name for n in nodes for a in n.attr} & PRIVATE_ATTRIBUTES
    assert any(a.name == "duration_ns" for n in b.nodes for a in n.attr)  # the builder keeps its own nodes
    r = run_simulation(path, ONE_NPU)
    assert r.finish_ns == [_astra_sim_compute_ns(path)] == [3001]  # ASTRA-sim: a 0 µs node takes 1 ns
    again = [pb.Node.FromString(n.SerializeToString()) for n in nodes]
    make_astra_sim_compatible(again)
    assert [n.duration_micros for n in again] == [1, 2, 0]  # applying it twice changes nothing


def test_the_flag_applies_only_when_converting(capsys, example_args) -> None:
    assert sim_main([*example_args, "--astra-sim-compatible"]) == 2
    assert "--astra-sim-compatible" in capsys.readouterr().err
