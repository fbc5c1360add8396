"""Errors of the TrioSim converter: each names the file (or flag), the place and what was expected."""
from __future__ import annotations

from network.errors import InputError


class TrioSimTraceError(InputError):
    """A TrioSim ``tensor.csv`` / ``trace.csv`` is missing or malformed.

    ``where`` names the line and the column, e.g. ``line 12, column 'stage'``.
    """


class LayoutError(InputError):
    """A parallel layout flag (``--dp``, ``--pp``, ``--batch-size-sim`` ...) does not fit the trace."""

    def __init__(self, flag: str, problem: str) -> None:
        super().__init__(None, flag, problem)
