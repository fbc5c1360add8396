"""Which backend record did the transfer of which communication operator.

A host backend (gloo) runs each collective on its own worker threads and records it there
(``gloo:all_reduce``, ``gloo:all_gather``, ``gloo:sparse_all_reduce``); the dispatcher op
(``c10d::allreduce_``) only queues it. The record's measured span is the collective's time on this
rank, which the network fit needs (network_fit.py). Records are paired with operators by identity,
not by the execution trace's parent links (which file a record under whatever op was open): among
the records that started after it and whose kind can be the operator's (``backend_runs``: gloo runs
``_reduce_scatter_base_`` as ``gloo:all_reduce``), one that reads a tensor of the operator; else one
that reads as many bytes; else the next one (each process group runs its work first in, first out);
an operator without tensors (a barrier) takes the next record without any. (By tensor alone, a
reduce-scatter took the all-gather after it, which reads its output shard, while gloo's all-reduce
read a copy of the input: both collectives' times were wrong, and the network fitted to them.)
"""
from __future__ import annotations

import math

from workload.collect.execution_trace import EtNode, ExecutionTrace
from workload.comm_names import BACKEND_PREFIXES, DTYPE_BYTES, backend_kind, backend_runs, dispatch_kind, tensor_records
from workload.pytorch.device_trace import DeviceTrace, Span


def link_backend_records(et: ExecutionTrace, dev: DeviceTrace, ops: list[EtNode]) -> dict[int, Span]:
    """Operator node id → span of its backend record, for the operators of ``ops`` that have one.

    Records come from Kineto, which keeps one that ended after the execution trace was closed (a
    collective still running when the step ended); their tensors from the execution trace where it
    has the record, else from Kineto's ``Input Dims`` and ``Input type``."""
    by_rf = {n.rf_id: n for n in et.nodes.values()}
    records = sorted(((rf, s) for rf, s in dev.by_rf.items() if s.name.startswith(BACKEND_PREFIXES)),
                     key=lambda p: (p[1].start_ns, p[0]))
    ids, sizes = [], []
    for rf, span in records:
        node = by_rf.get(rf)
        recs = tensor_records(node.inputs.values) if node is not None else []
        ids.append({r[0] for r in recs})
        sizes.append(sum(r[3] * r[4] for r in recs) if recs else _kineto_bytes(span.args))
    free = list(range(len(records)))
    out: dict[int, Span] = {}
    for op in sorted(ops, key=lambda n: n.rf_id):
        span = dev.by_rf.get(op.rf_id)
        if span is None or not free:
            continue
        recs = tensor_records(op.inputs.values)
        mine, size = {r[0] for r in recs}, sum(r[3] * r[4] for r in recs)
        later = [k for k in free if records[k][1].start_ns >= span.start_ns]
        kind = dispatch_kind(op.name)
        later = [k for k in later if kind is None or backend_kind(records[k][1].name) is None
                 or backend_runs(kind, backend_kind(records[k][1].name))]
        pick = next((k for k in later if mine & ids[k]), None)
        if pick is None and size:
            pick = next((k for k in later if sizes[k] == size), None)
        if pick is None:
            pick = next((k for k in later if not sizes[k]), None) if not recs else (later[0] if later else None)
        if pick is None:
            continue
        free.remove(pick)
        out[op.id] = records[pick][1]
    return out


def _kineto_bytes(args: dict) -> int:
    """Bytes of a Kineto event's inputs, from ``Input Dims`` and ``Input type`` (0 if it says none)."""
    total = 0
    for dims, typ in zip(args.get("Input Dims") or [], args.get("Input type") or []):
        size = DTYPE_BYTES.get(str(typ).split()[-1].lower()) if typ else None
        if size and isinstance(dims, list) and dims and all(isinstance(d, int) for d in dims):
            total += math.prod(dims) * size
    return total
