"""Helpers to build and read Chakra node attributes the way Chakra's tools and ASTRA-sim do."""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any
    from chakra_proto import et_def_pb2 as pb

_INT_MEMBERS = (
    "int64_val", "int32_val", "uint64_val", "uint32_val", "sint32_val", "sint64_val",
    "fixed32_val", "fixed64_val", "sfixed32_val", "sfixed64_val",
)
#: the members of an attribute's value that int_value reads as an integer
INTEGER_MEMBERS = frozenset((*_INT_MEMBERS, "bool_val"))


def _pb() -> Any:
    from chakra_proto import et_def_pb2  # only writers: readers of a small run need no protobuf

    return et_def_pb2


def attr_int64(name: str, v: int) -> pb.AttributeProto:
    return _pb().AttributeProto(name=name, int64_val=v)


def attr_int32(name: str, v: int) -> pb.AttributeProto:
    return _pb().AttributeProto(name=name, int32_val=v)


def attr_uint64(name: str, v: int) -> pb.AttributeProto:
    return _pb().AttributeProto(name=name, uint64_val=v)


def attr_bool(name: str, v: bool) -> pb.AttributeProto:
    return _pb().AttributeProto(name=name, bool_val=v)


def attr_string(name: str, v: str) -> pb.AttributeProto:
    return _pb().AttributeProto(name=name, string_val=v)


def attr_bool_list(name: str, vs: list[bool]) -> pb.AttributeProto:
    return _pb().AttributeProto(name=name, bool_list=_pb().BoolList(values=vs))


def attr_value(a: pb.AttributeProto) -> Any:
    """The attribute's value as a Python object (lists as lists), or None if unset."""
    which = a.WhichOneof("value")
    if which is None:
        return None
    v = getattr(a, which)
    if which.endswith("_list"):
        return list(v.values)
    return v


def attr_map(node: pb.Node) -> dict[str, pb.AttributeProto]:
    """name → first attribute with that name (ASTRA-sim's feeder takes the first match)."""
    out: dict[str, pb.AttributeProto] = {}
    for a in node.attr:
        out.setdefault(a.name, a)
    return out


def int_value(a: pb.AttributeProto) -> int | None:
    """An integer attribute read as ASTRA-sim's feeder_v3 does: any integer member, bool too."""
    which = a.WhichOneof("value")
    if which in INTEGER_MEMBERS:
        return int(getattr(a, which))
    return None
