"""The network YAML's graph keys: ``topology-file: PATH`` or ``topology-generator: {...}``.

``topology-file`` is relative to the YAML. ``npus_count`` (a list or a number) gives the logical
dimensions the collectives use; left out, all NPUs form one dimension. ``topology``,
``bandwidth`` and ``latency`` belong to the built-in networks and may not appear with them.
ASTRA-sim's ``--logical-topology-configuration`` file (``{"logical-dims": ["8", "4"]}``)
replaces ``npus_count`` (read_logical_dims).
"""
from __future__ import annotations

import math
import os

from network.errors import NetworkConfigError
from network.files import load_structured

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any
    from network.graph_topology import GraphTopology

GRAPH_KEYS = ("topology-file", "topology-generator")


def graph_topology(data: dict[str, Any], path: str | os.PathLike | None) -> GraphTopology:
    given = [k for k in GRAPH_KEYS if k in data]
    if len(given) > 1:
        raise NetworkConfigError(path, f"key {given[1]!r}", f"give either {GRAPH_KEYS[0]!r} or {GRAPH_KEYS[1]!r}, not both")
    clash = [k for k in ("topology", "bandwidth", "latency") if k in data]
    if clash:
        raise NetworkConfigError(path, f"key {clash[0]!r}", (
            f"belongs to the built-in networks; with {given[0]!r} the links' rates and latencies come from "
            "the graph (remove the key)"))
    # the graph modules load only for a graph network: a Ring/Switch run never needs them (start-up)
    if given[0] == "topology-file":
        from pathlib import Path  # as network.topology_file does: a graph network only

        from network.topology_file import read_topology_file

        f = data["topology-file"]
        if not isinstance(f, str) or not f:
            raise NetworkConfigError(path, "key 'topology-file'", "expected the path of a topology file")
        base = Path(path).parent if path is not None else Path(".")
        graph = read_topology_file(base / f)
    else:
        from network.topology_gen import generate

        graph = generate(data["topology-generator"], None if path is None else str(path))
        if path is not None and graph.path is None:  # errors found later (routes) name the YAML
            import dataclasses

            graph = dataclasses.replace(graph, path=str(path))
    dims = None
    if "npus_count" in data:
        raw = data["npus_count"]
        dims = list(raw) if isinstance(raw, (list, tuple)) else [raw]
        for i, n in enumerate(dims):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise NetworkConfigError(path, f"key 'npus_count', entry {i}", f"expected an integer >= 1, got {n!r}")
    return _with_dims(graph, dims, path, "key 'npus_count'")


def _with_dims(graph: Any, dims: list[int] | None, path: Any, where: str) -> GraphTopology:
    from network.graph_topology import GraphTopology

    npus = len(graph.npus)
    if dims is not None and math.prod(dims) != npus:
        raise NetworkConfigError(path, where, (
            f"the logical dimensions {dims} hold {math.prod(dims)} NPUs but the topology has {npus} "
            f"(its non-switch nodes)"))
    return GraphTopology(graph, dims)


def read_logical_dims(path: str | os.PathLike) -> list[int]:
    """ASTRA-sim's logical topology file: ``{"logical-dims": ["8", "4"]}`` (numbers or strings)."""
    data = load_structured(path, NetworkConfigError, fmt="json")
    dims = data.get("logical-dims") if isinstance(data, dict) else None
    if not isinstance(dims, list) or not dims:
        raise NetworkConfigError(path, "key 'logical-dims'", 'expected {"logical-dims": ["8", "4"]}: a list of dimension sizes')
    out = []
    for i, v in enumerate(dims):
        try:
            n = int(v) if not isinstance(v, (bool, float)) else None
        except ValueError:
            n = None
        if n is None or n < 1:
            raise NetworkConfigError(path, f"key 'logical-dims', entry {i}", f"expected a positive integer, got {v!r}")
        out.append(n)
    return out


def apply_logical_dims(topology: Any, dims: list[int], path: str | os.PathLike) -> Any:
    """The topology with these logical dimensions (for a built-in network they must be its own)."""
    from network.graph_topology import GraphTopology

    if isinstance(topology, GraphTopology):
        return _with_dims(topology.graph, dims, path, "key 'logical-dims'")
    if list(dims) != topology.npus_count_per_dim:
        raise NetworkConfigError(path, "key 'logical-dims'", (
            f"{dims} differ from the network's dimensions {topology.npus_count_per_dim}; logical dimensions "
            "apply to a network given as a topology-file"))
    return topology
