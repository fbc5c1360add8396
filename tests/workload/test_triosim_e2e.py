"""End to end: TrioSim trace → ETs → ``system.main.run_simulation``.

The acceptance numbers of issue 4: single-GPU time = Σ Operator_cudatimenooverlap ÷ bsRatio to the
nanosecond, and data-parallel sync on the TrioSim-like 8-GPU ring adds exactly one all-reduce of the
gradient bytes (≈ S / 65 GB/s, TrioSim's figure). Every layout simulates to the end.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb
from chakra_proto.io import write_et
from network.config import NetworkConfig
from system.main import run_simulation
from workload.triosim import convert_triosim
from workload.triosim.rank_graph import RankGraph

ROOT = Path(__file__).resolve().parents[2]
VGG = ROOT / "examples" / "triosim" / "vgg13"
RESNET = ROOT / "examples" / "triosim" / "resnet50"
TRIOSIM_NET = ROOT / "examples" / "network" / "triosim_like.yml"
TRIOSIM_SYS = ROOT / "examples" / "triosim" / "triosim_like_system.json"
VGG_GRAD_BYTES = 532_191_392


def _two_gpus() -> NetworkConfig:
    return NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [2], "bandwidth": [50.0], "latency": [500.0]})


@pytest.mark.parametrize("trace, bs_sim, expected_ns", [
    (VGG, None, 94_038_000), (VGG, 64, 47_019_000), (RESNET, None, 70_723_000),
], ids=["vgg13-128", "vgg13-64", "resnet50-128"])
def test_single_gpu_time_is_the_sum_of_operator_times(tmp_path: Path, trace: Path, bs_sim, expected_ns: int) -> None:
    res = convert_triosim(trace, batch_size=128, batch_size_sim=bs_sim, out_prefix=tmp_path / "one")
    # one rank's file, run by each NPU of a 2-NPU network (no communication, so nothing else counts)
    sim = run_simulation(res.et_path(0), _two_gpus())
    assert sim.finish_ns == [expected_ns, expected_ns]


def _one_all_reduce(tmp_path: Path, size: int, ranks: int) -> Path:
    g = RankGraph(0)
    g.all_reduce("gradients", size, 0)
    for r in range(ranks):
        write_et(tmp_path / f"ar.{r}.et", pb.GlobalMetadata(version="0.0.4"), g.nodes)
    return tmp_path / "ar"


def test_dp_sync_adds_exactly_one_gradient_all_reduce(tmp_path: Path) -> None:
    res = convert_triosim(VGG, batch_size=128, dp=8, out_prefix=tmp_path / "dp8")
    sim = run_simulation(res.prefix, TRIOSIM_NET, TRIOSIM_SYS)
    alone = run_simulation(_one_all_reduce(tmp_path, VGG_GRAD_BYTES, 8), TRIOSIM_NET, TRIOSIM_SYS)
    assert sim.finish_ns == [94_038_000 + alone.end_ns] * 8
    # the TrioSim-like ring runs an all-reduce of S bytes in S / 65 GB/s, up to ns truncation
    assert abs(alone.end_ns - VGG_GRAD_BYTES / 65) < 20


def test_ddp_overlaps_gradient_all_reduces_with_backward(tmp_path: Path) -> None:
    ends = {}
    for mode in ("sync", "ddp"):
        res = convert_triosim(VGG, batch_size=128, batch_size_sim=64, dp=8, dp_mode=mode, out_prefix=tmp_path / mode)
        ends[mode] = run_simulation(res.prefix, TRIOSIM_NET, TRIOSIM_SYS).end_ns
    assert ends["sync"] == 47_019_000 + run_simulation(
        _one_all_reduce(tmp_path, VGG_GRAD_BYTES // 2, 8), TRIOSIM_NET, TRIOSIM_SYS).end_ns
    assert 47_019_000 < ends["ddp"] < ends["sync"] - 3_000_000


LAYOUTS = [
    dict(dp=8, dp_mode="ddp"),
    dict(tp=8),
    dict(pp=8, micro_batches=4, pp_schedule="1f1b"),
    dict(pp=8, micro_batches=2, pp_balance="count"),
    dict(dp=2, tp=2, pp=2, micro_batches=2, dp_mode="ddp", pp_schedule="1f1b"),
    dict(dp=2, pp=4, micro_batches=4, pp_balance="count", scale_weights=False),
]


@pytest.mark.parametrize("trace", [VGG, RESNET], ids=["vgg13", "resnet50"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda d: "-".join(f"{k}{v}" for k, v in d.items()))
def test_layouts_simulate_to_the_end(tmp_path: Path, trace: Path, layout: dict) -> None:
    res = convert_triosim(trace, batch_size=128, batch_size_sim=32, out_prefix=tmp_path / "w", **layout)
    sim = run_simulation(res.prefix, TRIOSIM_NET, TRIOSIM_SYS)
    assert len(sim.finish_ns) == 8 and all(w.is_finished for w in sim.workloads)
    # no rank finishes before its own compute, and communication costs something
    for rank, info in enumerate(res.summary["per_rank"]):
        assert sim.finish_ns[rank] >= info["compute_ns"]
    assert sim.end_ns > max(info["compute_ns"] for info in res.summary["per_rank"])
