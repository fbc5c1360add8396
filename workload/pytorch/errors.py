"""The error of the PyTorch trace converter (exit 2 through network.errors.InputError)."""
from __future__ import annotations

from workload.collect.errors import ProfilerTraceError


class PyTorchTraceError(ProfilerTraceError):
    """A host or device trace given to ``workload.convert pytorch`` cannot be used as given."""
