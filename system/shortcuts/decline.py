"""The one way a shortcut says no: ``Decline(reason)``, raised while it tries to prove a run."""
from __future__ import annotations


class Decline(Exception):
    """This shortcut cannot prove its answer equal to the every-event path's; the reason says why
    (``--debug`` prints it, the report keeps it)."""
