"""Errors raised by the system layer."""
from __future__ import annotations

from network.errors import InputError


class SystemConfigError(InputError):
    """The system configuration (ASTRA-sim's system JSON, or YAML with the same keys) is invalid."""


class CommGroupError(InputError):
    """The communicator-group configuration is invalid."""


class RemoteMemoryConfigError(InputError):
    """The remote-memory configuration is invalid."""


class UnsupportedFeatureError(InputError):
    """The input asks for something this simulator (and ASTRA-sim) does not model."""
