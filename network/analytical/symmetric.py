"""Congestion-unaware network seen by one representative NPU of a symmetric SPMD run.

When every rank runs the same graph and every collective step is the same on every rank up to
a relabelling of ranks, every rank does the same thing at the same time (issue 8). Then the
message that rank ``me`` receives from ``src`` in a step was sent by ``src`` at the instant
``me`` posted its own send and receive of that step, and it arrives ``delay(src → me)`` later.
This backend simulates only that one NPU: a receive fires at post time + the congestion-unaware
delay, a send costs nothing but counts its bytes. The system layer runs unchanged on top.

Only the system layer decides whether a run qualifies (system/shortcuts/representative.py); this backend
trusts that decision. ``scale`` multiplies the traffic counters so that stats describe the
whole network.
"""
from __future__ import annotations

from network.config import NetworkConfig
from network.event_queue import EventQueue, core_name
from network.topology import Topology

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Callable


class SymmetricUnawareBackend:
    name = "congestion-unaware"

    def __init__(self, config: NetworkConfig, max_events: int | None = None,
                 wall_limit_s: float | None = None) -> None:
        self.config = config
        self.topology: Topology = config.topology
        self.queue = EventQueue(max_events, wall_limit_s)
        self.schedule = self.queue.schedule
        self.messages = 0
        self.bytes_per_dim = [0] * self.topology.dims_count
        self.scale = self.topology.npus_count
        self._delay: dict[tuple[int, int, int], int] = {}
        self._dim: dict[tuple[int, int], int] = {}

    def now(self) -> int:
        return self.queue.now

    def run(self) -> None:
        self.queue.run()

    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        self.messages += 1
        pair = (src, dst)
        d = self._dim.get(pair)
        if d is None:
            d = self._dim[pair] = self.topology.dim_to_transfer(src, dst)
        self.bytes_per_dim[d] += size_bytes

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        k = (src, dst, size_bytes)
        delay = self._delay.get(k)
        if delay is None:
            delay = self._delay[k] = self.topology.unaware_delay_ns(src, dst, size_bytes)
        self.queue.schedule(delay, callback, *args)

    def exchange(self, me: int, dst: int, src: int, size_bytes: int, tag: int, label: object,
                 callback: Callable[..., None], arg: object) -> None:
        self.send(me, dst, size_bytes, tag, callback)
        self.recv(me, src, size_bytes, tag, callback, arg)

    def unmatched(self) -> list[str]:
        return []

    def stats(self) -> dict[str, object]:
        return {
            "core": core_name(self.queue),  # which event queue ran (network/event_queue.py)
            "events": self.queue.events_processed,
            "messages": self.messages * self.scale,
            "bytes_sent": sum(self.bytes_per_dim) * self.scale,
            "bytes_received": sum(self.bytes_per_dim) * self.scale,
            "bytes_per_dim": [b * self.scale for b in self.bytes_per_dim],
            "representative_rank": True,
        }
