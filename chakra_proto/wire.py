"""Decoding ET messages without the protobuf runtime, for runs that only read them.

Importing protobuf costs a small run about a fifth of its start-up, while an ET node is a few
varints and strings. ``decode(data, Node)`` reads the wire format into plain objects that answer
what readers ask of et_def_pb2 messages (fields as attributes with proto3 defaults, ``HasField``,
``WhichOneof``), or returns ``None`` for anything it is not certain to read as protobuf does: an
unknown field, a wrong wire type, a message field or a oneof set twice (protobuf would merge), an
integer protobuf would truncate, a bad UTF-8 string, a truncated message. The caller then decodes
with protobuf itself, which also words the errors. tests/chakra_proto/test_wire.py compares the
two on generated and mutated messages.

Where pip install compiled chakra_proto/_wire_core.c, ``decode`` runs it (about 10x faster, the
same objects, the same declines); ``decode_python`` is this module's reader, the reference.
"""
from __future__ import annotations

import os
from struct import error as _StructError, unpack_from
from types import ModuleType

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_WIRE = {"uint64": _VARINT, "int64": _VARINT, "int32": _VARINT, "uint32": _VARINT, "bool": _VARINT,
         "sint32": _VARINT, "sint64": _VARINT, "fixed64": _I64, "sfixed64": _I64, "double": _I64,
         "fixed32": _I32, "sfixed32": _I32, "float": _I32, "string": _LEN, "bytes": _LEN, "message": _LEN}
_STRUCT = {"fixed64": "<Q", "sfixed64": "<q", "double": "<d", "fixed32": "<I", "sfixed32": "<i", "float": "<f"}
_DEFAULTS = {"string": "", "bytes": b"", "double": 0.0, "float": 0.0, "bool": False}


class _Declined(Exception):
    """Not certain to read as protobuf does: the caller decodes with protobuf."""


class Message:
    """A decoded message; a field absent from the wire reads as its class default, as in protobuf."""

    #: field number → (name, kind, repeated, message class or None); ONEOF: the numbers of group "value"
    FIELDS: dict[int, tuple[str, str, bool, Any]] = {}
    ONEOF: frozenset[int] = frozenset()
    _oneof: str | None = None

    def HasField(self, name: str) -> bool:  # noqa: N802 (protobuf's name)
        return name in self.__dict__

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802 (protobuf's name; one group in the schema)
        return self._oneof


def _message(name: str, fields: dict[int, tuple[str, str, bool, Any]], oneof: frozenset[int] = frozenset()) -> type:
    defaults: dict[str, Any] = {}
    for fname, kind, repeated, sub in fields.values():
        defaults[fname] = () if repeated else sub() if sub else _DEFAULTS.get(kind, 0)
    return type(name, (Message,), {"FIELDS": fields, "ONEOF": oneof, **defaults})


_KINDS = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",  # et_def.proto's order
          "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes")
_LISTS = {k: _message(f"{k.title()}List", {1: ("values", k, True, None)}) for k in _KINDS}
_ONEOF = {}
for _i, _k in enumerate(_KINDS):  # AttributeProto's oneof value: <kind>_val = 3 + 2i, <kind>_list = 4 + 2i
    _ONEOF[3 + 2 * _i] = (f"{_k}_val", _k, False, None)
    _ONEOF[4 + 2 * _i] = (f"{_k}_list", "message", False, _LISTS[_k])
AttributeProto = _message("AttributeProto", {1: ("name", "string", False, None), 2: ("doc_string", "string", False, None),
                                             **_ONEOF}, frozenset(_ONEOF))
IOInfo = _message("IOInfo", {1: ("values", "string", False, None), 2: ("shapes", "string", False, None),
                             3: ("types", "string", False, None)})
GlobalMetadata = _message("GlobalMetadata", {1: ("version", "string", False, None),
                                             2: ("attr", "message", True, AttributeProto)})
Node = _message("Node", {
    1: ("id", "uint64", False, None), 2: ("name", "string", False, None), 3: ("type", "int32", False, None),  # enum
    4: ("ctrl_deps", "uint64", True, None), 5: ("data_deps", "uint64", True, None),
    6: ("start_time_micros", "uint64", False, None), 7: ("duration_micros", "uint64", False, None),
    8: ("inputs", "message", False, IOInfo), 9: ("outputs", "message", False, IOInfo),
    10: ("attr", "message", True, AttributeProto)})


def decode_python(data: bytes, cls: type[Message]) -> Any:
    """``cls`` (Node, GlobalMetadata, ...) read from ``data``, or None: decode with protobuf instead."""
    try:
        return _decode(data, 0, len(data), cls)
    except (_Declined, IndexError, _StructError, UnicodeDecodeError):  # IndexError: a truncated varint
        return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> 64:  # protobuf would drop the high bits
                raise _Declined
            return result, pos
        shift += 7
        if shift >= 70:  # longer than protobuf's 10 bytes
            raise _Declined


def _decode(data: bytes, pos: int, end: int, cls: type[Message]) -> Message:
    msg = cls()
    d = msg.__dict__
    fields, oneof = cls.FIELDS, cls.ONEOF
    while pos < end:
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(data, pos)
        spec = fields.get(tag >> 3)
        if spec is None:
            raise _Declined  # unknown to et_def.proto (protobuf keeps it as an unknown field)
        name, kind, repeated, sub = spec
        wire = tag & 7
        if wire == _LEN:
            size = data[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _varint(data, pos)
            stop = pos + size
            if stop > end:
                raise _Declined
            if kind == "string":
                value: Any = data[pos:stop].decode("utf-8")  # strict, as protobuf checks proto3 strings
            elif kind == "bytes":
                value = data[pos:stop]
            elif kind == "message":
                value = _decode(data, pos, stop, sub)
            elif repeated:  # packed scalars
                values = d.setdefault(name, [])
                while pos < stop:
                    v, pos = _scalar(data, pos, kind)
                    values.append(v)
                if pos != stop:
                    raise _Declined
                continue
            else:
                raise _Declined
            pos = stop
        elif wire == _WIRE[kind]:
            value, pos = _scalar(data, pos, kind)
        else:
            raise _Declined
        if pos > end:
            raise _Declined
        if repeated:
            d.setdefault(name, []).append(value)
            continue
        if kind == "message" and name in d:
            raise _Declined  # protobuf merges the two
        if tag >> 3 in oneof:
            if msg._oneof not in (None, name):
                raise _Declined  # protobuf keeps the last member and clears the others
            d["_oneof"] = name
        d[name] = value
    if pos != end:
        raise _Declined
    return msg


def _scalar(data: bytes, pos: int, kind: str) -> tuple[Any, int]:
    fmt = _STRUCT.get(kind)
    if fmt is not None:
        return unpack_from(fmt, data, pos)[0], pos + (8 if fmt[1] in "Qqd" else 4)
    v = data[pos]
    if v < 0x80:
        pos += 1
    else:
        v, pos = _varint(data, pos)
    if kind == "uint64":
        return v, pos
    if kind == "int64":
        return (v - (1 << 64) if v >> 63 else v), pos
    if kind == "int32":  # also the enum Node.type; negative int32s are sign-extended to 64 bits
        if v < 1 << 31:
            return v, pos
        if v >= (1 << 64) - (1 << 31):
            return v - (1 << 64), pos
    elif kind == "uint32":
        if v < 1 << 32:
            return v, pos
    elif kind == "bool":
        if v < 2:
            return bool(v), pos
    elif kind == "sint64":
        return (v >> 1) ^ -(v & 1), pos
    elif kind == "sint32" and v < 1 << 32:
        return (v >> 1) ^ -(v & 1), pos
    raise _Declined  # a value protobuf would truncate to the field's width


def _load_native() -> ModuleType | None:
    """chakra_proto._wire_core, unless ``DTSIM_PURE_PYTHON=1``, not compiled, or compiled from
    another _wire_core.c than the one beside it (network/native_build.py's rule, which this leaf
    package cannot import; setup.py writes the checksum with that module)."""
    if os.environ.get("DTSIM_PURE_PYTHON") == "1":
        return None
    try:
        from chakra_proto import _wire_core
    except ImportError:
        return None
    import zlib

    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_wire_core.c"), "rb") as f:
            here = f"{zlib.crc32(f.read()):08x}"
    except OSError:  # an installed wheel carries the binary only
        return _wire_core
    if here != _wire_core.SOURCE_CHECKSUM:
        import warnings

        warnings.warn(f"{_wire_core.__file__} was compiled from another _wire_core.c than the one in "
                      "chakra_proto/ now; decoding in Python (the same results, slower) until "
                      "`python -m pip install -e .` compiles it again", RuntimeWarning, stacklevel=2)
        return None
    return _wire_core


NATIVE = _load_native()
#: ``cls`` read from ``data`` (see decode_python), in C where compiled
decode = NATIVE.decode if NATIVE is not None else decode_python


def fields_of(node: Any) -> tuple:
    """What a reader of a Node reads, from a protobuf or wire Node: (id, name, type, ctrl_deps,
    data_deps, duration_micros, inputs.values or None where inputs is not set, attributes), the
    attributes a dict name → (oneof member or None, value), a list member's value the tuple of its
    values; of several attributes of one name the first (ASTRA-sim's feeder reads the first)."""
    attrs: dict[str, tuple[str | None, Any]] = {}
    for a in node.attr:
        name = a.name
        if name not in attrs:
            which = a.WhichOneof("value")
            value = None if which is None else getattr(a, which)
            if which is not None and which.endswith("_list"):
                value = tuple(value.values)
            attrs[name] = (which, value)
    return (node.id, node.name, node.type, tuple(node.ctrl_deps), tuple(node.data_deps), node.duration_micros,
            node.inputs.values if node.HasField("inputs") else None, attrs)


def node_fields_python(data: bytes) -> tuple | None:
    """fields_of the Node read from ``data`` by decode_python, or None where it declines."""
    node = decode_python(data, Node)
    return None if node is None else fields_of(node)
