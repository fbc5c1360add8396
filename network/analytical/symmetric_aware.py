"""Congestion-aware network seen by one representative NPU of a symmetric SPMD run.

In a symmetric run (system/shortcuts/representative.py decides) rank x does what rank 0 does, mapped by the
group element x: per dimension a translation of the coordinate (ring, direct) or, for
halving-doubling on a Switch or FullyConnected dimension, an XOR. Every such map is an
automorphism of the congestion-aware network (aware.py): it maps links to links, keeps
dimension-order routes and the Ring rule "shorter way, a tie clockwise". The group acts freely,
so the directed links fall into classes of N links each ("dimension d, +1 direction" on a Ring,
"up-link" / "down-link" on a Switch, "offset k" on FullyConnected), and every link of a class
carries the mapped copy of the same traffic: the representative's own hops on the links of that
class. So one FIFO link per class, fed every hop of every message of rank 0 with aware.py's two
events per hop and its truncations, reproduces every link; a receive of rank 0 from ``src``
completes when rank 0's own matching send to ``src⁻¹`` arrives (its image under ``src``).

Same-tick order. The real run orders the events of one tick by insertion, and that order can
decide cycles: two chunks entering one link, two events of rank 0's system layer, a receive
posted at the tick its message arrives. symmetric_order.py tells from the representative's
events which of two such real events runs first; where that differs from the order here (or
cannot be told), ``SymmetryBroken`` is raised and the caller reruns on the general path. A
link freed at the tick a chunk reaches it starts the chunk at once in either order; only which
event started it (and so the order of what follows) follows the real order. See
docs/network-backends.md.
"""
from __future__ import annotations

from collections import deque

from network.config import NetworkConfig
from network.errors import FastPathConflict, MessageMismatchError
from network.event_queue import EventQueue, core_name
from network.topology import Topology, TopologyKind
from network.analytical.symmetric_order import Event, Group, before
from network.units import link_arrival_ns, link_serialization_ns

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Callable, Sequence


class SymmetryBroken(FastPathConflict):
    """Same-tick events whose order in the real run this backend cannot know (internal)."""


def _noop(*_: object) -> None:
    pass


class _Chunk:
    __slots__ = ("msg", "route", "hop", "size_bytes", "tick", "rec", "g")

    def __init__(self, msg: list, route: "_Route", size_bytes: int) -> None:
        self.msg = msg
        self.route = route
        self.hop = 0
        self.size_bytes = size_bytes
        self.tick = -1  # when it entered its current link, from rank g's copy of event rec
        self.rec: Event | None = None
        self.g = 0


class _Route:
    """Rank 0's route to one NPU: its class links and, per hop, the group element that maps the
    class's link at rank 0 onto the hop's link (``offs``)."""

    __slots__ = ("links", "offs", "dst", "sender", "dim")

    def __init__(self, links: tuple, offs: tuple[int, ...], dst: int, sender: int, dim: int) -> None:
        self.links = links
        self.offs = offs
        self.dst = dst
        self.sender = sender  # the arrival at dst, copied by this rank, is a delivery at rank 0
        self.dim = dim  # the dimension its bytes count in (the lowest that differs)


class _ClassLink:
    """One link standing for a class of N links; FIFO, one chunk at a time (aware.py: Link).
    Events at it are compared as the copies that run on the class's link at rank 0."""

    __slots__ = ("busy", "pending", "peak_pending", "latency_ns", "bytes_per_ns", "delays", "_net",
                 "_enq_tick", "_enq", "_free_tick", "_free", "_free_off")

    def __init__(self, latency_ns: float, bytes_per_ns: float, delays: dict, net: "SymmetricAwareBackend") -> None:
        self.busy = False
        self.pending: deque[_Chunk] = deque()
        self.peak_pending = 0
        self.latency_ns, self.bytes_per_ns, self.delays = latency_ns, bytes_per_ns, delays
        self._net = net
        self._enq_tick = self._free_tick = -1
        self._enq: tuple = ()
        self._free: tuple = ()
        self._free_off = 0

    def send(self, chunk: _Chunk, rec: Event, g: int) -> None:
        net = self._net
        now = net.queue.now
        off = chunk.route.offs[chunk.hop]
        here = (rec, net.group.sub(g, off))
        if self._enq_tick == now:  # two chunks at one tick: the FIFO order must be the real one
            if net.before(*self._enq, *here) is not True:
                raise SymmetryBroken
        self._enq_tick, self._enq = now, here
        chunk.tick, chunk.rec, chunk.g = now, rec, g
        if self.busy:
            self.pending.append(chunk)
            if len(self.pending) > self.peak_pending:
                self.peak_pending = len(self.pending)
            return
        if self._free_tick == now:  # freed this tick: in the real run, did the chunk come first?
            first = net.before(*self._free, *here)
            if first is None:
                raise SymmetryBroken
            if not first:  # then it waited and the link-free event started it
                rec, g = self._free[0], net.group.sub(off, self._free_off)
        self._transmit(chunk, rec, g, off)

    def _transmit(self, chunk: _Chunk, rec: Event, g: int, off: int) -> None:
        self.busy = True
        net = self._net
        size = chunk.size_bytes
        d = self.delays.get(size)
        if d is None:
            d = self.delays[size] = (link_arrival_ns(size, self.latency_ns, self.bytes_per_ns),
                                     link_serialization_ns(size, self.bytes_per_ns))
        now = net.queue.now
        group = net.group
        # arrival first, then link-free, as aware.py
        net.queue.schedule(d[0], net.on_chunk_arrived, chunk, Event(now + d[0], rec, g, group))
        net.queue.schedule(d[1], self._on_free, Event(now + d[1], rec, g, group), off)

    def _on_free(self, rec: Event, off: int) -> None:
        net = self._net
        now = net.queue.now
        self.busy = False
        self._free_tick, self._free, self._free_off = now, (rec, net.group.sub(0, off)), off
        if self.pending:
            c = self.pending.popleft()
            c_off = c.route.offs[c.hop]
            prec, pg = rec, net.group.sub(c_off, off)  # rank (c_off - off)'s copy of this event
            if c.tick == now:  # entered this tick: in the real run, was the link still busy?
                first = net.before(c.rec, net.group.sub(c.g, c_off), *self._free)
                if first is None:
                    raise SymmetryBroken
                if not first:
                    prec, pg = c.rec, c.g
            self._transmit(c, prec, pg, c_off)


class SymmetricAwareBackend:
    name = "congestion-aware"

    def __init__(self, config: NetworkConfig, xor_dims: Sequence[bool] | None = None,
                 max_events: int | None = None, wall_limit_s: float | None = None) -> None:
        self.config = config
        topo: Topology = config.topology
        self.topology = topo
        self.queue = EventQueue(max_events, wall_limit_s)
        self.scale = topo.npus_count
        sizes = topo.npus_count_per_dim
        self._xor = tuple(xor_dims) if xor_dims is not None else (False,) * len(sizes)
        self.group = Group(sizes, self._xor)
        self._strides = tuple(topo._strides)
        self._delays = tuple({} for _ in topo.dims)
        self._classes: dict[tuple, _ClassLink] = {}
        self._routes: dict[int, _Route] = {}
        self._channels: dict[tuple, list] = {}  # (tag, peer, size) → [sends, recvs, waiting]
        self._inv: dict[int, int] = {}
        self.messages = 0
        self.bytes_received = 0
        self.bytes_per_dim = [0] * topo.dims_count
        # the real event running now: rank _cur_g's copy of event _cur (first rank 0's start)
        self._cur = Event(-1, None, 0, self.group)
        self._cur_g = 0
        self._sys_tick = -1
        self._sys: tuple = ()  # the last system-layer event of _sys_tick, as (event, rank)
        self._call: tuple = ()  # what the last one ran: (callback, args)
        self._made: list[Event] = []  # the events it scheduled
        self._touched = False  # whether it sent or posted a receive
        # the run of equal calls that ends this tick's system events so far: (event, rank) in real
        # order, what each call scheduled in the order they ran, and the event before the run
        self._run_ids: list[tuple] = []
        self._run_made: list[list[Event]] = []
        self._run_before: tuple | None = None

    def before(self, r1: Event, g1: int, r2: Event, g2: int) -> bool | None:
        return before(r1, g1, r2, g2, self.group)

    def now(self) -> int:
        return self.queue.now

    def run(self) -> None:
        self.queue.run()

    # -- rank 0's system-layer events ---------------------------------------------------
    def schedule(self, delay_ns: int, callback: Callable[..., None], *args: object) -> None:
        rec = Event(self.queue.now + delay_ns, self._cur, self._cur_g, self.group)
        self._made.append(rec)
        self.queue.schedule(delay_ns, self._system_event, rec, 0, callback, args)

    def _system_event(self, rec: Event, g: int, callback: Callable[..., None], args: tuple) -> None:
        """Rank 0's system layer runs ``callback`` as rank g's copy of event rec."""
        now = self.queue.now
        if now == self._sys_tick:
            first = before(*self._sys, rec, g, self.group)
            if first is not True:  # the real run has them the other way round (or cannot tell)
                if first is None or not self._join_run(rec, g, callback, args):
                    raise SymmetryBroken
                callback(*args)
                return
            if self._same_call(callback, args):  # one more of a run of equal calls, in order
                self._sys = (rec, g)
                self._made, self._touched = [], False
                self._run_ids.append(self._sys)
                self._run_made.append(self._made)
                self._cur, self._cur_g = rec, g
                callback(*args)
                return
            self._run_before = self._sys
        else:
            self._run_before = None
        self._sys_tick, self._sys = now, (rec, g)
        self._call, self._made, self._touched = (callback, args), [], False
        self._run_ids, self._run_made = [self._sys], [self._made]
        self._cur, self._cur_g = rec, g
        callback(*args)

    def _same_call(self, callback: Callable[..., None], args: tuple) -> bool:
        """The call the last system event of this tick ran, with the same arguments, and that one
        neither sent nor posted a receive: running them in either order leaves the same state."""
        cb1, args1 = self._call
        if cb1 != callback or len(args1) != len(args) or self._touched:
            return False
        return all(a is b or (type(a) is int and a == b) for a, b in zip(args1, args))

    def _join_run(self, rec: Event, g: int, callback: Callable[..., None], args: tuple) -> bool:
        """A run of equal calls at this tick (``_run_ids``, in real order) meets one more that
        really runs before some of them (e.g. packets of one algorithm delivered by several
        senders). The state is the same in any order; only which real event scheduled what
        differs: the i-th call run made what the i-th in real order makes. Insert it, hand the
        scheduled events on accordingly, and run this call as the real last; False where that is
        not safe (another call, a send or receive, an event already with children, an order
        that cannot be told)."""
        if not self._same_call(callback, args):
            return False
        group = self.group
        if self._run_before is not None and before(*self._run_before, rec, g, group) is not True:
            return False
        ids, made = self._run_ids, self._run_made
        p = None
        for i, (r2, g2) in enumerate(ids):
            b = before(rec, g, r2, g2, group)
            if b is None:
                return False
            if b and p is None:
                p = i
            elif not b and p is not None:
                return False  # not a place in the order
        if p is None:
            return False
        k = len(ids)
        for i in range(p, k):
            if ids[i][0].kids != len(made[i]) or any(r.kids for r in made[i]):
                return False  # children from elsewhere, or ones that have already run
        for i in range(p, k):
            ids[i][0].kids = 0
        new_ids = ids[:p] + [(rec, g)] + ids[p:]
        for i in range(p, k):
            nr, ng = new_ids[i]
            for r in made[i]:
                r.reparent(nr, ng, group)
        self._run_ids = new_ids
        self._made, self._touched = [], False
        made.append(self._made)
        self._sys = new_ids[-1]
        self._cur, self._cur_g = self._sys
        return True

    # -- messages -----------------------------------------------------------------------
    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        key = (tag, dst, size_bytes)
        ch = self._channels.get(key)
        if ch is None:
            ch = self._channels[key] = [0, 0, deque()]
        ch[0] += 1
        if ch[1] >= ch[0]:  # the receive of its image is waiting
            msg = ch[2].popleft()
            if label is not None and msg[5] is not None and label != msg[5]:
                raise MessageMismatchError(src, dst, label, msg[5])
            if ch[0] == ch[1]:
                del self._channels[key]
        else:
            # [arrived, its delivery at rank 0 as (event, rank), its tick, recv callback, args, label]
            msg = [False, None, -1, None, (), label]
            ch[2].append(msg)
        self.messages += 1
        self._touched = True
        route = self._routes.get(dst)
        if route is None:
            route = self._routes[dst] = self._build_route(dst)
        self.bytes_per_dim[route.dim] += size_bytes
        chunk = _Chunk(msg, route, size_bytes)
        if callback is not _noop:
            msg.append((callback, args))
        route.links[0].send(chunk, self._cur, self._cur_g)

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        peer = self._inv.get(src)
        if peer is None:
            peer = self._inv[src] = self.group.sub(0, src)
        key = (tag, peer, size_bytes)
        ch = self._channels.get(key)
        if ch is None:
            ch = self._channels[key] = [0, 0, deque()]
        ch[1] += 1
        self._touched = True
        if ch[0] >= ch[1]:  # its image was sent
            msg = ch[2].popleft()
            if label is not None and msg[5] is not None and label != msg[5]:
                raise MessageMismatchError(src, dst, msg[5], label)
            if ch[0] == ch[1]:
                del self._channels[key]
            if msg[0]:
                if msg[2] == self.queue.now and before(*msg[1], self._cur, self._cur_g, self.group) is not True:
                    raise SymmetryBroken  # arrived this tick, but after this post in the real run
                self.bytes_received += size_bytes
                self.schedule(0, callback, *args)
                return
        else:
            msg = [False, None, -1, None, (), label]
            ch[2].append(msg)
        msg[3] = callback
        msg[4] = args

    def exchange(self, me: int, dst: int, src: int, size_bytes: int, tag: int, label: object,
                 callback: Callable[..., None], arg: object) -> None:
        self.send(me, dst, size_bytes, tag, _noop, label=label)
        self.recv(me, src, size_bytes, tag, callback, arg, label=label)

    def on_chunk_arrived(self, chunk: _Chunk, rec: Event) -> None:
        route = chunk.route
        hop = chunk.hop + 1
        if hop < len(route.links):
            chunk.hop = hop
            route.links[hop].send(chunk, rec, 0)
            return
        msg = chunk.msg
        if len(msg) > 6:  # a send callback: rank 0's own message arrived
            cb, args = msg[6]
            self._system_event(rec, 0, cb, args)
        if msg[3] is not None:
            self.bytes_received += chunk.size_bytes
            self._system_event(rec, route.sender, msg[3], msg[4])
        else:
            msg[0], msg[1], msg[2] = True, (rec, route.sender), self.queue.now

    # -- routes ---------------------------------------------------------------------------
    def _build_route(self, dst: int) -> _Route:
        """aware.py's dimension-order route from rank 0, hop by hop as (class, offset): the
        offset is the group element that maps the class's link at rank 0 onto this hop."""
        topo = self.topology
        hops: list[tuple[tuple, int]] = []
        cur = 0
        for dim, (st, d) in enumerate(zip(self._strides, topo.dims)):
            n = d.npus_count
            b = (dst // st) % n
            if b == 0:
                continue
            nxt = cur + b * st  # rank 0's coordinates are 0 in this and every later dimension
            if d.kind is TopologyKind.RING:
                step = -1 if n - b < b else 1  # the shorter way, a tie clockwise
                x = 0
                while x != b:
                    y = (x + step) % n
                    hops.append(((dim, "ring", (y - x) % n), cur + x * st))
                    x = y
            elif d.kind is TopologyKind.SWITCH:
                hops.append(((dim, "up"), cur))
                hops.append(((dim, "down"), nxt))  # a down-link's class is fixed by its NPU
            else:
                hops.append(((dim, "fc", b), cur))
            cur = nxt
        links = []
        for key, _ in hops:
            link = self._classes.get(key)
            if link is None:
                d = topo.dims[key[0]]
                link = self._classes[key] = _ClassLink(d.latency_ns, d.bytes_per_ns, self._delays[key[0]], self)
            links.append(link)
        offs = tuple(off for _, off in hops)
        return _Route(tuple(links), offs, dst, self.group.sub(0, dst), topo.dim_to_transfer(0, dst))

    # -- reporting ------------------------------------------------------------------------
    def unmatched(self) -> list[str]:
        out = []
        for (tag, peer, size), ch in self._channels.items():
            if ch[2]:
                out.append(f"representative rank: {len(ch[2])} message(s) to/from image {peer} "
                           f"(tag {tag}, {size} bytes) never paired")
        return out

    def stats(self) -> dict[str, object]:
        s = self.scale
        sent = sum(self.bytes_per_dim)
        return {
            "core": core_name(self.queue),  # which event queue ran (network/event_queue.py)
            "events": self.queue.events_processed,
            "messages": self.messages * s,
            "bytes_sent": sent * s,
            "bytes_received": self.bytes_received * s,
            "bytes_per_dim": [b * s for b in self.bytes_per_dim],
            "links_used": len(self._classes) * s,  # the group acts freely: N links per class
            "max_link_queue": max((c.peak_pending for c in self._classes.values()), default=0),
            "representative_rank": True,
        }
