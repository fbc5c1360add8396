"""What one tensor-parallel rank runs for one micro-batch: the operators of a transformer layer,
the embedding and the output head, with their tensor-parallel communication in Megatron's order.

Megatron-LM's ``ColumnParallelLinear`` / ``RowParallelLinear`` (megatron/core/tensor_parallel/
layers.py) decide where communication sits:

* forward, without sequence parallelism: the row-parallel output (attention projection, fc2) is
  all-reduced, blocking, before the bias-dropout-add;
* forward, with ``--sequence-parallel``: layer norms and dropouts run on s/tp tokens, the
  column-parallel input (QKV, fc1) is all-gathered first and the row-parallel output is
  reduce-scattered;
* backward of a column-parallel layer: the input gradient's all-reduce (reduce-scatter with
  sequence parallelism) is launched asynchronously and overlaps the weight-gradient GEMM
  (``LinearWithGradAccumulationAndAsyncCommunication``); with sequence parallelism the input is
  first all-gathered again, overlapping the data-gradient GEMM;
* backward of a row-parallel layer with sequence parallelism: the output gradient is all-gathered
  (the backward of the reduce-scatter), blocking.

A list of steps: ``Op`` (compute), ``Comm`` (``chain``: blocking; ``async``: runs beside the
compute that follows) and ``JOIN`` (wait for every async communication so far).
"""
from __future__ import annotations

from dataclasses import dataclass

from workload.megatron.compute import Op, gemm, memory
from workload.megatron.config import MegatronConfig

ELEM = 2  #: bytes per activation / weight element (bf16 or fp16 mixed precision)


@dataclass(frozen=True, slots=True)
class Comm:
    label: str
    comm_type: str  #: ALL_REDUCE | ALL_GATHER | REDUCE_SCATTER | ALL_TO_ALL (Chakra's names)
    size_bytes: int  #: Chakra's comm_size: all-gather per-rank input, the others the whole buffer
    group: str  #: tp | dp | ep | edp | emb | world
    mode: str = "chain"  #: chain (blocking) | async (overlaps what follows, until the next JOIN)


JOIN = "join"
Step = Op | Comm | str


class LayerShapes:
    """Shapes of one rank's share of a layer for micro-batch size b (Megatron's s x b x h)."""

    def __init__(self, cfg: MegatronConfig) -> None:
        self.cfg = cfg
        t = self.tp = cfg.tensor_model_parallel_size
        self.sp = cfg.sequence_parallel and t > 1
        self.tokens = cfg.micro_batch_size * cfg.seq_length  #: T = b x s
        self.local_tokens = self.tokens // t if self.sp else self.tokens  #: tokens in layer norm / dropout
        self.h = cfg.hidden_size
        self.heads = cfg.num_attention_heads // t
        self.kv = cfg.kv_channels
        self.kv_groups = max(1, cfg.query_groups // t)
        self.ffn = cfg.ffn // t
        self.act_bytes = self.tokens * self.h * ELEM  #: one full s x b x h activation

    # ------------------------------------------------------------------ communication

    def _tp_enter(self, label: str) -> list[Step]:
        """Before a column-parallel GEMM: nothing, or the sequence-parallel all-gather."""
        if self.sp:
            return [Comm(f"{label} all-gather", "ALL_GATHER", self.act_bytes // self.tp, "tp")]
        return []

    def _tp_leave(self, label: str) -> list[Step]:
        """After a row-parallel GEMM: the all-reduce, or the sequence-parallel reduce-scatter."""
        if self.tp == 1:
            return []
        if self.sp:
            return [Comm(f"{label} reduce-scatter", "REDUCE_SCATTER", self.act_bytes, "tp")]
        return [Comm(f"{label} all-reduce", "ALL_REDUCE", self.act_bytes, "tp")]

    def _column_backward(self, label: str, dgrad: Op, wgrad: Op) -> list[Step]:
        """Megatron's async input-gradient reduction overlapping the weight gradient."""
        if self.tp == 1:
            return [dgrad, wgrad]
        steps: list[Step] = []
        if self.sp:
            steps += [Comm(f"{label} input all-gather", "ALL_GATHER", self.act_bytes // self.tp, "tp", "async"),
                      dgrad, JOIN,
                      Comm(f"{label} grad reduce-scatter", "REDUCE_SCATTER", self.act_bytes, "tp", "async")]
        else:
            steps += [dgrad, Comm(f"{label} grad all-reduce", "ALL_REDUCE", self.act_bytes, "tp", "async")]
        return steps + [wgrad, JOIN]

    def _row_backward_enter(self, label: str) -> list[Step]:
        if self.sp:
            return [Comm(f"{label} grad all-gather", "ALL_GATHER", self.act_bytes // self.tp, "tp")]
        return []

    # ------------------------------------------------------------------ operators

    def _norm(self, name: str) -> Op:
        return memory(name, 2 * self.local_tokens * self.h * ELEM + 2 * self.h * ELEM, 5.0 * self.local_tokens * self.h)

    def _bias_dropout_add(self, name: str) -> Op:
        return memory(name, 4 * self.local_tokens * self.h * ELEM, 3.0 * self.local_tokens * self.h)

    def _qkv_cols(self) -> int:
        return (self.heads + 2 * self.kv_groups) * self.kv

    def attention_core(self, backward: bool = False) -> list[Op]:
        """Scores, softmax, dropout and context for this rank's heads (unfused unless flash)."""
        b, s, a, d = self.cfg.micro_batch_size, self.cfg.seq_length, self.heads, self.kv
        if self.cfg.use_flash_attn:
            fl = 4.0 * b * a * s * s * d * (2.5 if backward else 1.0)
            io = 4 * b * a * s * d * ELEM * (2 if backward else 1)
            return [Op("flash attention" + (" bwd" if backward else ""), fl, io, (b * a, s, s, d))]
        scores = b * a * s * s * ELEM
        ops = [gemm("attention scores QK^T", s, s, d, batch=b * a),
               memory("scale-mask-softmax", 2 * scores, 4.0 * b * a * s * s),
               memory("attention dropout", 2 * scores + scores // 2),
               gemm("attention context (PV)", s, d, s, batch=b * a)]
        if not backward:
            return ops
        return [gemm("context bwd dgrad", s, s, d, batch=b * a), gemm("context bwd wgrad", s, d, s, batch=b * a),
                memory("attention dropout bwd", 3 * scores), memory("softmax bwd", 3 * scores),
                gemm("scores bwd dQ", s, d, s, batch=b * a), gemm("scores bwd dK", s, d, s, batch=b * a)]

    def _mlp_up(self) -> int:
        return 2 * self.ffn if self.cfg.swiglu else self.ffn

    def forward(self) -> list[Step]:
        T, h = self.tokens, self.h
        steps: list[Step] = [self._norm("input layernorm")]
        steps += self._tp_enter("qkv")
        steps.append(gemm("qkv GEMM", T, self._qkv_cols(), h))
        steps += self.attention_core()
        steps.append(gemm("attention proj GEMM", T, h, self.heads * self.kv))
        steps += self._tp_leave("attention proj")
        steps += [self._bias_dropout_add("attention bias-dropout-add"), self._norm("pre-mlp layernorm")]
        steps += self.moe_forward() if self.cfg.num_experts else self.mlp_forward()
        steps += [self._bias_dropout_add("mlp bias-dropout-add")]
        return steps

    def mlp_forward(self) -> list[Step]:
        T, h = self.tokens, self.h
        steps = self._tp_enter("fc1")
        steps += [gemm("fc1 GEMM", T, self._mlp_up(), h),
                  memory("swiglu" if self.cfg.swiglu else "gelu", (self._mlp_up() + self.ffn) * T * ELEM),
                  gemm("fc2 GEMM", T, h, self.ffn)]
        return steps + self._tp_leave("fc2")

    def mlp_backward(self) -> list[Step]:
        T, h, up = self.tokens, self.h, self._mlp_up()
        steps = self._row_backward_enter("fc2")
        steps += [gemm("fc2 dgrad", T, self.ffn, h), gemm("fc2 wgrad", self.ffn, h, T),
                  memory("gelu bwd", (up + 2 * self.ffn) * T * ELEM)]
        return steps + self._column_backward("fc1", gemm("fc1 dgrad", T, h, up), gemm("fc1 wgrad", h, up, T))

    def backward(self) -> list[Step]:
        T, h = self.tokens, self.h
        steps: list[Step] = [memory("mlp bias-dropout-add bwd", 3 * self.local_tokens * h * ELEM)]
        steps += self.moe_backward() if self.cfg.num_experts else self.mlp_backward()
        steps += [self._norm("pre-mlp layernorm bwd"), memory("attention bias-dropout-add bwd", 3 * self.local_tokens * h * ELEM)]
        steps += self._row_backward_enter("attention proj")
        hd = self.heads * self.kv
        steps += [gemm("proj dgrad", T, hd, h), gemm("proj wgrad", hd, h, T)]
        steps += self.attention_core(backward=True)
        q = self._qkv_cols()
        steps += self._column_backward("qkv", gemm("qkv dgrad", T, h, q), gemm("qkv wgrad", h, q, T))
        steps.append(self._norm("input layernorm bwd"))
        return steps

    # ------------------------------------------------------------------ mixture of experts

    def _moe_sizes(self) -> tuple[int, int, int]:
        """(routed tokens this rank's experts see, their ffn width, local experts). Experts are not
        tensor-parallel (expert tp 1); tokens are balanced over experts (no capacity drop)."""
        cfg = self.cfg
        routed = self.local_tokens * cfg.moe_router_topk
        return routed, self.cfg.ffn, cfg.num_experts // cfg.expert_model_parallel_size

    def moe_forward(self) -> list[Step]:
        """Megatron-core's alltoall token dispatcher: route, permute, all-to-all over the
        expert-parallel group, expert MLPs, all-to-all back, unpermute."""
        cfg, h = self.cfg, self.h
        routed, ffn, local = self._moe_sizes()
        up = 2 * ffn if cfg.swiglu else ffn
        a2a = routed * h * ELEM
        steps: list[Step] = [gemm("router GEMM", self.local_tokens, cfg.num_experts, h),
                             memory("router top-k + permute", 2 * a2a)]
        if cfg.expert_model_parallel_size > 1:
            steps.append(Comm("moe dispatch all-to-all", "ALL_TO_ALL", a2a, "ep"))
        per = max(1, routed // local)
        steps += [Op("expert fc1 GEMMs", 2.0 * routed * up * h, ELEM * (routed * (h + up) + local * h * up),
                     (local, per, up, h), local),
                  memory("expert activation", (up + ffn) * routed * ELEM),
                  Op("expert fc2 GEMMs", 2.0 * routed * ffn * h, ELEM * (routed * (h + ffn) + local * h * ffn),
                     (local, per, h, ffn), local)]
        if cfg.expert_model_parallel_size > 1:
            steps.append(Comm("moe combine all-to-all", "ALL_TO_ALL", a2a, "ep"))
        return steps + [memory("unpermute", 2 * a2a)]

    def moe_backward(self) -> list[Step]:
        cfg, h = self.cfg, self.h
        routed, ffn, local = self._moe_sizes()
        up = 2 * ffn if cfg.swiglu else ffn
        a2a = routed * h * ELEM
        per = max(1, routed // local)
        steps: list[Step] = [memory("unpermute bwd", 2 * a2a)]
        if cfg.expert_model_parallel_size > 1:
            steps.append(Comm("moe combine bwd all-to-all", "ALL_TO_ALL", a2a, "ep"))
        steps += [Op("expert fc2 dgrad+wgrad", 4.0 * routed * ffn * h, 2 * ELEM * (routed * (h + ffn) + local * h * ffn),
                     (local, per, ffn, h), 2 * local),
                  memory("expert activation bwd", (up + 2 * ffn) * routed * ELEM),
                  Op("expert fc1 dgrad+wgrad", 4.0 * routed * up * h, 2 * ELEM * (routed * (h + up) + local * h * up),
                     (local, per, h, up), 2 * local)]
        if cfg.expert_model_parallel_size > 1:
            steps.append(Comm("moe dispatch bwd all-to-all", "ALL_TO_ALL", a2a, "ep"))
        return steps + [memory("permute bwd", 2 * a2a), gemm("router dgrad+wgrad", self.local_tokens, h, 2 * cfg.num_experts)]

    # ------------------------------------------------------------------ embedding and head

    def embedding_forward(self) -> list[Step]:
        """Vocab-parallel lookup; the partial embeddings are summed over tp (reduced or scattered)."""
        steps: list[Step] = [memory("word+position embedding", 3 * self.act_bytes)]
        steps += self._tp_leave("embedding")
        return steps + [memory("embedding dropout", 2 * self.local_tokens * self.h * ELEM)]

    def embedding_backward(self) -> list[Step]:
        steps = self._row_backward_enter("embedding")
        return steps + [memory("embedding grad (scatter-add)", 3 * self.act_bytes)]

    def head_forward(self) -> list[Step]:
        """Final layer norm, the column-parallel logits GEMM and vocab-parallel cross entropy
        (three tp all-reduces of one float per token: max, sum of exponentials, target logit)."""
        T, h, v = self.tokens, self.h, self.cfg.padded_vocab // self.tp
        steps: list[Step] = [self._norm("final layernorm")]
        steps += self._tp_enter("logits")
        steps.append(gemm("logits GEMM", T, v, h))
        ce = [memory("cross-entropy (vocab-parallel)", 3 * T * v * 4, 4.0 * T * v)]
        if self.tp > 1:
            ce += [Comm(f"cross-entropy {what} all-reduce", "ALL_REDUCE", 4 * T, "tp")
                   for what in ("max", "sum-exp", "target")]
        return steps + ce

    def head_backward(self) -> list[Step]:
        T, h, v = self.tokens, self.h, self.cfg.padded_vocab // self.tp
        steps: list[Step] = [memory("cross-entropy bwd", 2 * T * v * ELEM + T * v * 4)]
        steps += self._column_backward("logits", gemm("logits dgrad", T, h, v), gemm("logits wgrad", h, v, T))
        return steps + [self._norm("final layernorm bwd")]


def layer_parameters(cfg: MegatronConfig) -> tuple[int, int]:
    """(dense, expert) parameters of one transformer layer on one rank: dense ones are reduced
    over the data-parallel group, expert ones over the expert-data-parallel group."""
    t, h = cfg.tensor_model_parallel_size, cfg.hidden_size
    q = (cfg.num_attention_heads + 2 * cfg.query_groups) * cfg.kv_channels
    up = 2 * cfg.ffn if cfg.swiglu else cfg.ffn
    attn = (h * q + q) // t + h * h // t + h
    norms = 4 * h  # two layer norms (weight + bias)
    if cfg.num_experts:
        local = cfg.num_experts // cfg.expert_model_parallel_size
        return attn + norms + h * cfg.num_experts, local * (h * up + cfg.ffn * h)
    mlp = (h * up + up) // t + cfg.ffn * h // t + h
    return attn + mlp + norms, 0


def embedding_parameters(cfg: MegatronConfig) -> int:
    return cfg.padded_vocab * cfg.hidden_size // cfg.tensor_model_parallel_size + cfg.seq_length * cfg.hidden_size
