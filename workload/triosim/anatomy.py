"""What a trace says about the model: its parameters, and which backward operator belongs where.

TrioSim traces carry no dependencies (docs/formats.md §D.1), so three facts are recovered here:

* **Parameters** (= gradients): TrioSim's rule, the inputs of Adam's ``aten::_foreach_addcdiv_``
  minus those that are also inputs of ``_foreach_add_`` / ``_foreach_lerp_``. Without that optimizer
  op, the rule that does not depend on the optimizer: weight/bias-typed (``bias=None`` included)
  inputs of forward operators with a non-zero size. On both sample traces the two rules agree.
* **Anchors**: each backward operator is tied to the forward operator it differentiates, by the
  tensors it names: a parameter (by id or by storage id: AddmmBackward0 lists only the transposed
  weight, which shares the weight's storage), else the latest forward operator naming one of its
  tensors, else the anchor of the backward operator before it. Anchors are made non-increasing
  along the backward pass (a backward pass runs layers in reverse).
* **Gradient readiness**: a parameter's gradient is ready after the first backward operator whose
  anchor is at or before the parameter's forward operator.
"""
from __future__ import annotations

from dataclasses import dataclass

from workload.triosim.trace import Operator, Trace

_WEIGHT_TYPES = frozenset({"weight", "bias", "bias=None"})
_ADAM_STEP = "aten::_foreach_addcdiv_"
_ADAM_STATE = ("aten::_foreach_add_", "aten::_foreach_lerp_")


@dataclass(frozen=True, slots=True)
class Parameter:
    """A trainable tensor. ``forward_pos`` and ``ready_pos`` index the forward / backward op lists."""

    tensor_id: int
    bytes: int  #: unscaled trace size
    forward_pos: int  #: the first forward operator that reads it
    tp_sharded: bool  #: read by a tpflag=1 operator, so tensor parallelism splits it
    ready_pos: int | None  #: the backward operator after which its gradient exists (None: no backward pass)


@dataclass(frozen=True)
class Anatomy:
    """Forward / backward / optimizer operators of a trace and how they relate."""

    forward: list[Operator]
    backward: list[Operator]
    optimizer: list[Operator]
    parameters: list[Parameter]  #: in forward (layer) order
    parameter_rule: str
    anchors: list[int]  #: per backward op, the forward position it belongs to (non-increasing)

    @property
    def parameter_ids(self) -> frozenset[int]:
        return frozenset(p.tensor_id for p in self.parameters)

    def gradient_bytes(self) -> int:
        return sum(p.bytes for p in self.parameters)


def analyse(trace: Trace) -> Anatomy:
    forward, backward = trace.stage_ops("forward"), trace.stage_ops("backward")
    optimizer = trace.stage_ops("optimizer")
    ids, rule = _parameter_ids(trace, forward)
    consumer: dict[int, int] = {}
    for pos, op in enumerate(forward):
        for t in op.inputs:
            if t in ids:
                consumer.setdefault(t, pos)
    ordered = sorted(ids, key=lambda t: (consumer.get(t, len(forward)), t))
    anchors = _anchors(trace, forward, backward, ordered, consumer)
    params = []
    for t in ordered:
        pos = consumer.get(t, len(forward) - 1)
        sharded = any(t in op.inputs and op.tpflag for op in forward)
        ready = next((i for i, a in enumerate(anchors) if a <= pos), len(backward) - 1)
        params.append(Parameter(t, trace.tensors[t].bytes, pos, sharded, ready if backward else None))
    return Anatomy(forward, backward, optimizer, params, rule, anchors)


def _parameter_ids(trace: Trace, forward: list[Operator]) -> tuple[frozenset[int], str]:
    steps = [op for op in trace.operators if op.name == _ADAM_STEP]
    if steps:
        state = {t for op in trace.operators if op.name in _ADAM_STATE for t in op.inputs}
        return frozenset(t for op in steps for t in op.inputs if t not in state), (
            "inputs of aten::_foreach_addcdiv_ minus inputs of _foreach_add_/_foreach_lerp_ (TrioSim)"
        )
    found = frozenset(
        t for op in forward for t in op.inputs
        if trace.tensors[t].types & _WEIGHT_TYPES and trace.tensors[t].bytes > 0
    )
    return found, "weight/bias-typed inputs of forward operators"


def _anchors(trace: Trace, forward: list[Operator], backward: list[Operator],
             params: list[int], consumer: dict[int, int]) -> list[int]:
    last_ref: dict[int, int] = {}
    for pos, op in enumerate(forward):
        for t in op.tensor_ids:
            last_ref[t] = pos
    by_storage: dict[int, int] = {}
    for t in params:
        storage = trace.tensors[t].storage_id
        if storage and t in consumer:  # storage 0 marks "no storage" (a None tensor)
            by_storage[storage] = max(by_storage.get(storage, -1), consumer[t])
    anchors: list[int] = []
    previous = len(forward) - 1
    for op in backward:
        hits = [consumer[t] for t in op.tensor_ids if t in consumer]
        hits += [by_storage[s] for s in (trace.tensors[t].storage_id for t in op.tensor_ids) if s in by_storage]
        if not hits:
            hits = [last_ref[t] for t in op.tensor_ids if t in last_ref]
        anchor = min(previous, max(hits)) if hits else previous
        anchors.append(max(anchor, 0))
        previous = anchors[-1]
    return anchors
