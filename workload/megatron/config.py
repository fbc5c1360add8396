"""One Megatron-LM training job: the model, its parallel layout and the cluster it runs on.

Field names follow Megatron-LM's arguments (``--num-layers`` is ``num_layers``), so a config
reads like the command line that launched the job. Everything is checked here, once; later code
trusts it (design.md (h)).
"""
from __future__ import annotations

from dataclasses import dataclass

from network.errors import InputError


class MegatronConfigError(InputError):
    """Megatron flags that describe no job (exit 2), naming the flag and what it needs."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(None, flag, problem)


@dataclass(frozen=True)
class MegatronConfig:
    """A GPT-style decoder stack under Megatron-LM's tensor/pipeline/data/expert parallelism."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int
    global_batch_size: int
    micro_batch_size: int
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    data_parallel_size: int = 1
    ffn_hidden_size: int | None = None  #: default 4 x hidden, as Megatron
    num_query_groups: int | None = None  #: grouped-query attention; default = heads (multi-head)
    vocab_size: int = 51200  #: GPT-2's 50257 padded as Megatron pads it (multiple of 128 x tp)
    sequence_parallel: bool = False
    num_layers_per_virtual_pipeline_stage: int | None = None
    num_experts: int | None = None
    moe_router_topk: int = 2
    expert_model_parallel_size: int = 1
    recompute_granularity: str | None = None  #: None, "full" (every layer) or "selective" (core attention)
    use_distributed_optimizer: bool = False
    tied_embeddings: bool = True  #: GPT ties input and output embeddings (Megatron's default)
    use_flash_attn: bool = False  #: fused attention: no s x s score tensors in HBM
    swiglu: bool = False  #: gated MLP (Llama): fc1 is two ffn-wide GEMMs

    def __post_init__(self) -> None:
        for flag, v in self._positive():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise MegatronConfigError(flag, f"expected an integer >= 1, got {v!r}")
        tp, pp, dp = self.tensor_model_parallel_size, self.pipeline_model_parallel_size, self.data_parallel_size
        if self.num_attention_heads % tp:
            raise MegatronConfigError("--num-attention-heads", f"{self.num_attention_heads} heads do not split over "
                                      f"--tensor-model-parallel-size {tp} (Megatron needs heads divisible by tp)")
        if self.hidden_size % self.num_attention_heads:
            raise MegatronConfigError("--hidden-size", f"{self.hidden_size} is not a multiple of "
                                      f"--num-attention-heads {self.num_attention_heads}")
        groups = self.query_groups
        if self.num_attention_heads % groups or groups % tp and tp % groups:
            raise MegatronConfigError("--num-query-groups", f"{groups} groups must divide the {self.num_attention_heads} "
                                      f"heads and split over (or be replicated across) tp {tp}")
        if self.num_layers % pp:
            raise MegatronConfigError("--num-layers", f"{self.num_layers} layers do not split over "
                                      f"--pipeline-model-parallel-size {pp}")
        per_replica = self.micro_batch_size * dp
        if self.global_batch_size % per_replica:
            raise MegatronConfigError("--global-batch-size", f"{self.global_batch_size} is not a multiple of "
                                      f"--micro-batch-size x --data-parallel-size = {per_replica}")
        if self.sequence_parallel and self.seq_length % tp:
            raise MegatronConfigError("--sequence-parallel", f"--seq-length {self.seq_length} must be a multiple of tp {tp}")
        if self.ffn % tp:
            raise MegatronConfigError("--ffn-hidden-size", f"{self.ffn} does not split over tp {tp}")
        self._check_virtual()
        self._check_moe()
        if self.recompute_granularity not in (None, "full", "selective"):
            raise MegatronConfigError("--recompute-granularity", f"expected full or selective, got {self.recompute_granularity!r}")

    def _positive(self) -> list[tuple[str, object]]:
        out = [("--num-layers", self.num_layers), ("--hidden-size", self.hidden_size),
               ("--num-attention-heads", self.num_attention_heads), ("--seq-length", self.seq_length),
               ("--global-batch-size", self.global_batch_size), ("--micro-batch-size", self.micro_batch_size),
               ("--tensor-model-parallel-size", self.tensor_model_parallel_size),
               ("--pipeline-model-parallel-size", self.pipeline_model_parallel_size),
               ("--data-parallel-size", self.data_parallel_size), ("--vocab-size", self.vocab_size),
               ("--moe-router-topk", self.moe_router_topk),
               ("--expert-model-parallel-size", self.expert_model_parallel_size)]
        for flag, v in (("--ffn-hidden-size", self.ffn_hidden_size), ("--num-query-groups", self.num_query_groups),
                        ("--num-layers-per-virtual-pipeline-stage", self.num_layers_per_virtual_pipeline_stage),
                        ("--num-experts", self.num_experts)):
            if v is not None:
                out.append((flag, v))
        return out

    def _check_virtual(self) -> None:
        v = self.num_layers_per_virtual_pipeline_stage
        if v is None:
            return
        pp = self.pipeline_model_parallel_size
        if pp < 2:
            raise MegatronConfigError("--num-layers-per-virtual-pipeline-stage", "needs --pipeline-model-parallel-size > 1")
        if self.layers_per_stage % v:
            raise MegatronConfigError("--num-layers-per-virtual-pipeline-stage",
                                      f"{v} does not divide the {self.layers_per_stage} layers of a pipeline stage")
        if self.micro_batches % pp:
            # Megatron's interleaved schedule asserts this (schedules.py, microbatch groups of pp)
            raise MegatronConfigError("--global-batch-size", f"the interleaved schedule needs the {self.micro_batches} "
                                      f"micro-batches per pipeline to be a multiple of pp {pp}")

    def _check_moe(self) -> None:
        ep = self.expert_model_parallel_size
        if self.num_experts is None:
            if ep != 1:
                raise MegatronConfigError("--expert-model-parallel-size", "needs --num-experts")
            return
        if self.num_experts % ep:
            raise MegatronConfigError("--expert-model-parallel-size", f"{ep} does not divide --num-experts {self.num_experts}")
        if self.data_parallel_size % ep:
            # Megatron carves the expert-parallel group out of the data-parallel ranks
            raise MegatronConfigError("--expert-model-parallel-size", f"{ep} must divide --data-parallel-size "
                                      f"{self.data_parallel_size}")
        if self.tensor_model_parallel_size > 1 and not self.sequence_parallel:
            # Megatron asserts it (megatron/training/arguments.py): the dispatcher splits tokens over tp
            raise MegatronConfigError("--num-experts", "with --tensor-model-parallel-size > 1 MoE needs --sequence-parallel")
        if self.moe_router_topk > self.num_experts:
            raise MegatronConfigError("--moe-router-topk", f"{self.moe_router_topk} exceeds --num-experts {self.num_experts}")

    # ------------------------------------------------------------------ derived sizes

    @property
    def ranks(self) -> int:
        return self.tensor_model_parallel_size * self.pipeline_model_parallel_size * self.data_parallel_size

    @property
    def ffn(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def query_groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def kv_channels(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def micro_batches(self) -> int:
        """Micro-batches each pipeline runs per iteration (Megatron's num_microbatches)."""
        return self.global_batch_size // (self.micro_batch_size * self.data_parallel_size)

    @property
    def layers_per_stage(self) -> int:
        return self.num_layers // self.pipeline_model_parallel_size

    @property
    def model_chunks(self) -> int:
        """Virtual stages per pipeline rank (1 without interleaving)."""
        v = self.num_layers_per_virtual_pipeline_stage
        return 1 if v is None else self.layers_per_stage // v

    @property
    def layers_per_chunk(self) -> int:
        return self.layers_per_stage // self.model_chunks

    @property
    def padded_vocab(self) -> int:
        """Megatron pads the vocabulary to a multiple of 128 x tp (make_vocab_size_divisible_by)."""
        m = 128 * self.tensor_model_parallel_size
        return -(-self.vocab_size // m) * m
