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


def test_a_message_equal_to_another_files_at_its_place_is_that_object() -> None:
    """split_frames(raw, like): the same messages and offsets as without ``like``; where node k
    equals like[k] byte for byte the list holds like[k] itself, anywhere else a new object (the
    metadata is never taken from like, nor a node from another place or of other bytes)."""
    native = _native()
    rng = random.Random(7)
    reused = 0
    for _ in range(300):
        data = _file(rng)
        plain = native.split_frames(data)
        like = [bytes(f) for f in plain[0][1:]]  # equal bytes, other objects
        for k in range(len(like)):
            if rng.random() < 0.3:
                like[k] = like[k] + b"!"  # other bytes
        rng.shuffle(like) if rng.random() < 0.2 else None
        like += [b"extra"] * rng.randrange(2)
        got = native.split_frames(data, like)
        assert got == plain
        for k, f in enumerate(got[0][1:]):
            same = k < len(like) and like[k] == f
            assert (f is like[k]) == same, k
            reused += same
        assert native.split_frames(data, None) == plain
        _, frames, starts = io.split_et_bytes(data, "f.et", read_only=True, like=like)
        assert (frames, starts) == (plain[0][1:], plain[1][1:])
    assert reused > 100, reused
    data = io.encode_et_bytes(pb.GlobalMetadata(version="0.0.4"), [pb.Node(id=1, type=4)])
    meta = native.split_frames(data)[0][0]
    like = [bytes(meta)]  # the metadata's bytes at node 0's place: not node 0, not taken
    frames = native.split_frames(data, like)[0]
    assert frames[0] == meta and frames[0] is not like[0] and frames[1] is not like[0]
    with pytest.raises(TypeError, match="split_frames"):
        native.split_frames(b"", (b"a",))
