"""Physical topology files as ASTRA-sim's ns-3 backend and SimAI read them, and our writer.

The format (ASTRA-sim ``astra-network-ns3`` scratch/common.h; SimAI network_frontend/ns3/common.h)::

    9 1 8                      nodes switches links          (ASTRA-sim)
    8                          the switch node ids
    0 8 400Gbps 0.0005ms 0     src dst rate latency error_rate, one line per full-duplex link
    ...

SimAI's header has more fields: ``nodes gpus_per_server nvswitches switches links gpu_type``,
and its id line lists the NVSwitch ids first, then the other switches. NPUs are the nodes that
are not switches, in id order (NPU rank r is the r-th such node).

Both readers are C++ streams, so we accept what they accept: ids spread over several lines or
an empty id line, extra spaces, a missing error rate, lines after the announced links (ignored
with a warning). We also accept trailing fields and ``#`` comments. Rates take bit or byte units
with SI or binary prefixes (``400Gbps``, ``100Mbps``, ``1.6Tbps``, ``50GBps``); latencies take
``s``, ``ms``, ``us``, ``ns`` or ``ps``.

A rate is what the file's authors meant: bits (or bytes) per second, exactly, with SI prefixes
(``400Gbps`` is 400 × 10^9 bit/s, 50 bytes per ns), as ASTRA-sim's and SimAI's ns-3 readers take
it (ns-3's DataRate). Inside, it is held in the network YAML's unit, where ASTRA-sim's analytical
backend reads ``bandwidth: 50`` as 50 GB/s with GB = 2^30 bytes: ``400Gbps`` is ``bandwidth:
46.566...`` (50 × 10^9 / 2^30), so a 1 GiB message on one 400Gbps link takes 2^30 / 50 ns plus the
latency on every backend (21,474,836 + latency), as it does in ns-3. A YAML ``bandwidth:`` keeps
ASTRA-sim's meaning. docs/network-backends.md ("Units") works both through.
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from network.errors import InputError
from network.files import read_text
from network.graph import GraphLink, PhysicalGraph

_RATE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([kKMGT]?)(i?)(bps|b/s|Bps|B/s)$")
_TIME = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(s|ms|us|ns|ps)$")
_PREFIX = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4}
_NS_PER = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "ps": 1e-3}
MAX_NODES = 1 << 21
_GIB = float(1 << 30)      # the YAML unit's GB (ASTRA-sim's)


class TopologyFileError(InputError):
    """A topology file that cannot be read: names the line and column."""


def parse_rate_gb_s(text: str) -> float | None:
    """``400Gbps`` → 50 × 10^9 / 2^30 (the YAML unit, GB/s of 2^30 bytes, that means exactly 400
    × 10^9 bit/s); None when ``text`` is not a rate."""
    m = _RATE.match(text)
    if not m:
        return None
    value, prefix, binary, unit = m.groups()
    scale = (1024.0 if binary else 1000.0) ** _PREFIX[prefix]
    bytes_per_s = float(value) * scale / (8.0 if unit[0] == "b" else 1.0)
    return bytes_per_s / _GIB


def parse_latency_ns(text: str) -> float | None:
    m = _TIME.match(text)
    return None if not m else float(m.group(1)) * _NS_PER[m.group(2)]


def format_rate(bandwidth_gb_s: float) -> str:
    """The inverse of parse_rate_gb_s, in Gbps: 50 × 10^9 / 2^30 → ``400Gbps``; a YAML
    ``bandwidth: 50`` (50 × 2^30 bytes/s) → ``429.4967296Gbps``."""
    return f"{bandwidth_gb_s * _GIB * 8 / 1e9:.10g}Gbps"


def format_latency(latency_ns: float) -> str:
    return f"{latency_ns / 1e6:.12g}ms"  # ms: the unit both projects' example files use


class _Tokens:
    """Whitespace-separated tokens with their line and column, read in order like a C++ stream."""

    def __init__(self, text: str, path: str | None) -> None:
        self.path = path
        self.lines: list[list[tuple[int, int, str]]] = []
        for n, raw in enumerate(text.splitlines(), start=1):
            body = raw.split("#", 1)[0]
            self.lines.append([(n, m.start() + 1, m.group()) for m in re.finditer(r"\S+", body)])
        self.line = 0  # index into self.lines
        self.col = 0  # index into the current line's tokens

    def next(self, what: str) -> tuple[int, int, str]:
        while self.line < len(self.lines) and self.col >= len(self.lines[self.line]):
            self.line, self.col = self.line + 1, 0
        if self.line >= len(self.lines):
            raise TopologyFileError(self.path, f"line {len(self.lines) + 1}", f"the file ends where {what} was expected")
        tok = self.lines[self.line][self.col]
        self.col += 1
        return tok

    def rest_lines(self) -> list[list[tuple[int, int, str]]]:
        """The unread lines, each as a list of tokens, blank ones left out."""
        first = self.lines[self.line][self.col:] if self.line < len(self.lines) else []
        rest = [first] + self.lines[self.line + 1:]
        return [ln for ln in rest if ln]


def _int(tok: tuple[int, int, str], path: str | None, what: str, low: int, high: int) -> int:
    line, col, text = tok
    try:
        v = int(text)
    except ValueError:
        raise TopologyFileError(path, f"line {line}, column {col}", f"expected {what} (an integer), got {text!r}") from None
    if not low <= v <= high:
        raise TopologyFileError(path, f"line {line}, column {col}", f"{what} must be from {low} to {high}, got {v}")
    return v


def parse_topology_text(text: str, path: str | os.PathLike | None = None) -> PhysicalGraph:
    p = None if path is None else str(path)
    toks = _Tokens(text, p)
    first = next((i for i, ln in enumerate(toks.lines) if ln), 0)  # a stream skips leading blank lines
    header = toks.lines[first] if toks.lines else []
    gpus_per_server = 0
    if len(header) == 3:
        nodes = _int(header[0], p, "the node count", 1, MAX_NODES)
        nv_count, sw_count = 0, _int(header[1], p, "the switch count", 0, nodes)
        links_count = _int(header[2], p, "the link count", 0, 1 << 31)
    elif len(header) in (5, 6):  # SimAI: nodes gpus_per_server nvswitches switches links [gpu_type]
        nodes = _int(header[0], p, "the node count", 1, MAX_NODES)
        gpus_per_server = _int(header[1], p, "the GPUs per server", 0, nodes)
        nv_count = _int(header[2], p, "the NVSwitch count", 0, nodes)
        sw_count = _int(header[3], p, "the switch count", 0, nodes)
        links_count = _int(header[4], p, "the link count", 0, 1 << 31)
    else:
        raise TopologyFileError(p, f"line {first + 1}", (
            f"expected 'nodes switches links' (ASTRA-sim) or 'nodes gpus_per_server nvswitches switches "
            f"links gpu_type' (SimAI), got {len(header)} fields"))
    toks.line, toks.col = first + 1, 0
    if nv_count + sw_count >= nodes:
        raise TopologyFileError(p, f"line {first + 1}", f"{nv_count + sw_count} switches leave no NPU among {nodes} nodes")
    switch_ids: list[int] = []
    seen: set[int] = set()
    for i in range(nv_count + sw_count):
        tok = toks.next(f"switch id {i + 1} of {nv_count + sw_count}")
        sid = _int(tok, p, "a switch id", 0, nodes - 1)
        if sid in seen:
            raise TopologyFileError(p, f"line {tok[0]}, column {tok[1]}", f"switch {sid} is listed twice")
        seen.add(sid)
        switch_ids.append(sid)
    links: list[GraphLink] = []
    rest = toks.rest_lines()
    for ln in rest[:links_count]:
        links.append(_link(ln, p, nodes))
    if len(links) < links_count:
        raise TopologyFileError(p, f"line {len(toks.lines) + 1}",
                                f"the header announces {links_count} links but the file has {len(links)} link lines")
    if len(rest) > links_count:
        warnings.warn(f"{p}: line {rest[links_count][0][0]}: {len(rest) - links_count} line(s) after the "
                      f"{links_count} links the header announces are ignored (as ASTRA-sim and SimAI do)", stacklevel=2)
    _check_duplicates(links, p)
    graph = PhysicalGraph(nodes, frozenset(switch_ids), frozenset(switch_ids[:nv_count]), tuple(links), p)
    _check_connected(graph, p)
    if gpus_per_server:
        _check_servers(graph, gpus_per_server, header[1], p)
    return graph


def _check_duplicates(links: list[GraphLink], p: str | None) -> None:
    """Two lines for one pair of nodes are parallel links (both readers make two), unless they
    disagree on the rate or the latency: then one of them is a typo, and which one is unknown."""
    first: dict[tuple[int, int], GraphLink] = {}
    for link in links:
        key = (min(link.a, link.b), max(link.a, link.b))
        seen = first.setdefault(key, link)
        if seen is not link and (seen.bandwidth_gb_s, seen.latency_ns) != (link.bandwidth_gb_s, link.latency_ns):
            raise TopologyFileError(p, f"line {link.line}", (
                f"link {link.a}-{link.b} ({format_rate(link.bandwidth_gb_s)}, {format_latency(link.latency_ns)}) "
                f"contradicts line {seen.line}'s link between the same nodes ({format_rate(seen.bandwidth_gb_s)}, "
                f"{format_latency(seen.latency_ns)}); parallel links must agree: fix or remove one"))


def _check_servers(graph: PhysicalGraph, gpus_per_server: int, tok: tuple[int, int, str], p: str | None) -> None:
    """SimAI's gpus_per_server: the NPUs fill whole servers, and an NVSwitch serves one server."""
    npus = graph.npus
    where = f"line {tok[0]}, column {tok[1]}"
    if len(npus) % gpus_per_server:
        raise TopologyFileError(p, where, f"gpus_per_server is {gpus_per_server}, but the file has {len(npus)} "
                                          "GPUs, which do not fill whole servers")
    rank = {n: r for r, n in enumerate(npus)}
    served: dict[int, set[int]] = {}
    for link in graph.links:
        for sw, other in ((link.a, link.b), (link.b, link.a)):
            if sw in graph.nvswitches and other in rank:
                served.setdefault(sw, set()).add(rank[other] // gpus_per_server)
    for sw, servers in sorted(served.items()):
        if len(servers) > 1:
            a, b = sorted(servers)[:2]
            raise TopologyFileError(p, where, (
                f"NVSwitch node {sw} links GPUs of servers {a} and {b} when gpus_per_server is {gpus_per_server} "
                f"(server s holds ranks s*{gpus_per_server} .. s*{gpus_per_server}+{gpus_per_server - 1}); the "
                "header's gpus_per_server does not match the links"))


def _link(ln: list[tuple[int, int, str]], p: str | None, nodes: int) -> GraphLink:
    line = ln[0][0]
    if len(ln) < 4:
        raise TopologyFileError(p, f"line {line}", f"expected 'src dst rate latency error_rate', got {len(ln)} fields")
    a = _int(ln[0], p, "a node id", 0, nodes - 1)
    b = _int(ln[1], p, "a node id", 0, nodes - 1)
    if a == b:
        raise TopologyFileError(p, f"line {line}, column {ln[1][1]}", f"a link from node {a} to itself")
    rate = parse_rate_gb_s(ln[2][2])
    if rate == 0:
        raise TopologyFileError(p, f"line {line}, column {ln[2][1]}",
                                f"a link rate must be above 0, got {ln[2][2]!r}: a link that moves nothing is no link")
    if rate is None or not 1e-9 <= rate <= 1e18:
        raise TopologyFileError(p, f"line {line}, column {ln[2][1]}", (
            f"expected a link rate such as 400Gbps (units bps, Kbps, Mbps, Gbps, Tbps or the same in "
            f"bytes, GBps), got {ln[2][2]!r}"))
    lat = parse_latency_ns(ln[3][2])
    if lat is None or lat > 2 ** 62:
        raise TopologyFileError(p, f"line {line}, column {ln[3][1]}",
                                f"expected a latency such as 0.0005ms (units s, ms, us, ns, ps), got {ln[3][2]!r}")
    err = 0.0
    if len(ln) > 4:
        try:
            err = float(ln[4][2])
        except ValueError:
            raise TopologyFileError(p, f"line {line}, column {ln[4][1]}",
                                    f"expected an error rate (a number from 0 to 1), got {ln[4][2]!r}") from None
        if not 0.0 <= err <= 1.0:
            raise TopologyFileError(p, f"line {line}, column {ln[4][1]}", f"an error rate is from 0 to 1, got {err}")
    return GraphLink(a, b, rate, lat, err, line)


def _check_connected(graph: PhysicalGraph, p: str | None) -> None:
    npus = graph.npus
    degree = [0] * graph.nodes_count
    for link in graph.links:
        degree[link.a] += 1
        degree[link.b] += 1
    lonely = [n for n in npus if degree[n] == 0]
    if lonely and len(npus) > 1:
        raise TopologyFileError(p, "links", f"NPU node {lonely[0]} (rank {npus.index(lonely[0])}) has no link; "
                                            f"{len(lonely)} NPU(s) are not connected")
    if graph.switches and len(npus) > 1:
        # only switches forward (graph_routes.py): every NPU must hang off one switched fabric
        dist = graph.bfs(npus[0], through_npus=False)
        cut = [n for n in npus if dist[n] < 0]
        if cut:
            raise TopologyFileError(p, "links", (
                f"NPU node {cut[0]} (rank {npus.index(cut[0])}) cannot reach NPU node {npus[0]} through "
                f"switches ({len(cut)} NPU(s) cannot): only switches forward, NPUs are endpoints, as in "
                "ASTRA-sim's and SimAI's ns-3; link every NPU to a switch of the fabric"))
        return
    reach = graph.reachable_from(npus[0])
    cut = [n for n in npus if n not in reach]
    if cut:
        raise TopologyFileError(p, "links", (
            f"NPU node {cut[0]} (rank {npus.index(cut[0])}) cannot be reached from NPU node {npus[0]}: "
            f"the links leave {len(cut)} NPU(s) disconnected"))


def read_topology_file(path: str | os.PathLike) -> PhysicalGraph:
    return parse_topology_text(read_text(path, TopologyFileError), path)


def format_topology(graph: PhysicalGraph, gpus_per_server: int = 0, gpu_type: str = "NONE") -> str:
    """The file text. ASTRA-sim's 3-field header, or SimAI's when the graph has NVSwitches
    (SimAI's is the only one that marks a scale-up switch as such)."""
    nv = sorted(graph.nvswitches)
    sw = sorted(graph.switches - graph.nvswitches)
    if nv:
        head = f"{graph.nodes_count} {gpus_per_server} {len(nv)} {len(sw)} {len(graph.links)} {gpu_type}"
    else:
        head = f"{graph.nodes_count} {len(sw)} {len(graph.links)}"
    lines = [head, " ".join(map(str, nv + sw))]
    for link in graph.links:
        lines.append(f"{link.a} {link.b} {format_rate(link.bandwidth_gb_s)} {format_latency(link.latency_ns)} "
                     f"{link.error_rate:g}")
    return "\n".join(lines) + "\n"


def write_topology_file(path: str | os.PathLike, graph: PhysicalGraph, **kwargs: object) -> Path:
    from network.files import write_atomic

    out = Path(path)
    write_atomic(out, format_topology(graph, **kwargs))  # type: ignore[arg-type]
    return out
