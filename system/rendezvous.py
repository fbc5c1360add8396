"""ASTRA-sim's --rendezvous-protocol (Sys::rendezvous_sim_send/recv), as a part of Sys.

The receiver first sends an 8192-byte request to the sender; its arrival posts the real receive
(the request's send callback) and then releases the real send (the sender's receive callback),
in that order. ``Sys`` routes its network sends and receives through these when the flag is on.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

RENDEZVOUS_TAG_OFFSET = 1_000_000_000
RENDEZVOUS_BYTES = 8192


class RendezvousMixin:
    """Needs ``self.backend`` and ``self.id`` (a Sys)."""

    backend: Any
    id: int

    def _rendezvous_send(self, dst: int, size: int, tag: int, label: object, callback: Callable[..., None],
                         *args: object) -> None:
        self.backend.recv(self.id, dst, RENDEZVOUS_BYTES, tag + RENDEZVOUS_TAG_OFFSET,
                          self._rendezvous_release_send, dst, size, tag, label, callback, args, label=label)

    def _rendezvous_release_send(self, dst: int, size: int, tag: int, label: object,
                                 callback: Callable[..., None], args: tuple) -> None:
        self.backend.send(self.id, dst, size, tag, callback, *args, label=label)

    def _rendezvous_recv(self, src: int, size: int, tag: int, label: object, callback: Callable[..., None],
                         *args: object) -> None:
        self.backend.send(self.id, src, RENDEZVOUS_BYTES, tag + RENDEZVOUS_TAG_OFFSET,
                          self._rendezvous_post_recv, src, size, tag, label, callback, args, label=label)

    def _rendezvous_post_recv(self, src: int, size: int, tag: int, label: object,
                              callback: Callable[..., None], args: tuple) -> None:
        self.backend.recv(self.id, src, size, tag, callback, *args, label=label)
