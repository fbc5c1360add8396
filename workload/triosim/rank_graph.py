"""One rank's Chakra graph, built node by node in replay order.

Conventions (what ASTRA-sim and our simulator read, docs/formats.md §A.4-A.5):

* node ids start at 0 and follow creation order; ordering lives in ``data_deps`` only.
* ``chain`` nodes hang off the rank's current tail, so compute and blocking collectives replay in
  order. Side nodes (DDP bucket all-reduces, pipeline sends) depend on the node that produced their
  data and leave the tail alone, so they overlap what follows.
* COMP_NODE carries ``duration_ns`` (uint64, exact) and ``duration_micros`` (integer µs for
  ASTRA-sim). Both are cut from the rank's *cumulative* exact compute time, rounded half up:
  duration = round(end) − round(start), so a rank's durations add up to round(Σ times) exactly.
  ``astra_sim_compatible`` leaves ``duration_ns`` out (ASTRA-sim ignores it, so the two simulators
  would disagree): durations are then whole µs, and a node that rounds to 0 µs is left out.
"""
from __future__ import annotations

from fractions import Fraction

from chakra_proto import et_def_pb2 as pb
from chakra_proto.attrs import attr_bool, attr_int32, attr_int64, attr_string, attr_uint64

_HALF = Fraction(1, 2)


def round_half_up(x: Fraction) -> int:
    return int((x + _HALF).__floor__())


class RankGraph:
    """The nodes of one rank (ASTRA-sim: one ``PREFIX.{rank}.et``)."""

    __slots__ = ("rank", "nodes", "tail", "compute_ns", "_compute_exact", "_compute_us", "counts", "_join",
                 "astra_sim_compatible")

    def __init__(self, rank: int, astra_sim_compatible: bool = False) -> None:
        self.rank = rank
        self.astra_sim_compatible = astra_sim_compatible
        self.nodes: list[pb.Node] = []
        self.tail: int | None = None  #: the last chained node
        self.compute_ns = 0  #: Σ duration_ns so far (= round of the exact sum)
        self._compute_exact = Fraction(0)
        self._compute_us = 0
        self.counts = {"comp": 0, "all_reduce": 0, "send": 0, "recv": 0, "zero_time_skipped": 0}
        self._join: list[int] = []

    def _new(self, name: str, kind: int, deps: list[int] | None, chain: bool) -> pb.Node:
        node = pb.Node(id=len(self.nodes), name=name, type=kind)
        if deps is None:
            deps = ([] if self.tail is None else [self.tail]) + self._join
            self._join = []
        node.data_deps.extend(sorted(set(deps)))
        self.nodes.append(node)
        if chain:
            self.tail = node.id
        return node

    def comp(self, name: str, time_ns: Fraction) -> int:
        """A chained GPU compute node lasting ``time_ns`` (exact; rounded cumulatively).

        A node that rounds to 0 ns is left out (ASTRA-sim would charge it 1 ns), its time stays in
        the running sum; the id returned is then the current tail.
        """
        self._compute_exact += time_ns
        end_us = round_half_up(self._compute_exact / 1000)
        end_ns = end_us * 1000 if self.astra_sim_compatible else round_half_up(self._compute_exact)
        if end_ns == self.compute_ns and self.tail is not None:
            self.counts["zero_time_skipped"] += 1
            return self.tail
        node = self._new(name, pb.COMP_NODE, None, True)
        node.duration_micros = end_us - self._compute_us
        node.attr.append(attr_bool("is_cpu_op", False))
        if not self.astra_sim_compatible:
            node.attr.append(attr_uint64("duration_ns", end_ns - self.compute_ns))
        self.compute_ns, self._compute_us = end_ns, end_us
        self.counts["comp"] += 1
        return node.id

    def all_reduce(self, name: str, size_bytes: int, group: int, *,
                   deps: list[int] | None = None, chain: bool = True) -> int:
        """An ALL_REDUCE of ``size_bytes`` (the full buffer) in comm group ``group`` (0: all ranks)."""
        node = self._new(name, pb.COMM_COLL_NODE, deps, chain)
        node.attr.extend([
            attr_bool("is_cpu_op", False),
            attr_int64("comm_type", pb.ALL_REDUCE),
            attr_int64("comm_size", size_bytes),
        ])
        if group:
            node.attr.append(attr_string("pg_name", str(group)))
        self.counts["all_reduce"] += 1
        return node.id

    def send(self, name: str, dst: int, size_bytes: int, tag: int, *, deps: list[int]) -> int:
        """A side COMM_SEND_NODE: waits for ``deps`` only, so compute goes on while it flies."""
        node = self._new(name, pb.COMM_SEND_NODE, deps, False)
        node.attr.extend(_p2p_attrs(self.rank, dst, size_bytes, tag))
        self.counts["send"] += 1
        return node.id

    def recv(self, name: str, src: int, size_bytes: int, tag: int) -> int:
        """A chained COMM_RECV_NODE: what follows needs the data."""
        node = self._new(name, pb.COMM_RECV_NODE, None, True)
        node.attr.extend(_p2p_attrs(src, self.rank, size_bytes, tag))
        self.counts["recv"] += 1
        return node.id

    def join(self, deps: list[int]) -> None:
        """Make the next chained node also wait for ``deps`` (e.g. every DDP bucket all-reduce)."""
        self._join.extend(deps)


def _p2p_attrs(src: int, dst: int, size_bytes: int, tag: int) -> list[pb.AttributeProto]:
    return [
        attr_bool("is_cpu_op", False),
        attr_int32("comm_src", src),
        attr_int32("comm_dst", dst),
        attr_int32("comm_tag", tag),
        attr_int64("comm_size", size_bytes),
    ]
