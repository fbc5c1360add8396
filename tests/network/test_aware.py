"""The congestion-aware analytical backend: links, FIFO queues, store-and-forward, routing.

Expected times are written in closed form from docs/astra-sim-semantics.md §6.3:
one hop costs int(latency + size / bw) to arrive and keeps its link busy int(size / bw),
with bw = GB/s × 2^30 / 1e9 bytes/ns.
"""
from __future__ import annotations

import pytest

from network.analytical.aware import CongestionAwareBackend
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from network.errors import NetworkConfigError
from network.registry import backend_class

MB = 1 << 20


def bpns(gb_s: float) -> float:
    return gb_s * (1 << 30) / 1e9


def hop(size: int, gb_s: float, lat: float) -> int:
    """Arrival delay of one uncontended hop."""
    return int(lat + size / bpns(gb_s))


def ser(size: int, gb_s: float) -> int:
    """Time a link stays busy with one chunk."""
    return int(size / bpns(gb_s))


def net(topology, npus, bw, lat, **extra) -> NetworkConfig:
    return NetworkConfig.from_dict(
        {"topology": topology, "npus_count": npus, "bandwidth": bw, "latency": lat, **extra}
    )


def run(backend, messages) -> dict[object, int]:
    """Send (src, dst, size, tag) messages at time 0, each with a posted receive; return the
    arrival time per message index (the receive callback's time)."""
    done: dict[object, int] = {}
    for i, (src, dst, size, tag) in enumerate(messages):
        backend.recv(dst, src, size, tag, lambda i=i: done.__setitem__(i, backend.now()))
        backend.send(src, dst, size, tag, lambda: None)
    backend.run()
    assert len(done) == len(messages)
    return done


def both(cfg, messages):
    return (run(CongestionAwareBackend(cfg), messages),
            run(CongestionUnawareBackend(cfg), messages))


def test_registered_under_its_name_and_alias():
    assert backend_class("congestion-aware") is CongestionAwareBackend
    assert backend_class("aware") is CongestionAwareBackend
    assert CongestionAwareBackend.name == "congestion-aware"


def test_switch_stores_and_forwards_per_hop():
    cfg = net(["Switch"], [4], [50.0], [500.0])
    aware, unaware = both(cfg, [(0, 2, MB, 7)])
    assert aware[0] == 2 * hop(MB, 50, 500) == 40062
    assert unaware[0] == int(2 * 500 + MB / bpns(50)) == 20531
    assert CongestionAwareBackend(cfg).route(0, 2) == [0, 4, 2]  # switch is device N


def test_truncation_is_per_hop():
    # 1000 B at 50 GB/s = 18.6265 ns per hop: two truncated hops lose more than one.
    cfg = net(["Switch"], [4], [50.0], [0.5])
    aware, _ = both(cfg, [(1, 3, 1000, 0)])
    assert aware[0] == 2 * int(0.5 + 1000 / bpns(50)) == 38


def test_two_flows_on_one_link_take_twice_as_long():
    # Two messages 0 -> 1 at once on a FullyConnected network: one link, so the second waits
    # for the first to serialise. Unaware lets them overlap.
    lat, bw, size = 500.0, 50.0, 64 * MB
    cfg = net(["FullyConnected"], [4], [bw], [lat])
    aware, unaware = both(cfg, [(0, 1, size, 0), (0, 1, size, 1)])
    assert aware[0] == hop(size, bw, lat) == 1250500
    assert aware[1] == ser(size, bw) + hop(size, bw, lat) == 2500500
    assert unaware[0] == unaware[1] == hop(size, bw, lat)
    assert max(aware.values()) / max(unaware.values()) == pytest.approx(2.0, rel=1e-3)


def test_incast_through_a_switch_queues_on_the_down_link():
    # 0 -> 2 and 1 -> 2: both up-links run in parallel, both chunks reach the switch at t1,
    # then share the switch -> 2 link; the first one sent goes first.
    lat, bw, size = 500.0, 50.0, MB
    cfg = net(["Switch"], [4], [bw], [lat])
    aware, unaware = both(cfg, [(0, 2, size, 0), (1, 2, size, 0)])
    t1 = hop(size, bw, lat)
    assert aware[0] == t1 + hop(size, bw, lat) == 40062
    assert aware[1] == t1 + ser(size, bw) + hop(size, bw, lat) == 59593
    assert unaware[0] == unaware[1] == 20531


@pytest.mark.parametrize("kind", ["Ring", "FullyConnected"])
def test_neighbour_traffic_equals_unaware(kind):
    # Every rank sends to both ring neighbours at once: each uses its own directed link.
    n, size = 8, 3 * MB + 17
    msgs = [(r, (r + 1) % n, size, 0) for r in range(n)] + [(r, (r - 1) % n, size, 1) for r in range(n)]
    aware, unaware = both(net([kind], [n], [50.0], [500.0]), msgs)
    assert aware == unaware
    assert set(aware.values()) == {hop(size, 50, 500)}


def test_fully_connected_all_to_all_equals_unaware():
    n, size = 6, 100_000
    msgs = [(s, d, size, 0) for s in range(n) for d in range(n) if s != d]
    aware, unaware = both(net(["FullyConnected"], [n], [25.0], [700.0]), msgs)
    assert aware == unaware


def test_ring_takes_the_shorter_way_and_ties_go_clockwise():
    b = CongestionAwareBackend(net(["Ring"], [8], [50.0], [500.0]))
    assert b.route(0, 3) == [0, 1, 2, 3]
    assert b.route(0, 5) == [0, 7, 6, 5]
    assert b.route(0, 4) == [0, 1, 2, 3, 4]      # tie: clockwise
    assert b.route(6, 2) == [6, 7, 0, 1, 2]      # tie, wrapping
    assert b.route(1, 7) == [1, 0, 7]
    two = CongestionAwareBackend(net(["Ring"], [2], [50.0], [500.0]))
    assert two.route(1, 0) == [1, 0]


def test_multi_hop_ring_message_costs_each_hop():
    lat, bw, size = 500.0, 50.0, MB
    aware, unaware = both(net(["Ring"], [8], [bw], [lat]), [(0, 3, size, 0)])
    assert aware[0] == 3 * hop(size, bw, lat) == 60093
    assert unaware[0] == int(3 * lat + size / bpns(bw)) == 21031


def test_link_queue_is_first_in_first_out():
    # Three messages of different sizes on the same link 2 -> 3: they leave in send order,
    # each after the previous one's serialisation, whatever their sizes.
    lat, bw = 100.0, 10.0
    sizes = [4 * MB, 1000, 2 * MB]
    b = CongestionAwareBackend(net(["Ring"], [4], [bw], [lat]))
    got = run(b, [(2, 3, s, i) for i, s in enumerate(sizes)])
    start = 0
    for i, s in enumerate(sizes):
        assert got[i] == start + hop(s, bw, lat)
        start += ser(s, bw)
    assert sorted(got, key=got.get) == [0, 1, 2]
    assert b.stats()["max_link_queue"] == 2
    assert b.link(2, 3).chunks == 3 and b.link(3, 2) is None


def test_a_chunk_waiting_at_an_intermediate_device_joins_the_queue_behind_earlier_ones():
    # 0 -> 2 goes 0 -> 1 -> 2; 1 -> 2 is sent first, twice, so when the chunk from 0 reaches
    # device 1 the link 1 -> 2 still has the second local message queued.
    lat, bw, size = 0.0, 50.0, MB
    b = CongestionAwareBackend(net(["Ring"], [8], [bw], [lat]))
    got = run(b, [(1, 2, size, 0), (1, 2, size, 1), (0, 2, size, 2)])
    s = ser(size, bw)
    assert (got[0], got[1], got[2]) == (s, 2 * s, 3 * s)


def test_arrival_is_scheduled_before_link_free():
    # Zero latency: a chunk's arrival and its link's free event fall on the same ns. ASTRA-sim
    # inserts the arrival first, so a send made in the arrival callback finds the link busy
    # and starts from link-free, after an event the callback scheduled for the same instant
    # as that second arrival.
    size, bw = MB, 50.0
    s = ser(size, bw)
    b = CongestionAwareBackend(net(["FullyConnected"], [2], [bw], [0.0]))
    order: list[tuple[str, int]] = []

    def first_arrived():
        order.append(("first", b.now()))
        b.send(0, 1, size, 1, lambda: None)
        b.recv(1, 0, size, 1, lambda: order.append(("second", b.now())))
        b.schedule(s, lambda: order.append(("marker", b.now())))

    b.send(0, 1, size, 0, lambda: None)
    b.recv(1, 0, size, 0, first_arrived)
    b.run()
    assert order == [("first", s), ("marker", 2 * s), ("second", 2 * s)]
    assert b.link(0, 1).peak_pending == 1


def test_sender_and_late_receiver_callbacks():
    b = CongestionAwareBackend(net(["Switch"], [4], [50.0], [500.0]))
    seen = []
    b.send(3, 0, MB, 5, lambda: seen.append(("send", b.now())))
    b.schedule(100_000, lambda: b.recv(0, 3, MB, 5, lambda: seen.append(("recv", b.now()))))
    b.run()
    assert seen == [("send", 40062), ("recv", 100_000)]
    assert b.unmatched() == []


def test_unreceived_message_is_reported():
    b = CongestionAwareBackend(net(["Ring"], [4], [50.0], [500.0]))
    b.send(0, 1, 10, 3, lambda: None)
    b.run()
    assert b.unmatched() == ["message rank 0 -> rank 1 (tag 3, 10 bytes, #1) arrived but was never received"]


# -- multi-dimensional: dimension-order routing ------------------------------------------

def test_multi_dim_routes_dimension_zero_first():
    # Ring(4) x Switch(2) x FullyConnected(2): rank = x0 + 4 x1 + 8 x2; switches from 16,
    # one per line of dimension 1 (8 lines: x0 in 0..3, x2 in 0..1).
    b = CongestionAwareBackend(net(["Ring", "Switch", "FullyConnected"], [4, 2, 2],
                                   [50.0, 25.0, 10.0], [500.0, 700.0, 900.0]))
    assert b.devices_count == 16 + 8
    assert b.route(0, 1) == [0, 1]
    assert b.route(0, 4) == [0, 16, 4]                  # dim 1 only, line 0
    assert b.route(3, 7) == [3, 19, 7]                  # line 3
    assert b.route(9, 13) == [9, 21, 13]                # x0=1, x2=1: line 1 + 4
    assert b.route(0, 2 + 4 + 8) == [0, 1, 2, 18, 6, 14]  # dim 0 (tie cw), then 1, then 2
    assert b.route(14, 0) == [14, 15, 12, 20, 8, 0]    # x0 2 -> 0 is a tie: clockwise via 3


def test_multi_dim_message_time_is_the_sum_of_its_hops():
    dims = (["Ring", "Switch"], [4, 4], [50.0, 25.0], [500.0, 700.0])
    size = MB
    aware, unaware = both(net(*dims), [(1, 2 + 4 * 3, size, 0)])
    # dim 0: 1 -> 2 (one ring hop); dim 1: via the switch of line x0=2 (two hops).
    assert aware[0] == hop(size, 50, 500) + 2 * hop(size, 25, 700)
    assert unaware[0] == hop(size, 50, 500)  # unaware charges the lowest differing dim only


def test_multi_dim_each_dimension_has_its_own_links():
    # Two dimension-1 messages from different dimension-0 positions use different switches
    # and do not contend; 0 -> 4 and 0 -> 8 share the up-link 0 -> switch, so one waits.
    dims = (["Ring", "Switch"], [4, 4], [50.0, 25.0], [500.0, 700.0])
    size = MB
    h, s = hop(size, 25, 700), ser(size, 25)
    got = run(CongestionAwareBackend(net(*dims)), [(0, 4, size, 0), (1, 5, size, 0)])
    assert got == {0: 2 * h, 1: 2 * h}
    got = run(CongestionAwareBackend(net(*dims)), [(0, 4, size, 0), (0, 8, size, 0)])
    assert got == {0: 2 * h, 1: s + 2 * h}


def test_multi_dim_contention_across_dimensions():
    # 0 -> 5 goes 0 -> 1 (dim 0) then 1 -> sw -> 5 (dim 1); 1 -> 5 starts on 1 -> sw at 0.
    # The chunk from 0 reaches device 1 after one ring hop; the up-link is free by then only
    # if the local chunk's serialisation is shorter than that hop.
    dims = (["Ring", "Switch"], [4, 4], [50.0, 10.0], [0.0, 0.0])
    size = MB
    r, s1 = hop(size, 50, 0), ser(size, 10)
    got = run(CongestionAwareBackend(net(*dims)), [(1, 5, size, 0), (0, 5, size, 1)])
    assert r < s1                                   # so the second chunk queues at device 1
    assert got[0] == 2 * s1
    assert got[1] == 3 * s1


def test_unknown_congestion_aware_setting_is_rejected():
    cfg = net(["Ring"], [4], [50.0], [500.0], congestion_aware={"routing": "adaptive"})
    with pytest.raises(NetworkConfigError, match="routing"):
        CongestionAwareBackend(cfg)


@pytest.mark.parametrize("value, what", [(9000, "topology file only"), (0, None), ("big", None)])
def test_packet_bytes_is_for_topology_files_and_a_whole_number(value, what):
    """The built-in topologies are ASTRA-sim's, which store and forward whole chunks."""
    if what is not None:
        with pytest.raises(NetworkConfigError, match=what):
            CongestionAwareBackend(net(["Ring"], [4], [50.0], [500.0], congestion_aware={"packet_bytes": value}))
        return
    gen = {"topology-generator": {"shape": "fat-tree", "leaves": 2, "npus-per-leaf": 2},
           "congestion_aware": {"packet_bytes": value}}
    with pytest.raises(NetworkConfigError, match="whole number of bytes"):
        CongestionAwareBackend(NetworkConfig.from_dict(gen))


def test_deterministic():
    n = 8
    msgs = [(s, d, 1000 * (s + 1), s * n + d) for s in range(n) for d in range(n) if s != d]
    cfg = net(["Ring"], [n], [50.0], [500.0])
    assert run(CongestionAwareBackend(cfg), msgs) == run(CongestionAwareBackend(cfg), msgs)


def test_the_c_transfer_sends_as_the_python_one_and_falls_back_where_it_must():
    """network._event_core.PlainTransfer, _transfer's common case in C: past time 0, a message on a
    cached route times out as the Python method times it (a second message queued behind the
    first); a link claimed by a batched ring phase still raises, through the method."""
    from network.errors import FastPathConflict
    from network.event_queue import native_module

    native = native_module()
    if native is None:
        pytest.skip("the C module is not built")
    size, bw, lat = MB, 50.0, 500.0

    def timed(use_c: bool) -> list[int]:
        b = CongestionAwareBackend(net(["Switch"], [4], [bw], [lat]))
        assert isinstance(b._transfer, native.PlainTransfer)
        if not use_c:
            del b._transfer  # the class's Python method
        done: list[int] = []
        b.queue.schedule(7, lambda: [b.exchange(0, 1, 3, size, 5, None, done.append, i) for i in range(2)])
        b.queue.schedule(9, lambda: [b.exchange(1, 2, 0, size, 5, None, lambda _: done.append(b.now()), None)
                                     for _ in range(2)])
        b.run()
        return done

    ours = timed(True)
    assert ours == timed(False)
    # rank 0's two messages to rank 1: the second waits for the first on 0 -> switch, reaches the
    # switch as the first frees switch -> 1, and arrives one hop later
    assert ours == [7 + 2 * hop(size, bw, lat), 7 + ser(size, bw) + 2 * hop(size, bw, lat)]

    b = CongestionAwareBackend(net(["Switch"], [4], [bw], [lat]))
    b.queue.schedule(3, b.exchange, 0, 1, 1, size, 5, None, print, None)  # time 3: builds and caches the route
    b.run()
    b._route(0, 1)[0].claim_until = b.now() + 1000
    with pytest.raises(FastPathConflict, match="batched ring phase"):
        b.queue.schedule(5, b.exchange, 0, 1, 1, size, 6, None, print, None)
        b.run()


def test_the_c_transfer_remembers_found_routes_only() -> None:
    """PlainTransfer keeps the routes it found by (src, dst) as C integers: once found in the
    backend's dict (keyed src * npus + dst), a route is taken from C again (a route changed in the
    dict afterwards, which aware.py never does, shows it); a rank outside 0 .. npus - 1 goes to
    the method every time, whatever the dict holds under the key it would make."""
    from network.event_queue import native_module

    native = native_module()
    if native is None:
        pytest.skip("the C module is not built")
    b = CongestionAwareBackend(net(["Switch"], [4], [50.0], [500.0]))
    done: list = []
    for i, t in enumerate((3, 10**6, 2 * 10**6)):  # built by the Python method, found in the dict, remembered
        b.queue.schedule(t, b.send, 0, 1, MB, i, done.append, i)
    b.run()
    assert set(b._routes) == {0 * 4 + 1}
    b._routes[0 * 4 + 1] = ("not a link",)  # the Python method would fail on it
    b.queue.schedule(5, b.send, 0, 1, MB, 9, done.append, 9)
    b.run()
    assert done == [0, 1, 2, 9]

    calls: list = []
    t = native.PlainTransfer({k: ("not a link",) for k in range(-8, 32)}, lambda *a: calls.append(a[:2]), 4)
    outside = [(1 << 70, 1), (1 << 70, 1), (-1, 1), (4, 0), (0, 4), (1, -3), (True, 1)]
    for src, dst in outside:
        t(src, dst, 8, None)
    assert calls == outside
    with pytest.raises(ValueError):
        native.PlainTransfer({}, print, 0)


def test_a_rank_outside_the_topology_names_no_other_pair() -> None:
    """_routes is keyed src * npus + dst: rank 0 -> 4 of 4 NPUs would be the key of 1 -> 0."""
    b = CongestionAwareBackend(net(["FullyConnected"], [4], [50.0], [500.0]))
    b.queue.schedule(3, b.send, 1, 0, MB, 1, print, None)
    b.run()
    for src, dst in ((0, 4), (-1, 3), (4, 0)):
        b.queue.schedule(5, b.send, src, dst, MB, 2, print, None)
        with pytest.raises(ValueError, match="outside"):
            b.run()


def test_a_subclass_that_overrides_transfer_keeps_its_own():
    class Counting(CongestionAwareBackend):
        def _transfer(self, src, dst, size_bytes, full):
            self.count = getattr(self, "count", 0) + 1
            super()._transfer(src, dst, size_bytes, full)

    b = Counting(net(["Switch"], [4], [50.0], [500.0]))
    run(b, [(0, 1, MB, 1), (2, 3, MB, 1)])
    assert b.count == 2
