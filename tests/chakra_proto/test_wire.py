"""chakra_proto/wire.py reads every message it accepts exactly as protobuf does, and declines the rest.

The property: on generated nodes (every field, every attribute kind, extreme values) and on
random mutations of them (flipped, cut, inserted bytes), ``wire.decode`` either returns None or a
message whose every field equals protobuf's decoding; and it never accepts what protobuf rejects.
Every property runs on both readers, the Python one (``decode_python``) and the C one
(chakra_proto/_wire_core.c), which must also decline exactly the same messages.
"""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import DecodeError

from chakra_proto import et_def_pb2 as pb, wire

ROOT = Path(__file__).resolve().parents[2]


def _native_or_skip() -> Any:
    from conftest import IN_CI

    if wire.NATIVE is None:
        why = "chakra_proto._wire_core is not compiled (or DTSIM_PURE_PYTHON=1): the Python reader runs"
        if IN_CI and os.environ.get("DTSIM_PURE_PYTHON") != "1":
            pytest.fail(f"CI=true and {why}", pytrace=False)
        pytest.skip(why)
    return wire.NATIVE.decode


@pytest.fixture(params=["python", "c"])
def decode(request: pytest.FixtureRequest) -> Any:
    return wire.decode_python if request.param == "python" else _native_or_skip()
_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1), "uint32": (0, (1 << 32) - 1),
           "uint64": (0, (1 << 64) - 1), "sint32": (-(1 << 31), (1 << 31) - 1), "sint64": (-(1 << 63), (1 << 63) - 1),
           "fixed32": (0, (1 << 32) - 1), "fixed64": (0, (1 << 64) - 1), "sfixed32": (-(1 << 31), (1 << 31) - 1),
           "sfixed64": (-(1 << 63), (1 << 63) - 1)}


def _value(rng: random.Random, kind: str) -> Any:
    if kind in _RANGES:
        lo, hi = _RANGES[kind]
        return rng.choice([lo, hi, 0, 1, -1 if lo < 0 else 2, rng.randint(lo, hi), rng.randint(0, 300)])
    if kind in ("float", "double"):
        return rng.choice([0.0, -0.0, 1.5, -2.25e30, float("inf"), rng.uniform(-1e6, 1e6)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "string":
        return rng.choice(["", "x", "aten::all_reduce", "ünïcødé ✓", "a\x00b", "😀" * 3])
    return bytes(rng.randrange(256) for _ in range(rng.randrange(5)))


def _attr(rng: random.Random) -> pb.AttributeProto:
    a = pb.AttributeProto(name=rng.choice(["comm_size", "is_cpu_op", "pg_name", "involved_dim", "", "x"]))
    if rng.random() < 0.2:
        a.doc_string = _value(rng, "string")
    if rng.random() < 0.9:
        kind = rng.choice(wire._KINDS)
        if rng.random() < 0.5:
            setattr(a, f"{kind}_val", _value(rng, kind))
        else:
            getattr(a, f"{kind}_list").values.extend(_value(rng, kind) for _ in range(rng.randrange(4)))
    return a


def _node(rng: random.Random) -> pb.Node:
    n = pb.Node(id=_value(rng, "uint64"), name=_value(rng, "string"), type=rng.choice([0, 4, 7, 9, -3, (1 << 31) - 1]))
    n.ctrl_deps.extend(_value(rng, "uint64") for _ in range(rng.randrange(3)))
    n.data_deps.extend(_value(rng, "uint64") for _ in range(rng.randrange(4)))
    n.start_time_micros, n.duration_micros = _value(rng, "uint64"), _value(rng, "uint64")
    for io in ("inputs", "outputs"):
        if rng.random() < 0.4:
            getattr(n, io).values = _value(rng, "string")
            getattr(n, io).shapes = _value(rng, "string")
    n.attr.extend(_attr(rng) for _ in range(rng.randrange(6)))
    return n


def _same(value: Any, expected: Any) -> bool:
    if isinstance(expected, float):
        return math.isnan(expected) and math.isnan(value) or (value == expected and
                                                                math.copysign(1, value) == math.copysign(1, expected))
    return type(value) is type(expected) and value == expected


def assert_same(ours: wire.Message, theirs: Any, where: str = "") -> None:
    """Every field of et_def.proto reads the same from both, presence and oneof included."""
    assert ours.WhichOneof("value") == (theirs.WhichOneof("value") if type(ours).ONEOF else None), where
    for name, kind, repeated, sub in type(ours).FIELDS.values():
        mine, ref = getattr(ours, name), getattr(theirs, name)
        if sub is not None and not repeated:
            assert ours.HasField(name) == theirs.HasField(name), f"{where}{name}"
            assert_same(mine, ref, f"{where}{name}.")
        elif sub is not None:
            assert len(mine) == len(ref), f"{where}{name}"
            for i, (m, r) in enumerate(zip(mine, ref)):
                assert_same(m, r, f"{where}{name}[{i}].")
        elif repeated:
            assert len(mine) == len(ref) and all(_same(m, r) for m, r in zip(mine, ref)), f"{where}{name}"
        else:
            assert _same(mine, ref), f"{where}{name}: {mine!r} != {ref!r}"


def _protobuf(data: bytes) -> pb.Node | None:
    try:
        return pb.Node.FromString(data)
    except DecodeError:
        return None


def test_generated_nodes_read_as_protobuf_reads_them(decode: Any) -> None:
    rng = random.Random(13)
    for i in range(400):
        n = _node(rng)
        data = n.SerializeToString()
        ours = decode(data, wire.Node)
        assert ours is not None, f"node {i}: a canonical encoding was declined"
        assert_same(ours, pb.Node.FromString(data), f"node {i}: ")


def _mutate(rng: random.Random, message: bytes) -> bytes:
    """1 to 3 random edits: a byte flipped, a byte inserted, the rest cut off."""
    data = bytearray(message)
    for _ in range(rng.randint(1, 3)):
        op, pos = rng.random(), rng.randrange(len(data) + 1)
        if op < 0.4 and pos < len(data):
            data[pos] = rng.randrange(256)
        elif op < 0.7:
            data.insert(pos, rng.randrange(256))
        else:
            del data[pos:]
    return bytes(data)


def test_mutated_nodes_are_read_as_protobuf_reads_them_or_declined(decode: Any) -> None:
    rng = random.Random(7)
    accepted = 0
    for i in range(1500):
        data = _mutate(rng, _node(rng).SerializeToString())
        ours, theirs = decode(data, wire.Node), _protobuf(data)
        if ours is not None:
            accepted += 1
            assert theirs is not None, f"mutation {i}: accepted what protobuf rejects: {data.hex()}"
            assert_same(ours, theirs, f"mutation {i}: ")
    assert accepted > 100  # the property is not vacuous (1,500 mutations: about 130 read, the rest declined)


def test_forms_protobuf_reads_differently_are_declined(decode: Any) -> None:
    """Hand-made wire bytes: each is valid protobuf that a naive reader would get wrong."""
    declined = {
        "unknown field 11": b"\x58\x01",
        "int32 type above 2^31, not sign-extended": b"\x18\x80\x80\x80\x80\x08",
        "inputs twice (protobuf merges)": b"\x42\x02\x0a\x00\x42\x02\x12\x00",
        "two oneof members in one attribute": b"\x52\x04\x48\x01\x38\x02",
        "bool 2": b"\x52\x03\xd8\x01\x02",
        "varint past 64 bits": b"\x08" + b"\xff" * 9 + b"\x7f",
        "string not UTF-8": b"\x12\x01\xff",
    }
    for what, data in declined.items():
        assert decode(data, wire.Node) is None, what
        if "64 bits" not in what and "UTF-8" not in what:
            assert _protobuf(data) is not None, what  # valid protobuf: declined for its meaning
    read = {  # and forms it does read: unpacked repeated, a scalar given twice (the last counts)
        "unpacked deps": b"\x28\x05\x28\x06\x2a\x01\x07",
        "id twice": b"\x08\x01\x08\x02",
        "negative int32 type": b"\x18" + b"\xfd" + b"\xff" * 8 + b"\x01",
    }
    for what, data in read.items():
        ours = decode(data, wire.Node)
        assert ours is not None, what
        assert_same(ours, pb.Node.FromString(data), what)


def test_metadata_reads_as_protobuf_reads_it(decode: Any) -> None:
    rng = random.Random(3)
    for _ in range(50):
        md = pb.GlobalMetadata(version=_value(rng, "string"))
        md.attr.extend(_attr(rng) for _ in range(rng.randrange(3)))
        data = md.SerializeToString()
        assert_same(decode(data, wire.GlobalMetadata), pb.GlobalMetadata.FromString(data))


def _load_graphs_in_subprocess(paths: list[str], env: dict[str, str] | None = None) -> list:
    code = ("import sys, json\nfrom workload.graph import load_graph\nout = []\n"
            f"for p in {paths!r}:\n    g = load_graph(p)\n"
            "    out.append([len(g), 'google.protobuf' in sys.modules])\nprint(json.dumps(out))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                       env={**os.environ, **(env or {})})
    return json.loads(r.stdout)


def _small_and_large(tmp_path: Path) -> list[str]:
    from chakra_proto import io
    from workload.builder import GraphBuilder

    b = GraphBuilder()
    prev: list = []
    for i in range(io._WIRE_BUDGET + 10):
        prev = [b.comp(f"c{i}", duration_ns=10, deps=[prev[0]] if prev else [])]
    small, large = GraphBuilder(), b
    small.comp("only", duration_ns=10)
    return [str(small.write(tmp_path / "small.et")), str(large.write(tmp_path / "large.et"))]


def test_a_large_workload_switches_to_protobuf_with_the_python_reader(tmp_path: Path) -> None:
    """Past io._WIRE_BUDGET messages protobuf's C decoder is cheaper than wire's Python reader: it is imported."""
    from chakra_proto import io

    out = _load_graphs_in_subprocess(_small_and_large(tmp_path), {"DTSIM_PURE_PYTHON": "1"})
    assert out == [[1, False], [io._WIRE_BUDGET + 10, True]]


def test_the_c_reader_never_needs_protobuf(tmp_path: Path) -> None:
    from chakra_proto import io

    _native_or_skip()
    assert _load_graphs_in_subprocess(_small_and_large(tmp_path)) == [[1, False], [io._WIRE_BUDGET + 10, False]]


def _fields(m: Any) -> Any:
    """A decoded message as comparable data: its class, its own fields (types kept), nested ones too."""
    if not isinstance(m, wire.Message):
        return (type(m).__name__, m if not isinstance(m, float) or not math.isnan(m) else "nan",
                math.copysign(1, m) if isinstance(m, float) else None)
    return type(m).__name__, {k: [_fields(x) for x in v] if isinstance(v, list) else _fields(v)
                              for k, v in sorted(vars(m).items())}


def test_c_and_python_readers_agree_on_every_message() -> None:
    """Both readers give the same objects (class, field types, values, oneof, absent fields) or both
    decline, on generated nodes and metadata, their mutations, and random bytes."""
    c_decode = _native_or_skip()
    rng = random.Random(20261202)
    cases: list[tuple[bytes, type]] = []
    for _ in range(600):
        data = _node(rng).SerializeToString()
        cases.append((data, wire.Node))
        cases.append((_mutate(rng, data), wire.Node))
        cases.append((bytes(rng.randrange(256) for _ in range(rng.randrange(12))), wire.Node))
    for _ in range(100):
        md = pb.GlobalMetadata(version=_value(rng, "string"))
        md.attr.extend(_attr(rng) for _ in range(rng.randrange(3)))
        cases.append((md.SerializeToString(), wire.GlobalMetadata))
    read = 0
    for i, (data, cls) in enumerate(cases):
        ours, ref = c_decode(data, cls), wire.decode_python(data, cls)
        assert (ours is None) == (ref is None), f"case {i} ({data.hex()}): C {ours!r}, Python {ref!r}"
        if ref is not None:
            read += 1
            assert _fields(ours) == _fields(ref), f"case {i} ({data.hex()})"
    assert 700 < read < len(cases)  # both reading and declining are exercised


def test_c_reader_edges() -> None:
    """Varints at the 64-bit edge, the 10th byte, packed lists cut inside a value, a tag past the
    highest field number: the two readers agree on each."""
    c_decode = _native_or_skip()
    edges = [
        b"\x08" + b"\xff" * 9 + b"\x01",        # id = 2^64 - 1: read
        b"\x08" + b"\xff" * 9 + b"\x02",        # 65 bits: declined
        b"\x08" + b"\x80" * 9 + b"\x00",        # 10 bytes of zero: read
        b"\x08" + b"\x80" * 10 + b"\x00",       # 11 bytes: declined
        b"\x2a\x02\x01\x80",                     # packed data_deps cut inside a varint
        b"\x2a\x03\x01\x80\x01",                 # packed, whole
        b"\x80\x04\x00",                         # field 64
        b"\xf8\xff\xff\xff\x0f\x00",             # a field number past 2^28
        b"\x52\x05\x3d\x00\x00\xc0\x7f",          # attr: a float NaN
        b"\x52\x06\x3d\x00\x00\xc0",              # attr: a float cut short
        b"\x52\x0a\x49" + b"\x01" * 8 + b"\x0a\x00",  # attr: double, then a name
        b"\x52\x03\x59\x01",                     # attr: sfixed64 wire type on its own, short
        b"\x1a\x00",                              # type as LEN
        b"\x12\x02\xc3\xa9",                      # name "é"
        b"\x12\x03\xed\xa0\x80",                  # a UTF-8 surrogate: declined
        b"",
    ]
    for data in edges:
        ours, ref = c_decode(data, wire.Node), wire.decode_python(data, wire.Node)
        assert (ours is None) == (ref is None), data.hex()
        if ref is not None:
            assert _fields(ours) == _fields(ref), data.hex()


def test_an_edited_c_source_runs_the_python_reader(tmp_path: Path) -> None:
    """A _wire_core.c that differs from the one compiled in: the Python reader, with a warning."""
    import shutil

    _native_or_skip()
    src = ROOT / "chakra_proto"
    dst = tmp_path / "chakra_proto"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    (dst / "_wire_core.c").write_bytes((src / "_wire_core.c").read_bytes() + b"\n")
    code = "from chakra_proto import wire; print(wire.NATIVE is None, wire.decode is wire.decode_python)"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.stdout.split() == ["True", "True"]
    assert "compiled from another _wire_core.c" in r.stderr


def _comparable(fields: Any) -> Any:
    """node_fields' tuple with floats made comparable (NaN, the sign of zero) and types kept."""
    def one(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(one(x) for x in v)
        if isinstance(v, dict):
            return {k: one(x) for k, x in v.items()}
        if isinstance(v, float):
            return ("float", "nan" if math.isnan(v) else v, math.copysign(1, v))
        return type(v).__name__, v
    return None if fields is None else one(fields)


def test_node_fields_in_c_python_and_protobuf_agree() -> None:
    """_wire_core.node_fields (the loader's reader, chakra_proto.io.read_node_fields) gives, in C, what fields_of gives on wire's Python
    message and on protobuf's: every field, the first attribute of a name with its member and value
    (lists as tuples), inputs' values only where inputs is set; and declines exactly where wire does."""
    _native_or_skip()
    rng = random.Random(20261203)
    read = declined = 0
    for i in range(1500):
        data = _node(rng).SerializeToString()
        if i % 3 == 1:
            data = _mutate(rng, data)
        elif i % 3 == 2:  # attributes repeated under one name: the first one counts
            n = pb.Node.FromString(data)
            n.attr.extend(_attr(rng) for _ in range(3))
            data = n.SerializeToString()
        ours, ref = wire.NATIVE.node_fields(data, wire.Node), wire.node_fields_python(data)
        assert _comparable(ours) == _comparable(ref), f"case {i} ({data.hex()})"
        if ref is None:
            declined += 1
            continue
        read += 1
        assert _comparable(ref) == _comparable(wire.fields_of(pb.Node.FromString(data))), f"case {i}"
        first = {}
        for a in pb.Node.FromString(data).attr:
            first.setdefault(a.name, a.WhichOneof("value"))
        assert {k: v[0] for k, v in ref[7].items()} == first, f"case {i}"
    assert read > 900 and declined > 100  # both are exercised
