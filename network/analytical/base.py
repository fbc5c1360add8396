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
from typing import Callable

from network.config import NetworkConfig
from network.errors import MessageMismatchError
from network.event_queue import EventQueue
from network.topology import Topology

Callback = Callable[..., None]


def _noop(*_: object) -> None:
    pass


class Message:
    """One send/receive pair (ASTRA-sim: a CallbackTracker entry). ``sent_at`` is the time the
    send was issued (None until it is); ``label`` is the label of the side posted first."""

    __slots__ = ("key", "n", "sent_at", "send_cb", "send_args", "recv_cb", "recv_args", "label", "arrived")

    def __init__(self, key: tuple, n: int, label: object) -> None:
        self.key = key
        self.n = n
        self.sent_at: int | None = None
        self.send_cb: Callback = _noop
        self.send_args: tuple = ()
        self.recv_cb: Callback | None = None
        self.recv_args: tuple = ()
        self.label = label
        self.arrived = False


class _Channel:
    __slots__ = ("sends", "recvs", "waiting")

    def __init__(self) -> None:
        self.sends = 0
        self.recvs = 0
        self.waiting: deque[Message] = deque()


class AnalyticalBackend:
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

    def now(self) -> int:
        return self.queue.now

    def run(self) -> None:
        self.queue.run()

    # -- messages -----------------------------------------------------------------------
    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callback, *args: object,
             label: object = None) -> None:
        msg = self._post_send(src, dst, size_bytes, tag, label)
        msg.send_cb = callback
        msg.send_args = args
        self._transfer(src, dst, size_bytes, msg)

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callback, *args: object,
             label: object = None) -> None:
        self._post_recv(dst, src, size_bytes, tag, label, callback, args)

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
            msg = ch.waiting.popleft()
            if label is not None and msg.label is not None and label != msg.label:
                raise MessageMismatchError(me, dst, label, msg.label)
        else:
            msg = Message(key, ch.sends, label)
            ch.waiting.append(msg)
        msg.sent_at = self.queue.now
        self.messages += 1
        self.bytes_sent += size_bytes
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
            msg = ch.waiting.popleft()
            if label is not None and msg.label is not None and label != msg.label:
                raise MessageMismatchError(src, me, msg.label, label)
            if msg.arrived:
                self.bytes_received += size_bytes
                self.queue.schedule(0, callback, arg)
                return
        else:
            msg = Message(key, ch.recvs, label)
            ch.waiting.append(msg)
        msg.recv_cb = callback
        msg.recv_args = (arg,)

    def _post_send(self, src: int, dst: int, size_bytes: int, tag: int, label: object) -> Message:
        key = (tag, src, dst, size_bytes)
        ch = self._channels.get(key)
        if ch is None:
            ch = self._channels[key] = _Channel()
        ch.sends += 1
        if ch.recvs >= ch.sends:  # its receive is waiting
            msg = ch.waiting.popleft()
            if label is not None and msg.label is not None and label != msg.label:
                raise MessageMismatchError(src, dst, label, msg.label)
        else:
            msg = Message(key, ch.sends, label)
            ch.waiting.append(msg)
        msg.sent_at = self.queue.now
        self.messages += 1
        self.bytes_sent += size_bytes
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
            msg = ch.waiting.popleft()
            if label is not None and msg.label is not None and label != msg.label:
                raise MessageMismatchError(src, dst, msg.label, label)
            if msg.arrived:
                self.bytes_received += size_bytes
                self.queue.schedule(0, callback, *args)
                return
        else:
            msg = Message(key, ch.recvs, label)
            ch.waiting.append(msg)
        msg.recv_cb = callback
        msg.recv_args = args

    def _on_arrival(self, msg: Message) -> None:
        recv_cb = msg.recv_cb
        send_cb = msg.send_cb
        if send_cb is not _noop:
            send_cb(*msg.send_args)
        if recv_cb is not None:
            self.bytes_received += msg.key[3]
            recv_cb(*msg.recv_args)
        else:
            msg.arrived = True

    def _transfer(self, src: int, dst: int, size_bytes: int, msg: Message) -> None:
        raise NotImplementedError

    # -- reporting ----------------------------------------------------------------------
    def unmatched(self) -> list[str]:
        out = []
        seen = {id(m): m for ch in self._channels.values() for m in ch.waiting}
        seen.update((id(m), m) for m in self._in_flight())
        for m in sorted(seen.values(), key=lambda m: (m.key, m.n)):
            tag, src, dst, size = m.key
            if m.sent_at is None:
                out.append(f"receive on rank {dst} from rank {src} (tag {tag}, {size} bytes, #{m.n}) has no matching send")
            elif m.arrived:
                out.append(f"message rank {src} -> rank {dst} (tag {tag}, {size} bytes, #{m.n}) arrived but was never received")
            else:
                out.append(f"message rank {src} -> rank {dst} (tag {tag}, {size} bytes, #{m.n}) is still in flight")
        return out

    def _in_flight(self) -> list[Message]:
        """Paired messages not yet delivered (a backend that can lose them lists them)."""
        return []

    def stats(self) -> dict[str, object]:
        return {
            "events": self.queue.events_processed,
            "messages": self.messages,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "bytes_per_dim": list(self.bytes_per_dim),
        }
