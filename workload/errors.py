"""Errors raised by the workload layer."""
from __future__ import annotations

from network.errors import InputError


class WorkloadError(InputError):
    """A workload (Chakra ET files, or their layout on disk) is invalid."""
