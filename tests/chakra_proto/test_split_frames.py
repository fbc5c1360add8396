"""ET framing split in C (``_wire_core.split_frames``) gives what chakra_proto.io's Python loop
gives: the same messages and offsets on well-formed files, and on anything else the very error
the Python loop names (the C split declines and the loop runs)."""
from __future__ import annotations

import random
from typing import Any

import pytest

from chakra_proto import et_def_pb2 as pb, io, wire


def _native() -> Any:
    if wire.NATIVE is None:
        pytest.skip("chakra_proto._wire_core is not compiled: only the Python loop runs")
    return wire.NATIVE


def _file(rng: random.Random) -> bytes:
    meta = pb.GlobalMetadata(version="0.0.4")
    nodes = []
    for i in range(rng.randrange(0, 6)):
        n = pb.Node(id=i, name="x" * rng.choice([0, 3, 130, 20000]), type=4)
        nodes.append(n)
    return io.encode_et_bytes(meta, nodes)


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.3 and b:
            del b[rng.randrange(len(b)):]  # truncate
        elif r < 0.6 and b:
            b[rng.randrange(len(b))] = rng.choice([0x80, 0xFF, 0x7F, 0x00, rng.randrange(256)])
        else:
            b[rng.randrange(len(b) + 1):0] = bytes(rng.choice([[0xFF] * 6, [0x80, 0x80, 0x80, 0x80, 0x10], [0x05]]))
    return bytes(b)


def _python_split(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(wire, "NATIVE", None)
        try:
            _, frames, starts = io.split_et_bytes(data, "f.et", read_only=True)
        except io.EtFormatError as e:
            return ("error", str(e))
    return frames, starts


def test_c_split_equals_the_python_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    native = _native()
    rng = random.Random(7)
    declined = read = 0
    for i in range(600):
        data = _file(rng)
        if i % 2:
            data = _mutate(rng, data)
        if not data:
            continue
        ref = _python_split(data, monkeypatch)
        c = native.split_frames(data)
        if c is None:  # bad framing: the Python loop names it (or a bad metadata message before it)
            declined += 1
            assert ref[0] == "error", (i, ref)
        else:
            read += 1
            if ref[0] == "error":  # framing fine, the metadata message not
                assert "GlobalMetadata" in ref[1], (i, ref)
            else:
                assert (c[0][1:], c[1][1:]) == ref, i
        try:
            _, frames, starts = io.split_et_bytes(data, "f.et", read_only=True)
            got: Any = (frames, starts)
        except io.EtFormatError as e:
            got = ("error", str(e))
        assert got == ref, f"case {i}: {data[:40].hex()}"
    assert read > 200 and declined > 50, (read, declined)
