"""One pipeline stage's program, built once and shared by every rank of that stage.

All ranks of a stage (every tp and dp index) run the same nodes; they differ only in which
process group a collective names and which rank a send or receive names. So the program is a
template whose communication nodes carry a group *kind* (tp, dp, ...) and a stage *offset*,
resolved per rank by writer.py: generation costs one build per stage, not one per rank, and the
ranks of a stage are images of each other by construction (the simulator still proves it,
system/shortcuts/orbits.py).

Per micro-batch pass (schedule.py order): receive from the previous virtual stage, run the
chunk's layers (embedding first, output head last), send to the next; a receive is chained (the
pass needs its data), a send is waited for by the next pass (Megatron's blocking p2p). Backward
passes run the layers in reverse, each first recomputing its forward with
``--recompute-granularity full`` (core attention only with ``selective``). After the last pass
``finalize_model_grads``'s order: data-parallel gradient all-reduce (reduce-scatter with the
distributed optimizer), expert gradients over the expert-data-parallel group, sequence-parallel
layer-norm gradients over tp, tied-embedding gradients between the first and last stage; then the
optimizer step (and the distributed optimizer's parameter all-gather).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workload.megatron.compute import ComputeModel, Op, memory
from workload.megatron.config import MegatronConfig
from workload.megatron.gpus import GpuPreset
from workload.megatron.layers import JOIN, Comm, LayerShapes, Step, embedding_parameters, layer_parameters
from workload.megatron.schedule import pipeline_schedule

P2P_TAG_BASE = 1 << 28  #: clear of collective stream ids (docs/formats.md)
GRAD_BYTES = 4  #: gradients reduced in fp32 (Megatron's main_grad buffers under bf16)
ADAM_BYTES_PER_PARAM = 30  #: read fp32 param, grad, m, v; write param, m, v and the bf16 copy
COMP, COLL, SEND, RECV = "comp", "coll", "send", "recv"


@dataclass(slots=True)
class TNode:
    """A template node: ``group`` (a layout kind) or ``peer_stage_delta`` is resolved per rank."""

    kind: str
    name: str
    deps: list[int]
    duration_ns: int = 0
    comm_type: str = ""
    size_bytes: int = 0
    group: str = ""
    peer_stage_delta: int = 0
    tag: int = 0


@dataclass
class StageProgram:
    stage: int
    nodes: list[TNode] = field(default_factory=list)
    compute_ns_by_op: dict[str, float] = field(default_factory=dict)  #: breakdown (exact, per op name)
    bytes_by_comm: dict[str, int] = field(default_factory=dict)


class _Builder:
    """Appends nodes in replay order; consecutive operators fuse into one COMP node."""

    def __init__(self, prog: StageProgram, model: ComputeModel, gpu: GpuPreset, skip_groups: set[str]) -> None:
        self.prog, self.model, self.gpu, self.skip = prog, model, gpu, skip_groups
        self.tail: int | None = None
        self.pending: list[int] = []  # sends and joined async collectives: the next chained node waits
        self.open: list[int] = []  # async collectives running beside compute until the next JOIN
        self.run_ns = 0.0
        self.run_kernels = 0
        self.run_names: list[str] = []
        self.run_label = ""
        self.exact_ns = 0.0  # running compute total; node durations are cut from it (no drift)
        self.written_ns = 0

    def _add(self, node: TNode, chain: bool) -> int:
        nodes = self.prog.nodes
        node.deps = sorted(set(([] if self.tail is None else [self.tail]) + (self.pending if chain else [])))
        if chain:
            self.pending = []
        nodes.append(node)
        if chain:
            self.tail = len(nodes) - 1
        return len(nodes) - 1

    def op(self, op: Op, label: str) -> None:
        t = self.model.time_ns(op, self.gpu)
        if not self.run_names:
            self.run_label = label
        self.run_ns += t
        self.run_kernels += op.kernels
        self.run_names.append(op.name)
        by = self.prog.compute_ns_by_op
        by[op.name] = by.get(op.name, 0.0) + t

    def flush(self) -> None:
        if not self.run_names:
            return
        run = self.model.run_ns(self.run_ns, self.run_kernels)
        if run > self.run_ns:
            by = self.prog.compute_ns_by_op
            by["(host-bound: launch overhead beyond GPU time)"] = by.get("(host-bound: launch overhead beyond GPU time)", 0.0) + run - self.run_ns
        self.exact_ns += run
        end = int(self.exact_ns + 0.5)
        names = self.run_names
        text = names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} ops)"
        self._add(TNode(COMP, f"{self.run_label}: {text}", [], duration_ns=max(1, end - self.written_ns)), True)
        self.written_ns = max(end, self.written_ns + 1)
        self.run_ns, self.run_kernels, self.run_names = 0.0, 0, []

    def steps(self, steps: list[Step], label: str) -> None:
        for s in steps:
            if isinstance(s, Op):
                self.op(s, label)
            elif s == JOIN:
                self.flush()
                self.pending += self.open  # the next chained node waits for them
                self.open = []
            else:
                self.comm(s, label)

    def comm(self, c: Comm, label: str) -> None:
        if c.group in self.skip or c.size_bytes <= 0:
            return
        self.flush()
        by = self.prog.bytes_by_comm
        by[c.comm_type] = by.get(c.comm_type, 0) + c.size_bytes
        node = TNode(COLL, f"{label}: {c.label}", [], comm_type=c.comm_type, size_bytes=c.size_bytes, group=c.group)
        if c.mode == "async":
            self.open.append(self._add(node, False))
        else:
            self._add(node, True)

    def send(self, name: str, delta: int, size: int, tag: int) -> None:
        self.flush()
        self.pending.append(self._add(TNode(SEND, name, [], size_bytes=size, peer_stage_delta=delta, tag=tag), False))

    def recv(self, name: str, delta: int, size: int, tag: int) -> None:
        self.flush()
        self._add(TNode(RECV, name, [], size_bytes=size, peer_stage_delta=delta, tag=tag), True)


def build_stage(cfg: MegatronConfig, gpu: GpuPreset, model: ComputeModel, stage: int,
                skip_groups: set[str]) -> StageProgram:
    """The program every rank of pipeline stage ``stage`` runs. ``skip_groups``: kinds whose
    groups are single ranks (their collectives are no-ops and are left out)."""
    prog = StageProgram(stage)
    b = _Builder(prog, model, gpu, skip_groups)
    shapes = LayerShapes(cfg)
    pp, chunks, layers = cfg.pipeline_model_parallel_size, cfg.model_chunks, cfg.layers_per_chunk
    vstages = pp * chunks
    p2p_bytes = shapes.local_tokens * cfg.hidden_size * 2  # s/tp x b x h with sequence parallelism
    forward, backward = shapes.forward(), shapes.backward()
    recompute: list[Step] = []
    if cfg.recompute_granularity == "full":
        recompute = forward
    elif cfg.recompute_granularity == "selective":
        recompute = list(shapes.attention_core())

    def tag(m: int, boundary: int, direction: int) -> int:
        return P2P_TAG_BASE + 2 * (m * vstages + boundary) + direction

    for kind, m, c in pipeline_schedule(pp, stage, cfg.micro_batches, chunks):
        v = c * pp + stage  # virtual stage
        first, last = v == 0, v == vstages - 1
        delta_prev = -1 if stage > 0 else pp - 1  # chunk c-1 of the last stage feeds chunk c of stage 0
        delta_next = 1 if stage < pp - 1 else -(pp - 1)
        where = f"mb{m} chunk{c}" if chunks > 1 else f"mb{m}"
        if kind == "F":
            if not first:
                b.recv(f"F {where}: recv activations from virtual stage {v - 1}", delta_prev, p2p_bytes, tag(m, v - 1, 0))
            if first:
                b.steps(shapes.embedding_forward(), f"F {where} embedding")
            for i in range(layers):
                b.steps(forward, f"F {where} layer {c * layers + i}")
            if last:
                b.steps(shapes.head_forward(), f"F {where} head")
                b.flush()
            else:
                b.send(f"F {where}: send activations to virtual stage {v + 1}", delta_next, p2p_bytes, tag(m, v, 0))
        else:
            if not last:
                b.recv(f"B {where}: recv gradients from virtual stage {v + 1}", delta_next, p2p_bytes, tag(m, v, 1))
            else:
                b.steps(shapes.head_backward(), f"B {where} head")
            for i in reversed(range(layers)):
                b.steps(recompute, f"B {where} recompute layer {c * layers + i}")
                b.steps(backward, f"B {where} layer {c * layers + i}")
            if first:
                b.steps(shapes.embedding_backward(), f"B {where} embedding")
                b.flush()
            else:
                b.send(f"B {where}: send gradients to virtual stage {v - 1}", delta_prev, p2p_bytes, tag(m, v - 1, 1))
    _finalize(b, cfg, stage)
    return prog


def stage_parameters(cfg: MegatronConfig, stage: int) -> tuple[int, int, int]:
    """(dense, expert, embedding) parameters one rank of ``stage`` holds."""
    dense, expert = layer_parameters(cfg)
    n = cfg.layers_per_stage
    emb = 0
    pp = cfg.pipeline_model_parallel_size
    if stage == 0:
        emb += embedding_parameters(cfg)
    if stage == pp - 1:
        emb += 2 * cfg.hidden_size  # final layer norm
        if pp > 1 or not cfg.tied_embeddings:
            emb += cfg.padded_vocab * cfg.hidden_size // cfg.tensor_model_parallel_size  # the output layer's copy
    return dense * n, expert * n, emb


def _finalize(b: _Builder, cfg: MegatronConfig, stage: int) -> None:
    dense, expert, emb = stage_parameters(cfg, stage)
    dp = cfg.data_parallel_size
    ep = cfg.expert_model_parallel_size if cfg.num_experts else 1
    params = dense + emb
    dist = cfg.use_distributed_optimizer
    steps: list[Step] = []
    if dist:
        steps.append(Comm("dp gradient reduce-scatter", "REDUCE_SCATTER", params * GRAD_BYTES, "dp"))
    else:
        steps.append(Comm("dp gradient all-reduce", "ALL_REDUCE", params * GRAD_BYTES, "dp"))
    if expert:
        steps.append(Comm("expert gradient all-reduce", "ALL_REDUCE", expert * GRAD_BYTES, "edp"))
    if cfg.sequence_parallel:
        norms = (4 * cfg.num_layers // cfg.pipeline_model_parallel_size + 2) * cfg.hidden_size
        steps.append(Comm("sequence-parallel layernorm gradient all-reduce", "ALL_REDUCE", norms * GRAD_BYTES, "tp"))
    pp = cfg.pipeline_model_parallel_size
    if pp > 1 and cfg.tied_embeddings and stage in (0, pp - 1):
        emb_grad = cfg.padded_vocab * cfg.hidden_size // cfg.tensor_model_parallel_size
        steps.append(Comm("tied word-embedding gradient all-reduce", "ALL_REDUCE", emb_grad * GRAD_BYTES, "emb"))
    shard = dp if dist else 1
    steps.append(memory("adam optimizer step", (params // shard + expert // (dp // ep if dist else 1)) * ADAM_BYTES_PER_PARAM,
                        kernels=8))
    if dist and dp > 1:
        steps.append(Comm("distributed-optimizer parameter all-gather", "ALL_GATHER", params // dp * 2, "dp"))
    b.steps(steps, "iteration end")
    b.flush()
