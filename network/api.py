"""The network API every backend implements (ASTRA-sim: AstraNetworkAPI).

The backend owns the clock and the event loop, as in ASTRA-sim: the system layer asks it for
the time, schedules its own events through it and sends and receives messages with it.

Message semantics (ASTRA-sim's analytical frontend, docs/astra-sim-semantics.md §6.2):
* ``send(src, dst, size, tag, cb)``: ``cb`` runs when the message has arrived at ``dst``.
* ``recv(dst, src, size, tag, cb)``: ``cb`` runs when a matching message has arrived; if it
  arrived before the receive was posted, ``cb`` runs at the current time as a new event.
* Sends and receives pair on (tag, src, dst, size) plus a running count per key, first with first.
* Callbacks are never called from inside ``send``/``recv``.
* ``label`` (optional): what the message belongs to, e.g. a collective's identity. A send and
  the receive it pairs with whose labels both are set and differ raise
  ``network.errors.MessageMismatchError`` (the ranks disagree: exit 3).
* ``exchange(me, dst, src, size, tag, label, cb, arg)``: one collective step, the same as
  ``send(me, dst, size, tag, <nothing>)`` then ``recv(me, src, size, tag, cb, arg)`` (one call
  on the hot path instead of two).
* ``clock_queue`` (optional attribute): where the backend's time is an object's ``now``
  attribute (the analytical backends' event queue), that object, else None or absent; the system
  layer's C path (system/_sys_core.c) reads the clock there instead of calling ``now()``, and
  where the object also has ``time()`` (the same value, as a call) Sys.now is that method.
"""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

from network.event_queue import MAX_TIME_NS  # noqa: F401 (the clock every backend keeps ends there)
from network.topology import Topology

Callback = Callable[..., None]


@runtime_checkable
class NetworkBackend(Protocol):
    """What the system layer needs from a network. Time is integer nanoseconds."""

    name: str
    topology: Topology

    def now(self) -> int: ...

    def schedule(self, delay_ns: int, callback: Callback, *args: object) -> None: ...

    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callback, *args: object,
             label: object = None) -> None: ...

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callback, *args: object,
             label: object = None) -> None: ...

    def exchange(self, me: int, dst: int, src: int, size_bytes: int, tag: int, label: object,
                 callback: Callback, arg: object) -> None: ...

    def run(self) -> None: ...

    def unmatched(self) -> list[str]:
        """Human-readable lines for messages that never paired (used in the stuck report)."""
        ...

    def stats(self) -> dict[str, object]:
        """Counters after a run: events processed, messages, bytes per dimension."""
        ...
