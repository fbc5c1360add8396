"""Reader and writer for Chakra ET file framing.

A file is a varint32 length-delimited GlobalMetadata followed by any number of
length-delimited Node messages, with no magic and no trailer (see Chakra's
``protolib.encodeMessage``). gzip-compressed files are accepted on read, as
Chakra's Python tools accept them.
"""
from __future__ import annotations

import os
import sys

from chakra_proto import wire

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any, Iterable
    from chakra_proto import et_def_pb2 as pb

_GZIP_MAGIC = b"\x1f\x8b"
_MAX_VARINT32_BYTES = 5
# messages read by wire's Python reader (~25 µs each where protobuf takes ~2 µs): past about what
# importing protobuf costs, the import pays for itself. wire's C reader (~2 µs) has no budget.
_WIRE_BUDGET = 2000
_wire_left = _WIRE_BUDGET if wire.NATIVE is None else 1 << 62


def _pb() -> Any:
    from chakra_proto import et_def_pb2  # here: a small run reads its few nodes without protobuf

    return et_def_pb2


class EtFormatError(ValueError):
    """A file is not valid Chakra ET framing; the message names file and byte offset."""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(raw: bytes, pos: int, where: str) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= len(raw):
            raise EtFormatError(f"{where}: truncated length prefix at byte {start}")
        b = raw[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= _MAX_VARINT32_BYTES:
            raise EtFormatError(f"{where}: length prefix at byte {start} is longer than a 32-bit varint")


def split_et_bytes(raw: bytes, where: str = "<bytes>", read_only: bool = False,
                   like: list[bytes] | None = None) -> tuple[pb.GlobalMetadata, list[bytes], list[int]]:
    """Decode the metadata and split the nodes into their serialized messages, undecoded:
    (metadata, one bytes per node, the byte offset of each node's length prefix). Identical
    nodes are identical bytes, so a reader can decode each distinct one once. With ``read_only``
    the metadata may be a chakra_proto.wire message (see read_node). ``like``: another file's
    messages; one equal to its message at the same place may be that object (the same bytes:
    for a reader that keys by them, already hashed)."""
    if raw[:2] == _GZIP_MAGIC:
        import gzip  # here, not at start-up: few ET files are compressed
        import zlib

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:  # zlib.error: a gzip header over a bad stream
            raise EtFormatError(f"{where}: corrupt gzip data ({e})") from None
    if not raw:
        raise EtFormatError(f"{where}: file is empty; expected a GlobalMetadata message")
    split = wire.NATIVE.split_frames(raw, like) if wire.NATIVE is not None and type(raw) is bytes else None
    if split is not None:  # well-formed framing, split in C; anything else is named below
        frames, starts = split
        metadata = _read_only(frames[0], "GlobalMetadata") if read_only else None
        if metadata is None:
            metadata = _pb().GlobalMetadata()
            _parse(metadata, frames[0], where, "GlobalMetadata", starts[0])
        del frames[0], starts[0]
        return metadata, frames, starts
    n = len(raw)
    metadata: Any = None
    frames: list[bytes] = []
    starts: list[int] = []
    pos = 0
    while pos < n:
        start = pos
        size = raw[pos]
        if size < 0x80:  # most nodes are under 128 bytes: a one-byte prefix
            pos += 1
        else:
            size, pos = _read_varint(raw, pos, where)
        end = pos + size
        if end > n:
            what = "GlobalMetadata" if not starts else f"node #{len(starts) - 1}"
            raise EtFormatError(
                f"{where}: {what} at byte {start} declares {size} bytes but only "
                f"{n - pos} remain (truncated file?)"
            )
        frames.append(raw[pos:end])
        starts.append(start)
        if len(starts) == 1:  # a bad metadata message is named before a truncation after it
            metadata = _read_only(frames[0], "GlobalMetadata") if read_only else None
            if metadata is None:
                metadata = _pb().GlobalMetadata()
                _parse(metadata, frames[0], where, "GlobalMetadata", start)
        pos = end
    return metadata, frames[1:], starts[1:]


def decode_node(data: bytes, where: str, index: int, start: int) -> pb.Node:
    """One node message from split_et_bytes (index and start name it in an error)."""
    node = _pb().Node()
    _parse(node, data, where, f"node #{index}", start)
    return node


def read_node(data: bytes, where: str, index: int, start: int) -> Any:
    """decode_node for a reader that only reads fields: while protobuf is not imported and (with
    wire's Python reader) the process has read fewer than _WIRE_BUDGET messages, a
    chakra_proto.wire.Node (same fields, HasField, WhichOneof); otherwise, or where wire declines,
    the protobuf message."""
    return _read_only(data, "Node") or decode_node(data, where, index, start)


def read_node_fields(data: bytes, where: str, index: int, start: int) -> tuple:
    """wire.fields_of the node read_node reads (wire's C reader reads the fields directly)."""
    if wire.NATIVE is not None and "chakra_proto.et_def_pb2" not in sys.modules:
        fields = wire.NATIVE.node_fields(data, wire.Node)
        if fields is not None:
            return fields
    return wire.fields_of(read_node(data, where, index, start))


def _read_only(data: bytes, kind: str) -> Any:
    global _wire_left
    if _wire_left <= 0 or "chakra_proto.et_def_pb2" in sys.modules:
        return None
    _wire_left -= 1
    return wire.decode(data, getattr(wire, kind))


def _parse(msg: Any, data: bytes, where: str, what: str, start: int) -> None:
    from google.protobuf.message import DecodeError

    try:
        msg.ParseFromString(data)
    except DecodeError as e:
        raise EtFormatError(f"{where}: {what} at byte {start} is not a valid protobuf message ({e})") from None


def decode_et_bytes(
    raw: bytes, where: str = "<bytes>"
) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    """Decode ET bytes into (metadata, nodes). Raises EtFormatError with the byte offset."""
    metadata, frames, starts = split_et_bytes(raw, where)
    return metadata, [decode_node(f, where, i, s) for i, (f, s) in enumerate(zip(frames, starts))]


def encode_et_bytes(metadata: pb.GlobalMetadata, nodes: Iterable[pb.Node]) -> bytes:
    parts: list[bytes] = []
    for m in (metadata, *nodes):
        b = m.SerializeToString()
        parts.append(_varint(len(b)))
        parts.append(b)
    return b"".join(parts)


def read_et(path: str | os.PathLike) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    p = _path_str(path)
    return decode_et_bytes(_read(p), p)


def read_et_split(path: str | os.PathLike, read_only: bool = False, like: list[bytes] | None = None,
                  ) -> tuple[pb.GlobalMetadata, list[bytes], list[int]]:
    """split_et_bytes of a file's contents, read in one call."""
    p = _path_str(path)
    return split_et_bytes(_read(p), p, read_only, like)


def _path_str(path: str | os.PathLike) -> str:
    """``str(pathlib.Path(path))``, as errors name the file, without importing pathlib on every run's
    path (network/files.py says why). network.files.path_str's twin: chakra_proto imports nothing of ours."""
    s = os.fspath(path)
    root = "//" if s.startswith("//") and not s.startswith("///") else "/" if s.startswith("/") else ""
    return root + "/".join(part for part in s.split("/") if part not in ("", ".")) or "."


def _read(p: str) -> bytes:
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError as e:
        raise EtFormatError(f"{p}: cannot read ({e.strerror})") from None


def write_et(
    path: str | os.PathLike, metadata: pb.GlobalMetadata, nodes: Iterable[pb.Node]
) -> None:
    """Write atomically: a reader never sees a half-written file. (network.files.atomic_open does
    the same for the other outputs; chakra_proto is a leaf and imports nothing of ours.)"""
    from pathlib import Path  # writers only: no run writes an ET

    p = Path(path)
    data = encode_et_bytes(metadata, nodes)
    p.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # only writers need it

    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600; an ET is an ordinary file
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
