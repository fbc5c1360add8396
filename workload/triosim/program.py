"""Each rank's program for a dp × tp × pp layout (TrioSim's rules, docs/formats.md §D.2).

A rank (dp index d, tp index t, stage p) runs its stage's passes in schedule order:

* forward pass of micro-batch m: receive activations from stage p−1, replay the stage's forward
  operators (time ÷ micro-batches), send activations to stage p+1 (a side node);
* backward pass: the same with activation gradients, in the other direction;
* tensor parallel: a tpflag=1 operator runs time ÷ tp and is followed by a blocking all-reduce of
  its output bytes ÷ tp in the tp group (TrioSim's rule); other operators run whole;
* data parallel ``sync``: after the last backward pass, one all-reduce of the stage's gradient
  bytes in the dp group; ``ddp``: gradients bucketed in reverse layer order (PyTorch's greedy cap,
  default 25 MiB), each bucket all-reduced as a side node as soon as the backward operator that
  finishes it is done in the last micro-batch; the optimizer waits for every bucket;
* then the stage's optimizer operators.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from workload.triosim.anatomy import Anatomy
from workload.triosim.layout import CommGroups, Layout
from workload.triosim.rank_graph import RankGraph
from workload.triosim.scaling import ScaledTrace
from workload.triosim.stages import Stage, schedule
from workload.triosim.trace import Operator

P2P_TAG_BASE = 1 << 28  #: SEND/RECV tags start here, clear of collective stream ids (< 5·10^8)
FORWARD, BACKWARD = 0, 1


@dataclass(frozen=True)
class Bucket:
    """A DDP gradient bucket on one stage; ``ready`` indexes the stage's backward operators."""

    params: tuple[int, ...]  #: positions in anatomy.parameters, reverse layer order
    size_bytes: int  #: per rank (tensor-parallel shards already divided)
    ready: int | None  #: None: the stage has no backward operator, issue after the last pass


def p2p_tag(micro_batch: int, direction: int) -> int:
    return P2P_TAG_BASE + 2 * micro_batch + direction


class ProgramBuilder:
    """Builds every rank's RankGraph from one trace analysis and one layout."""

    def __init__(self, anatomy: Anatomy, scaled: ScaledTrace, layout: Layout,
                 stages: list[Stage], groups: CommGroups) -> None:
        self.anatomy, self.scaled, self.layout = anatomy, scaled, layout
        self.stages, self.groups = stages, groups
        #: a trace without backward operators is inference: no backward passes, no gradient sync
        self.training = bool(anatomy.backward)
        ddp = layout.dp > 1 and layout.dp_mode == "ddp" and self.training
        self.buckets = [self._buckets(st) for st in stages] if ddp else None

    # -------------------------------------------------------------------------------- sizes

    def gradient_bytes(self, param_pos: int) -> int:
        """Gradient bytes of one parameter on one rank: tensor-parallel shards are ÷ tp."""
        p = self.anatomy.parameters[param_pos]
        size = self.scaled.tensor_bytes(p.tensor_id)
        return size // self.layout.tp if p.tp_sharded else size

    def activation_bytes(self, stage: int) -> int:
        """Bytes crossing the cut after ``stage`` per micro-batch (at least 1: the order must hold)."""
        m = self.layout.micro_batches
        return max(1, sum(self.scaled.tensor_bytes(t) // m for t in self.stages[stage].send_tensors))

    def _buckets(self, st: Stage) -> list[Bucket]:
        cap = self.layout.bucket_bytes
        local = {op.id: i for i, op in enumerate(st.backward)}
        buckets: list[Bucket] = []
        members: list[int] = []
        size = 0
        for pos in reversed(st.parameters):
            members.append(pos)
            size += self.gradient_bytes(pos)
            if size >= cap:
                buckets.append(self._bucket(members, size, local, st))
                members, size = [], 0
        if members:
            buckets.append(self._bucket(members, size, local, st))
        ready = -1  # bucket k never waits on less than bucket k−1: issue order = bucket order
        out = []
        for b in buckets:
            if b.ready is not None:
                ready = max(ready, b.ready)
                b = Bucket(b.params, b.size_bytes, ready)
            out.append(b)
        return [b for b in out if b.size_bytes > 0]  # a 0-byte collective is never written

    def _bucket(self, members: list[int], size: int, local: dict[int, int], st: Stage) -> Bucket:
        if not st.backward:
            return Bucket(tuple(members), size, None)
        last = len(st.backward) - 1
        ready = []
        for pos in members:
            r = self.anatomy.parameters[pos].ready_pos
            op = self.anatomy.backward[r] if r is not None else None
            ready.append(local.get(op.id, last) if op is not None else last)
        return Bucket(tuple(members), size, max(ready))

    # -------------------------------------------------------------------------------- ranks

    def build(self, rank: int) -> RankGraph:
        lay = self.layout
        d, t, p = lay.coordinates(rank)
        st = self.stages[p]
        g = RankGraph(rank, self.layout.astra_sim_compatible)
        tp_group = self.groups.tp_group(d, p) if lay.tp > 1 else 0
        dp_group = self.groups.dp_group(t, p) if lay.dp > 1 else 0
        bucket_nodes: list[int] = []
        for kind, m in schedule(lay.pp_schedule, lay.pp, p, lay.micro_batches):
            if kind == "F":
                self._forward(g, st, d, t, p, m, tp_group)
            elif self.training:
                last = m == lay.micro_batches - 1
                hooks = self._hooks(p) if last and self.buckets is not None else {}
                bucket_nodes += self._backward(g, st, d, t, p, m, tp_group, dp_group, hooks)
        if self.buckets is not None:
            bucket_nodes += [g.all_reduce(f"ddp bucket {k} all-reduce ({b.size_bytes} B)", b.size_bytes, dp_group,
                                          chain=False) for k, b in enumerate(self.buckets[p]) if b.ready is None]
            g.join(bucket_nodes)
        elif lay.dp > 1 and self.training:
            total = sum(self.gradient_bytes(i) for i in st.parameters)
            if total > 0:
                g.all_reduce(f"dp all-reduce of gradients ({total} B)", total, dp_group)
        for op, share in st.optimizer:
            self._op(g, op, share, tp_group, "")
        return g

    def _hooks(self, stage: int) -> dict[int, list[tuple[int, Bucket]]]:
        hooks: dict[int, list[tuple[int, Bucket]]] = {}
        for k, b in enumerate(self.buckets[stage]):
            if b.ready is not None:
                hooks.setdefault(b.ready, []).append((k, b))
        return hooks

    def _forward(self, g: RankGraph, st: Stage, d: int, t: int, p: int, m: int, tp_group: int) -> None:
        lay = self.layout
        mb = f" mb{m}" if lay.micro_batches > 1 else ""
        if p > 0:
            g.recv(f"recv activations{mb} from stage {p - 1}", lay.rank(d, t, p - 1),
                   self.activation_bytes(p - 1), p2p_tag(m, FORWARD))
        for op in st.forward:
            self._op(g, op, Fraction(1, lay.micro_batches), tp_group, mb)
        if p < lay.pp - 1:
            g.send(f"send activations{mb} to stage {p + 1}", lay.rank(d, t, p + 1),
                   self.activation_bytes(p), p2p_tag(m, FORWARD), deps=[g.tail])

    def _backward(self, g: RankGraph, st: Stage, d: int, t: int, p: int, m: int, tp_group: int,
                  dp_group: int, hooks: dict[int, list[tuple[int, Bucket]]]) -> list[int]:
        lay = self.layout
        mb = f" mb{m}" if lay.micro_batches > 1 else ""
        if p < lay.pp - 1:
            g.recv(f"recv activation gradients{mb} from stage {p + 1}", lay.rank(d, t, p + 1),
                   self.activation_bytes(p), p2p_tag(m, BACKWARD))
        issued = []
        for i, op in enumerate(st.backward):
            comp = self._op(g, op, Fraction(1, lay.micro_batches), tp_group, mb)
            for k, b in hooks.get(i, ()):
                issued.append(g.all_reduce(f"ddp bucket {k} all-reduce ({b.size_bytes} B)", b.size_bytes,
                                           dp_group, deps=[comp], chain=False))
        if p > 0:
            g.send(f"send activation gradients{mb} to stage {p - 1}", lay.rank(d, t, p - 1),
                   self.activation_bytes(p - 1), p2p_tag(m, BACKWARD), deps=[g.tail])
        return issued

    def _op(self, g: RankGraph, op: Operator, share: Fraction, tp_group: int, label: str) -> int:
        """Replay one operator (time × share, ÷ tp if tpflag); return its compute node."""
        tp = self.layout.tp
        split = op.tpflag == 1 and tp > 1
        time = self.scaled.time_ns(op) * share / (tp if split else 1)
        comp = g.comp(f"{op.name} [op {op.id}]{label}", time)
        if split:
            size = sum(self.scaled.tensor_bytes(x) // self.layout.micro_batches
                       if op.stage != "optimizer" else self.scaled.tensor_bytes(x) for x in op.outputs) // tp
            if size > 0:
                g.all_reduce(f"tp all-reduce after op {op.id}{label} ({size} B)", size, tp_group)
        return comp
