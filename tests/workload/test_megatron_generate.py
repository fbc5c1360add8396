"""The Megatron generator's files, graphs and refusals (workload/megatron/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra_proto.io import read_et
from chakra_proto.attrs import attr_map, attr_value
from system.simulation import run_simulation
from workload.generate import main
from workload.megatron import Cluster, ComputeModel, MegatronConfig, build_programs, gpu_preset

SMALL = ["--num-layers", "2", "--hidden-size", "512", "--num-attention-heads", "8", "--seq-length", "256",
         "--global-batch-size", "8", "--micro-batch-size", "1"]
MODEL = ComputeModel(0.7, 128.0, 0.8, 2000.0, 0.0)


def _gen(tmp_path: Path, *flags: str) -> Path:
    prefix = tmp_path / "w"
    assert main(["megatron", *SMALL, *flags, "-o", str(prefix)]) == 0
    return prefix


def _types(prefix: Path, rank: int) -> list[tuple[str, int, str]]:
    _, nodes = read_et(f"{prefix}.{rank}.et")
    out = []
    for n in nodes:
        a = attr_map(n)
        if "comm_type" in a:
            out.append((n.name, attr_value(a["comm_type"]), attr_value(a["pg_name"]) if "pg_name" in a else ""))
    return out


def test_writes_the_files_system_main_reads(tmp_path: Path) -> None:
    prefix = _gen(tmp_path, "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                  "--data-parallel-size", "2", "--gpus-per-node", "4")
    for suffix in (".comm_groups.json", ".network.yml", ".system.json", ".megatron.json"):
        assert Path(f"{prefix}{suffix}").is_file()
    assert sorted(p.name for p in tmp_path.glob("w.*.et")) == sorted(f"w.{r}.et" for r in range(8))
    groups = json.loads(Path(f"{prefix}.comm_groups.json").read_text())
    assert [0, 1] in groups.values() and [0, 2] in groups.values() and [0, 4] in groups.values()  # tp, dp, emb
    res = run_simulation(prefix, f"{prefix}.network.yml", f"{prefix}.system.json")
    assert res.end_ns > 0 and "Switch(4" in res.inputs["topology"]


def test_single_gpu_iteration_is_the_sum_of_its_compute(tmp_path: Path) -> None:
    """No communication on one GPU: the simulated iteration is exactly the compute the nodes hold."""
    prefix = _gen(tmp_path, "--recompute-granularity", "full")
    _, nodes = read_et(f"{prefix}.0.et")
    total = sum(attr_value(attr_map(n)["duration_ns"]) for n in nodes)
    res = run_simulation(prefix, f"{prefix}.network.yml", f"{prefix}.system.json")
    assert res.end_ns == total
    summary = json.loads(Path(f"{prefix}.megatron.json").read_text())
    assert abs(summary["stages"][0]["compute_ms"] * 1e6 - total) < 1 + len(nodes)


def test_sequence_parallel_trades_all_reduces_for_gathers_and_scatters(tmp_path: Path) -> None:
    plain = _types(_gen(tmp_path / "a", "--tensor-model-parallel-size", "2"), 0)
    sp = _types(_gen(tmp_path / "b", "--tensor-model-parallel-size", "2", "--sequence-parallel"), 0)
    from chakra_proto import enums
    kinds_plain = {t for _, t, _ in plain}
    kinds_sp = {t for _, t, _ in sp}
    assert enums.ALL_GATHER not in kinds_plain and enums.REDUCE_SCATTER not in kinds_plain
    assert enums.ALL_GATHER in kinds_sp and enums.REDUCE_SCATTER in kinds_sp
    layer_ar_plain = [n for n, t, _ in plain if t == enums.ALL_REDUCE and " layer " in n]
    layer_ar_sp = [n for n, t, _ in sp if t == enums.ALL_REDUCE and " layer " in n]
    assert layer_ar_plain and not layer_ar_sp


def test_distributed_optimizer_reduce_scatters_and_gathers_over_dp(tmp_path: Path) -> None:
    from chakra_proto import enums
    plain = _types(_gen(tmp_path / "a", "--data-parallel-size", "2"), 0)
    dist = _types(_gen(tmp_path / "b", "--data-parallel-size", "2", "--use-distributed-optimizer"), 0)
    assert [t for n, t, _ in plain if "dp gradient" in n] == [enums.ALL_REDUCE]
    assert [t for n, t, _ in dist if "dp gradient" in n] == [enums.REDUCE_SCATTER]
    assert [t for n, t, _ in dist if "parameter all-gather" in n] == [enums.ALL_GATHER]


def test_recompute_adds_forward_work_to_backward() -> None:
    gpu = gpu_preset("a100")
    cfg = dict(num_layers=4, hidden_size=512, num_attention_heads=8, seq_length=256, global_batch_size=4,
               micro_batch_size=1)
    times = {}
    for g in (None, "selective", "full"):
        _, progs = build_programs(MegatronConfig(**cfg, recompute_granularity=g), Cluster(gpu), MODEL)
        times[g] = sum(progs[0].compute_ns_by_op.values())
    assert times[None] < times["selective"] < times["full"]


def test_moe_all_to_alls_run_in_the_expert_parallel_group(tmp_path: Path) -> None:
    from chakra_proto import enums
    prefix = _gen(tmp_path, "--data-parallel-size", "4", "--num-experts", "8", "--expert-model-parallel-size", "2")
    groups = json.loads(Path(f"{prefix}.comm_groups.json").read_text())
    a2a = [(n, g) for n, t, g in _types(prefix, 0) if t == enums.ALL_TO_ALL]
    # 2 micro-batches per replica x 2 layers x (dispatch + combine) x (forward + backward)
    assert len(a2a) == 2 * 2 * 2 * 2
    assert {tuple(groups[g]) for _, g in a2a} == {(0, 1)}
    assert any("expert gradient" in n and groups[g] == [0, 2] for n, _, g in _types(prefix, 0))


@pytest.mark.parametrize("flags,named", [
    (["--tensor-model-parallel-size", "3"], "--num-attention-heads"),
    (["--pipeline-model-parallel-size", "3"], "--num-layers"),
    (["--data-parallel-size", "3"], "--global-batch-size"),
    (["--gpu", "z80"], "--gpu"),
    (["--num-experts", "4", "--expert-model-parallel-size", "3"], "--expert-model-parallel-size"),
    (["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2"],
     "--num-layers-per-virtual-pipeline-stage"),
    (["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--data-parallel-size", "2",
      "--gpus-per-node", "3"], "--gpus-per-node"),
])
def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture, flags: list[str],
                                          named: str) -> None:
    assert main(["megatron", *SMALL, *flags, "-o", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


def test_missing_required_flag_is_exit_2(tmp_path: Path) -> None:
    assert main(["megatron", "--num-layers", "2", "-o", str(tmp_path / "w")]) == 2
