"""The ``ns3:`` section of a network YAML, parsed once into a frozen object (no ns-3 import).

Every key is optional; the defaults model a lossless µs-scale fabric rather than the internet:

``transport``            ``tcp`` (default) or ``udp``: how a message travels (see backend.py).
``mtu``                  bytes per IP packet on every link (default 9000, jumbo frames; ns-3: Mtu).
``segment_size``         payload bytes per packet (default: what fills one MTU: mtu − 52 for TCP
                         with timestamps, mtu − 28 for UDP; ns-3: TcpSocket::SegmentSize).
``snd_buf_size``         TCP send buffer per connection, bytes (default 0: auto, see below).
``rcv_buf_size``         TCP receive buffer (window) per connection, bytes (default 0: auto).
``preconnect``           TCP: open the connections the run uses (a congestion-unaware run of the
                         workload names them; else every two NPUs of each dimension group)
                         before time 0, as NCCL does when it builds a communicator (default
                         true). False: a pair connects on its first message, which then pays
                         the handshake (one round trip). Skipped, with a warning, above
                         20,000 connections.
``queue_size``           packets each link direction may queue (default 10000, DropTail; no
                         queue disc, so a link is one FIFO as in the congestion-aware model).
``tcp_variant``          ns-3 congestion control class without ``ns3::`` (default ``TcpNewReno``).
``initial_cwnd``         TCP initial window, segments (default 0: auto).
``min_rto_us``           TCP minimum retransmission timeout, µs (default 1000; ns-3's is 1 s).
``delayed_ack_timeout_us`` TCP delayed-ACK timer, µs (default 10; ns-3's is 200 ms). Must stay
                         below ``min_rto_us``, or every idle connection times out spuriously.

Auto sizes (``resolved``) come from a generous bandwidth-delay product of the network
(``bdp_bytes``): the buffers are twice it, rounded up to a power of two, within 256 KiB..64 MiB,
so a flow is never window-limited; the initial window covers it (at least 10 segments), so a
new connection starts at line rate as RDMA does, instead of spending round trips in slow
start. Far larger buffers only slow ns-3 down (its TCP buffers scan lists of segments).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from network.errors import NetworkConfigError
from network.topology import Topology, TopologyKind

_TCP_HEADERS = 20 + 20 + 12  # IPv4 + TCP + timestamp option (on by default in ns-3)
_UDP_HEADERS = 20 + 8  # IPv4 + UDP
_TRANSPORTS = ("tcp", "udp")
_AUTO_KEYS = ("segment_size", "snd_buf_size", "rcv_buf_size", "initial_cwnd")  # 0 = derive
_MIN_BUF, _MAX_BUF = 256 << 10, 64 << 20
_MAX_UINT32 = 2**32 - 1
_MAX_US = (2**63 - 1) // 1000


@dataclass(frozen=True, slots=True)
class Ns3Settings:
    """ns-3 knobs of one run. Sizes in bytes, queue in packets, timers in microseconds."""

    transport: str = "tcp"
    mtu: int = 9000
    segment_size: int = 0  # 0: derived from mtu and transport (see payload_size)
    snd_buf_size: int = 0  # 0: auto (resolved)
    rcv_buf_size: int = 0  # 0: auto
    queue_size: int = 10_000
    preconnect: bool = True
    tcp_variant: str = "TcpNewReno"
    initial_cwnd: int = 0  # 0: auto
    min_rto_us: int = 1000
    delayed_ack_timeout_us: int = 10

    @property
    def max_payload(self) -> int:
        """The largest payload that fits one MTU without IP fragmentation."""
        return self.mtu - (_TCP_HEADERS if self.transport == "tcp" else _UDP_HEADERS)

    @property
    def payload_size(self) -> int:
        """Payload bytes per packet: TCP's MSS, or the size of each UDP datagram."""
        return self.segment_size or self.max_payload

    @classmethod
    def from_mapping(cls, data: Any, path: str | None = None) -> "Ns3Settings":
        """Validate the YAML ``ns3:`` mapping; unknown keys and bad values name the key."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise NetworkConfigError(path, "key 'ns3'", "expected a mapping of ns-3 settings")
        known = cls.__slots__
        values: dict[str, Any] = {}
        for key, value in data.items():
            where = f"key 'ns3.{key}'"
            if key not in known:
                raise NetworkConfigError(path, where, f"unknown ns-3 setting; expected one of {', '.join(known)}")
            if key == "preconnect":
                if not isinstance(value, bool):
                    raise NetworkConfigError(path, where, f"expected true or false, got {value!r}")
                values[key] = value
            elif key in ("transport", "tcp_variant"):
                if not isinstance(value, str) or not value:
                    raise NetworkConfigError(path, where, f"expected a name, got {value!r}")
                if key == "transport" and value.lower() not in _TRANSPORTS:
                    raise NetworkConfigError(path, where, f"expected tcp or udp, got {value!r}")
                values[key] = value.lower() if key == "transport" else value.removeprefix("ns3::")
            else:
                low = 0 if key in _AUTO_KEYS else 1
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    raise NetworkConfigError(path, where, f"expected an integer >= {low}, got {value!r}")
                # ns-3 keeps sizes in uint32 and times in int64 ns; beyond, Config::SetDefault aborts
                high = _MAX_US if key.endswith("_us") else _MAX_UINT32
                if value > high:
                    raise NetworkConfigError(path, where, f"expected an integer from {low} to {high}, got {value!r}")
                values[key] = value
        settings = cls(**values)
        settings._check(path)
        return settings

    def _check(self, path: str | None) -> None:
        if not 576 <= self.mtu <= 65535:
            raise NetworkConfigError(path, "key 'ns3.mtu'", f"expected 576..65535 bytes, got {self.mtu}")
        if self.segment_size > self.max_payload:
            raise NetworkConfigError(
                path, "key 'ns3.segment_size'",
                f"{self.segment_size} bytes do not fit an MTU of {self.mtu} with {self.transport.upper()} "
                f"headers; at most {self.max_payload}",
            )
        if self.delayed_ack_timeout_us >= self.min_rto_us:
            raise NetworkConfigError(
                path, "key 'ns3.delayed_ack_timeout_us'",
                f"must be below min_rto_us ({self.min_rto_us}), or idle connections time out spuriously",
            )

    def resolved(self, topology: Topology) -> "Ns3Settings":
        """These settings with every auto (0) value derived from the network (see module doc)."""
        bdp = bdp_bytes(topology, self.mtu)
        buf = min(max(1 << math.ceil(math.log2(max(2 * bdp, 1))), _MIN_BUF), _MAX_BUF)
        return dataclasses.replace(
            self,
            segment_size=self.payload_size,
            snd_buf_size=self.snd_buf_size or buf,
            rcv_buf_size=self.rcv_buf_size or buf,
            initial_cwnd=self.initial_cwnd or min(max(10, math.ceil(bdp / self.payload_size)), _MAX_UINT32),
        )


def _max_hops(kind: TopologyKind, npus: int) -> int:
    return {TopologyKind.RING: npus // 2, TopologyKind.FULLY_CONNECTED: 1, TopologyKind.SWITCH: 2}[kind]


def bdp_bytes(topology: Topology, mtu: int) -> int:
    """An upper bound of the network's bandwidth-delay product, bytes: the fastest link's rate
    times the longest round trip (there and back across every dimension's largest hop count,
    each hop one latency plus one packet's serialisation, as packets are stored and forwarded)."""
    if getattr(topology, "graph", None) is not None:  # a physical graph (graph_wiring.py)
        from network.ns3.graph_wiring import GraphWiring

        if not topology.link_bytes_per_ns:
            return 0       # one NPU, no link: nothing is ever in flight
        return math.ceil(max(topology.link_bytes_per_ns) * GraphWiring(topology).max_rtt_ns(mtu))
    rtt_ns = sum(
        2 * _max_hops(d.kind, d.npus_count) * (d.latency_ns + mtu / d.bytes_per_ns) for d in topology.dims
    )
    return math.ceil(max(d.bytes_per_ns for d in topology.dims) * rtt_ns)
