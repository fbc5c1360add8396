"""The scheduler unit: which streams run on each queue (ASTRA-sim: Sys::SchedulerUnit).

Each queue lets at most ``queue_threshold`` streams run at once
(ceil(active-chunks-per-dimension / queues-per-dim)); the others wait in the queue's
``active_streams`` list, in priority order, and start when a running one leaves.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from system.sys import Sys


class SchedulerUnit:
    __slots__ = ("sys", "max_running_streams", "ready_list_threshold", "queue_threshold",
                 "running_streams", "queue_id_to_dimension")

    def __init__(self, sys: "Sys", queues_per_dim: list[int], max_running_streams: int,
                 ready_list_threshold: int, queue_threshold: int) -> None:
        self.sys = sys
        self.max_running_streams = max_running_streams
        self.ready_list_threshold = ready_list_threshold
        self.queue_threshold = queue_threshold
        self.running_streams: dict[int, int] = {}
        self.queue_id_to_dimension: dict[int, int] = {}
        base = 0
        for dim, q in enumerate(queues_per_dim):
            for _ in range(q):
                self.running_streams[base] = 0
                self.queue_id_to_dimension[base] = dim
                base += 1

    def _start_waiting(self, vnet: int) -> None:
        queue = self.sys.active_streams[vnet]
        i = self.running_streams[vnet]
        while i < len(queue) and self.running_streams[vnet] < self.queue_threshold:
            queue[i].init()
            self.running_streams[vnet] += 1
            i += 1

    def _schedule_ready(self) -> None:
        sys = self.sys
        if sys.first_phase_streams < self.ready_list_threshold and sys.total_running_streams < self.max_running_streams:
            room = self.ready_list_threshold - sys.first_phase_streams
            room = min(room, self.max_running_streams - sys.total_running_streams)
            sys.schedule(room)

    def notify_stream_added(self, vnet: int) -> None:
        self._start_waiting(vnet)

    def notify_stream_added_into_ready_list(self) -> None:
        self._schedule_ready()

    def notify_stream_removed(self, vnet: int) -> None:
        self.running_streams[vnet] -= 1
        self._schedule_ready()
        self._start_waiting(vnet)
