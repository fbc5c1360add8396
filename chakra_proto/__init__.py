"""Chakra execution-trace schema (wire-compatible with mlcommons/chakra) and file framing.

This package is a leaf: it imports nothing else from the project.
"""
from chakra_proto import et_def_pb2
from chakra_proto.io import (
    EtFormatError,
    decode_et_bytes,
    decode_node,
    encode_et_bytes,
    read_et,
    read_et_split,
    split_et_bytes,
    write_et,
)

__all__ = [
    "et_def_pb2",
    "EtFormatError",
    "decode_et_bytes",
    "decode_node",
    "split_et_bytes",
    "read_et_split",
    "encode_et_bytes",
    "read_et",
    "write_et",
]
