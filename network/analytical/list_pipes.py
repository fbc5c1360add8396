"""LinkPipes (link_pipes.py) on Python lists: the same store-and-forward arithmetic and the same
conflicts, flow by flow, without numpy.

A batched ring phase of a small run does a few thousand flow-steps; importing numpy for it costs
more than the whole phase in Python (0.07-0.2 s and 14 MB of peak memory, against 0.1-0.4 µs a
flow-step), so ring_batch.py takes this class until a run's batched work would pay for numpy.
Both classes give the same times and raise on the same steps (tests/network/test_list_pipes.py);
a link's ``claim_recent`` is a list here and an array there, and either class reads the other's.
"""
from __future__ import annotations

from network.errors import FastPathConflict
from network.event_queue import MAX_TIME_NS
from network.units import link_arrival_ns, link_serialization_ns

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Sequence
    from network.analytical.aware import Link

#: chunks per link whose starts a phase keeps (both kinds of pipes)
DEPTH = 8


def link_state(link: "Link", size_bytes: int) -> tuple[int, int, int, int]:
    """What a phase starts from on one of its links, for both kinds of pipes: (free, seen,
    arrival delay, serialization) of a chunk of ``size_bytes``; a busy link is a conflict."""
    if link.busy or link.pending:
        raise FastPathConflict(f"link {link.src}->{link.dst} is busy as a batched ring phase starts")
    d = link.delays.get(size_bytes)
    if d is None:
        d = link.delays[size_bytes] = (link_arrival_ns(size_bytes, link.latency_ns, link.bytes_per_ns),
                                       link_serialization_ns(size_bytes, link.bytes_per_ns))
    return max(link.claim_until, link.free_at), max(link.last_start, link.claim_last), d[0], d[1]


class ListPipes:
    def __init__(self, routes: Sequence[tuple["Link", ...]], size_bytes: int) -> None:
        self.routes = routes
        self.hops = len(routes[0])
        n = len(routes)
        self.free: list[list[int]] = []
        self.ser: list[list[int]] = []
        self.arr: list[list[int]] = []
        self._seen: list[list[int]] = []
        self._recent: list[list[list[int]]] = []  # per hop: DEPTH - 1 rows of n chunk starts
        for h in range(self.hops):
            free, ser, arr, seen = [0] * n, [0] * n, [0] * n, [0] * n
            recent = [[-1] * n for _ in range(DEPTH - 1)]
            for i, r in enumerate(routes):
                link = r[h]
                free[i], seen[i], arr[i], ser[i] = link_state(link, size_bytes)
                if link.claim_recent is not None:
                    for s, v in enumerate(link.claim_recent):
                        recent[s][i] = int(v)
            self.free.append(free)
            self.ser.append(ser)
            self.arr.append(arr)
            self._seen.append(seen)
            self._recent.append(recent)
        self._peak = [[0] * n for _ in range(self.hops)]
        self._last_in: list[list[int] | None] = [None] * self.hops
        self._step = 0

    def step(self, sends: list[int]) -> list[int]:
        """One message on every flow, sent at ``sends``; returns the arrival times at the ends."""
        x = sends
        first = self._step == 0
        slot = self._step % (DEPTH - 1)
        self._step += 1
        for h in range(self.hops):
            free = self.free[h]
            if first and any(s >= t for s, t in zip(self._seen[h], x)):
                raise FastPathConflict("a link was used while a batched ring phase waited for its ranks")
            if any(f == t for f, t in zip(free, x)):
                raise FastPathConflict("a chunk reaches a link as it frees")
            start = [f if f > t else t for f, t in zip(free, x)]
            waited = [i for i, (s, t) in enumerate(zip(start, x)) if s > t]
            if waited:  # a queue formed: count the chunks waiting when this one came
                recent, peak = self._recent[h], self._peak[h]
                depth = [0] * len(x)
                for i in waited:
                    depth[i] = 1
                for row in recent:
                    for i, (v, t) in enumerate(zip(row, x)):
                        if v > t:
                            depth[i] += 1
                if max(depth) >= DEPTH:
                    raise FastPathConflict("a link queue deeper than the batched phase tracks")
                self._peak[h] = [d if d > p else p for d, p in zip(depth, peak)]
            free = [s + c for s, c in zip(start, self.ser[h])]
            arrive = [s + a for s, a in zip(start, self.arr[h])]
            if max(free) > MAX_TIME_NS or max(arrive) > MAX_TIME_NS:  # as LinkPipes, whose int64 would wrap
                raise FastPathConflict("a time past the 64-bit clock")
            self._recent[h][slot] = start
            self._last_in[h] = x
            self.free[h] = free
            x = arrive
        return x

    def close(self, messages: int) -> None:
        """Claim the links until the phase's last chunk has left them; book the statistics."""
        for h in range(self.hops):
            free, last_in, peak, recent = self.free[h], self._last_in[h], self._peak[h], self._recent[h]
            for i, r in enumerate(self.routes):
                link = r[h]
                link.claim_until = free[i]
                link.claim_last = last_in[i]
                link.claim_recent = [row[i] for row in recent]
                link.chunks += messages
                if peak[i] > link.peak_pending:
                    link.peak_pending = peak[i]

