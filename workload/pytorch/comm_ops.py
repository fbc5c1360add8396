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

import re
from dataclasses import dataclass
from typing import Any, Iterable

from chakra_proto import et_def_pb2 as pb
from workload.collect.execution_trace import EtNode

SEND, RECV = "SEND", "RECV"
#: collectives the simulator runs; others (reduce, gather, scatter, barrier) stay host time only
SIMULATED = {"ALL_REDUCE": pb.ALL_REDUCE, "ALL_GATHER": pb.ALL_GATHER, "REDUCE_SCATTER": pb.REDUCE_SCATTER,
             "ALL_TO_ALL": pb.ALL_TO_ALL, "BROADCAST": pb.BROADCAST}
_KEYWORDS = (("alltoall", "ALL_TO_ALL"), ("allgather", "ALL_GATHER"), ("reducescatter", "REDUCE_SCATTER"),
             ("allreduce", "ALL_REDUCE"), ("broadcast", "BROADCAST"), ("send", SEND), ("recv", RECV),
             ("barrier", "BARRIER"), ("reduce", "REDUCE"), ("gather", "GATHER"), ("scatter", "SCATTER"))
_DISPATCH_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
_BACKEND_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:")
_DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
                "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "byte": 1, "uint8": 1,
                "char": 1, "int8": 1, "bool": 1}


def kind_of_name(name: str) -> str | None:
    """ALL_REDUCE, ..., SEND, RECV, BARRIER, ... from a name such as 'c10d::_allgather_base_'."""
    low = re.sub(r"[^a-z]", "", name.lower().replace("c10d", "").replace("nccldevkernel", "")
                 .replace("ncclkernel", ""))
    if low.startswith("wait") or "coalesced" == low or low.endswith("wait"):
        return None
    for key, kind in _KEYWORDS:
        if key in low:
            return kind
    return None


def is_comm_op(node: EtNode, backend_records: bool = False) -> bool:
    """A host operator that starts communication: a c10d dispatcher op; with backend_records (a
    trace that has none) also the backend's own records and record_param_comms."""
    if node.name.startswith(_DISPATCH_PREFIXES):
        return kind_of_name(node.name.split("::")[-1]) is not None
    if not backend_records:
        return False
    if node.name == "record_param_comms":
        return True
    return node.name.startswith(_BACKEND_PREFIXES) and kind_of_name(node.name.split(":")[-1]) is not None


def has_dispatch_ops(nodes: Iterable[EtNode]) -> bool:
    """Whether collectives show as c10d dispatcher ops (torch 2.0 and later): then the backend's
    records (gloo:all_reduce, started on its own threads, under whatever op was open) are not launches."""
    return any(n.name.startswith(_DISPATCH_PREFIXES) for n in nodes)


@dataclass(frozen=True, slots=True)
class CommOp:
    """One communication operator of the host trace."""

    kind: str                 # a SIMULATED key, SEND, RECV or another collective name
    size_bytes: int
    peer: int | None          # group rank of the other side of a send/recv
    tag: int
    group_name: str | None    # process-group name when the operator names it


def comm_op(node: EtNode, record_args: dict | None) -> CommOp:
    """Describe a communication operator; record_args: the Kineto args of its record_param_comms."""
    rec = record_args or {}
    kind = kind_of_name(node.name.split("::")[-1]) or kind_of_name(str(rec.get("Collective name", ""))) or ""
    if node.name == "record_param_comms":
        kind = kind_of_name(str(rec.get("Collective name", ""))) or kind
    args = _named_args(node)
    size = _bytes(_data_argument(args)) or record_bytes(rec)
    peer = _int_arg(args, ("dst", "dstrank", "src", "srcrank"))
    if peer is None:
        peer = _int_or_none(rec.get("Dst Rank" if kind == SEND else "Src Rank"))
    group = args.get("group_name")
    group_name = str(group[0]) if group and isinstance(group[0], str) else None
    if rec.get("Process Group Name") is not None:
        group_name = str(rec["Process Group Name"])
    return CommOp(kind, size, peer, _int_arg(args, ("tag",)) or 0, group_name)


def _named_args(node: EtNode) -> dict[str, tuple[Any, str]]:
    """Argument name → (value, type), names from the op schema (position names where it has none)."""
    names = _schema_names(node.op_schema)
    out = {}
    for i, (value, typ) in enumerate(zip(node.inputs.values, node.inputs.types)):
        out[names[i] if i < len(names) else f"arg{i}"] = (value, str(typ))
    return out


def _schema_names(schema: str) -> list[str]:
    if "(" not in schema:
        return []
    inner = schema.split("(", 1)[1].rsplit(") ->", 1)[0].rstrip(")")
    names = []
    for item in inner.split(","):
        words = item.split("=")[0].split()
        if words:
            names.append(words[-1].lower())
    return names


def _data_argument(args: dict[str, tuple[Any, str]]) -> Any:
    for want in ("input_tensors", "input_tensor", "input", "tensors", "tensor", "self"):
        if want in args and "tensor" in args[want][1].lower():
            return args[want][0]
    for value, typ in args.values():
        if "tensor" in typ.lower():
            return value
    return None


def _bytes(value: Any) -> int:
    """numel × element size of every tensor record ([id, storage, offset, numel, itemsize, device]) inside."""
    if not isinstance(value, list):
        return 0
    if len(value) >= 5 and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:5]):
        return value[3] * value[4]
    return sum(_bytes(v) for v in value)


def record_bytes(rec: dict) -> int:
    nelems = _int_or_none(rec.get("In msg nelems"))
    itemsize = _DTYPE_BYTES.get(str(rec.get("dtype", "")).lower().replace("torch.", ""))
    return nelems * itemsize if nelems and itemsize else 0


def _int_arg(args: dict[str, tuple[Any, str]], names: tuple[str, ...]) -> int | None:
    for name in names:
        if name in args:
            return _int_or_none(args[name][0])
    return None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
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
