"""What the analytical backends share: the event queue and send/recv pairing.

Pairing follows ASTRA-sim's analytical frontend (ChunkIdGenerator + CallbackTracker): each
(tag, src, dst, size) key counts its sends and its receives separately, and the n-th send of a
key pairs with the n-th receive. On arrival the sender's callback runs, then the receiver's if
its receive is posted; a receive posted after arrival runs its callback at delay 0.
"""
from __future__ import annotations

from typing import Callable

from network.config import NetworkConfig
from network.event_queue import EventQueue
from network.topology import Topology

Callback = Callable[..., None]

# entry slots
_SEND_CB, _SEND_ARGS, _RECV_CB, _RECV_ARGS, _ARRIVED = range(5)


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
        self._send_ids: dict[tuple, int] = {}
        self._recv_ids: dict[tuple, int] = {}
        self._entries: dict[tuple, list] = {}
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
    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callback, *args: object) -> None:
        key = (tag, src, dst, size_bytes)
        n = self._send_ids.get(key, 0) + 1
        self._send_ids[key] = n
        full = (key, n)
        entry = self._entries.get(full)
        if entry is None:
            self._entries[full] = [callback, args, None, None, False]
        else:
            entry[_SEND_CB] = callback
            entry[_SEND_ARGS] = args
        self.messages += 1
        self.bytes_sent += size_bytes
        pair = (src, dst)
        dim = self._dim_cache.get(pair)
        if dim is None:
            dim = self._dim_cache[pair] = self.topology.dim_to_transfer(src, dst)
        self.bytes_per_dim[dim] += size_bytes
        self._transfer(src, dst, size_bytes, full)

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callback, *args: object) -> None:
        key = (tag, src, dst, size_bytes)
        n = self._recv_ids.get(key, 0) + 1
        self._recv_ids[key] = n
        full = (key, n)
        entry = self._entries.get(full)
        if entry is None:
            self._entries[full] = [None, None, callback, args, False]
        elif entry[_ARRIVED]:
            del self._entries[full]
            self.bytes_received += size_bytes
            self.queue.schedule(0, callback, *args)
        else:
            entry[_RECV_CB] = callback
            entry[_RECV_ARGS] = args

    def _on_arrival(self, full: tuple) -> None:
        entry = self._entries[full]
        recv_cb = entry[_RECV_CB]
        entry[_SEND_CB](*entry[_SEND_ARGS])
        if recv_cb is not None:
            del self._entries[full]
            self.bytes_received += full[0][3]
            recv_cb(*entry[_RECV_ARGS])
        else:
            entry[_ARRIVED] = True

    def _transfer(self, src: int, dst: int, size_bytes: int, full: tuple) -> None:
        raise NotImplementedError

    # -- reporting ----------------------------------------------------------------------
    def unmatched(self) -> list[str]:
        out = []
        for ((tag, src, dst, size), n), e in sorted(self._entries.items(), key=lambda kv: kv[0]):
            if e[_RECV_CB] is not None and e[_SEND_CB] is None:
                out.append(f"receive on rank {dst} from rank {src} (tag {tag}, {size} bytes, #{n}) has no matching send")
            elif e[_SEND_CB] is not None and e[_ARRIVED]:
                out.append(f"message rank {src} -> rank {dst} (tag {tag}, {size} bytes, #{n}) arrived but was never received")
            elif e[_SEND_CB] is not None:
                out.append(f"message rank {src} -> rank {dst} (tag {tag}, {size} bytes, #{n}) is still in flight")
        return out

    def stats(self) -> dict[str, object]:
        return {
            "events": self.queue.events_processed,
            "messages": self.messages,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "bytes_per_dim": list(self.bytes_per_dim),
        }
