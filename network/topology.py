"""Network topology: dimensions, addresses and hop counts, shared by every backend.

A topology is a list of dimensions, dimension 0 fastest: rank = x0 + N0·x1 + N0·N1·x2 …
(ASTRA-sim: MultiDimTopology::translate_address). A message between two ranks travels in
the lowest dimension in which their coordinates differ (get_dim_to_transfer).
"""
from __future__ import annotations

import math
from functools import cached_property

from network.choices import Choice
from network.records import record
from network.units import bw_gb_s_to_bytes_per_ns, message_delay_ns


class TopologyKind(Choice):
    RING = "Ring"
    FULLY_CONNECTED = "FullyConnected"
    SWITCH = "Switch"


@record
class Dimension:
    """One network dimension: its building block, size, link bandwidth (GB/s) and latency (ns).
    (A named tuple, network/records.py, not a dataclass: importing dataclasses is ~13 ms of a
    small run's start-up.)"""

    kind: TopologyKind
    npus_count: int
    bandwidth_gb_s: float
    latency_ns: float

    @property
    def bytes_per_ns(self) -> float:
        return bw_gb_s_to_bytes_per_ns(self.bandwidth_gb_s)

    def hops(self, src: int, dst: int) -> int:
        """Hop count between two local coordinates (ASTRA-sim: compute_hops_count)."""
        if self.kind is TopologyKind.RING:
            cw = (dst - src) % self.npus_count
            return min(cw, self.npus_count - cw)  # the ring is bidirectional (§6.2)
        if self.kind is TopologyKind.SWITCH:
            return 2  # src → switch → dst
        return 1


class Topology:
    """A multi-dimensional network of NPUs."""

    __slots__ = ("dims", "npus_count", "_strides", "__dict__")

    def __init__(self, dims: list[Dimension]) -> None:
        if not dims:
            raise ValueError("a topology needs at least one dimension")
        self.dims = tuple(dims)
        self.npus_count = math.prod(d.npus_count for d in dims)
        strides = []
        s = 1
        for d in dims:
            strides.append(s)
            s *= d.npus_count
        self._strides = tuple(strides)

    @property
    def npus_count_per_dim(self) -> list[int]:
        return [d.npus_count for d in self.dims]

    @property
    def dims_count(self) -> int:
        return len(self.dims)

    def translate_address(self, rank: int) -> list[int]:
        return [(rank // st) % d.npus_count for st, d in zip(self._strides, self.dims)]

    def dim_to_transfer(self, src: int, dst: int) -> int:
        """The lowest dimension in which src and dst differ."""
        for i, (st, d) in enumerate(zip(self._strides, self.dims)):
            if (src // st) % d.npus_count != (dst // st) % d.npus_count:
                return i
        raise ValueError(f"ranks {src} and {dst} have the same address")

    def local_pair(self, src: int, dst: int) -> tuple[int, int, int]:
        """(dimension, local src coordinate, local dst coordinate) that carries src → dst."""
        dim = self.dim_to_transfer(src, dst)
        st, n = self._strides[dim], self.dims[dim].npus_count
        return dim, (src // st) % n, (dst // st) % n

    def hops(self, src: int, dst: int) -> int:
        dim, a, b = self.local_pair(src, dst)
        return self.dims[dim].hops(a, b)

    @cached_property
    def _bytes_per_ns(self) -> tuple[float, ...]:
        return tuple(d.bytes_per_ns for d in self.dims)

    def unaware_delay_ns(self, src: int, dst: int, size_bytes: int) -> int:
        """Congestion-unaware message time (ASTRA-sim: BasicTopology::compute_communication_delay):
        hops × latency + size / bw, truncated once, in the lowest differing dimension."""
        dim, a, b = self.local_pair(src, dst)
        d = self.dims[dim]
        return message_delay_ns(d.hops(a, b), d.latency_ns, size_bytes, self._bytes_per_ns[dim])

    def describe(self) -> str:
        return " x ".join(
            f"{d.kind.value}({d.npus_count}, {d.bandwidth_gb_s:g} GB/s, {d.latency_ns:g} ns)"
            for d in self.dims
        )
