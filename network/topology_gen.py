"""Generators for the cluster shapes people build, writing ASTRA-sim / SimAI topology files.

Shapes (node ids: NPUs first, rank order; then switches, lowest tier first):

* ``fat-tree`` (two-tier Clos): ``leaves`` leaf switches with ``npus_per_leaf`` NPUs each;
  every leaf has ``uplinks_per_leaf`` links spread evenly over ``spines`` spines (each leaf
  reaches every spine). The stated ``oversubscription`` (leaf downlink capacity : uplink
  capacity) sets the uplink rate: npus_per_leaf × bandwidth / (uplinks × oversubscription).
  Left out, uplinks are npus_per_leaf / oversubscription links of the NPU rate, one per spine.
* ``fat-tree-3`` (three-tier Clos): ``pods`` pods, each a two-tier fat-tree of ``leaves``
  leaves and ``uplinks_per_leaf`` spines (aggregation switches); spine j of every pod has
  ``spine_uplinks`` links to its own group of ``spine_uplinks`` cores, at the rate
  ``spine_oversubscription`` leaves.
* ``rail-optimized``: ``servers`` servers of ``gpus_per_server`` NPUs; NPU k of every server
  sits on rail switch k, and each server's NPUs share one scale-up switch (an NVSwitch, at
  ``scale_up_bandwidth``). With ``spines`` > 0 every rail switch also links to every spine.
  Written with SimAI's header, which marks the NVSwitches.

Command: ``python -m network.topology_gen fat-tree --leaves 4 --npus-per-leaf 8
--oversubscription 4 -o ft.txt [--png ft.png]`` (also ``dtsim-topology``). The same
parameters, in a network YAML's ``topology-generator:`` mapping, build one on the fly.
"""
from __future__ import annotations

import argparse
import sys

from network.errors import InputError
from network.graph import GraphLink, PhysicalGraph
from network.topology_file import parse_latency_ns, parse_rate_gb_s, write_topology_file

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable


class GeneratorError(InputError):
    """Generator parameters that describe no network."""


def _rate(v: Any, what: str) -> float:
    r = parse_rate_gb_s(v) if isinstance(v, str) else (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    if r is None or not r > 0:
        raise GeneratorError(None, what, f"expected a rate such as 400Gbps (or a number of GB/s > 0), got {v!r}")
    return r


def _latency(v: Any, what: str) -> float:
    r = parse_latency_ns(v) if isinstance(v, str) else (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    if r is None or not r >= 0:
        raise GeneratorError(None, what, f"expected a latency such as 0.0005ms (or a number of ns >= 0), got {v!r}")
    return r


def _count(v: Any, what: str, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise GeneratorError(None, what, f"expected an integer >= {low}, got {v!r}")
    return v


def _ratio(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise GeneratorError(None, what, f"expected a number > 0 (e.g. 4 for 4:1), got {v!r}")
    return float(v)


def _uplinks(down_gb_s: float, uplinks: Any, spines: Any, os_: float, link_gb_s: float, who: str) -> tuple[int, int, float]:
    """(uplinks, spines, uplink rate) of a switch with ``down_gb_s`` of downlink capacity."""
    if uplinks is None:
        uplinks = max(1, round(down_gb_s / link_gb_s / os_))
    uplinks = _count(uplinks, f"uplinks per {who}")
    spines = uplinks if spines is None else _count(spines, "spines")
    if uplinks % spines:
        raise GeneratorError(None, "spines", f"{uplinks} uplinks per {who} cannot spread evenly over {spines} switches above")
    return uplinks, spines, down_gb_s / (uplinks * os_)


def fat_tree(npus_per_leaf: int, leaves: int, uplinks_per_leaf: int | None = None, spines: int | None = None,
             oversubscription: float = 1.0, bandwidth: Any = "400Gbps", latency: Any = "0.0005ms",
             uplink_latency: Any = None) -> PhysicalGraph:
    n, nl = _count(npus_per_leaf, "npus-per-leaf"), _count(leaves, "leaves")
    bw, lat = _rate(bandwidth, "bandwidth"), _latency(latency, "latency")
    up_lat = lat if uplink_latency is None else _latency(uplink_latency, "uplink-latency")
    os_ = _ratio(oversubscription, "oversubscription")
    u, ns, up_bw = _uplinks(n * bw, uplinks_per_leaf, spines, os_, bw, "leaf")
    npus = n * nl
    leaf0, spine0 = npus, npus + nl
    links = [GraphLink(r, leaf0 + r // n, bw, lat) for r in range(npus)]
    for leaf in range(nl):
        for k in range(u):
            links.append(GraphLink(leaf0 + leaf, spine0 + k % ns, up_bw, up_lat))
    return PhysicalGraph(npus + nl + ns, frozenset(range(leaf0, npus + nl + ns)), frozenset(), tuple(links))


def fat_tree_3(npus_per_leaf: int, leaves: int, pods: int, uplinks_per_leaf: int | None = None,
               oversubscription: float = 1.0, spine_uplinks: int | None = None, spine_oversubscription: float = 1.0,
               bandwidth: Any = "400Gbps", latency: Any = "0.0005ms", uplink_latency: Any = None) -> PhysicalGraph:
    n, nl, npods = _count(npus_per_leaf, "npus-per-leaf"), _count(leaves, "leaves"), _count(pods, "pods")
    bw, lat = _rate(bandwidth, "bandwidth"), _latency(latency, "latency")
    up_lat = lat if uplink_latency is None else _latency(uplink_latency, "uplink-latency")
    u, _, up_bw = _uplinks(n * bw, uplinks_per_leaf, None, _ratio(oversubscription, "oversubscription"), bw, "leaf")
    su, _, core_bw = _uplinks(nl * up_bw, spine_uplinks, None, _ratio(spine_oversubscription, "spine-oversubscription"),
                              up_bw, "spine")
    npus = n * nl * npods
    leaf0 = npus
    spine0 = leaf0 + nl * npods
    core0 = spine0 + u * npods
    total = core0 + u * su
    links = [GraphLink(r, leaf0 + r // n, bw, lat) for r in range(npus)]
    for p in range(npods):
        for leaf in range(nl):
            for k in range(u):
                links.append(GraphLink(leaf0 + p * nl + leaf, spine0 + p * u + k, up_bw, up_lat))
    for p in range(npods):
        for k in range(u):
            for c in range(su):
                links.append(GraphLink(spine0 + p * u + k, core0 + k * su + c, core_bw, up_lat))
    return PhysicalGraph(total, frozenset(range(leaf0, total)), frozenset(), tuple(links))


def rail_optimized(servers: int, gpus_per_server: int, bandwidth: Any = "400Gbps", latency: Any = "0.0005ms",
                   scale_up_bandwidth: Any = "2880Gbps", scale_up_latency: Any = "0.000025ms",
                   spines: int = 0, spine_bandwidth: Any = None) -> PhysicalGraph:
    ns, g = _count(servers, "servers"), _count(gpus_per_server, "gpus-per-server")
    bw, lat = _rate(bandwidth, "bandwidth"), _latency(latency, "latency")
    su_bw, su_lat = _rate(scale_up_bandwidth, "scale-up-bandwidth"), _latency(scale_up_latency, "scale-up-latency")
    nsp = _count(spines, "spines", low=0)
    sp_bw = bw * ns / max(nsp, 1) if spine_bandwidth is None else _rate(spine_bandwidth, "spine-bandwidth")
    npus = ns * g
    nv0, rail0, spine0 = npus, npus + ns, npus + ns + g
    total = spine0 + nsp
    links: list[GraphLink] = []
    for r in range(npus):
        links.append(GraphLink(r, nv0 + r // g, su_bw, su_lat))
        links.append(GraphLink(r, rail0 + r % g, bw, lat))
    for k in range(g):
        for s in range(nsp):
            links.append(GraphLink(rail0 + k, spine0 + s, sp_bw, lat))
    return PhysicalGraph(total, frozenset(range(nv0, total)), frozenset(range(nv0, rail0)), tuple(links))


SHAPES: dict[str, Callable[..., PhysicalGraph]] = {
    "fat-tree": fat_tree, "clos": fat_tree, "fat-tree-3": fat_tree_3, "clos-3": fat_tree_3,
    "rail-optimized": rail_optimized,
}


def generate(spec: dict[str, Any], path: str | None = None) -> PhysicalGraph:
    """A graph from a YAML-style mapping: ``shape`` plus the shape's parameters (kebab-case)."""
    where = "key 'topology-generator'"
    if not isinstance(spec, dict) or "shape" not in spec:
        raise GeneratorError(path, where, f"expected a mapping with 'shape' ({', '.join(SHAPES)}) and its parameters")
    fn = SHAPES.get(spec["shape"])
    if fn is None:
        raise GeneratorError(path, f"{where}, key 'shape'", f"unknown shape {spec['shape']!r}; known: {', '.join(SHAPES)}")
    params = {str(k).replace("-", "_"): v for k, v in spec.items() if k != "shape"}
    known = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    for k in params:
        if k not in known:
            raise GeneratorError(path, f"{where}, key {k.replace('_', '-')!r}",
                                 f"unknown parameter of {spec['shape']}; expected {', '.join(a.replace('_', '-') for a in known)}")
    try:
        return fn(**params)
    except GeneratorError as e:
        raise GeneratorError(path, f"{where}, {e.where}", e.problem) from None
    except TypeError as e:  # a required parameter is missing
        raise GeneratorError(path, where, str(e).split(") ", 1)[-1]) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m network.topology_gen",
                                description="Write a fat-tree / Clos or rail-optimized topology file (ASTRA-sim ns-3 / SimAI format).")
    p.add_argument("shape", choices=sorted(SHAPES))
    p.add_argument("-o", "--output", required=True, metavar="FILE.txt")
    p.add_argument("--png", metavar="FILE.png", help="also draw the graph (needs matplotlib)")
    for name in ("npus-per-leaf", "leaves", "pods", "uplinks-per-leaf", "spines", "spine-uplinks",
                 "servers", "gpus-per-server"):
        p.add_argument(f"--{name}", type=int)
    for name in ("oversubscription", "spine-oversubscription"):
        p.add_argument(f"--{name}", type=float)
    for name in ("bandwidth", "latency", "uplink-latency", "scale-up-bandwidth", "scale-up-latency", "spine-bandwidth"):
        p.add_argument(f"--{name}", metavar="400Gbps" if "bandwidth" in name else "0.0005ms")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = {k.replace("_", "-"): v for k, v in vars(args).items() if v is not None and k not in ("output", "png")}
    try:
        graph = generate(spec)
        write_topology_file(args.output, graph, gpus_per_server=args.gpus_per_server or 0)
        if args.png:
            from network.topology_draw import draw

            draw(graph, args.png)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.output}: {graph.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
