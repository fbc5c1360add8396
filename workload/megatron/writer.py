"""Write every rank's Chakra ET from its stage's template (program.py).

A node's bytes are serialized once per stage; only what differs between the ranks of a stage
(a collective's ``pg_name``, a send's or receive's ``comm_src``/``comm_dst``) is encoded per rank
and spliced in as one more ``attr`` entry (protobuf reads a repeated field's entries wherever they
sit in the message). Files are wire-compatible Chakra (GlobalMetadata 0.0.4, then the nodes).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from chakra_proto import et_def_pb2 as pb
from chakra_proto.attrs import attr_bool, attr_int32, attr_int64, attr_string, attr_uint64
from chakra_proto.io import _varint
from workload.megatron.layout import Layout
from workload.megatron.program import COLL, COMP, RECV, SEND, StageProgram

ET_VERSION = "0.0.4"
_ATTR_FIELD = b"\x52"  # Node.attr: field 10, length-delimited
_TYPES = {COMP: pb.COMP_NODE, COLL: pb.COMM_COLL_NODE, SEND: pb.COMM_SEND_NODE, RECV: pb.COMM_RECV_NODE}


def _attr_bytes(a: pb.AttributeProto) -> bytes:
    b = a.SerializeToString()
    return _ATTR_FIELD + _varint(len(b)) + b


class StageTemplate:
    """A stage's nodes as bytes: constant runs, and per-rank slots (kind, base bytes, parameter)."""

    def __init__(self, prog: StageProgram, astra_sim_compatible: bool) -> None:
        self.pieces: list[bytes | tuple[str, bytes, object]] = []
        const: list[bytes] = []
        written_us = exact_ns = 0
        for i, t in enumerate(prog.nodes):
            n = pb.Node(id=i, name=t.name, type=_TYPES[t.kind])
            n.data_deps.extend(t.deps)
            n.attr.append(attr_bool("is_cpu_op", False))
            if t.kind == COMP:
                exact_ns += t.duration_ns
                end_us = (exact_ns + 500) // 1000  # whole µs cut from the running total (builder.py)
                n.duration_micros, written_us = end_us - written_us, end_us
                if not astra_sim_compatible:
                    n.attr.append(attr_uint64("duration_ns", t.duration_ns))
                const.append(_framed(n.SerializeToString()))
                continue
            if t.kind == COLL:
                n.attr.extend([attr_int64("comm_type", pb.CollectiveCommType.Value(t.comm_type)),
                               attr_int64("comm_size", t.size_bytes)])
                slot = ("group", n.SerializeToString(), t.group)
            else:
                n.attr.extend([attr_int32("comm_tag", t.tag), attr_int64("comm_size", t.size_bytes)])
                slot = (t.kind, n.SerializeToString(), t.peer_stage_delta)
            if const:
                self.pieces.append(b"".join(const))
                const = []
            self.pieces.append(slot)
        if const:
            self.pieces.append(b"".join(const))

    def rank_bytes(self, rank: int, group_of: Callable[[str, int], int | None], stride: int,
                   cache: dict[tuple[str, int], bytes]) -> bytes:
        out: list[bytes] = []
        for piece in self.pieces:
            if isinstance(piece, bytes):
                out.append(piece)
                continue
            kind, base, param = piece
            if kind == "group":
                gid = group_of(param, rank)
                extra = b"" if not gid else _cached(cache, "pg_name", gid, lambda g: attr_string("pg_name", str(g)))
            else:
                peer = rank + param * stride
                src, dst = (rank, peer) if kind == SEND else (peer, rank)
                extra = (_cached(cache, "comm_src", src, lambda r: attr_int32("comm_src", r))
                         + _cached(cache, "comm_dst", dst, lambda r: attr_int32("comm_dst", r)))
            out.append(_framed(base + extra))
        return b"".join(out)


def _framed(b: bytes) -> bytes:
    return _varint(len(b)) + b


def _cached(cache: dict[tuple[str, int], bytes], name: str, value: int, make: Callable[[int], pb.AttributeProto]) -> bytes:
    key = (name, value)
    b = cache.get(key)
    if b is None:
        b = cache[key] = _attr_bytes(make(value))
    return b


def metadata_bytes(astra_sim_compatible: bool, rank: int) -> bytes:
    meta = pb.GlobalMetadata(version=ET_VERSION)
    if not astra_sim_compatible:
        meta.attr.extend([attr_string("generator", "dtsim workload.megatron"), attr_string("rank", str(rank))])
    return _framed(meta.SerializeToString())


def write_ranks(prefix: Path, layout: Layout, templates: list[StageTemplate], astra_sim_compatible: bool,
                ranks: list[int] | None = None) -> int:
    """Write ``PREFIX.{rank}.et`` for every rank (or for ``ranks``); returns the bytes written."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    cache: dict[tuple[str, int], bytes] = {}
    stride = layout.stage_offset(1)
    total = 0
    for rank in (range(layout.ranks) if ranks is None else ranks):
        _, _, p = layout.coordinates(rank)
        data = metadata_bytes(astra_sim_compatible, rank) + templates[p].rank_bytes(rank, layout.group, stride, cache)
        path = prefix.parent / f"{prefix.name}.{rank}.et"
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # a reader never sees half a file
        total += len(data)
    return total
