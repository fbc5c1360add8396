"""What a host operator's name and arguments say about the communication it does.

One set of rules for every reader of PyTorch-made traces: the converter of raw traces
(workload/pytorch) and the loader of Chakra files that hold communication only as CPU
operators (workload/host_comms.py). Names are the c10d dispatcher ops that every
``torch.distributed`` call goes through (``c10d::allreduce_``, ``c10d::_allgather_base_``,
``c10d::send``, ...), functional collectives (``_c10d_functional::all_reduce``), the backends'
own records (``gloo:all_reduce``, ``nccl:all_reduce``) and NCCL kernels
(``ncclDevKernel_AllReduce_...``).
"""
from __future__ import annotations

import re

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

SEND, RECV = "SEND", "RECV"
#: collectives the simulator runs; others (reduce, gather, scatter, barrier) stay host time only
SIMULATED = {"ALL_REDUCE": pb.ALL_REDUCE, "ALL_GATHER": pb.ALL_GATHER, "REDUCE_SCATTER": pb.REDUCE_SCATTER,
             "ALL_TO_ALL": pb.ALL_TO_ALL, "BROADCAST": pb.BROADCAST}
_KEYWORDS = (("alltoall", "ALL_TO_ALL"), ("allgather", "ALL_GATHER"), ("reducescatter", "REDUCE_SCATTER"),
             ("allreduce", "ALL_REDUCE"), ("broadcast", "BROADCAST"), ("send", SEND), ("recv", RECV),
             ("barrier", "BARRIER"), ("reduce", "REDUCE"), ("gather", "GATHER"), ("scatter", "SCATTER"))
DISPATCH_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
BACKEND_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:")
DTYPE_BYTES = {"float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
               "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "byte": 1, "uint8": 1,
               "char": 1, "int8": 1, "bool": 1}
#: argument names (lower case, from op schemas) that hold the other side of a send / recv
PEER_ARGS = ("dst", "dstrank", "src", "srcrank", "peer")


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


def dispatch_kind(name: str) -> str | None:
    """The kind of a c10d dispatcher op ('c10d::allreduce_'), None for any other name."""
    return kind_of_name(name.split("::")[-1]) if name.startswith(DISPATCH_PREFIXES) else None


def backend_kind(name: str) -> str | None:
    """The kind of a backend's own record ('gloo:all_reduce'), None for any other name."""
    return kind_of_name(name.split(":")[-1]) if name.startswith(BACKEND_PREFIXES) else None


def schema_names(schema: str) -> list[str]:
    """Argument names (lower case) of an op schema such as 'c10d::send(Tensor[] tensors, ...)'."""
    if "(" not in schema:
        return []
    inner = schema.split("(", 1)[1].rsplit(") ->", 1)[0].rstrip(")")
    names = []
    for item in inner.split(","):
        words = item.split("=")[0].split()
        if words:
            names.append(words[-1].lower())
    return names


def named_args(values: list, types: list, schema: str) -> dict[str, tuple[Any, str]]:
    """Argument name → (value, type), names from the op schema (position names where it has none)."""
    names = schema_names(schema)
    return {names[i] if i < len(names) else f"arg{i}": (v, str(t)) for i, (v, t) in enumerate(zip(values, types))}


def data_argument(args: dict[str, tuple[Any, str]]) -> Any:
    """The value of the argument that holds the data sent (the input tensors)."""
    for want in ("input_tensors", "input_tensor", "input", "tensors", "tensor", "self"):
        if want in args and "tensor" in args[want][1].lower():
            return args[want][0]
    for value, typ in args.values():
        if "tensor" in typ.lower():
            return value
    return None


def tensor_bytes(value: Any) -> int:
    """numel × element size of every tensor record ([id, storage, offset, numel, itemsize, device]) inside."""
    if not isinstance(value, list):
        return 0
    if len(value) >= 5 and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:5]):
        return value[3] * value[4]
    return sum(tensor_bytes(v) for v in value)


def shape_bytes(shape: Any, typ: str) -> int:
    """Bytes of the tensors of one argument from its shape and type ('GenericList[Tensor(float)]'),
    for traces whose values do not hold tensor records."""
    dtypes = re.findall(r"Tensor\((\w+)\)", typ)
    if not dtypes:
        return 0
    size = DTYPE_BYTES.get(dtypes[0].lower())
    if size is None:
        return 0

    def numel(s: Any) -> int:
        if isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in s):
            out = 1
            for d in s:
                out *= d
            return out
        return sum(numel(x) for x in s) if isinstance(s, list) else 0
    return numel(shape) * size


def int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


#: backend records that run a dispatcher op of another kind: gloo runs ``_reduce_scatter_base_`` as
#: ``gloo:all_reduce`` (seen in torch 2.13 traces), NCCL runs ``barrier`` as an all-reduce of one element
_RUNS_AS = {("REDUCE_SCATTER", "ALL_REDUCE"), ("BARRIER", "ALL_REDUCE")}


def backend_runs(dispatch: str, backend: str) -> bool:
    """Whether a backend record of kind ``backend`` can be the transfer of a dispatcher op of kind
    ``dispatch`` (both as kind_of_name says them)."""
    return dispatch == backend or (dispatch, backend) in _RUNS_AS


def tensor_records(value: Any) -> list[list]:
    """Every tensor record ([id, storage, offset, numel, itemsize, device]) inside a value."""
    if not isinstance(value, list):
        return []
    if len(value) >= 5 and all(isinstance(v, int) and not isinstance(v, bool) for v in value[:5]):
        return [value]
    return [r for v in value for r in tensor_records(v)]


def is_sparse_record(record: list) -> bool:
    """A tensor record of a sparse tensor: the execution trace gives it no storage, no elements and
    no element size (``[id, 0, 0, 0, 0, '']``); its data are its indices and values tensors."""
    return record[1:5] == [0, 0, 0, 0] and (len(record) < 6 or record[5] == "")
