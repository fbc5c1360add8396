"""Logical topologies the collective algorithms run on (ASTRA-sim: astraccl/.../logical_topology).

A collective sees the network as a list of logical dimensions, one per entry of its
implementation list (not one per network dimension): dimension d is a ring of the NPUs that
differ from this one only in network coordinate d (ASTRA-sim: GeneralComplexTopology), a
double binary tree, or, for the ``one*`` implementations, a single ring over every NPU.
"""
from __future__ import annotations

import math

from network.choices import Choice
from system.config import CollectiveImpl, ImplType


class Direction(Choice):
    CLOCKWISE = 0
    ANTICLOCKWISE = 1


class RingTopology:
    """A ring of NPUs in a fixed order (ASTRA-sim: RingTopology).

    A ring along one network dimension is arithmetic (base + i × offset), so it stores three
    numbers, not N members: with one Sys per rank a list per rank would cost N² memory.
    ``local`` marks the rings ASTRA-sim builds for communicator groups
    (RingTopology::Dimension::Local); on those the memory bus uses its "fast" fixed 10-cycle
    delay instead of endpoint-delay (MemBus::Transmition::Fast).
    """

    __slots__ = ("id", "index_in_ring", "nodes_in_ring", "local", "_list", "_base", "_offset", "_identity")

    def __init__(self, npu_id: int, members: list[int], local: bool = False) -> None:
        self.id = npu_id
        self._list: list[int] | None = list(members)
        self._base = self._offset = 0
        self.nodes_in_ring = len(members)
        self.index_in_ring = members.index(npu_id)
        self.local = local
        self._identity: tuple | None = None

    @classmethod
    def homogeneous(cls, npu_id: int, size: int, offset: int) -> "RingTopology":
        ring = cls.__new__(cls)
        ring.id = npu_id
        ring.index_in_ring = (npu_id % (offset * size)) // offset
        ring.nodes_in_ring = size
        ring.local = False
        ring._list = None
        ring._base = npu_id - ring.index_in_ring * offset
        ring._offset = offset
        ring._identity = None
        return ring

    @property
    def members(self) -> list[int]:
        if self._list is not None:
            return list(self._list)
        return [self._base + i * self._offset for i in range(self.nodes_in_ring)]

    @property
    def identity(self) -> tuple:
        """Equal on every member's copy of one ring, different for another ring (made once)."""
        key = self._identity
        if key is None:
            # tagged: a strided ring (n, base, offset) and a listed one of three members are other rings
            key = self._identity = ("strided", self.nodes_in_ring, self._base, self._offset) if self._list is None \
                else ("listed", *self._list)
        return key

    def member_at(self, index: int) -> int:
        i = index % self.nodes_in_ring
        if self._list is not None:
            return self._list[i]
        return self._base + i * self._offset

    def get_receiver(self, direction: Direction) -> int:
        step = 1 if direction is Direction.CLOCKWISE else -1
        return self.member_at(self.index_in_ring + step)

    def get_sender(self, direction: Direction) -> int:
        step = -1 if direction is Direction.CLOCKWISE else 1
        return self.member_at(self.index_in_ring + step)

    @property
    def num_nodes(self) -> int:
        return self.nodes_in_ring


class LogicalTopology:
    """Per-collective list of logical dimensions (ASTRA-sim: GeneralComplexTopology)."""

    __slots__ = ("dims",)

    def __init__(self, dims: list) -> None:
        self.dims = dims

    def get_num_of_dimensions(self) -> int:
        return len(self.dims)

    def get_num_of_nodes_in_dimension(self, d: int) -> int:
        return self.dims[d].num_nodes

    def get_basic_topology_at_dimension(self, d: int):
        return self.dims[d]

    @classmethod
    def general_complex(cls, npu_id: int, dim_sizes: list[int], impls: tuple[CollectiveImpl, ...]) -> "LogicalTopology":
        dims: list = []
        offset = 1
        last = len(impls) - 1
        for d, impl in enumerate(impls):
            size = dim_sizes[d]
            if impl.type.is_one:
                total = math.prod(dim_sizes)
                dims.append(RingTopology.homogeneous(npu_id, total, 1))
                break
            if impl.type is ImplType.DOUBLE_BINARY_TREE:
                from system.collective.double_binary_tree import DoubleBinaryTreeTopology

                if d == last:
                    start = npu_id % offset
                else:
                    start = (npu_id - npu_id % (offset * size)) + npu_id % offset
                dims.append(DoubleBinaryTreeTopology(npu_id, size, start, offset))
            else:
                dims.append(RingTopology.homogeneous(npu_id, size, offset))
            offset *= size
        return cls(dims)
