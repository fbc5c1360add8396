"""The bytes of a sparse tensor that a collective moves: its indices and its values.

The execution trace records a sparse COO tensor as a tensor without storage (``[id, 0, 0, 0, 0,
'']``: no elements), so its all-reduce would read as 0 bytes. What the backend sends are the
tensor's two dense parts, which the trace shows where the tensor was made
(``aten::_sparse_coo_tensor_unsafe(indices, values, ...)``,
``aten::_sparse_coo_tensor_with_dims_and_tensors``) and where they are read back
(``aten::_indices``, ``aten::_values``). The latest of those before the collective gives its size.

gloo's sparse all-reduce is an all-gather: every rank sends its own indices and values (first
their counts, then the data) and sums what it gathers, so ranks send different amounts. The
simulator runs one size on every rank; the converter gives each rank the mean over the ranks,
which keeps the bytes gathered (see converter.py).
"""
from __future__ import annotations

import bisect
from typing import Any

from workload.collect.execution_trace import ExecutionTrace

_CONSTRUCTORS = ("aten::_sparse_coo_tensor_unsafe", "aten::_sparse_coo_tensor_with_dims_and_tensors",
                 "aten::sparse_coo_tensor", "aten::_sparse_coo_tensor_with_dims")
_PARTS = ("aten::_indices", "aten::_values", "aten::indices", "aten::values")


def is_storageless(record: Any) -> bool:
    """A tensor record with no storage and no elements: how the trace writes a sparse tensor."""
    return (isinstance(record, list) and len(record) >= 5 and all(isinstance(v, int) for v in record[:5])
            and record[1] == 0 and record[3] == 0)


def tensor_records(value: Any) -> list[list]:
    if not isinstance(value, list):
        return []
    if len(value) >= 5 and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:5]):
        return [value]
    return [r for v in value for r in tensor_records(v)]


class SparseSizes:
    """Index of one trace: sparse tensor id → where its size (bytes of indices + values) was seen."""

    def __init__(self, et: ExecutionTrace) -> None:
        self._made: dict[int, list[tuple[int, int]]] = {}
        self._parts: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for n in et.nodes.values():
            if n.name in _CONSTRUCTORS:
                size = sum(r[3] * r[4] for r in tensor_records(n.inputs.values) if not is_storageless(r))
                for out in tensor_records(n.outputs.values):
                    if is_storageless(out) and size:
                        self._made.setdefault(out[0], []).append((n.rf_id, size))
            elif n.name in _PARTS:
                ins, outs = tensor_records(n.inputs.values), tensor_records(n.outputs.values)
                if ins and outs and is_storageless(ins[0]) and not is_storageless(outs[0]):
                    which = "indices" if "indices" in n.name else "values"
                    self._parts.setdefault((ins[0][0], which), []).append((n.rf_id, outs[0][3] * outs[0][4]))
        for seen in (*self._made.values(), *self._parts.values()):
            seen.sort()

    def bytes_before(self, tensor_id: int, rf_id: int) -> int | None:
        """The size of sparse tensor ``tensor_id`` as last seen before operator ``rf_id``: where it
        was made, else its indices and values as last read back; None if the trace shows neither."""
        made = _last_before(self._made.get(tensor_id), rf_id)
        if made is not None:
            return made
        idx = _last_before(self._parts.get((tensor_id, "indices")), rf_id)
        val = _last_before(self._parts.get((tensor_id, "values")), rf_id)
        return idx + val if idx is not None and val is not None else None


def _last_before(seen: list[tuple[int, int]] | None, rf_id: int) -> int | None:
    if not seen:
        return None
    k = bisect.bisect_left(seen, (rf_id, -1)) - 1
    return seen[k][1] if k >= 0 else None
