"""Queues (virtual networks) per dimension and how phases are assigned to them
(ASTRA-sim: QueueLevels / QueueLevelHandler).

Queue ids are global: dimension 0 owns ids 0..q0−1, dimension 1 the next q1, and so on. With
several queues per dimension the second half runs anticlockwise; localBWAware all-reduce puts
its reduce-scatter and all-reduce phases on the first half and its all-gather phases on the
second half (the deadlock workaround of ASTRA-sim PR #135).
"""
from __future__ import annotations

from system.logical_topology import Direction


class QueueLevelHandler:
    __slots__ = ("queues", "allocator", "first_allocator", "last_allocator")

    def __init__(self, start: int, count: int) -> None:
        self.queues = list(range(start, start + count))
        self.allocator = 0
        self.first_allocator = 0
        self.last_allocator = count // 2

    @property
    def rotates(self) -> bool:
        """Whether the allocators hand out more than one (queue, direction): with one queue (or
        none) each of them gives the same answer every time, and its counters stay at 0."""
        return len(self.queues) > 1

    def get_next_queue_id(self) -> tuple[int, Direction]:
        n = len(self.queues)
        direction = Direction.ANTICLOCKWISE if n > 1 and self.allocator >= n // 2 else Direction.CLOCKWISE
        if n == 0:
            return -1, direction
        q = self.queues[self.allocator]
        self.allocator += 1
        if self.allocator >= n:
            self.allocator = 0
        return q, direction

    def get_next_queue_id_first(self) -> tuple[int, Direction]:
        n = len(self.queues)
        if n == 0:
            return -1, Direction.CLOCKWISE
        q = self.queues[self.first_allocator]
        self.first_allocator += 1
        if self.first_allocator >= n // 2:
            self.first_allocator = 0
        return q, Direction.CLOCKWISE

    def get_next_queue_id_last(self) -> tuple[int, Direction]:
        n = len(self.queues)
        if n == 0:
            return -1, Direction.ANTICLOCKWISE
        q = self.queues[self.last_allocator]
        self.last_allocator += 1
        if self.last_allocator >= n:
            self.last_allocator = n // 2
        return q, Direction.ANTICLOCKWISE


class QueueLevels:
    __slots__ = ("levels",)

    def __init__(self, queues_per_dim: list[int]) -> None:
        self.levels = []
        start = 0
        for q in queues_per_dim:
            self.levels.append(QueueLevelHandler(start, q))
            start += q

    def get_next_queue_at_level(self, level: int) -> tuple[int, Direction]:
        return self.levels[level].get_next_queue_id()

    def get_next_queue_at_level_first(self, level: int) -> tuple[int, Direction]:
        return self.levels[level].get_next_queue_id_first()

    def get_next_queue_at_level_last(self, level: int) -> tuple[int, Direction]:
        return self.levels[level].get_next_queue_id_last()
