"""Build Chakra ET graphs in code and write them with the project's own writer.

Used by the benchmark, the tests and anyone scripting a workload::

    b = GraphBuilder()
    c = b.comp("fwd", duration_ns=5000)
    b.collective("grad_ar", "ALL_REDUCE", 1 << 20, deps=[c])
    b.write("out/my_workload", rank=0)      # out/my_workload.0.et
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from chakra_proto import et_def_pb2 as pb, write_et
from chakra_proto.attrs import int_value, attr_bool, attr_bool_list, attr_int32, attr_int64, attr_string, attr_uint64
from workload.compatible_flag import ASTRA_SIM_COMPATIBLE_HELP, add_astra_sim_compatible_argument  # noqa: F401

ET_VERSION = "0.0.4"  # what ASTRA-sim's examples carry (formats.md A.3)
PRIVATE_ATTRIBUTES = frozenset({"duration_ns"})  #: ours: ASTRA-sim ignores them, so its cycles would differ


def make_astra_sim_compatible(nodes: Iterable[pb.Node]) -> None:
    """In place: every COMP_NODE's ``duration_ns`` becomes whole ``duration_micros`` and private
    attributes go. Microseconds are cut from the running total in node order, rounded half up, so
    the durations add up to the rounded sum instead of losing up to 1 µs per node."""
    exact_ns = written_us = 0
    for n in nodes:
        ns = next((int_value(a) for a in n.attr if a.name == "duration_ns"), None)
        if n.type == pb.COMP_NODE:
            exact_ns += n.duration_micros * 1000 if ns is None else ns
            end_us = (exact_ns + 500) // 1000
            n.duration_micros, written_us = end_us - written_us, end_us
        kept = [a for a in n.attr if a.name not in PRIVATE_ATTRIBUTES]
        if len(kept) != len(n.attr):
            del n.attr[:]
            n.attr.extend(kept)


class GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[pb.Node] = []

    def _add(self, name: str, ntype: int, deps: Iterable[int], ctrl_deps: Iterable[int] = ()) -> pb.Node:
        n = pb.Node(id=len(self.nodes), name=name, type=ntype)
        n.data_deps.extend(deps)
        n.ctrl_deps.extend(ctrl_deps)
        self.nodes.append(n)
        return n

    def comp(self, name: str, duration_ns: int, deps: Iterable[int] = (), *, is_cpu_op: bool = False,
             num_ops: int | None = None, tensor_size: int | None = None) -> int:
        n = self._add(name, pb.COMP_NODE, deps)
        n.duration_micros = duration_ns // 1000
        n.attr.append(attr_bool("is_cpu_op", is_cpu_op))
        if duration_ns % 1000:
            n.attr.append(attr_uint64("duration_ns", duration_ns))
        if num_ops is not None:
            n.attr.append(attr_int64("num_ops", num_ops))
        if tensor_size is not None:
            n.attr.append(attr_uint64("tensor_size", tensor_size))
        return n.id

    def collective(self, name: str, comm_type: str | int, size: int, deps: Iterable[int] = (), *,
                   pg_name: str | None = None, involved_dim: list[bool] | None = None,
                   priority: int | None = None, duration_ns: int = 0) -> int:
        ct = pb.CollectiveCommType.Value(comm_type) if isinstance(comm_type, str) else comm_type
        n = self._add(name, pb.COMM_COLL_NODE, deps)
        n.duration_micros = duration_ns // 1000
        n.attr.append(attr_bool("is_cpu_op", False))
        n.attr.append(attr_int64("comm_type", ct))
        n.attr.append(attr_int64("comm_size", size))
        if pg_name is not None:
            n.attr.append(attr_string("pg_name", pg_name))
        if involved_dim is not None:
            n.attr.append(attr_bool_list("involved_dim", involved_dim))
        if priority is not None:
            n.attr.append(attr_int32("comm_priority", priority))
        return n.id

    def send(self, name: str, src: int, dst: int, size: int, tag: int, deps: Iterable[int] = ()) -> int:
        n = self._add(name, pb.COMM_SEND_NODE, deps)
        n.attr.extend([attr_bool("is_cpu_op", False), attr_int32("comm_src", src), attr_int32("comm_dst", dst),
                       attr_int32("comm_tag", tag), attr_int64("comm_size", size)])
        return n.id

    def recv(self, name: str, src: int, dst: int, size: int, tag: int, deps: Iterable[int] = ()) -> int:
        n = self._add(name, pb.COMM_RECV_NODE, deps)
        n.attr.extend([attr_bool("is_cpu_op", False), attr_int32("comm_src", src), attr_int32("comm_dst", dst),
                       attr_int32("comm_tag", tag), attr_int64("comm_size", size)])
        return n.id

    def memory(self, name: str, kind: str, size: int, deps: Iterable[int] = ()) -> int:
        ntype = pb.MEM_LOAD_NODE if kind == "load" else pb.MEM_STORE_NODE
        n = self._add(name, ntype, deps)
        n.attr.extend([attr_bool("is_cpu_op", False), attr_uint64("tensor_size", size)])
        return n.id

    def write(self, prefix: str | os.PathLike, rank: int | None = None, *,
              astra_sim_compatible: bool = False) -> Path:
        """Write ``PREFIX.{rank}.et`` (or exactly ``prefix`` when rank is None)."""
        path = Path(f"{prefix}.{rank}.et") if rank is not None else Path(prefix)
        nodes = self.nodes
        if astra_sim_compatible:
            nodes = [pb.Node.FromString(n.SerializeToString()) for n in self.nodes]
            make_astra_sim_compatible(nodes)
        write_et(path, pb.GlobalMetadata(version=ET_VERSION), nodes)
        return path


def write_collective_microbenchmark(prefix: str | os.PathLike, npus: int, comm_type: str = "ALL_REDUCE",
                                    size: int = 1 << 20, shared: bool = False) -> str:
    """One collective per rank, as ASTRA-sim's microbenchmark generator writes them.
    With ``shared`` one file ``PREFIX.et`` serves every rank; returns the workload spec."""
    if shared:
        b = GraphBuilder()
        b.collective(comm_type, comm_type, size)
        return str(b.write(f"{prefix}.et"))
    for r in range(npus):
        b = GraphBuilder()
        b.collective(comm_type, comm_type, size)
        b.write(prefix, r)
    return str(prefix)
