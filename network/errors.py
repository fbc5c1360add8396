"""Error types shared by every layer.

The base, InputError, lives in the lowest layer so that every layer can raise it
without importing upward. The CLI prints ``str(exc)`` as one paragraph and exits 2.
"""
from __future__ import annotations

import os


class InputError(Exception):
    """Bad user input: names the file, the place in it, and what was expected."""

    def __init__(self, path: str | os.PathLike | None, where: str, problem: str) -> None:
        self.path = None if path is None else str(path)
        self.where = where
        self.problem = problem
        loc = self.path or "<command line>"
        super().__init__(f"{loc}: {where}: {problem}" if where else f"{loc}: {problem}")


class NetworkConfigError(InputError):
    """The network configuration (YAML) is invalid."""


class SimulationLimitError(Exception):
    """A user-set budget (events, wall time) ran out before the simulation finished."""


class MessageMismatchError(Exception):
    """A send and the receive it pairs with belong to different collectives (exit 3): the ranks
    issue collectives in different orders. The labels are the system layer's, printed as given."""

    def __init__(self, src: int, dst: int, send_label: object, recv_label: object) -> None:
        self.src, self.dst = src, dst
        self.send_label, self.recv_label = send_label, recv_label
        super().__init__(
            f"rank {src}'s message to rank {dst} belongs to {send_label} on rank {src}, but the receive "
            f"rank {dst} posted for it belongs to {recv_label} on rank {dst}: the ranks run their "
            "collectives in different orders"
        )


class FastPathConflict(Exception):
    """A shortcut (e.g. ring phases advanced in batch) met something it cannot reproduce exactly,
    such as other traffic on a link it had claimed: the run is redone without the shortcut."""
