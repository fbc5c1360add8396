"""Congestion-aware network seen by one representative NPU of a symmetric SPMD run.

In a symmetric run (system/symmetry.py decides) rank x does what rank 0 does, mapped by the
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

Same-tick order. The real run orders events of one tick by insertion; an event of rank 0 there
descends, through link queues and deliveries, from the start of some rank r ("its root").
Two events of one tick whose roots agree run in the same order here as in the real run; if the
roots differ the order may differ. So every event carries its root (as a group element, or
None once it is unknown), and where order can matter (two chunks entering one link class at one
tick; two system-layer events of rank 0 at one tick; a receive posted at the tick its message
arrives) roots that differ raise ``SymmetryBroken``: the caller reruns on the general path.
A link freed at the tick a chunk reaches it starts that chunk at the same time in either order,
only its root becomes unknown. See docs/network-backends.md.
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

from network.config import NetworkConfig
from network.errors import MessageMismatchError
from network.event_queue import EventQueue
from network.topology import Topology, TopologyKind
from network.units import link_arrival_ns, link_serialization_ns

Root = int | None  # a group element as the rank it maps 0 to; None: unknown


class SymmetryBroken(Exception):
    """Same-tick events whose order in the real run this backend cannot know (internal)."""


def _noop(*_: object) -> None:
    pass


class _Group:
    """The ranks as a group: per dimension addition mod n, or XOR (``xor_dims``)."""

    def __init__(self, sizes: Sequence[int], xor_dims: Sequence[bool]) -> None:
        self._dims = []
        st = 1
        for n, x in zip(sizes, xor_dims):
            self._dims.append((st, n, x))
            st *= n
        self._memo: dict[tuple[int, int, int], int] = {}
        if len(sizes) == 1 and not xor_dims[0]:
            n = sizes[0]
            self.add = lambda a, b: (a + b) % n  # the common case, without the memo

    def _op(self, a: int, b: int, sign: int) -> int:
        r = 0
        for st, n, x in self._dims:
            ca, cb = (a // st) % n, (b // st) % n
            r += (ca ^ cb if x else (ca + sign * cb) % n) * st
        return r

    def add(self, a: int, b: int) -> int:
        k = (a, b, 1)
        r = self._memo.get(k)
        if r is None:
            r = self._memo[k] = self._op(a, b, 1)
        return r

    def sub(self, a: int, b: int) -> int:
        return self._op(a, b, -1)


class _Chunk:
    __slots__ = ("msg", "route", "hop", "size_bytes", "root", "tick")

    def __init__(self, msg: list, route: "_Route", size_bytes: int) -> None:
        self.msg = msg
        self.route = route
        self.hop = 0
        self.size_bytes = size_bytes
        self.root: Root = None
        self.tick = -1  # when it entered its current link


class _Route:
    """Rank 0's route to one NPU: its class links, and per hop the root shift to the next hop
    (for the last hop: to the delivery at rank 0 of the message's image)."""

    __slots__ = ("links", "shifts", "dst", "dim")

    def __init__(self, links: tuple, shifts: tuple[int, ...], dst: int, dim: int) -> None:
        self.links = links
        self.shifts = shifts
        self.dst = dst
        self.dim = dim  # the dimension its bytes count in (the lowest that differs)


class _ClassLink:
    """One link standing for a class of N links; FIFO, one chunk at a time (aware.py: Link)."""

    __slots__ = ("busy", "pending", "peak_pending", "latency_ns", "bytes_per_ns", "delays",
                 "_queue", "_on_arrived", "_enq_tick", "_enq_root", "_free_tick", "_free_root")

    def __init__(self, latency_ns: float, bytes_per_ns: float, delays: dict, queue: EventQueue,
                 on_arrived: Callable) -> None:
        self.busy = False
        self.pending: deque[_Chunk] = deque()
        self.peak_pending = 0
        self.latency_ns, self.bytes_per_ns, self.delays = latency_ns, bytes_per_ns, delays
        self._queue = queue
        self._on_arrived = on_arrived
        self._enq_tick = self._free_tick = -1
        self._enq_root: Root = None
        self._free_root: Root = None

    def send(self, chunk: _Chunk, root: Root) -> None:
        now = self._queue.now
        if self._enq_tick == now:  # two chunks at one tick: their FIFO order must be the real one
            if root is None or root != self._enq_root:
                raise SymmetryBroken
        else:
            self._enq_tick, self._enq_root = now, root
        chunk.root, chunk.tick = root, now
        if self.busy:
            self.pending.append(chunk)
            if len(self.pending) > self.peak_pending:
                self.peak_pending = len(self.pending)
        else:
            if self._free_tick == now and self._free_root != root:
                root = None  # freed this tick: which of the two came first is unknown
            self._transmit(chunk, root)

    def _transmit(self, chunk: _Chunk, root: Root) -> None:
        self.busy = True
        chunk.root = root
        size = chunk.size_bytes
        d = self.delays.get(size)
        if d is None:
            d = self.delays[size] = (link_arrival_ns(size, self.latency_ns, self.bytes_per_ns),
                                     link_serialization_ns(size, self.bytes_per_ns))
        self._queue.schedule(d[0], self._on_arrived, chunk)  # arrival first, as aware.py
        self._queue.schedule(d[1], self._on_free, root)

    def _on_free(self, root: Root) -> None:
        now = self._queue.now
        self.busy = False
        self._free_tick, self._free_root = now, root
        if self.pending:
            c = self.pending.popleft()
            self._transmit(c, root if c.tick != now or c.root == root else None)


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
        self._group = _Group(sizes, self._xor)
        self._strides = tuple(topo._strides)
        self._delays = tuple({} for _ in topo.dims)
        self._classes: dict[tuple, _ClassLink] = {}
        self._routes: dict[int, _Route] = {}
        self._channels: dict[tuple, list] = {}  # (tag, peer, size) → [sends, recvs, waiting]
        self._inv: dict[int, int] = {}
        self.messages = 0
        self.bytes_received = 0
        self.bytes_per_dim = [0] * topo.dims_count
        self._root: Root = 0  # root of the system-layer event running now (rank 0's start: 0)
        self._sys_tick = 0
        self._sys_root: Root = 0

    def now(self) -> int:
        return self.queue.now

    def run(self) -> None:
        self.queue.run()

    # -- rank 0's system-layer events ---------------------------------------------------
    def schedule(self, delay_ns: int, callback: Callable[..., None], *args: object) -> None:
        self.queue.schedule(delay_ns, self._system_event, self._root, callback, args)

    def _system_event(self, root: Root, callback: Callable[..., None], args: tuple) -> None:
        now = self.queue.now
        if now == self._sys_tick:
            if root is None or root != self._sys_root:
                raise SymmetryBroken
        else:
            self._sys_tick, self._sys_root = now, root
        self._root = root
        callback(*args)

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
            # [arrived, root of the image's delivery, its tick, recv callback, its args, label]
            msg = [False, None, -1, None, (), label]
            ch[2].append(msg)
        self.messages += 1
        route = self._routes.get(dst)
        if route is None:
            route = self._routes[dst] = self._build_route(dst)
        self.bytes_per_dim[route.dim] += size_bytes
        chunk = _Chunk(msg, route, size_bytes)
        if callback is not _noop:
            msg.append((callback, args))
        route.links[0].send(chunk, self._root)  # rank 0's first hop: its root is the sender's

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        peer = self._inv.get(src)
        if peer is None:
            peer = self._inv[src] = self._group.sub(0, src)
        key = (tag, peer, size_bytes)
        ch = self._channels.get(key)
        if ch is None:
            ch = self._channels[key] = [0, 0, deque()]
        ch[1] += 1
        if ch[0] >= ch[1]:  # its image was sent
            msg = ch[2].popleft()
            if label is not None and msg[5] is not None and label != msg[5]:
                raise MessageMismatchError(src, dst, msg[5], label)
            if ch[0] == ch[1]:
                del self._channels[key]
            if msg[0]:
                if msg[2] == self.queue.now and (msg[1] is None or msg[1] != self._root):
                    raise SymmetryBroken  # arrived this tick: before or after this post?
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

    def _on_chunk_arrived(self, chunk: _Chunk) -> None:
        route = chunk.route
        hop = chunk.hop
        root = chunk.root
        if root is not None:
            root = self._group.add(root, route.shifts[hop])
        hop += 1
        if hop < len(route.links):
            chunk.hop = hop
            route.links[hop].send(chunk, root)
            return
        msg = chunk.msg
        if len(msg) > 6:  # a send callback: rank 0's own message arrived
            cb, args = msg[6]
            sender = None if root is None else self._group.add(root, route.dst)  # the arrival at dst
            self._system_event(sender, cb, args)
        if msg[3] is not None:
            self.bytes_received += chunk.size_bytes
            self._system_event(root, msg[3], msg[4])
        else:
            msg[0], msg[1], msg[2] = True, root, self.queue.now

    # -- routes ---------------------------------------------------------------------------
    def _build_route(self, dst: int) -> _Route:
        """aware.py's dimension-order route from rank 0, hop by hop as (class, offset): the
        offset is the group element that maps the class's link at rank 0 onto this hop."""
        topo, g = self.topology, self._group
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
                link = self._classes[key] = _ClassLink(d.latency_ns, d.bytes_per_ns, self._delays[key[0]],
                                                       self.queue, self._on_chunk_arrived)
            links.append(link)
        offs = [off for _, off in hops]
        shifts = [g.sub(offs[i], offs[i + 1]) for i in range(len(offs) - 1)]
        shifts.append(g.sub(offs[-1], dst))  # the image of the arrival at dst is a delivery at 0
        return _Route(tuple(links), tuple(shifts), dst, topo.dim_to_transfer(0, dst))

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
            "events": self.queue.events_processed,
            "messages": self.messages * s,
            "bytes_sent": sent * s,
            "bytes_received": self.bytes_received * s,
            "bytes_per_dim": [b * s for b in self.bytes_per_dim],
            "links_used": len(self._classes) * s,  # the group acts freely: N links per class
            "max_link_queue": max((c.peak_pending for c in self._classes.values()), default=0),
            "representative_rank": True,
        }
