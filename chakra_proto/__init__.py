"""Chakra execution-trace schema (wire-compatible with mlcommons/chakra) and file framing.

This package is a leaf: it imports nothing else from the project. ``et_def_pb2`` (the protobuf
runtime) is imported on first use, not here: a small run reads its nodes without it (wire.py).
"""
from __future__ import annotations

from chakra_proto.io import (
    EtFormatError,
    decode_et_bytes,
    decode_node,
    encode_et_bytes,
    read_et,
    read_et_split,
    read_node,
    read_node_fields,
    split_et_bytes,
    write_et,
)

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "et_def_pb2",
    "EtFormatError",
    "decode_et_bytes",
    "decode_node",
    "split_et_bytes",
    "read_et_split",
    "encode_et_bytes",
    "read_et",
    "read_node",
    "read_node_fields",
    "write_et",
]


def __getattr__(name: str) -> Any:  # chakra_proto.et_def_pb2 after a bare "import chakra_proto"
    if name == "et_def_pb2":
        import importlib

        return importlib.import_module("chakra_proto.et_def_pb2")
    raise AttributeError(f"module 'chakra_proto' has no attribute {name!r}")
