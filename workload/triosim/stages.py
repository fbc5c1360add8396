"""Pipeline stages: which operators each stage runs, what crosses each cut, and the schedule.

Two ways to cut (``pp_balance``):

* ``count``, TrioSim's rule (``traceplayer/pipeParallel.go``): forward operators split into pp runs
  of equal count (stage i gets ``[i·n/pp, (i+1)·n/pp)``); the backward and optimizer operators,
  together, split the same way and dealt in reverse (the first run to the last stage).
* ``time`` (default): every backward operator follows its forward operator (anatomy.anchors), each
  forward operator weighs its forward plus its backward time, and the forward sequence is cut into
  pp contiguous runs minimising the heaviest stage. Each stage runs every optimizer operator for its
  own parameters: time × (the stage's parameter bytes / all parameter bytes).

Activations crossing cut s are the tensors a forward operator of stage ≤ s writes and a forward
operator of a stage > s reads (a skip connection crosses every cut it spans). The gradients of
the same tensors go back across the cut in the backward pass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from workload.triosim.anatomy import Anatomy
from workload.triosim.errors import LayoutError
from workload.triosim.scaling import ScaledTrace
from workload.triosim.trace import Operator, Trace


@dataclass
class Stage:
    index: int
    forward: list[Operator] = field(default_factory=list)
    backward: list[Operator] = field(default_factory=list)
    optimizer: list[tuple[Operator, Fraction]] = field(default_factory=list)  #: (op, share of its time)
    parameters: list[int] = field(default_factory=list)  #: positions in anatomy.parameters
    send_tensors: list[int] = field(default_factory=list)  #: activations crossing to the next stage


def plan_stages(anatomy: Anatomy, scaled: ScaledTrace, pp: int, balance: str) -> list[Stage]:
    n = len(anatomy.forward)
    if n < pp:
        raise LayoutError("--pp", f"{pp} stages but the trace has only {n} forward operators")
    stages = [Stage(i) for i in range(pp)]
    if balance == "count":
        fwd_stage = [_even_cut(i, n, pp) for i in range(n)]
        rest = anatomy.backward + anatomy.optimizer
        for i, op in enumerate(rest):
            s = pp - 1 - _even_cut(i, len(rest), pp)
            (stages[s].backward if op.stage == "backward" else stages[s].optimizer).append(
                op if op.stage == "backward" else (op, Fraction(1)))
    else:
        weight = [scaled.time_ns(op) for op in anatomy.forward]
        for op, a in zip(anatomy.backward, anatomy.anchors):
            weight[a] += scaled.time_ns(op)
        fwd_stage = _min_max_cut(weight, pp)
        for op, a in zip(anatomy.backward, anatomy.anchors):
            stages[fwd_stage[a]].backward.append(op)
    for op, s in zip(anatomy.forward, fwd_stage):
        stages[s].forward.append(op)
    for i, p in enumerate(anatomy.parameters):
        stages[fwd_stage[p.forward_pos]].parameters.append(i)
    if balance == "time":
        _share_optimizer(stages, anatomy)
    _cut_tensors(stages, anatomy, scaled.trace, fwd_stage)
    return stages


def _even_cut(i: int, n: int, parts: int) -> int:
    """The run of TrioSim's ``[k·n/parts, (k+1)·n/parts)`` split that holds item i."""
    k = i * parts // n
    while (k + 1) * n // parts <= i:
        k += 1
    while k * n // parts > i:
        k -= 1
    return k


def _min_max_cut(weight: list[Fraction], parts: int) -> list[int]:
    """Stage of each item: contiguous non-empty runs minimising the heaviest run (exact DP).

    Ties go to the earliest cut, so the result is deterministic. O(parts · n²) on integers.
    """
    n = len(weight)
    scale = math.lcm(*(w.denominator for w in weight)) if weight else 1
    prefix = [0]
    for w in weight:
        prefix.append(prefix[-1] + int(w * scale))
    unset = prefix[-1] + 1
    best = [[unset] * (n + 1) for _ in range(parts + 1)]
    cut = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0
    for k in range(1, parts + 1):
        prev, row, cuts = best[k - 1], best[k], cut[k]
        for i in range(k, n - (parts - k) + 1):
            pi = prefix[i]
            for j in range(k - 1, i):
                v = max(prev[j], pi - prefix[j])
                if v < row[i]:
                    row[i], cuts[i] = v, j
    stage = [0] * n
    i = n
    for k in range(parts, 0, -1):
        j = cut[k][i]
        for x in range(j, i):
            stage[x] = k - 1
        i = j
    return stage


def _share_optimizer(stages: list[Stage], anatomy: Anatomy) -> None:
    total = sum(p.bytes for p in anatomy.parameters)
    for st in stages:
        mine = sum(anatomy.parameters[i].bytes for i in st.parameters)
        share = Fraction(mine, total) if total else Fraction(int(st.index == len(stages) - 1))
        if share:
            st.optimizer = [(op, share) for op in anatomy.optimizer]


def _cut_tensors(stages: list[Stage], anatomy: Anatomy, trace: Trace, fwd_stage: list[int]) -> None:
    """Fill each stage's ``send_tensors``. Tensors are matched by storage, so a view made by an
    operator the tracer dropped (VGG's flatten: 199 → 205) still links writer and reader."""
    params = anatomy.parameter_ids

    def key(t: int) -> tuple[str, int]:
        storage = trace.tensors[t].storage_id
        return ("storage", storage) if storage else ("tensor", t)

    param_keys = {key(t) for t in params}
    written: dict[tuple[str, int], int] = {}  # first stage whose forward op writes it
    read_last: dict[tuple[str, int], int] = {}  # last stage whose forward op reads it
    read_as: dict[tuple[str, int], int] = {}  # the largest tensor read under that key
    for op, s in zip(anatomy.forward, fwd_stage):
        for t in op.inputs:
            k = key(t)
            if t in params or k in param_keys:
                continue
            read_last[k] = max(read_last.get(k, s), s)
            if trace.tensors[t].bytes > trace.tensors[read_as.get(k, t)].bytes or k not in read_as:
                read_as[k] = t
        for t in op.outputs:
            written.setdefault(key(t), s)
    for st in stages[:-1]:
        st.send_tensors = [read_as[k] for k, s in written.items() if s <= st.index < read_last.get(k, -1)]


def schedule(kind: str, pp: int, stage: int, micro_batches: int) -> list[tuple[str, int]]:
    """The order of ("F", m) and ("B", m) passes a stage runs.

    gpipe: all forwards, then all backwards (micro-batch order). 1f1b (PipeDream-Flush, as
    Megatron's non-interleaved schedule): pp − stage − 1 warm-up forwards, then one forward and one
    backward in turn, then the remaining backwards.
    """
    m = micro_batches
    if kind == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warm = min(pp - stage - 1, m)
    order = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", i) for i in range(m - warm, m)]
    return order
