"""Megatron-LM-style LLM training workloads generated from a model config (docs/megatron.md)."""
from workload.megatron.compute import ComputeModel, Op
from workload.megatron.config import MegatronConfig, MegatronConfigError
from workload.megatron.generator import Cluster, Generated, build_programs, generate
from workload.megatron.gpus import PRESETS, GpuPreset, gpu_preset

__all__ = ["Cluster", "ComputeModel", "Generated", "GpuPreset", "MegatronConfig", "MegatronConfigError", "Op",
           "PRESETS", "build_programs", "generate", "gpu_preset"]
