"""Backend registry: a name → lazily imported class, with an install hint (fsspec's pattern)."""
from __future__ import annotations

import importlib

from network.errors import NetworkConfigError
from network.extras import install_hint

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

_KNOWN: dict[str, tuple[str, str | None]] = {
    "congestion-unaware": ("network.analytical.unaware:CongestionUnawareBackend", None),
    "congestion-aware": ("network.analytical.aware:CongestionAwareBackend", None),
    "ns3": ("network.ns3.backend:Ns3Backend", install_hint("ns3", "'ns3==3.44.post0'")),
}
_ALIASES = {
    "unaware": "congestion-unaware",
    "analytical": "congestion-unaware",
    "congestion_unaware": "congestion-unaware",
    "aware": "congestion-aware",
    "congestion_aware": "congestion-aware",
    "ns-3": "ns3",
}
DEFAULT_BACKEND = "congestion-unaware"


def known_backends() -> list[str]:
    return list(_KNOWN)


def canonical_name(name: str) -> str:
    n = _ALIASES.get(name, name)
    if n not in _KNOWN:
        raise NetworkConfigError(
            None, "backend", f"unknown backend {name!r}; known: {', '.join(_KNOWN)}"
        )
    return n


def backend_class(name: str) -> Any:
    """Import only the chosen backend, so that an optional one costs nothing unless asked for."""
    n = canonical_name(name)
    target, hint = _KNOWN[n]
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        if hint is None:
            raise
        raise NetworkConfigError(
            None, "backend", f"backend {n!r} needs an optional dependency ({exc}); install it with: {hint}"
        ) from None
