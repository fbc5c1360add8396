"""Analytical congestion-unaware backend (ASTRA-sim: congestion_unaware).

A message costs hops × latency + size / bandwidth in the lowest dimension in which source and
destination differ, truncated once; there is no link state, so any number of messages may be
in flight at once (docs/astra-sim-semantics.md §6.2).
"""
from __future__ import annotations

from network.analytical.base import AnalyticalBackend, Message, graph_flows
from network.event_queue import native_module
from network.topology import Dimension, Topology, TopologyKind

_native = native_module()
_KIND_CODES = {TopologyKind.RING: 0, TopologyKind.FULLY_CONNECTED: 1, TopologyKind.SWITCH: 2}


def _exact_double(x: object) -> bool:
    """A latency whose products with hop counts C's doubles give as Python does: a float, or an
    int small enough that hops × latency stays below 2^53 either way."""
    return type(x) is float or (type(x) is int and abs(x) < 1 << 31)


def _unaware_table(topology: Topology) -> tuple | None:
    """Per dimension (stride, NPUs, kind code, latency ns, bytes/ns), what FixedDelayTransfer
    computes Topology.unaware_delay_ns from; None where the topology or a dimension computes it
    otherwise (a subclass), or has more dimensions than C takes."""
    if type(topology) is not Topology or not 1 <= len(topology.dims) <= 16 or \
            any(type(d) is not Dimension or d.kind not in _KIND_CODES or not _exact_double(d.latency_ns)
                for d in topology.dims):
        return None
    return tuple((st, d.npus_count, _KIND_CODES[d.kind], float(d.latency_ns), bpn)
                 for st, d, bpn in zip(topology._strides, topology.dims, topology._bytes_per_ns))


class CongestionUnawareBackend(AnalyticalBackend):
    name = "congestion-unaware"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._delay_cache: dict[tuple[int, int, int], int] = {}
        self._graph = graph_flows(self.topology)  # None: no topology file
        if self._graph is not None:
            self._transfer = self._graph_transfer  # type: ignore[method-assign]
        elif _native is not None and isinstance(self, _native.Pairing) and \
                type(self)._transfer is CongestionUnawareBackend._transfer and \
                type(self)._on_arrival is _native.Pairing._on_arrival:
            # _transfer in C (network/_pairing.c): on a plain topology each delay is computed
            # there as Topology.unaware_delay_ns computes it; anything else calls the method
            self._transfer = _native.FixedDelayTransfer(self, self._delay_cache, self._transfer,
                                                        _unaware_table(self.topology))
        #: the delay of a message depends only on (src, dst, size), on a topology file too (one
        #: path per pair, graph_links.py): callers may advance many messages at once
        #: (system/shortcuts/ring_batch.py) and book them with account_flows
        self.fixed_delay_ns = self.message_delay_ns

    def message_delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        k = (src, dst, size_bytes)
        d = self._delay_cache.get(k)
        if d is None:
            if self._graph is not None:
                self._graph.check_pair(src, dst)
            d = self._delay_cache[k] = self.topology.unaware_delay_ns(src, dst, size_bytes)
        return d

    def fold(self, group) -> None:
        """An orbit run on a topology file: only checks that routes follow its symmetry
        (graph_links.GraphFlows.fold); delays have no link state to fold."""
        if self._graph is None:
            raise ValueError("an orbit run folds the links of a topology file only")
        self._graph.fold(group)

    def _transfer(self, src: int, dst: int, size_bytes: int, msg: Message) -> None:
        k = (src, dst, size_bytes)
        d = self._delay_cache.get(k)
        if d is None:
            d = self._delay_cache[k] = self.topology.unaware_delay_ns(src, dst, size_bytes)
        self.queue.schedule(d, self._on_arrival, msg)

    def _graph_transfer(self, src: int, dst: int, size_bytes: int, msg: Message) -> None:
        """A topology file: the pair's path (graph_links.py)."""
        self.queue.schedule(self._graph.delay_ns(src, dst, size_bytes), self._on_arrival, msg)

    def account_flows(self, flows: list[tuple[int, int]], size_bytes: int, count: int) -> None:
        super().account_flows(flows, size_bytes, count)
        if self._graph is not None:     # the per-link-class report spreads them over their paths
            for src, dst in flows:
                self._graph.count(src, dst, size_bytes * count)

    def stats(self) -> dict[str, object]:
        out = super().stats()
        if self._graph is not None:
            out.update(self._graph.stats(self.now()))
        return out
