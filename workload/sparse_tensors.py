"""The bytes a collective of sparse tensors moves: their indices and their values.

One rule for both readers of PyTorch-made traces: the converter of raw traces (workload/pytorch)
and the loader of Chakra files that hold gloo's collectives as CPU operators (host_comms.py).

The execution trace records a sparse COO tensor without storage or elements (``[id, 0, 0, 0, 0,
'']``, comm_names.is_sparse_record), so its all-reduce would read as 0 bytes. What gloo sends are
the tensor's two dense parts, which the trace shows where the tensor was made
(``aten::_sparse_coo_tensor_unsafe(indices, values, ...)``: its first two dense inputs) and where
they are read back (``aten::_indices``, ``aten::_values``: their outputs). For each part the last
such operator the rank started before the collective counts, else the first after it; a part no
operator shows leaves the size unknown, and the readers refuse the file.

gloo's sparse all-reduce is an all-gather (every rank sends its own indices and values, then sums
what it gathered), so both readers write it as an ALL_GATHER of those bytes.
"""
from __future__ import annotations

from workload.comm_names import is_sparse_record, tensor_records

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Iterable

#: constructors (inputs: indices, then values; the output is the sparse tensor) and accessors
#: (input: the sparse tensor; output: the part)
MAKERS = frozenset({"aten::_sparse_coo_tensor_unsafe", "aten::_sparse_coo_tensor_with_dims_and_tensors",
                    "aten::sparse_coo_tensor", "aten::_sparse_coo_tensor_with_dims"})
PARTS = {"aten::_indices": "indices", "aten::indices": "indices", "aten::_values": "values",
         "aten::values": "values"}
SAYS_PARTS = ", ".join(sorted(MAKERS | set(PARTS)))


class SparseParts:
    """Where a trace shows the parts of its sparse tensors: built once per trace from its
    operators as (start order key, name, input values, output values)."""

    def __init__(self, ops: Iterable[tuple[int, str, Any, Any]]) -> None:
        self._seen: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for key, name, inputs, outputs in ops:
            if name in MAKERS:
                dense = [r for r in tensor_records(inputs) if not is_sparse_record(r)]
                if len(dense) >= 2:
                    for out in tensor_records(outputs):
                        for part, r in zip(("indices", "values"), dense):
                            self._seen.setdefault((out[0], part), []).append((key, r[3] * r[4]))
            elif name in PARTS:
                ins, outs = tensor_records(inputs), tensor_records(outputs)
                if ins and outs:
                    self._seen.setdefault((ins[0][0], PARTS[name]), []).append(
                        (key, sum(r[3] * r[4] for r in outs)))

    def bytes_at(self, tensor_id: int, key: int) -> int | None:
        """Bytes of the indices and values of sparse tensor ``tensor_id`` as seen nearest before
        order ``key`` (else after it); None when the trace does not show both parts."""
        total = 0
        for part in ("indices", "values"):
            found = self._seen.get((tensor_id, part))
            if not found:
                return None
            total += min(found, key=lambda kb: (kb[0] > key, abs(kb[0] - key)))[1]
        return total
