"""The ns-3 backend's parts that need no ns-3: the ``ns3:`` YAML section, the wiring plan, the
bandwidth conversion, and the install hint when the package is missing."""
from __future__ import annotations

import importlib.util
import math
import sys

import pytest

from network.config import NetworkConfig
from network.errors import NetworkConfigError
from network.ns3.settings import Ns3Settings, bdp_bytes
from network.ns3.wiring import dimension_groups, link_rate_bps, wire
from network.registry import backend_class


def topo(kinds, npus):
    n = len(kinds)
    return NetworkConfig.from_dict(
        {"topology": kinds, "npus_count": npus, "bandwidth": [12.5] * n, "latency": [1000] * n}
    ).topology


def test_defaults_model_a_lossless_jumbo_frame_fabric():
    s = Ns3Settings.from_mapping(None)
    assert (s.transport, s.mtu, s.payload_size, s.queue_size) == ("tcp", 9000, 9000 - 52, 10_000)
    assert Ns3Settings.from_mapping({"transport": "UDP"}).payload_size == 9000 - 28
    assert Ns3Settings.from_mapping({"mtu": 1500, "segment_size": 1000}).payload_size == 1000


def test_auto_sizes_follow_the_bandwidth_delay_product():
    # Ring(8, 12.5 GB/s, 1 µs): 4 hops each way, each 1000 ns + 9000 B / 13.42 B/ns = 1670.6 ns.
    t = topo(["Ring"], [8])
    assert bdp_bytes(t, 9000) == math.ceil(12.5 * 2**30 / 1e9 * 8 * (1000 + 9000 / (12.5 * 2**30 / 1e9)))
    s = Ns3Settings.from_mapping(None).resolved(t)
    assert (s.snd_buf_size, s.rcv_buf_size, s.initial_cwnd, s.segment_size) == (512 << 10, 512 << 10, 21, 8948)
    fixed = Ns3Settings.from_mapping({"snd_buf_size": 65536, "initial_cwnd": 4}).resolved(t)
    assert (fixed.snd_buf_size, fixed.rcv_buf_size, fixed.initial_cwnd) == (65536, 512 << 10, 4)
    small = Ns3Settings.from_mapping(None).resolved(topo(["FullyConnected"], [4]))
    assert (small.snd_buf_size, small.initial_cwnd) == (256 << 10, 10)  # the floors


def test_yaml_section_reaches_the_settings(tmp_path):
    p = tmp_path / "n.yml"
    p.write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [10]\nlatency: [500]\n"
                 "ns3:\n  transport: udp\n  mtu: 1500\n  queue_size: 64\n")
    cfg = NetworkConfig.from_file(p)
    s = Ns3Settings.from_mapping(cfg.extra["ns3"], cfg.path)
    assert (s.transport, s.mtu, s.queue_size) == ("udp", 1500, 64)


@pytest.mark.parametrize(
    "section, key",
    [
        ({"mtuu": 1500}, "ns3.mtuu"),
        ({"transport": "rdma"}, "ns3.transport"),
        ({"mtu": 100}, "ns3.mtu"),
        ({"mtu": True}, "ns3.mtu"),
        ({"queue_size": 0}, "ns3.queue_size"),
        ({"snd_buf_size": "4MiB"}, "ns3.snd_buf_size"),
        ({"mtu": 1500, "segment_size": 1480}, "ns3.segment_size"),
        ({"min_rto_us": 5}, "ns3.delayed_ack_timeout_us"),
        ({"tcp_variant": 3}, "ns3.tcp_variant"),
        ({"preconnect": "yes"}, "ns3.preconnect"),
        ({"initial_cwnd": -1}, "ns3.initial_cwnd"),
    ],
)
def test_bad_settings_name_the_key_and_the_file(section, key):
    with pytest.raises(NetworkConfigError) as err:
        Ns3Settings.from_mapping(section, "net.yml")
    assert f"'{key}'" in str(err.value) and "net.yml" in str(err.value)


def test_not_a_mapping():
    with pytest.raises(NetworkConfigError, match="key 'ns3'"):
        Ns3Settings.from_mapping(["tcp"], "net.yml")


def test_bandwidth_uses_the_analytical_gigabyte():
    assert link_rate_bps(12.5) == 12.5 * 2**30 * 8 == 107_374_182_400
    assert link_rate_bps(1) == 8 * 2**30


@pytest.mark.parametrize(
    "kinds, npus, nodes, links",
    [
        (["Ring"], [8], 8, 8),
        (["Ring"], [2], 2, 1),  # a ring of two is one (full-duplex) link
        (["FullyConnected"], [4], 4, 6),
        (["Switch"], [4], 5, 4),  # one router node
        (["Ring", "Switch"], [4, 2], 8 + 4, 4 * 2 + 2 * 4),
        (["FullyConnected", "Ring", "Switch"], [2, 3, 2], 12 + 6, 6 * 1 + 4 * 3 + 6 * 2),
    ],
)
def test_wiring_counts(kinds, npus, nodes, links):
    w = wire(topo(kinds, npus))
    assert (w.nodes_count, len(w.links)) == (nodes, links)
    assert len({(l.a, l.b) for l in w.links}) == links  # no duplicate link


def test_wiring_joins_only_npus_that_differ_in_the_links_dimension():
    t = topo(["Ring", "Switch"], [4, 2])
    assert dimension_groups(t, 0) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert dimension_groups(t, 1) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    w = wire(t)
    ring = {(l.a, l.b) for l in w.links if l.dim == 0}
    assert ring == {(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)}
    switch = sorted((l.a, l.b) for l in w.links if l.dim == 1)
    assert switch == [(0, 8), (1, 9), (2, 10), (3, 11), (4, 8), (5, 9), (6, 10), (7, 11)]


def test_missing_package_gives_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ns" else real(name, *a))
    monkeypatch.delitem(sys.modules, "network.ns3.backend", raising=False)
    with pytest.raises(NetworkConfigError) as err:
        backend_class("ns3")
    assert "pip install" in str(err.value) and "ns3" in str(err.value)
