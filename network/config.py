"""Network configuration: ASTRA-sim's analytical YAML keys, parsed once into a frozen object.

Keys (each a list with one entry per dimension, or a scalar for a 1-D network):
``topology`` (Ring | FullyConnected | Switch), ``npus_count`` (>= 1), ``bandwidth`` (GB/s, > 0),
``latency`` (ns, >= 0). Our additions: ``backend`` (a registered backend name) and ``ns3``
(a mapping of ns-3 knobs, read by the ns-3 backend), and a physical graph instead of the
dimension keys: ``topology-file`` or ``topology-generator`` (network/graph_config.py).
"""
from __future__ import annotations

import math
import os
from types import MappingProxyType

from network.errors import NetworkConfigError
from network.files import load_structured, path_str
from network.graph_config import GRAPH_KEYS, apply_logical_dims, graph_topology
from network.records import record
from network.registry import canonical_name
from network.topology import Dimension, Topology, TopologyKind

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Mapping

LIST_KEYS = ("topology", "npus_count", "bandwidth", "latency")
OPTIONAL_KEYS = ("backend", "ns3", "congestion_aware", "name", "description") + GRAPH_KEYS
KNOWN_KEYS = LIST_KEYS + OPTIONAL_KEYS
_LIST_KEYS, _OPTIONAL_KEYS = LIST_KEYS, OPTIONAL_KEYS


@record
class NetworkConfig:
    """A parsed network file. (A named tuple, network/records.py, not a dataclass: importing
    dataclasses is ~13 ms of a small run's start-up.)"""

    topology: Topology
    backend: str | None = None
    extra: Mapping[str, Any] = MappingProxyType({})  #: "ns3" and "congestion_aware" settings
    path: str | None = None

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "NetworkConfig":
        p = path_str(path)
        data = load_structured(p, NetworkConfigError, fmt="yaml")
        if not isinstance(data, dict):
            hint = _not_a_network_yaml(p)
            if hint:
                raise NetworkConfigError(p, "", hint)
        return cls.from_dict(data, p)

    @classmethod
    def from_dict(cls, data: Any, path: str | os.PathLike | None = None) -> "NetworkConfig":
        if not isinstance(data, dict):
            raise NetworkConfigError(
                path, "", f"expected a mapping with keys {', '.join(_LIST_KEYS)}; got {type(data).__name__}"
            )
        unknown = sorted(str(k) for k in data if k not in _LIST_KEYS + _OPTIONAL_KEYS)
        if unknown:
            raise NetworkConfigError(
                path, f"key {unknown[0]!r}",
                f"unknown key; expected {', '.join(_LIST_KEYS + _OPTIONAL_KEYS)}",
            )
        if any(k in data for k in GRAPH_KEYS):  # a physical graph; npus_count = logical dims
            return cls._finish(graph_topology(data, path), data, path)
        missing = [k for k in _LIST_KEYS if k not in data]
        if missing:
            raise NetworkConfigError(path, f"key {missing[0]!r}", "required key is missing")
        lists = {k: _as_list(data[k]) for k in _LIST_KEYS}
        n = len(lists["topology"])
        if n == 0:
            raise NetworkConfigError(path, "key 'topology'", "needs at least one dimension")
        for k in _LIST_KEYS[1:]:
            if len(lists[k]) != n:
                raise NetworkConfigError(
                    path, f"key {k!r}",
                    f"has {len(lists[k])} entries but 'topology' has {n}; every list needs one entry per dimension",
                )
        dims = [_dimension(path, i, *(lists[k][i] for k in _LIST_KEYS)) for i in range(n)]
        total = math.prod(d.npus_count for d in dims)
        if total > MAX_NPUS:
            raise NetworkConfigError(path, "key 'npus_count'", f"the network has {total} NPUs; at most {MAX_NPUS} are supported")
        return cls._finish(Topology(dims), data, path)

    @classmethod
    def _finish(cls, topology: Topology, data: dict, path: str | os.PathLike | None) -> "NetworkConfig":
        backend = data.get("backend")
        if backend is not None and not isinstance(backend, str):
            raise NetworkConfigError(path, "key 'backend'", "expected a backend name (a string)")
        if backend is not None:
            try:
                canonical_name(backend)  # here, so that the error names this file, not the command line
            except NetworkConfigError as e:
                raise NetworkConfigError(path, "key 'backend'", e.problem) from None
        extra = {k: data[k] for k in ("ns3", "congestion_aware") if k in data}
        for k, v in extra.items():
            if v is not None and not isinstance(v, dict):
                raise NetworkConfigError(path, f"key {k!r}", "expected a mapping of settings")
        return cls(topology, backend, extra, None if path is None else str(path))

    def with_logical_dims(self, dims: list[int], source: str | os.PathLike) -> "NetworkConfig":
        """ASTRA-sim's --logical-topology-configuration: these dimensions for the collectives."""
        return self._replace(topology=apply_logical_dims(self.topology, dims, source))


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _dimension(path: Any, i: int, kind: Any, npus: Any, bw: Any, lat: Any) -> Dimension:
    where = f"dimension {i}"
    try:
        k = TopologyKind(kind)
    except ValueError:
        raise NetworkConfigError(
            path, f"{where}, key 'topology'",
            f"{kind!r} is not a topology; expected Ring, FullyConnected or Switch",
        ) from None
    if isinstance(npus, bool) or not isinstance(npus, int) or not 1 <= npus <= MAX_NPUS:
        raise NetworkConfigError(path, f"{where}, key 'npus_count'",
                                 f"expected an integer from 1 to {MAX_NPUS}, got {_shown(npus)}")
    # chained comparisons: NaN, infinities and 400-digit integers fail them without float overflow
    if not _is_number(bw) or not _MIN_BANDWIDTH_GB_S <= bw <= _MAX_BANDWIDTH_GB_S:
        raise NetworkConfigError(path, f"{where}, key 'bandwidth'",
                                 f"expected a number > 0 (GB/s, from 1e-9 to 1e18), got {_shown(bw)}")
    if not _is_number(lat) or not 0 <= lat <= _MAX_LATENCY_NS:
        raise NetworkConfigError(path, f"{where}, key 'latency'",
                                 f"expected a number >= 0 (ns, at most 2^63), got {_shown(lat)}")
    return Dimension(k, npus, float(bw), float(lat))


# Limits that keep every message time a finite number (a smaller bandwidth makes size / bw
# overflow a double) and every run within memory; real configs sit far inside them.
MAX_NPUS = 1 << 20
_MIN_BANDWIDTH_GB_S = 1e-9  # about one byte per second
_MAX_BANDWIDTH_GB_S = 1e18
_MAX_LATENCY_NS = 2 ** 63  # ASTRA-sim's ticks are 64-bit


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shown(v: Any) -> str:
    text = repr(v) if len(repr(v)) <= 40 else repr(v)[:37] + "..."
    if isinstance(v, str):
        try:
            float(v)
            text += " (text, not a number: YAML reads 1e3 as a string; write 1.0e+3)"
        except ValueError:
            pass
    return text


def _not_a_network_yaml(path: str) -> str | None:
    """What a file that is not a network YAML is, when it is one of the two text files users
    give by mistake: a topology file (ASTRA-sim ns-3 / SimAI) or ASTRA-sim ns-3's config.txt."""
    try:
        with open(path, errors="replace") as f:
            lines = [ln.split("#", 1)[0].split() for ln in f.read().splitlines()[:200]]
    except OSError:
        return None
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    head = lines[0]
    if len(head) in (3, 5, 6) and all(t.isdigit() for t in head[:5]) and len(lines) > 1:
        return (f"this is a topology file ('{' '.join(head)}': nodes, switches, links, as ASTRA-sim's ns-3 "
                f"backend and SimAI read them), not a network YAML; write a YAML that names it, e.g. "
                f"'topology-file: {os.path.basename(path)}' in net.yml beside it, and pass --network net.yml "
                "(docs/network-backends.md, 'Physical topologies')")
    keys = {ln[0] for ln in lines}
    if "TOPOLOGY_FILE" in keys or sum(1 for k in keys if k.isupper() and "_" in k) >= 3:
        topo = next((ln[1] for ln in lines if ln[0] == "TOPOLOGY_FILE" and len(ln) > 1), "T.txt")
        return (f"this is ASTRA-sim ns-3's config.txt (KEY value lines), not a network YAML; write a YAML "
                f"with 'topology-file: {topo}' (the file its TOPOLOGY_FILE names) and pass --network with "
                "it and --backend ns3; ns-3 settings of ours go under its 'ns3:' key (docs/network-backends.md)")
    return None

