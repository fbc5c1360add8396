"""What the analytical backends share: the event queue and send/recv pairing.

Pairing follows ASTRA-sim's analytical frontend (ChunkIdGenerator + CallbackTracker): each
(tag, src, dst, size) key counts its sends and its receives separately, and the n-th send of a
key pairs with the n-th receive. On arrival the sender's callback runs, then the receiver's if
its receive is posted; a receive posted after arrival runs its callback at delay 0.

We keep, per key, a channel: the two counts and a FIFO of the messages still missing their
other side (they are all sends or all receives, since the n-th pairs with the n-th). Pairing is
then one dict look-up and one deque operation per side.

A message may carry a label (the system layer's identity of the collective it belongs to). When
a send and a receive pair and both carry labels that differ, the ranks disagree on which
collective this is: ``MessageMismatchError`` (exit 3), rather than a silently wrong answer.
"""
from __future__ import annotations

from collections import deque

from network.config import NetworkConfig
from network.errors import MessageMismatchError
from network.event_queue import EventQueue, core_name, native_module
from network.topology import Topology

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

    Callback = Callable[..., None]


# A message (one send/receive pair; ASTRA-sim: a CallbackTracker entry) is a list, which is
# several times cheaper to create than an object (one per message):
# [send callback, its args, receive callback, its args, arrived, label of the side posted first,
#  time the send was issued (None until it is), pairing key, n-th of its key]
SEND_CB, SEND_ARGS, RECV_CB, RECV_ARGS, ARRIVED, LABEL, SENT_AT, KEY, N = range(9)
Message = list


def _py_noop(*_: object) -> None:
    pass


class PyChannel:
    """One pairing key: its sends and receives counted, and the messages still missing their
    other side, first in first out."""

    __slots__ = ("sends", "recvs", "waiting")

    def __init__(self) -> None:
        self.sends = 0
        self.recvs = 0
        self.waiting: deque[Message] = deque()

    def push(self, msg: Message) -> None:
        self.waiting.append(msg)

    def pop(self) -> Message:
        return self.waiting.popleft()


class PyPairing:
    """The pairing, the reference for network/_pairing.c (which runs it where it is compiled):
    ``exchange``, one collective step; ``_post_send`` and ``_post_recv``, a send or a receive
    paired or queued; ``_on_arrival``, a message delivered."""

    def exchange(self, me: int, dst: int, src: int, size_bytes: int, tag: int, label: object,
                 callback: Callback, arg: object) -> None:
        """One collective step: ``send`` to ``dst`` with no callback, then ``recv`` from ``src``
        calling ``callback(arg)``; the same order and times as the two calls."""
        # _post_send and _post_recv, inlined: this runs once per collective message
        channels = self._channels
        key = (tag, me, dst, size_bytes)
        ch = channels.get(key)
        if ch is None:
            ch = channels[key] = _Channel()
        ch.sends += 1
        if ch.recvs >= ch.sends:
            msg = ch.pop()
            if label is not None and msg[LABEL] is not None and label != msg[LABEL]:
                raise MessageMismatchError(me, dst, label, msg[LABEL])
            if ch.recvs == ch.sends:  # all paired: forget the key (tags are often used once)
                del channels[key]
        else:
            msg = [_noop, (), None, (), False, label, None, key, ch.sends]
            ch.push(msg)
        msg[SENT_AT] = self.queue.now
        self.messages += 1
        self.bytes_sent += size_bytes
        if self._one_dim:
            self.bytes_per_dim[0] += size_bytes
        else:
            pair = (me, dst)
            dim = self._dim_cache.get(pair)
            if dim is None:
                dim = self._dim_cache[pair] = self.topology.dim_to_transfer(me, dst)
            self.bytes_per_dim[dim] += size_bytes
        self._transfer(me, dst, size_bytes, msg)

        key = (tag, src, me, size_bytes)
        ch = channels.get(key)
        if ch is None:
            ch = channels[key] = _Channel()
        ch.recvs += 1
        if ch.sends >= ch.recvs:
            msg = ch.pop()
            if label is not None and msg[LABEL] is not None and label != msg[LABEL]:
                raise MessageMismatchError(src, me, msg[LABEL], label)
            if ch.recvs == ch.sends:
                del channels[key]
            if msg[ARRIVED]:
                self.bytes_received += size_bytes
                self.queue.schedule(0, callback, arg)
                return
        else:
            msg = [_noop, (), None, (), False, label, None, key, ch.recvs]
            ch.push(msg)
        msg[RECV_CB] = callback
        msg[RECV_ARGS] = (arg,)

    def _on_arrival(self, msg: Message) -> None:
        recv_cb = msg[RECV_CB]
        send_cb = msg[SEND_CB]
        if send_cb is not _noop:
            send_cb(*msg[SEND_ARGS])
        if recv_cb is not None:
            self.bytes_received += msg[KEY][3]
            recv_cb(*msg[RECV_ARGS])
        else:
            msg[ARRIVED] = True

    def _post_send(self, src: int, dst: int, size_bytes: int, tag: int, label: object) -> Message:
        key = (tag, src, dst, size_bytes)
        ch = self._channels.get(key)
        if ch is None:
            ch = self._channels[key] = _Channel()
        ch.sends += 1
        if ch.recvs >= ch.sends:  # its receive is waiting
            msg = ch.pop()
            if label is not None and msg[LABEL] is not None and label != msg[LABEL]:
                raise MessageMismatchError(src, dst, label, msg[LABEL])
            if ch.recvs == ch.sends:  # all paired: forget the key (tags are often used once)
                del self._channels[key]
        else:
            msg = [_noop, (), None, (), False, label, None, key, ch.sends]
            ch.push(msg)
        msg[SENT_AT] = self.queue.now
        self.messages += 1
        self.bytes_sent += size_bytes
        if self._one_dim:
            self.bytes_per_dim[0] += size_bytes
        else:
            pair = (src, dst)
            dim = self._dim_cache.get(pair)
            if dim is None:
                dim = self._dim_cache[pair] = self.topology.dim_to_transfer(src, dst)
            self.bytes_per_dim[dim] += size_bytes
        return msg

    def _post_recv(self, dst: int, src: int, size_bytes: int, tag: int, label: object,
                   callback: Callback, args: tuple) -> None:
        key = (tag, src, dst, size_bytes)
        ch = self._channels.get(key)
        if ch is None:
            ch = self._channels[key] = _Channel()
        ch.recvs += 1
        if ch.sends >= ch.recvs:  # its send was issued
            msg = ch.pop()
            if label is not None and msg[LABEL] is not None and label != msg[LABEL]:
                raise MessageMismatchError(src, dst, msg[LABEL], label)
            if ch.recvs == ch.sends:
                del self._channels[key]
            if msg[ARRIVED]:
                self.bytes_received += size_bytes
                self.queue.schedule(0, callback, *args)
                return
        else:
            msg = [_noop, (), None, (), False, label, None, key, ch.recvs]
            ch.push(msg)
        msg[RECV_CB] = callback
        msg[RECV_ARGS] = args


_native = native_module()
if _native is not None:  # network/_pairing.c: the same rules, without a Python frame per message
    _noop, _Channel, _Pairing = _native.noop, _native.Channel, _native.Pairing
else:
    _noop, _Channel, _Pairing = _py_noop, PyChannel, PyPairing


class AnalyticalBackend(_Pairing):
    """Base of the analytical backends; subclasses implement ``_transfer``."""

    name = "analytical"

    def __init__(
        self,
        config: NetworkConfig,
        max_events: int | None = None,
        wall_limit_s: float | None = None,
    ) -> None:
        self.config = config
        self.topology: Topology = config.topology
        self.queue = EventQueue(max_events, wall_limit_s)
        self.schedule = self.queue.schedule  # bound once: the system layer calls it per step
        self._channels: dict[tuple, _Channel] = {}
        self.messages = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.bytes_per_dim = [0] * self.topology.dims_count
        self._dim_cache: dict[tuple[int, int], int] = {}
        # one dimension: every message's bytes are dimension 0's (no lookup per message)
        self._one_dim = self.topology.dims_count == 1

    def now(self) -> int:
        return self.queue.now

    @property
    def clock_queue(self) -> object | None:
        """network/api.py: the queue whose ``now`` is this backend's time; None for a subclass
        that keeps its time elsewhere (ns-3's simulator)."""
        return self.queue if type(self).now is AnalyticalBackend.now else None

    def run(self) -> None:
        self.queue.run()

    # -- messages -----------------------------------------------------------------------
    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callback, *args: object,
             label: object = None) -> None:
        msg = self._post_send(src, dst, size_bytes, tag, label)
        msg[SEND_CB] = callback
        msg[SEND_ARGS] = args
        self._transfer(src, dst, size_bytes, msg)

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callback, *args: object,
             label: object = None) -> None:
        self._post_recv(dst, src, size_bytes, tag, label, callback, args)

    def account_flows(self, flows: list[tuple[int, int]], size_bytes: int, count: int) -> None:
        """Book ``count`` messages on each (src, dst) of ``flows`` that a caller advanced without
        events (they paired and arrived; see the unaware backend's fixed_delay_ns)."""
        total = size_bytes * count
        n = len(flows)
        self.messages += count * n
        self.bytes_sent += total * n
        self.bytes_received += total * n
        cache, per_dim = self._dim_cache, self.bytes_per_dim
        for pair in flows:
            dim = cache.get(pair)
            if dim is None:
                dim = cache[pair] = self.topology.dim_to_transfer(*pair)
            per_dim[dim] += total

    def _transfer(self, src: int, dst: int, size_bytes: int, msg: Message) -> None:
        raise NotImplementedError

    # -- reporting ----------------------------------------------------------------------
    def unmatched(self) -> list[str]:
        out = []
        seen = {id(m): m for ch in self._channels.values() for m in ch.waiting}
        seen.update((id(m), m) for m in self._in_flight())
        for m in sorted(seen.values(), key=lambda m: (m[KEY], m[N])):
            (tag, src, dst, size), n = m[KEY], m[N]
            if m[SENT_AT] is None:
                out.append(f"receive on rank {dst} from rank {src} (tag {tag}, {size} bytes, #{n}) has no matching send")
            elif m[ARRIVED]:
                out.append(f"message rank {src} -> rank {dst} (tag {tag}, {size} bytes, #{n}) arrived but was never received")
            else:
                out.append(f"message rank {src} -> rank {dst} (tag {tag}, {size} bytes, #{n}) is still in flight")
        return out

    def _in_flight(self) -> list[Message]:
        """Paired messages not yet delivered (a backend that can lose them lists them)."""
        return []

    def stats(self) -> dict[str, object]:
        return {
            # which event core ran: the C one (network/_event_core.c) or the Python reference
            "core": core_name(self.queue),
            "events": self.queue.events_processed,
            "messages": self.messages,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "bytes_per_dim": list(self.bytes_per_dim),
        }


def graph_flows(topology: Any, make_link: Callable[..., Any] | None = None) -> Any:
    """graph_links.graph_flows (a GraphFlows for a topology file, None for a built-in topology),
    imported only for a topology file (one with a ``graph``, as everywhere else that asks): a run
    on a built-in one is spared graph_links and graph_topology."""
    if getattr(topology, "graph", None) is None:
        return None
    from network.analytical.graph_links import graph_flows as flows

    return flows(topology, make_link)
