"""Ring phases on a topology file's links (aware.py's PacketLink), every rank at once, where flows
share links and phases overlap.

A ring phase (system/shortcuts/ring_batch.py) is, per rank i of a ring and message k = 1..S:

    t_1[i] = start[i] + E;   R_k[i] = max(A_k[i], t_k[i]);   t_(k+1)[i] = R_k[i] + extra[k+1]

where rank i sends message k at t_k[i] on the flow i → succ(i), and A_k[i] is when message k of
its predecessor's flow reached it; the phase ends on rank i at R_S[i]. A message crosses its
flow's one path (graph_links.py) with the PacketLink's arithmetic per hop (p = min(packet, S)):

    start = max(arrival, link free);  end = max(start + int(S/B), tail + int(p/B))
    head at the next device = start + int(L + p/B);  tail there = max(int(end + L), head)

``RingFlows`` runs every phase that joins it, as its ranks join, beside the event queue:

* A link that one flow (one pair of ranks) uses is private: it serves that flow's messages in
  their order, so its hops are arithmetic, computed for many ranks at once (numpy) as far ahead
  as each rank's inputs allow.
* A link that several flows use is shared: it serves messages in arrival order, ties by input
  link id, as the event path does. Flows drift apart by whole steps and phases overlap there, so
  shared links are a small discrete-event simulation: a heap of the messages waiting at them,
  served in time order up to a horizon before which nothing not yet computed can arrive: every
  such message waits, through private flows, on a message in the heap (whose effects reach a
  shared link no sooner than ``lookahead`` after it), on a rank about to send, or on a rank that
  has not started its phase yet (which sends no sooner than now plus the least endpoint time,
  nor before the phase it is in has ended: a rank runs one phase at a time).
* The horizon rests on what the phases so far tell (their endpoint times, their flows, one phase
  per rank at a time); so each message is checked against what its links already served, and
  one that would have to queue before a message already served (two chunks of one rank at once,
  a phase with a shorter endpoint time, a new flow onto a link that served another alone) raises
  ``FastPathConflict``: the run is redone with every message an event.
* The links are claimed for good: any message of the event path onto them is a conflict too.

It resumes from the event queue when time reaches what the heap holds, and hands each rank back
to the system layer at its last receive.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from network.errors import FastPathConflict

if TYPE_CHECKING:
    from network.analytical.aware import PacketLink

#: messages a private link keeps the starts of, to count its queue exactly
DEPTH = 64
#: messages sent at once that are advanced one at a time rather than as arrays
SCALAR = 8
#: _Phase.touched: look at every rank
ALL = object()
#: a claim no event-path message passes
FOREVER = 1 << 62


def _delays(link: "PacketLink", size: int) -> tuple[int, int, int]:
    return link.packet_delays(size)


class _Phase:
    """One ring phase: its ranks in ring order and their progress."""

    __slots__ = ("n", "ids", "steps", "size", "endpoint", "extra", "succ", "flow_in", "flow_out", "joined",
                 "t_last", "sent", "got", "arr", "finished", "last", "handed", "on_done", "left", "unhanded", "cum",
                 "touched", "ending", "bnd", "w", "order", "dirty")

    def __init__(self, ids: Sequence[int], pred: Sequence[int], steps: int, size: int, endpoint: int,
                 extra: Sequence[int], flow_in: np.ndarray, order: int = 0, dirty: list | None = None) -> None:
        n = len(ids)
        self.order = order  # its place among the phases: touched ones are looked at in this order
        self.dirty = [] if dirty is None else dirty  # the phases touched since the pump last looked
        self.ids = list(ids)
        self.n, self.steps, self.size, self.endpoint = n, steps, size, endpoint
        self.extra = np.asarray(list(extra) + [0] * max(0, steps + 2 - len(extra)), dtype=np.int64)
        # cum[k]: the least time from send 1 to send k (each send waits extra[j] after a receive)
        self.cum = np.zeros(steps + 1, dtype=np.int64)
        self.cum[2:] = np.cumsum(self.extra[2:steps + 1])
        pred_a = np.asarray(pred, dtype=np.intp)
        self.succ = np.empty(n, dtype=np.intp)
        self.succ[pred_a] = np.arange(n)
        self.flow_in = flow_in  # flow id of pred(i) → i
        self.flow_out = flow_in[self.succ]  # flow id of i → succ(i)
        self.joined = np.zeros(n, dtype=bool)
        self.t_last = np.zeros(n, dtype=np.int64)  # send time of rank i's latest message
        self.sent = np.zeros(n, dtype=np.int64)
        self.got = np.zeros(n, dtype=np.int64)
        # message k reached rank i at arr[i, (k - 1) % w]. A rank that has sent m messages has
        # received at most m + n - 1 (its successor sends at most m + 1, the next m + 2, ...
        # round the ring), so a window of n holds every arrival it has not used yet.
        self.w = w = max(1, min(steps, n))
        self.arr = np.zeros((n, w), dtype=np.int64)
        self.finished = np.zeros(n, dtype=bool)
        self.last = np.zeros(n, dtype=np.int64)  # the last receive, once finished
        self.handed = np.zeros(n, dtype=bool)  # handed back to the system layer
        self.on_done: list[Callable[[int], None] | None] = [None] * n
        self.left = n  # ranks whose last receive is not known yet
        self.unhanded = n  # ranks not yet handed back
        # ranks that something happened to that may let them send (a join, an arrival): a set of
        # indices, ALL, or None
        self.touched: set[int] | object | None = None
        self.ending = False  # a rank may have its last message both out and in
        # per rank, the earliest its phase can end (see RingFlows._joins_from); FOREVER: not joined or over
        self.bnd = np.full(n, FOREVER, dtype=np.int64)

    def touch(self, i: int) -> None:
        t = self.touched
        if t is None:
            self.touched = {i}
            self.dirty.append(self)
        elif t is not ALL:
            t.add(i)  # type: ignore[union-attr]

    def touch_many(self, idx: np.ndarray) -> None:
        if len(idx) > SCALAR or self.touched is ALL:
            if self.touched is None:
                self.dirty.append(self)
            self.touched = ALL
        else:
            for i in idx.tolist():
                self.touch(i)


def _by_order(ph: _Phase) -> int:
    return ph.order


class RingFlows:
    """Every batched ring phase of a run on a topology file (see the module's doc)."""

    def __init__(self, path: Callable[[int, int], tuple], schedule: Callable[..., None], now: Callable[[], int],
                 npus: int) -> None:
        self._path = path
        self._npus = npus
        self._schedule = schedule
        self._now = now
        self._fids: dict[tuple[int, int], int] = {}
        self._routes: list[tuple] = []
        self._users: dict[int, set[int]] = {}  # link → flows that use it
        self._shared: set[int] = set()
        self._sizes: set[int] = set()
        # private links: one slot each, their state as arrays
        self._slot_of: dict[int, int] = {}
        self._plinks: list[Any] = []
        self._lead: np.ndarray = np.zeros(0, dtype=np.intp)  # hops before a flow's first shared link
        self._rlen: np.ndarray = np.zeros(0, dtype=np.intp)
        self._slot: np.ndarray = np.zeros((0, 0), dtype=np.intp)  # [flow, hop] → private slot
        self._free = self._last_in = self._peak = np.zeros(0, dtype=np.int64)
        self._recent = np.zeros((0, DEPTH - 1), dtype=np.int64)
        self._rpos = np.zeros(0, dtype=np.intp)
        self._rdel: dict[tuple[int, int], tuple] = {}  # (flow, size) → _record
        self._reach_cache: dict[int, tuple[tuple, np.ndarray]] = {}
        self._served: dict[Any, tuple[int, int]] = {}  # shared link → the last (arrival, input) it served
        self._phases: list[_Phase] = []
        self._gone = False  # a phase was handed back on every rank: drop it from _phases
        self._dirty: list[_Phase] = []  # phases touched since the pump last looked (_Phase.touch)
        self._made = 0
        self._heap: list[tuple] = []
        self._seq = 0
        self._look = FOREVER
        self._to_shared = FOREVER
        self._to_end = FOREVER
        self._to_arrive = FOREVER  # the least time from a waiting message or a send to a rank
        self._endpoint_min = FOREVER
        self._held: dict[int, int] = {}  # rank → its phases not yet handed back
        self._retired: set[int] = set()  # ranks whose workload is over
        self._bound: tuple[int, int] | None = None  # _joins_from's minima while nothing has moved
        self._pump_at: int | None = None
        self._resume_at: int | None = None

    # -- phases -------------------------------------------------------------------------
    def phase(self, ids: Sequence[int], pred: Sequence[int], steps: int, size: int, endpoint: int,
              extra: Sequence[int]) -> _Phase:
        """A new phase of the ring ``ids`` (ranks in ring order; index i receives from pred(i))."""
        known = (len(self._routes), len(self._shared), len(self._sizes))
        fids = np.asarray([self._flow(ids[p], ids[i]) for i, p in enumerate(pred)], dtype=np.intp)
        self._sizes.add(size)
        self._made += 1
        ph = _Phase(ids, pred, steps, size, endpoint, extra, fids, self._made, self._dirty)
        self._phases.append(ph)
        least = min([endpoint] + [int(x) for x in ph.extra[2:steps + 1]])
        self._endpoint_min = min(self._endpoint_min, least)
        if known != (len(self._routes), len(self._shared), len(self._sizes)):  # new flows, links or sizes
            self._layout()
            self._bounds()
        self._look = FOREVER if self._to_end == FOREVER else self._to_end + self._endpoint_min + self._to_shared
        if self._shared and self._look < 1:
            raise FastPathConflict("shared links with no lookahead: the batched phases cannot order them")
        return ph

    def join(self, ph: _Phase, index: int, on_done: Callable[[int], None]) -> None:
        """Ring index ``index`` of ``ph`` starts now; ``on_done(last receive)`` runs then."""
        rank = ph.ids[index]
        if rank in self._retired:
            raise FastPathConflict(f"rank {rank} starts a ring phase after its workload ended")  # not reached
        held = self._held.get(rank, 0)
        self._held[rank] = held + 1
        ph.joined[index] = True
        ph.touch(index)
        self._bound = None
        ph.t_last[index] = self._now() + ph.endpoint
        ph.bnd[index] = ph.t_last[index] + ph.cum[ph.steps] - ph.cum[1]
        ph.on_done[index] = on_done
        now = self._now()
        if self._pump_at != now:  # once per tick, after every rank of the tick joined
            self._pump_at = now
            self._schedule(0, self._pump)

    # -- flows and links ----------------------------------------------------------------
    def _flow(self, src: int, dst: int) -> int:
        fid = self._fids.get((src, dst))
        if fid is None:
            fid = self._fids[(src, dst)] = len(self._routes)
            route = self._path(src, dst)
            self._routes.append(route)
            for link in route:
                if link.arrivals:
                    raise FastPathConflict(f"link {link.src}->{link.dst} is deciding arrivals as a batched ring phase starts")
                link.claim_until = FOREVER
                users = self._users.setdefault(id(link), set())
                users.add(fid)
                if len(users) > 1 and id(link) not in self._shared:
                    self._share(link)
        return fid

    def _share(self, link: Any) -> None:
        """A second flow onto a link: from now on it serves messages in arrival order (the heap).
        What it served alone goes back into the Link; a message that reaches it no later than
        the last of those is a conflict (its place among them is not known)."""
        s = self._slot_of.pop(id(link), None)
        if s is not None and self._last_in[s] >= 0:
            self._write_back(s, link)
            self._last_in[s] = -1  # the slot is no one's now
        if link.last_arrival >= 0:
            self._served[link] = (link.last_arrival, FOREVER)
        self._shared.add(id(link))

    def _write_back(self, j: int, link: Any) -> None:
        link.free_at = int(self._free[j])
        link.last_arrival = int(self._last_in[j])
        link.waiting = deque(sorted(int(s) for s in self._recent[j] if s > link.last_arrival))
        link.peak_pending = max(link.peak_pending, int(self._peak[j]))

    def _layout(self) -> None:
        """Slots for private links (state kept), each flow's private lead hops."""
        routes = self._routes
        lead, rlen = [], []
        for r in routes:
            h = 0
            while h < len(r) and id(r[h]) not in self._shared:
                h += 1
            lead.append(h)
            rlen.append(len(r))
        # a link behind a flow's first shared link is run one message at a time, on its Link
        for f, r in enumerate(routes):
            for link in r[lead[f]:]:
                j = self._slot_of.pop(id(link), None)
                if j is not None and self._last_in[j] >= 0:
                    self._write_back(j, link)
                    self._last_in[j] = -1  # the slot is no one's now
        hops = max(lead, default=0)
        slot = np.full((len(routes), max(hops, 1)), -1, dtype=np.intp)
        grow = []
        for f, r in enumerate(routes):
            for h in range(lead[f]):
                link = r[h]
                s = self._slot_of.get(id(link))
                if s is None:
                    s = self._slot_of[id(link)] = len(self._plinks)
                    self._plinks.append(link)
                    grow.append(link)
                slot[f, h] = s
        self._lead = np.asarray(lead, dtype=np.intp)
        self._rlen = np.asarray(rlen, dtype=np.intp)
        self._marks = [tuple(id(link) in self._shared for link in r) for r in routes]  # shared hops
        self._rdel = {}
        # messages waiting in the heap go on with the new marks (a link behind them may be shared now)
        self._heap = [(*e[:8], self._record(e[8][3], e[8][4])) for e in self._heap]
        heapq.heapify(self._heap)
        self._slot = slot
        if grow:
            def cat(a: np.ndarray, b: list) -> np.ndarray:
                return np.concatenate([a, np.asarray(b, dtype=a.dtype)])
            self._free = cat(self._free, [link.free_at for link in grow])
            self._last_in = cat(self._last_in, [link.last_arrival for link in grow])
            self._peak = cat(self._peak, [link.peak_pending for link in grow])
            rec = np.full((len(grow), DEPTH - 1), -1, dtype=np.int64)
            for j, link in enumerate(grow):
                w = list(link.waiting)[-(DEPTH - 1):]
                rec[j, :len(w)] = w
            self._recent = np.concatenate([self._recent, rec])
            self._rpos = np.concatenate([self._rpos, np.zeros(len(grow), dtype=np.intp)])
        self._lat = np.asarray([link.latency_ns for link in self._plinks], dtype=np.float64)
        self._prof: dict[int, tuple] = {}  # per message size: each flow's lead hops with no queue
        self._d: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for size in self._sizes:
            d = np.asarray([_delays(link, size) for link in self._plinks], dtype=np.int64).reshape(-1, 3)
            self._d[size] = (d[:, 0].copy(), d[:, 1].copy(), d[:, 2].copy())

    def _reach(self, size: int) -> np.ndarray:
        """Per flow, the least time from a send to what it can bring to a shared link: the head's
        hops to the flow's first shared link; on a flow with none, its whole trip to the receiver,
        the least endpoint time, and the least time from the receiver's next send to a shared link."""
        key = (size, self._endpoint_min, self._to_shared, len(self._routes), len(self._shared))
        got = self._reach_cache.get(size)
        if got is not None and got[0] == key:
            return got[1]
        out = np.empty(len(self._routes), dtype=np.int64)
        for f, r in enumerate(self._routes):
            s = 0
            for link in r:
                if id(link) in self._shared:
                    break
                s += _delays(link, size)[0]
            else:
                last = r[-1]
                s = (s - _delays(last, size)[0] + _delays(last, size)[1] + int(last.latency_ns)
                     + min(self._endpoint_min, FOREVER) + self._to_shared)
            out[f] = min(s, FOREVER)
        self._reach_cache[size] = (key, out)
        return out

    def _bounds(self) -> None:
        """The least times from a send to a shared link (the head's hops) and from a message's
        arrival at a shared link to its arrival at the flow's end: the head's hops, then on the
        last link the whole message, ``end >= start + int(S/B)`` and the tail ``int(end + L)``."""
        to_shared = to_end = FOREVER
        for size in self._sizes:
            for r in self._routes:
                s = 0
                for link in r:
                    if id(link) in self._shared:
                        to_shared = min(to_shared, s)
                        break
                    s += _delays(link, size)[0]
                last = r[-1]
                s = _delays(last, size)[1] + int(last.latency_ns)
                if id(last) in self._shared:
                    to_end = min(to_end, s)
                for link in reversed(r[:-1]):
                    s += _delays(link, size)[0]
                    if id(link) in self._shared:
                        to_end = min(to_end, s)
        whole = FOREVER  # a message's trip from its send to the flow's end
        for size in self._sizes:
            for r in self._routes:
                last = r[-1]
                whole = min(whole, sum(_delays(link, size)[0] for link in r[:-1]) + _delays(last, size)[1]
                            + int(last.latency_ns))
        self._to_shared, self._to_end = to_shared, to_end
        self._to_arrive = min(to_end, whole)

    # -- running ------------------------------------------------------------------------
    def _pump(self) -> None:
        """Advance every phase as far as is safe now."""
        self._pump_at = None
        now = self._now()
        heap = self._heap
        while True:
            ready = []
            tmin = treach = FOREVER  # the ready ranks' earliest send, and earliest reach of a shared link
            dirty = self._dirty
            if len(dirty) > 1:
                dirty.sort(key=_by_order)
            touched_phases = dirty[:]
            dirty.clear()
            for ph in touched_phases:
                touched = ph.touched
                ph.touched = None
                if ph.ending:
                    self._hand_back(ph)  # ranks whose last receive is known: their end bounds the horizon
                if touched is not ALL and len(touched) <= SCALAR:  # type: ignore[arg-type]
                    few = self._ready_few(ph, touched)  # type: ignore[arg-type]
                    if few:
                        tmin = min(tmin, min(few[2]))
                        reach = self._reach(ph.size)
                        flows = ph.flow_out
                        treach = min(treach, min(t + int(reach[flows[i]]) for i, t in zip(few[0], few[2])))
                        ready.append((ph, *few))
                    continue
                idx = np.flatnonzero(ph.joined & (ph.sent < ph.steps) & (ph.got >= ph.sent))
                if not len(idx):
                    continue
                k = ph.sent[idx]  # messages sent so far; this one is k + 1
                later = k > 0
                if later.any():
                    j = idx[later]
                    kk = k[later]
                    ph.t_last[j] = np.maximum(ph.arr[j, (kk - 1) % ph.w], ph.t_last[j]) + ph.extra[kk + 1]
                times = ph.t_last[idx]
                tmin = min(tmin, int(times.min()))
                treach = min(treach, int((times + self._reach(ph.size)[ph.flow_out[idx]]).min()))
                ready.append((ph, idx, k + 1, times))
            if ready:
                self._bound = None  # their sends move the earliest a rank can start a phase
            served = 0
            if heap:
                horizon = min(heap[0][0] + self._look, treach)
                soonest = now + self._endpoint_min + self._to_shared
                if soonest < horizon:  # no rank yet to join a phase reaches a shared link sooner than this
                    pending = min(heap[0][0], tmin)
                    horizon = min(horizon, max(soonest, self._joins_from(now, pending) + self._endpoint_min
                                               + self._to_shared))
                served = self._serve_until(horizon)
            if not ready:
                if served:
                    continue  # what it delivered may let ranks send
                break
            for ph, idx, k, times in ready:
                if isinstance(idx, list):
                    self._send_few(ph, idx, k, times)
                    continue
                ph.sent[idx] = k
                # the earliest this phase can end on them: their sends still to come
                ph.bnd[idx] = times + ph.cum[ph.steps] - ph.cum[k]
                if int(k.max()) == ph.steps:
                    ph.ending = True
                self._inject(ph, idx, k, times)
                again = idx[ph.got[idx] >= k]  # arrivals already there for their next message
                if len(again):
                    ph.touch_many(again)
        for ph in self._phases:
            if ph.ending:
                self._hand_back(ph)
        if self._gone:
            self._gone = False
            self._phases = [ph for ph in self._phases if ph.unhanded]  # finished ones go
        if heap:
            # come back when the earliest waiting message can be served
            at = max(now + 1, heap[0][0] - self._endpoint_min - self._to_shared + 1)
            if self._resume_at is None or at < self._resume_at or self._resume_at <= now:
                self._resume_at = at
                self._schedule(at - now, self._resume, at)

    def _resume(self, at: int) -> None:
        if self._resume_at == at:
            self._resume_at = None
        self._pump()

    def _ready_few(self, ph: _Phase, touched: set[int]) -> tuple[list[int], list[int], list[int]] | None:
        """Of a few touched ranks, those that can send their next message: (ranks, message
        numbers, send times), one at a time (numpy's cost per call exceeds the work)."""
        ranks, ks, times = [], [], []
        steps = ph.steps
        sent, got, t_last, arr, extra = ph.sent, ph.got, ph.t_last, ph.arr, ph.extra
        for i in sorted(touched):
            k = int(sent[i])
            if not ph.joined[i] or k >= steps or int(got[i]) < k:
                continue
            t = int(t_last[i])
            if k:
                a = int(arr[i, (k - 1) % ph.w])
                t = (a if a > t else t) + int(extra[k + 1])
                t_last[i] = t
            ranks.append(i)
            ks.append(k + 1)
            times.append(t)
        return (ranks, ks, times) if ranks else None

    def _send_few(self, ph: _Phase, ranks: list[int], ks: list[int], times: list[int]) -> None:
        sent, got, bnd, cum, steps = ph.sent, ph.got, ph.bnd, ph.cum, ph.steps
        last = int(cum[steps])
        for i, k, t in zip(ranks, ks, times):
            sent[i] = k
            bnd[i] = t + last - int(cum[k])
            if k == steps:
                ph.ending = True
        self._inject_few(ph, ranks, ks, times)
        for i, k in zip(ranks, ks):
            if int(got[i]) >= k:
                ph.touch(i)

    def _hand_back(self, ph: _Phase) -> None:
        if not ph.ending:
            return
        ph.ending = False
        idx = np.flatnonzero(ph.joined & ~ph.finished & (ph.sent == ph.steps) & (ph.got == ph.steps))
        if not len(idx):
            return
        s = ph.steps
        last = np.maximum(ph.arr[idx, (s - 1) % ph.w], ph.t_last[idx])
        now = self._now()
        ph.finished[idx] = True
        ph.last[idx] = last
        ph.bnd[idx] = FOREVER
        self._bound = None
        ph.left -= len(idx)
        for i, t in zip(idx.tolist(), last.tolist()):
            if t < now:
                raise FastPathConflict("a batched ring phase ended in the past")  # not reached: times >= now
            self._schedule(t - now, self._done, ph, i, t)

    def _done(self, ph: _Phase, i: int, t: int) -> None:
        ph.handed[i] = True
        ph.unhanded -= 1
        if not ph.unhanded:
            self._gone = True
        self._bound = None
        rank = ph.ids[i]
        held = self._held[rank] - 1
        if held:
            self._held[rank] = held
        else:
            del self._held[rank]
        cb = ph.on_done[i]
        ph.on_done[i] = None
        cb(t)

    def retire(self, rank: int) -> None:
        """``rank`` will start no phase any more (its workload is over)."""
        self._retired.add(rank)
        self._bound = None

    def _joins_from(self, now: int, pending: int) -> int:
        """The earliest a rank can start another phase: now if some rank holds no phase, else
        when the first one ends (a rank runs one phase at a time; what breaks this is caught as a
        conflict, see the module's doc). A phase not yet over on a rank ends no sooner than its
        sends still to come allow, nor before ``pending``, the earliest that anything not yet
        computed happens (a message waiting in the heap, a send about to be made): its end is
        not computed yet."""
        if len(self._held) + len(self._retired) < self._npus:  # a rank is free to start one now
            return now
        if self._bound is None:
            full_t = part_t = done_t = FOREVER
            for ph in self._phases:
                if ph.left:
                    busy = ph.bnd < FOREVER
                    has_all = ph.got == ph.steps
                    b = ph.bnd[busy & has_all]
                    if len(b):
                        full_t = min(full_t, int(b.min()))
                    b = ph.bnd[busy & ~has_all]
                    if len(b):
                        part_t = min(part_t, int(b.min()))
                if ph.left < ph.n and ph.unhanded:
                    waiting = ph.finished & ~ph.handed
                    if waiting.any():
                        done_t = min(done_t, int(ph.last[waiting].min()))
            self._bound = (full_t, part_t, done_t)
        full_t, part_t, done_t = self._bound
        # a rank still waiting for a message ends no sooner than that message can arrive
        return max(min(done_t, full_t, max(part_t, pending + self._to_arrive)), now)

    def _deliver(self, ph: _Phase, recv: np.ndarray, k: np.ndarray, t: np.ndarray) -> None:
        if (ph.got[recv] != k - 1).any():
            raise FastPathConflict("a batched ring phase's messages overtook each other")  # FIFO: not reached
        if (k - ph.sent[recv] > ph.w).any():
            raise FastPathConflict("a rank holds more arrivals than its ring allows")  # not reached
        ph.arr[recv, (k - 1) % ph.w] = t
        ph.got[recv] = k
        ph.touch_many(recv)
        self._bound = None
        if int(k.max()) == ph.steps:
            ph.ending = True

    def _inject(self, ph: _Phase, senders: np.ndarray, k: np.ndarray, times: np.ndarray) -> None:
        """Messages k of ``senders``: their private hops as arrays, then into the heap at their
        first shared link, or to their receivers."""
        if len(senders) <= SCALAR:
            self._inject_few(ph, senders.tolist(), k.tolist(), times.tolist())
            return
        flows = ph.flow_out[senders]
        recv = ph.succ[senders]
        x = times.copy()
        tail = np.zeros(len(flows), dtype=np.int64)
        lead = self._lead[flows]
        # most messages meet no queue on their private hops: then every hop is the send time plus
        # the flow's own offsets, for all of them in a few array operations
        S, E, X, T, SL, V = self._profile(ph.size)
        sl = SL[flows]
        starts = S[flows] + x[:, None]  # arrival (= start) at each lead hop; padding far ahead
        queued = self._free[sl] > starts
        if not queued.any():  # the common case: no row indexing at all
            if (starts <= self._last_in[sl]).any():
                # a message not after the link's last one: other traffic, or another phase's
                # message that this order would put behind one computed first
                raise FastPathConflict("batched ring messages reach a link out of order")
            v = V[flows]
            sv = sl[v]
            self._free[sv] = (E[flows] + x[:, None])[v]
            self._last_in[sv] = starts[v]
            tail = T[flows] + x
            x = X[flows] + x
            self._finish_inject(ph, flows, recv, k, lead, x, tail)
            return
        fast = ~queued.any(axis=1)
        rows = np.flatnonzero(fast)
        if len(rows):
            if (starts[rows] <= self._last_in[sl[rows]]).any():
                raise FastPathConflict("batched ring messages reach a link out of order")
            f = flows[rows]
            v = V[f]
            sv = sl[rows][v]
            self._free[sv] = (E[f] + x[rows, None])[v]
            self._last_in[sv] = starts[rows][v]
            tail[rows] = T[f] + x[rows]
            x[rows] = X[f] + x[rows]
        slow = np.flatnonzero(~fast)
        self._hops(ph, flows[slow], lead[slow], x, tail, slow)
        self._finish_inject(ph, flows, recv, k, lead, x, tail)

    def _profile(self, size: int) -> tuple:
        """Per flow, with no queue on its lead (private) hops: each hop's start and end after the
        send, where and when it leaves them (head, tail), its slots and which hops are real."""
        prof = self._prof.get(size)
        if prof is None:
            nf, hops = self._slot.shape
            d0, d1, d2 = self._d[size]
            far = 1 << 60
            S = np.full((nf, hops), far, dtype=np.int64)
            E = np.zeros((nf, hops), dtype=np.int64)
            X = np.zeros(nf, dtype=np.int64)
            T = np.zeros(nf, dtype=np.int64)
            SL = np.zeros((nf, hops), dtype=np.intp)
            V = np.zeros((nf, hops), dtype=bool)
            for f in range(nf):
                x = tail = 0
                for h in range(int(self._lead[f])):
                    si = int(self._slot[f, h])
                    end = max(x + int(d1[si]), tail + int(d2[si]))
                    S[f, h], E[f, h], SL[f, h], V[f, h] = x, end, si, True
                    head = x + int(d0[si])
                    lt = int(end + float(self._lat[si]))
                    x, tail = head, max(lt, head)
                X[f], T[f] = x, tail
            prof = self._prof[size] = (S, E, X, T, SL, V)
        return prof

    def _hops(self, ph: _Phase, flows: np.ndarray, lead: np.ndarray, x: np.ndarray, tail: np.ndarray,
              rows: np.ndarray) -> None:
        """The lead hops hop by hop, for messages that meet a queue (``rows`` of x and tail)."""
        d0, d1, d2 = self._d[ph.size]
        xr, tr = x[rows], tail[rows]
        for h in range(self._slot.shape[1]):
            sel = np.flatnonzero(lead > h)
            if not len(sel):
                break
            s = self._slot[flows[sel], h]
            xs = xr[sel]
            if (xs <= self._last_in[s]).any():
                raise FastPathConflict("batched ring messages reach a link out of order")
            start = np.maximum(xs, self._free[s])
            waited = np.flatnonzero(start > xs)
            if len(waited):
                # a queue formed: the messages still waiting when this one came, itself too; only
                # messages that waited can still be waiting later, so only their starts are kept
                sw, xw = s[waited], xs[waited]
                depth = 1 + (self._recent[sw] > xw[:, None]).sum(axis=1)
                if int(depth.max()) >= DEPTH:
                    raise FastPathConflict("a link queue deeper than the batched phase tracks")
                self._peak[sw] = np.maximum(self._peak[sw], depth)
                pos = self._rpos[sw]
                self._recent[sw, pos] = start[waited]
                self._rpos[sw] = (pos + 1) % (DEPTH - 1)
            self._last_in[s] = xs
            end = np.maximum(start + d1[s], tr[sel] + d2[s])
            self._free[s] = end
            head = start + d0[s]
            lt = (end + self._lat[s]).astype(np.int64)  # int(end + L): end >= 0
            np.maximum(lt, head, out=lt)
            xr[sel] = head
            tr[sel] = lt
        x[rows] = xr
        tail[rows] = tr

    def _finish_inject(self, ph: _Phase, flows: np.ndarray, recv: np.ndarray, k: np.ndarray, lead: np.ndarray,
                       x: np.ndarray, tail: np.ndarray) -> None:
        done = lead == self._rlen[flows]
        if done.any():
            self._deliver(ph, recv[done], k[done], tail[done])
        if not done.all():
            rest = np.flatnonzero(~done)
            size = ph.size
            for f, h, xj, tj, r, kj in zip(flows[rest].tolist(), lead[rest].tolist(), x[rest].tolist(),
                                          tail[rest].tolist(), recv[rest].tolist(), k[rest].tolist()):
                self._push(xj, h, tj, kj, r, ph, self._record(f, size))

    def _record(self, f: int, size: int) -> tuple:
        """What the heap needs of flow f: its links, which are shared, and their packet delays."""
        rec = self._rdel.get((f, size))
        if rec is None:
            route = self._routes[f]
            rec = self._rdel[(f, size)] = (route, self._marks[f], [_delays(link, size) for link in route], f, size)
        return rec

    def _inject_few(self, ph: _Phase, senders: list[int], ks: list[int], times: list[int]) -> None:
        """_inject for a few messages, one at a time (numpy's cost per call exceeds the work)."""
        d0, d1, d2 = self._d[ph.size]
        free, last_in, recent, rpos, peak, lat = (self._free, self._last_in, self._recent, self._rpos,
                                                  self._peak, self._lat)
        lead_of, rlen_of, slot = self._lead, self._rlen, self._slot
        for r, k, x in zip(senders, ks, times):
            f = int(ph.flow_out[r])
            recv = int(ph.succ[r])
            lead = int(lead_of[f])
            tail = 0
            for h in range(lead):
                si = int(slot[f, h])
                if x <= last_in[si]:
                    raise FastPathConflict("batched ring messages reach a link out of order")
                start = int(free[si])
                if start > x:
                    depth = 1 + int((recent[si] > x).sum())
                    if depth >= DEPTH:
                        raise FastPathConflict("a link queue deeper than the batched phase tracks")
                    if depth > peak[si]:
                        peak[si] = depth
                    pos = int(rpos[si])
                    recent[si, pos] = start
                    rpos[si] = (pos + 1) % (DEPTH - 1)
                else:
                    start = x
                last_in[si] = x
                end = start + int(d1[si])
                t2 = tail + int(d2[si])
                if t2 > end:
                    end = t2
                free[si] = end
                head = start + int(d0[si])
                lt = int(end + float(lat[si]))
                x = head
                tail = lt if lt > head else head
            if lead == rlen_of[f]:
                if ph.got[recv] != k - 1:
                    raise FastPathConflict("a batched ring phase's messages overtook each other")  # not reached
                ph.arr[recv, (k - 1) % ph.w] = tail
                ph.got[recv] = k
                ph.touch(recv)
                self._bound = None
                if k == ph.steps:
                    ph.ending = True
            else:
                self._push(x, lead, tail, k, recv, ph, self._record(f, ph.size))

    def _push(self, x: int, h: int, tail: int, k: int, recv: int, ph: _Phase, rec: tuple) -> None:
        """A message reaches its flow's hop h, a shared link: it waits in the heap for its turn."""
        route = rec[0]
        link = route[h]
        inp = route[h - 1].dim if h else -1
        last = self._served.get(link)
        if last is not None and (x, inp) < last:
            raise FastPathConflict(f"a batched ring message reaches shared link {link.src}->{link.dst} after later ones were served")
        self._seq += 1
        heapq.heappush(self._heap, (x, inp, self._seq, h, tail, k, recv, ph, rec))

    def _serve_until(self, horizon: int) -> int:
        """Serve the messages waiting at shared links that arrived before ``horizon``, in time
        order; how many. One message at a time: this and the private hops after it, up to the
        next shared link or its receiver (the hot loop of a run with shared links)."""
        count = 0
        heap = self._heap
        pop = heapq.heappop
        served = self._served
        while heap and heap[0][0] < horizon:
            x, inp, _, h, tail, k, recv, ph, rec = pop(heap)
            count += 1
            route, mark, rd, _, _ = rec
            end_hop = len(route)
            while True:
                link = route[h]
                if mark[h]:
                    served[link] = (x, inp)
                if link.last_arrival > x:
                    raise FastPathConflict("batched ring messages reach a link out of order")
                x, tail = link.occupy(x, tail, rd[h])
                inp = link.dim
                h += 1
                if h == end_hop:
                    got = ph.got
                    if got[recv] != k - 1:
                        raise FastPathConflict("a batched ring phase's messages overtook each other")  # not reached
                    ph.arr[recv, (k - 1) % ph.w] = tail
                    got[recv] = k
                    ph.touch(recv)
                    self._bound = None
                    if k == ph.steps:
                        ph.ending = True
                    break
                if mark[h]:
                    self._push(x, h, tail, k, recv, ph, rec)
                    break
        return count

    # -- reporting ----------------------------------------------------------------------
    def flush(self) -> None:
        """Write the private links' state back into their Link objects (for the statistics)."""
        for j, link in enumerate(self._plinks):
            if self._last_in[j] >= 0:
                self._write_back(j, link)

    def open_phases(self) -> list[str]:
        return [f"batched ring phase of {ph.n} ranks: {int(ph.joined.sum())} joined, {ph.left} not finished"
                for ph in self._phases if ph.left]
