"""Flows advanced a step at a time for many senders at once on the congestion-aware network.

A batched ring phase (system/shortcuts/ring_batch.py) sends, at every step, one message on each of its n
flows pred(i) → i. When those flows' routes share no link, each link carries one flow, first in
first out, and store-and-forward on hop h is, for every flow at once:

    start = max(arrival at the link, link free);  free = start + int(size / bw);
    arrival at the next device = start + int(latency + size / bw)

(the arithmetic of aware.py's Link). The links are claimed while the phase uses them: other
traffic on a claimed link, or on a link whose recent use the phase cannot have seen, raises
``FastPathConflict`` and the caller reruns the run with every message an event.
``peak_pending`` (the ``max_link_queue`` statistic) is kept exact up to ``DEPTH`` queued chunks
per link; a deeper queue is a conflict too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from network.analytical.list_pipes import DEPTH, link_state
from network.errors import FastPathConflict
from network.event_queue import MAX_TIME_NS

if TYPE_CHECKING:
    from network.analytical.aware import Link


class LinkPipes:
    def __init__(self, routes: Sequence[tuple["Link", ...]], size_bytes: int) -> None:
        self.routes = routes
        self.hops = len(routes[0])
        n = len(routes)
        self.free, self.ser, self.arr, self._seen = [], [], [], []
        for h in range(self.hops):
            free = np.empty(n, dtype=np.int64)
            ser = np.empty(n, dtype=np.int64)
            arr = np.empty(n, dtype=np.int64)
            seen = np.empty(n, dtype=np.int64)  # the latest start this phase must come after
            for i, r in enumerate(routes):
                free[i], seen[i], arr[i], ser[i] = link_state(r[h], size_bytes)
            self.free.append(free)
            self.ser.append(ser)
            self.arr.append(arr)
            self._seen.append(seen)
        # starts of the link's latest chunks (a queue left by the phase before counts)
        self._recent = [np.full((DEPTH - 1, n), -1, dtype=np.int64) for _ in range(self.hops)]
        for h in range(self.hops):
            for i, r in enumerate(routes):
                if r[h].claim_recent is not None:
                    self._recent[h][:, i] = r[h].claim_recent
        self._peak = [np.zeros(n, dtype=np.int64) for _ in range(self.hops)]
        self._last_in: list[np.ndarray | None] = [None] * self.hops
        self._step = 0

    def step(self, sends: np.ndarray) -> np.ndarray:
        """One message on every flow, sent at ``sends``; returns the arrival times at the ends."""
        x = sends
        first = self._step == 0
        slot = self._step % (DEPTH - 1)
        self._step += 1
        for h in range(self.hops):
            if first and (self._seen[h] >= x).any():
                # other traffic used the link at or after this phase's first chunk reached it:
                # the two would have shared the queue in an order the recurrence does not know
                raise FastPathConflict("a link was used while a batched ring phase waited for its ranks")
            if (self.free[h] == x).any():
                # a chunk reaches a link in the tick it frees: whether it queued for that instant
                # (max_link_queue) depends on the events' order there, which is not modelled here
                raise FastPathConflict("a chunk reaches a link as it frees")
            start = np.maximum(x, self.free[h])
            waited = start > x
            if waited.any():  # a queue formed: count the chunks waiting when this one came
                depth = waited.astype(np.int64)
                depth += (self._recent[h] > x).sum(axis=0)
                if int(depth.max()) >= DEPTH:
                    raise FastPathConflict("a link queue deeper than the batched phase tracks")
                np.maximum(self._peak[h], depth, out=self._peak[h])
            if (start > MAX_TIME_NS - self.ser[h]).any() or (start > MAX_TIME_NS - self.arr[h]).any():
                # int64 would wrap: the event path ends such a run by its clock (exit 2)
                raise FastPathConflict("a time past the 64-bit clock")
            self._recent[h][slot] = start
            self._last_in[h] = x
            self.free[h] = start + self.ser[h]
            x = start + self.arr[h]
        return x

    def close(self, messages: int) -> None:
        """Claim the links until the phase's last chunk has left them; book the statistics."""
        for h in range(self.hops):
            free, last_in, peak = self.free[h], self._last_in[h], self._peak[h]
            for i, r in enumerate(self.routes):
                link = r[h]
                link.claim_until = int(free[i])
                link.claim_last = int(last_in[i])
                link.claim_recent = self._recent[h][:, i].copy()
                link.chunks += messages
                if peak[i] > link.peak_pending:
                    link.peak_pending = int(peak[i])
