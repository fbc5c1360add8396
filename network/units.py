"""Unit conversions with ASTRA-sim's exact arithmetic (docs/astra-sim-semantics.md §6.1)."""
from __future__ import annotations

_GB = 1 << 30  # the analytical network counts a GB as 2^30 bytes
_NS_PER_S = 1_000_000_000


def bw_gb_s_to_bytes_per_ns(bandwidth_gb_s: float) -> float:
    """GB/s → bytes/ns as ASTRA-sim's bw_GBps_to_Bpns: bw × 2^30 / 10^9, in double precision."""
    return bandwidth_gb_s * _GB / _NS_PER_S


def message_delay_ns(hops: int, latency_ns: float, size_bytes: int, bytes_per_ns: float) -> int:
    """Cut-through delay of one message: hops × latency + size / bw, truncated once."""
    return int(hops * latency_ns + size_bytes / bytes_per_ns)


def link_serialization_ns(size_bytes: int, bytes_per_ns: float) -> int:
    """Time a link is busy with one chunk, truncated (congestion-aware Link)."""
    return int(size_bytes / bytes_per_ns)


def link_arrival_ns(size_bytes: int, latency_ns: float, bytes_per_ns: float) -> int:
    """Time until a chunk reaches the next device: latency + serialization, truncated once."""
    return int(latency_ns + size_bytes / bytes_per_ns)
