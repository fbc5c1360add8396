"""``python -m workload.generate megatron`` (``dtsim-generate megatron``): Megatron-LM's own flag
names, plus the cluster."""
from __future__ import annotations

import argparse
from pathlib import Path

from workload.megatron.compute import ComputeModel
from workload.megatron.config import MegatronConfig
from workload.megatron.generator import Cluster, Generated, generate
from workload.megatron.gpus import PRESETS, gpu_preset

_DEFAULT_MODELS = Path(__file__).parent / "data"


def add_megatron_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("megatron", help="a Megatron-LM GPT job from its model config and layout",
                       description="Megatron-LM model config + layout + cluster -> one Chakra ET per rank, "
                                   "comm groups, network and system files.")
    m = p.add_argument_group("model and layout (Megatron-LM's flags)")
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length", "--global-batch-size",
                 "--micro-batch-size"):
        m.add_argument(flag, type=int, required=True)
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--data-parallel-size"):
        m.add_argument(flag, type=int, default=1)
    for flag in ("--ffn-hidden-size", "--num-query-groups", "--num-layers-per-virtual-pipeline-stage", "--num-experts"):
        m.add_argument(flag, type=int)
    m.add_argument("--vocab-size", type=int, default=51200)
    m.add_argument("--moe-router-topk", type=int, default=2)
    m.add_argument("--expert-model-parallel-size", type=int, default=1)
    m.add_argument("--sequence-parallel", action="store_true")
    m.add_argument("--recompute-granularity", choices=("full", "selective"))
    m.add_argument("--use-distributed-optimizer", action="store_true")
    m.add_argument("--use-flash-attn", action="store_true")
    m.add_argument("--swiglu", action="store_true")
    m.add_argument("--untie-embeddings-and-output-weights", action="store_true")
    c = p.add_argument_group("cluster")
    c.add_argument("--gpu", default="a100", help=f"one of {', '.join(PRESETS)} (default a100)")
    c.add_argument("--gpus-per-node", type=int, default=8)
    c.add_argument("--inter-node-gbps", type=float, default=800.0, help="Gbit/s per node between nodes (default 800)")
    c.add_argument("--topology", choices=("switch", "fat-tree"), default="switch")
    c.add_argument("--backend", choices=("congestion-unaware", "congestion-aware"),
                   help="written into the network file (fat-tree default: congestion-aware)")
    c.add_argument("--compute-model", metavar="JSON", help="calibrated compute-model knobs (docs/megatron.md)")
    c.add_argument("--dtype", help="peak FLOP/s of this dtype (default: the compute model's, bf16)")
    p.add_argument("-o", "--output", required=True, metavar="OUT/PREFIX")
    p.add_argument("--per-orbit", action="store_true",
                   help="write one file per pipeline stage and PREFIX.orbits.json instead of a file per rank: the "
                        "other ranks are images of those under the dp and tp rotations (for layouts of many "
                        "thousands of GPUs; the simulator runs one rank per stage)")
    p.add_argument("--astra-sim-compatible", action="store_true",
                   help="whole-µs durations and nothing ASTRA-sim does not read (docs/triosim.md)")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    return p


def config_from_args(a: argparse.Namespace) -> MegatronConfig:
    return MegatronConfig(
        num_layers=a.num_layers, hidden_size=a.hidden_size, num_attention_heads=a.num_attention_heads,
        seq_length=a.seq_length, global_batch_size=a.global_batch_size, micro_batch_size=a.micro_batch_size,
        tensor_model_parallel_size=a.tensor_model_parallel_size,
        pipeline_model_parallel_size=a.pipeline_model_parallel_size, data_parallel_size=a.data_parallel_size,
        ffn_hidden_size=a.ffn_hidden_size, num_query_groups=a.num_query_groups, vocab_size=a.vocab_size,
        sequence_parallel=a.sequence_parallel, num_layers_per_virtual_pipeline_stage=a.num_layers_per_virtual_pipeline_stage,
        num_experts=a.num_experts, moe_router_topk=a.moe_router_topk, expert_model_parallel_size=a.expert_model_parallel_size,
        recompute_granularity=a.recompute_granularity, use_distributed_optimizer=a.use_distributed_optimizer,
        tied_embeddings=not a.untie_embeddings_and_output_weights, use_flash_attn=a.use_flash_attn, swiglu=a.swiglu)


def default_compute_model(gpu: str) -> ComputeModel:
    """The fitted knobs shipped for this GPU (data/compute_GPU.json), else the built-in defaults."""
    path = _DEFAULT_MODELS / f"compute_{gpu.lower()}.json"
    if not path.is_file():
        path = _DEFAULT_MODELS / "compute_a100.json"
    return ComputeModel.from_file(path) if path.is_file() else ComputeModel()


def run_megatron(a: argparse.Namespace) -> Generated:
    cfg = config_from_args(a)
    gpu = gpu_preset(a.gpu)
    model = ComputeModel.from_file(a.compute_model) if a.compute_model else default_compute_model(gpu.name)
    if a.dtype:
        model = model.with_values(dtype=a.dtype)
    if a.gpus_per_node < 1:
        from workload.megatron.config import MegatronConfigError

        raise MegatronConfigError("--gpus-per-node", f"expected an integer >= 1, got {a.gpus_per_node}")
    if not a.inter_node_gbps > 0:
        from workload.megatron.config import MegatronConfigError

        raise MegatronConfigError("--inter-node-gbps", f"expected a rate > 0, got {a.inter_node_gbps}")
    cluster = Cluster(gpu, a.gpus_per_node, a.inter_node_gbps, a.topology, a.backend)
    return generate(cfg, cluster, model, a.output, astra_sim_compatible=a.astra_sim_compatible,
                    per_orbit=a.per_orbit)
