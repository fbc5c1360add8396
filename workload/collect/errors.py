"""Error types of the collector and the profiler-trace converter.

Both derive from :class:`network.errors.InputError`, so the CLI prints them as one
paragraph and exits 2.
"""
from __future__ import annotations

from network.errors import InputError


class ProfilerTraceError(InputError):
    """A PyTorch execution trace or Kineto profiler trace cannot be used.

    Raised for malformed JSON, an unsupported execution-trace schema version, a
    profiler trace without GPU kernels, or a pair of files that do not describe
    the same training step.
    """


class ModelSpecError(InputError):
    """The ``--model MODULE:CALLABLE`` argument, or what the callable returned, is unusable."""


class TimingTraceMismatch(ProfilerTraceError):
    """The timing trace's outermost operators differ from the profiled step's."""
