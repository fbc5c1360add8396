"""Reader and writer for Chakra ET file framing.

A file is a varint32 length-delimited GlobalMetadata followed by any number of
length-delimited Node messages, with no magic and no trailer (see Chakra's
``protolib.encodeMessage``). gzip-compressed files are accepted on read, as
Chakra's Python tools accept them.
"""
from __future__ import annotations

import gzip
import os
import tempfile
import zlib
from pathlib import Path
from typing import Iterable

from google.protobuf.message import DecodeError

from chakra_proto import et_def_pb2 as pb

_GZIP_MAGIC = b"\x1f\x8b"
_MAX_VARINT32_BYTES = 5


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


def decode_et_bytes(
    raw: bytes, where: str = "<bytes>"
) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    """Decode ET bytes into (metadata, nodes). Raises EtFormatError with the byte offset."""
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:  # zlib.error: a gzip header over a bad stream
            raise EtFormatError(f"{where}: corrupt gzip data ({e})") from None
    if not raw:
        raise EtFormatError(f"{where}: file is empty; expected a GlobalMetadata message")
    pos = 0
    nodes: list[pb.Node] = []
    metadata = pb.GlobalMetadata()
    index = -1  # -1 is the metadata
    while pos < len(raw):
        start = pos
        size, pos = _read_varint(raw, pos, where)
        end = pos + size
        what = "GlobalMetadata" if index < 0 else f"node #{index}"
        if end > len(raw):
            raise EtFormatError(
                f"{where}: {what} at byte {start} declares {size} bytes but only "
                f"{len(raw) - pos} remain (truncated file?)"
            )
        msg = metadata if index < 0 else pb.Node()
        try:
            msg.ParseFromString(raw[pos:end])
        except DecodeError as e:
            raise EtFormatError(
                f"{where}: {what} at byte {start} is not a valid protobuf message ({e})"
            ) from None
        if index >= 0:
            nodes.append(msg)
        pos = end
        index += 1
    return metadata, nodes


def encode_et_bytes(metadata: pb.GlobalMetadata, nodes: Iterable[pb.Node]) -> bytes:
    parts: list[bytes] = []
    for m in (metadata, *nodes):
        b = m.SerializeToString()
        parts.append(_varint(len(b)))
        parts.append(b)
    return b"".join(parts)


def read_et(path: str | os.PathLike) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise EtFormatError(f"{p}: cannot read ({e.strerror})") from None
    return decode_et_bytes(raw, str(p))


def write_et(
    path: str | os.PathLike, metadata: pb.GlobalMetadata, nodes: Iterable[pb.Node]
) -> None:
    """Write atomically: a reader never sees a half-written file. (network.files.atomic_open does
    the same for the other outputs; chakra_proto is a leaf and imports nothing of ours.)"""
    p = Path(path)
    data = encode_et_bytes(metadata, nodes)
    p.parent.mkdir(parents=True, exist_ok=True)
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
