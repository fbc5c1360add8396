"""The two enums of et_def.proto as plain integers, for code that only compares node and
collective types: it need not import the protobuf runtime (a fifth of a small run's start-up).
Names and values are et_def_pb2's; tests/chakra_proto/test_schema.py keeps them equal."""
from __future__ import annotations

# NodeType
INVALID_NODE = 0
METADATA_NODE = 1
MEM_LOAD_NODE = 2
MEM_STORE_NODE = 3
COMP_NODE = 4
COMM_SEND_NODE = 5
COMM_RECV_NODE = 6
COMM_COLL_NODE = 7

# CollectiveCommType
ALL_REDUCE = 0
REDUCE = 1
ALL_GATHER = 2
GATHER = 3
SCATTER = 4
BROADCAST = 5
ALL_TO_ALL = 6
REDUCE_SCATTER = 7
REDUCE_SCATTER_BLOCK = 8
BARRIER = 9

NODE_TYPE_NAMES = {INVALID_NODE: "INVALID_NODE", METADATA_NODE: "METADATA_NODE", MEM_LOAD_NODE: "MEM_LOAD_NODE",
                   MEM_STORE_NODE: "MEM_STORE_NODE", COMP_NODE: "COMP_NODE", COMM_SEND_NODE: "COMM_SEND_NODE",
                   COMM_RECV_NODE: "COMM_RECV_NODE", COMM_COLL_NODE: "COMM_COLL_NODE"}
COLLECTIVE_NAMES = {ALL_REDUCE: "ALL_REDUCE", REDUCE: "REDUCE", ALL_GATHER: "ALL_GATHER", GATHER: "GATHER",
                    SCATTER: "SCATTER", BROADCAST: "BROADCAST", ALL_TO_ALL: "ALL_TO_ALL",
                    REDUCE_SCATTER: "REDUCE_SCATTER", REDUCE_SCATTER_BLOCK: "REDUCE_SCATTER_BLOCK", BARRIER: "BARRIER"}
