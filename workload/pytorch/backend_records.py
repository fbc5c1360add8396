"""Which backend record did the transfer of which communication operator.

A host backend (gloo) runs each collective on its own worker threads and records it there
(``gloo:all_reduce``, ``gloo:all_gather``, ``gloo:sparse_all_reduce``); the dispatcher op
(``c10d::allreduce_``) only queues it. The record's measured span is the collective's time on this
rank, which the network fit needs (network_fit.py). Records are paired with operators by identity,
not by the execution trace's parent links (which file a record under whatever op was open): a
record that reads a tensor of the operator, among those that started after it; else the backend's
queue order (each process group runs its work first in, first out). The record's kind need not be
the operator's: gloo runs ``_reduce_scatter_base_`` as ``gloo:all_reduce``.
"""
from __future__ import annotations

from workload.collect.execution_trace import EtNode, ExecutionTrace
from workload.comm_names import BACKEND_PREFIXES
from workload.pytorch.device_trace import DeviceTrace, Span
from workload.pytorch.sparse import tensor_records


def link_backend_records(et: ExecutionTrace, dev: DeviceTrace, ops: list[EtNode]) -> dict[int, Span]:
    """Operator node id → span of its backend record, for the operators of ``ops`` that have one."""
    records = sorted(((n, s) for n in et.nodes.values() if n.name.startswith(BACKEND_PREFIXES)
                      and (s := dev.by_rf.get(n.rf_id)) is not None), key=lambda p: (p[1].start_ns, p[0].rf_id))
    free = list(range(len(records)))
    tensors = [{r[0] for r in tensor_records(n.inputs.values)} for n, _ in records]
    out: dict[int, Span] = {}
    for op in sorted(ops, key=lambda n: n.rf_id):
        span = dev.by_rf.get(op.rf_id)
        if span is None or not free:
            continue
        mine = {r[0] for r in tensor_records(op.inputs.values)}
        later = [k for k in free if records[k][1].start_ns >= span.start_ns]
        pick = next((k for k in later if mine & tensors[k]), later[0] if later else None)
        if pick is None:
            continue
        free.remove(pick)
        out[op.id] = records[pick][1]
    return out
