"""Which host operators are communication, of what kind, how many bytes, with which peer.

Recognised by the operator's name, whatever the backend: the c10d dispatcher ops that every
``torch.distributed`` call goes through (``c10d::allreduce_``, ``c10d::_allgather_base_``,
``c10d::send``, ...), functional collectives (``_c10d_functional::all_reduce``) and, in traces
without those, the backend's own records (``gloo:all_reduce``, ``nccl:all_reduce``,
``record_param_comms``). NCCL kernels are named the same way (``ncclDevKernel_AllReduce_...``).

The size follows ASTRA-sim's ``comm_size`` (docs/astra-sim-semantics.md): the bytes of the
operator's *input* tensors, i.e. the per-rank input of an all-gather and the full input of a
reduce-scatter, from the tensor records of the execution trace (numel × element size).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from workload.collect.execution_trace import EtNode
from workload.comm_names import (BACKEND_PREFIXES, DISPATCH_PREFIXES, DTYPE_BYTES, PEER_ARGS, RECV, SEND,
                                 SIMULATED, data_argument, int_or_none, kind_of_name, named_args, tensor_bytes)

__all__ = ["RECV", "SEND", "SIMULATED", "CommOp", "comm_op", "has_dispatch_ops", "is_comm_op", "kind_of_name",
           "record_bytes", "storages"]


def is_comm_op(node: EtNode, backend_records: bool = False) -> bool:
    """A host operator that starts communication: a c10d dispatcher op; with backend_records (a
    trace that has none) also the backend's own records and record_param_comms."""
    if node.name.startswith(DISPATCH_PREFIXES):
        return kind_of_name(node.name.split("::")[-1]) is not None
    if not backend_records:
        return False
    if node.name == "record_param_comms":
        return True
    return node.name.startswith(BACKEND_PREFIXES) and kind_of_name(node.name.split(":")[-1]) is not None


def has_dispatch_ops(nodes: Iterable[EtNode]) -> bool:
    """Whether collectives show as c10d dispatcher ops (torch 2.0 and later): then the backend's
    records (gloo:all_reduce, started on its own threads, under whatever op was open) are not launches."""
    return any(n.name.startswith(DISPATCH_PREFIXES) for n in nodes)


@dataclass(frozen=True, slots=True)
class CommOp:
    """One communication operator of the host trace."""

    kind: str                 # a SIMULATED key, SEND, RECV or another collective name
    size_bytes: int
    peer: int | None          # group rank of the other side of a send/recv
    tag: int
    group_name: str | None    # process-group name when the operator names it
    sparse: bool = False      # an all-reduce of sparse tensors, sent as an all-gather (workload/sparse_tensors.py)


def comm_op(node: EtNode, record_args: dict | None) -> CommOp:
    """Describe a communication operator; record_args: the Kineto args of its record_param_comms."""
    rec = record_args or {}
    kind = kind_of_name(node.name.split("::")[-1]) or kind_of_name(str(rec.get("Collective name", ""))) or ""
    if node.name == "record_param_comms":
        kind = kind_of_name(str(rec.get("Collective name", ""))) or kind
    args = named_args(node.inputs.values, node.inputs.types, node.op_schema)
    size = tensor_bytes(data_argument(args)) or record_bytes(rec)
    peer = _int_arg(args, PEER_ARGS)
    if peer is None:
        peer = int_or_none(rec.get("Dst Rank" if kind == SEND else "Src Rank"))
    group = args.get("group_name")
    group_name = str(group[0]) if group and isinstance(group[0], str) else None
    if rec.get("Process Group Name") is not None:
        group_name = str(rec["Process Group Name"])
    return CommOp(kind, size, peer, _int_arg(args, ("tag",)) or 0, group_name)

def record_bytes(rec: dict) -> int:
    nelems = int_or_none(rec.get("In msg nelems"))
    itemsize = DTYPE_BYTES.get(str(rec.get("dtype", "")).lower().replace("torch.", ""))
    return nelems * itemsize if nelems and itemsize else 0


def _int_arg(args: dict[str, tuple[Any, str]], names: tuple[str, ...]) -> int | None:
    for name in names:
        if name in args:
            return int_or_none(args[name][0])
    return None


def storages(node: EtNode) -> set[int]:
    """Storage ids of every tensor the node reads or writes."""
    found: set[int] = set()

    def walk(value: Any) -> None:
        if isinstance(value, list):
            if len(value) >= 5 and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:5]):
                found.add(value[1])
            else:
                for v in value:
                    walk(v)
    walk(node.inputs.values)
    walk(node.outputs.values)
    return found
