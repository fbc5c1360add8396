"""The event core: integer nanoseconds, a heap of plain tuples, FIFO among equal times.

ASTRA-sim's analytical EventQueue keeps one FIFO list per time and runs events added for the
current time in the same pass (common/event-queue/EventList.cpp); (time, seq) gives that order.
"""
from __future__ import annotations

import heapq
import itertools
import time as _time
from typing import Callable

from network.errors import SimulationLimitError


class EventQueue:
    __slots__ = ("now", "_heap", "_seq", "events_processed", "max_events", "wall_limit_s", "on_tick")

    #: ``on_tick(now_ns, events)`` runs once per this many events (a progress bar's hook)
    TICK_EVENTS = 1 << 16

    def __init__(self, max_events: int | None = None, wall_limit_s: float | None = None) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callable[..., None], tuple]] = []
        self._seq = itertools.count()
        self.events_processed = 0
        self.max_events = max_events
        self.wall_limit_s = wall_limit_s
        self.on_tick: Callable[[int, int], None] | None = None

    def schedule(self, delay_ns: int, callback: Callable[..., None], *args: object) -> None:
        heapq.heappush(self._heap, (self.now + delay_ns, next(self._seq), callback, args))

    def __len__(self) -> int:
        return len(self._heap)

    def run(self) -> None:
        heap, pop = self._heap, heapq.heappop  # locals: this loop runs millions of times
        limit = self.max_events
        wall = self.wall_limit_s
        tick = self.on_tick
        if limit is None and wall is None:
            if tick is None:
                n = 0
                while heap:
                    self.now, _, callback, args = pop(heap)
                    callback(*args)
                    n += 1
                self.events_processed += n
                return
            # in slices: the range iterator counts, so the loop costs what the one above does
            n = self.events_processed
            every = self.TICK_EVENTS
            while heap:
                for n in range(n + 1, n + every + 1):
                    self.now, _, callback, args = pop(heap)
                    callback(*args)
                    if not heap:
                        break
                self.events_processed = n
                tick(self.now, n)
            return
        deadline = None if wall is None else _time.monotonic() + wall
        mask = self.TICK_EVENTS - 1
        n = self.events_processed
        while heap:
            self.now, _, callback, args = pop(heap)
            callback(*args)
            n += 1
            if limit is not None and n >= limit and heap:
                self.events_processed = n
                raise SimulationLimitError(
                    f"event budget of {limit} events exhausted at simulated time {self.now} ns "
                    f"with {len(heap)} events still queued (raise --max-events)"
                )
            # every 64 events: a budget must hold even when single events are slow (generating
            # a large collective is one event); a clock read per 64 events costs nothing measurable
            if deadline is not None and not (n & 0x3F) and _time.monotonic() > deadline:
                self.events_processed = n
                raise SimulationLimitError(
                    f"wall-time budget of {wall:g} s exhausted at simulated time {self.now} ns "
                    f"after {n} events (raise --max-wall-seconds)"
                )
            if tick is not None and not (n & mask):
                self.events_processed = n
                tick(self.now, n)
        self.events_processed = n
