"""The congestion-unaware backend's message in C (network/_pairing.c: FixedDelayTransfer) against
its Python method: random exchanges and point-to-point messages, interleaved with other events
at the same ticks, arrive at the same times in the same order with the same counters; where the
C path cannot answer (a delay past 64 bits, a clock that would pass 2^63 ns) the run ends as the
method ends it; and the C path stands only where the method is the plain one."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from network.analytical.pair_recorder import PairRecorder
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from network.errors import SimulationLimitError
from network.event_queue import native_module

_native = native_module()
pytestmark = pytest.mark.skipif(_native is None, reason="the C module is not built")


def _config(kind: str = "Switch", npus: int = 8) -> NetworkConfig:
    if kind == "Ring x Switch":  # two dimensions, 8 NPUs
        return NetworkConfig.from_dict({"topology": ["Ring", "Switch"], "npus_count": [4, 2],
                                        "bandwidth": [37.5, 12.3], "latency": [700.0, 1300]})
    return NetworkConfig.from_dict({"topology": [kind], "npus_count": [npus], "bandwidth": [50.0],
                                    "latency": [500.0]})


def _backend(use_c: bool, kind: str = "Switch") -> CongestionUnawareBackend:
    b = CongestionUnawareBackend(_config(kind))
    assert isinstance(b._transfer, _native.FixedDelayTransfer)
    if not use_c:
        del b._transfer  # the class's Python method
    return b


def _program(b: CongestionUnawareBackend, seed: int) -> list:
    rng = random.Random(seed)
    log: list = []

    def cb(*args: object) -> None:
        log.append((b.now(), args))

    for _ in range(400):
        me = rng.randrange(8)
        peer, other = (me + rng.randrange(1, 8)) % 8, (me + rng.randrange(1, 8)) % 8  # not itself
        size, tag, at = rng.choice([0, 1, 4096, 1 << 20]), rng.randrange(3), rng.randrange(0, 20_000, 500)
        kind = rng.choice(["exchange", "exchange", "p2p", "other"])
        if kind == "exchange":
            b.queue.schedule(at, b.exchange, me, peer, other, size, tag, None, cb, ("x", me, tag))
        elif kind == "p2p":
            b.queue.schedule(at, b.send, me, peer, size, 10 + tag, cb, "s", me)
            b.queue.schedule(rng.randrange(0, 20_000, 500), b.recv, peer, me, size, 10 + tag, cb, "r", peer)
        else:  # an event of someone else's at a tick a message may arrive at
            b.queue.schedule(at, cb, "other", at)
    b.run()
    return [log, b.now(), b.queue.events_processed, b.messages, b.bytes_sent, b.bytes_received,
            list(b.bytes_per_dim), b.unmatched()]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["Switch", "Ring", "FullyConnected", "Ring x Switch"])
def test_messages_arrive_as_the_python_method_delivers_them(seed: int, kind: str) -> None:
    ours = _program(_backend(True, kind), seed)
    assert ours[0] and ours[3] > 100  # the program did send and deliver
    assert ours == _program(_backend(False, kind), seed)


def _cached_only(b: CongestionUnawareBackend) -> CongestionUnawareBackend:
    """The C path as it stands where it is given no topology table (a subclass's topology): it
    answers the delays the method has cached."""
    b._transfer = _native.FixedDelayTransfer(b, b._delay_cache, CongestionUnawareBackend._transfer.__get__(b), None)
    return b


def _one_message(b: CongestionUnawareBackend, at: int, tag: int, got: list[int]) -> None:
    b.queue.schedule(at, b.send, 0, 1, 4096, tag, lambda: got.append(b.now()))
    b.queue.schedule(at, b.recv, 1, 0, 4096, tag, lambda: None)
    b.run()


def test_on_a_plain_topology_the_c_path_computes_every_delay() -> None:
    """Each message's delay is the topology's, computed in C: the method's cache is neither
    filled nor read (a delay put there shows it is not read)."""
    b = _backend(True)
    got: list[int] = []
    _one_message(b, 1, 0, got)
    assert got[0] - 1 == b.topology.unaware_delay_ns(0, 1, 4096)
    assert b._delay_cache == {}
    b._delay_cache[(0, 1, 4096)] = 7
    _one_message(b, 0, 1, got)
    assert got[1] == got[0] + got[0] - 1


def test_given_no_table_the_c_path_answers_from_the_cache_the_method_fills() -> None:
    """The first message of a (src, dst, size) goes to the method, which caches its delay; the
    next ones read the cache in C: a delay changed there afterwards (which the backend never
    does) shows that the cache answered."""
    b = _cached_only(_backend(True))
    got: list[int] = []
    _one_message(b, 1, 0, got)
    first = got[0] - 1
    assert b._delay_cache == {(0, 1, 4096): first}
    b._delay_cache[(0, 1, 4096)] = 7
    _one_message(b, 0, 1, got)
    assert got[1] == got[0] + 7


@pytest.mark.parametrize("use_c", [True, False])
def test_a_delay_past_the_clock_ends_the_run_as_the_method_does(use_c: bool) -> None:
    """A cached delay beyond 64 bits goes to the method; one that fits but passes 2^63 ns with
    the clock is the queue's error: both end the run with the same SimulationLimitError."""
    messages = []
    for delay in (1 << 64, (1 << 63) - 2):
        b = _backend(use_c)
        if use_c:
            _cached_only(b)
        b._delay_cache[(0, 1, 8)] = delay
        b.queue.schedule(5, b.exchange, 0, 1, 1, 8, 0, None, print, None)
        with pytest.raises(SimulationLimitError) as e:
            b.run()
        messages.append(str(e.value))
    b = _backend(not use_c)
    if not use_c:
        _cached_only(b)
    b._delay_cache[(0, 1, 8)] = 1 << 64
    b.queue.schedule(5, b.exchange, 0, 1, 1, 8, 0, None, print, None)
    with pytest.raises(SimulationLimitError, match=str(messages[0])[:40].replace("(", r"\(")):
        b.run()


@pytest.mark.parametrize("latency", [4.5e18, 9.2e18])
def test_a_topology_delay_past_the_clock_ends_the_run_as_the_method_does(latency: float) -> None:
    """On a plain topology, a delay the C path computes (4.5e18 ns a hop, two hops) or declines
    (past 2^63 ns itself) that passes 2^63 ns with the clock ends the run with the method's error."""
    def run(use_c: bool) -> str:
        b = CongestionUnawareBackend(NetworkConfig.from_dict({"topology": ["Switch"], "npus_count": [8],
                                                              "bandwidth": [0.001], "latency": [latency]}))
        assert isinstance(b._transfer, _native.FixedDelayTransfer)
        if not use_c:
            del b._transfer
        b.queue.schedule(10**18, b.exchange, 0, 1, 1, 8, 0, None, print, None)
        with pytest.raises(SimulationLimitError) as e:
            b.run()
        return str(e.value)

    assert run(True) == run(False)


def test_the_c_path_stands_only_for_the_plain_method() -> None:
    """A subclass with its own _transfer (the pair recorder) keeps it."""
    assert isinstance(CongestionUnawareBackend(_config())._transfer, _native.FixedDelayTransfer)
    recorder = PairRecorder(_config())
    assert not isinstance(recorder._transfer, _native.FixedDelayTransfer)
    recorder.queue.schedule(1, recorder.exchange, 0, 1, 1, 8, 0, None, print, None)
    recorder.run()
    assert recorder.pairs == {(0, 1)}


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_delay_computed_in_c_is_the_topologys(data: st.DataObject) -> None:
    """FixedDelayTransfer computes every delay itself: on random topologies of one to
    three dimensions (every kind, bandwidths and latencies that do not divide evenly) it gives
    Topology.unaware_delay_ns, or declines (None) and leaves it to the method."""
    n = data.draw(st.integers(1, 3))
    kinds = data.draw(st.lists(st.sampled_from(["Ring", "Switch", "FullyConnected"]), min_size=n, max_size=n))
    npus = data.draw(st.lists(st.integers(2, 9), min_size=n, max_size=n))
    bw = data.draw(st.lists(st.sampled_from([50.0, 12.5, 3.3, 0.7, 123.456, 1e-3, 400]), min_size=n, max_size=n))
    lat = data.draw(st.lists(st.sampled_from([500.0, 0.0, 1.1, 333.3, 700, 0.1]), min_size=n, max_size=n))
    b = CongestionUnawareBackend(NetworkConfig.from_dict({"topology": kinds, "npus_count": npus, "bandwidth": bw,
                                                          "latency": lat}))
    assert isinstance(b._transfer, _native.FixedDelayTransfer)
    total = b.topology.npus_count
    for _ in range(30):
        src, dst = data.draw(st.integers(0, total - 1)), data.draw(st.integers(0, total - 1))
        size = data.draw(st.sampled_from([0, 1, 7, 4096, 1 << 20, 3 * (1 << 30) + 5, (1 << 53) + 1, 1 << 62]))
        got = b._transfer.delay(src, dst, size)
        if src == dst:
            assert got is None  # the method names the error
            continue
        if size > 1 << 53:
            assert got is None  # past a double's integers: the method's
        else:
            assert got == b.topology.unaware_delay_ns(src, dst, size), (src, dst, size)


@pytest.mark.parametrize("latency", [0.7, 0.1, 0.3, 1.1, 333.3, 2.675])
def test_a_delay_computed_in_c_rounds_as_python_does(latency: float) -> None:
    """Where hops × latency lands on or next to an integer (0.7 × 10 = 7.0 in doubles), the
    truncation shows any other rounding of the product or the sum: every pair of a 24-ring."""
    b = CongestionUnawareBackend(NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [24],
                                                          "bandwidth": [3.3], "latency": [latency]}))
    for dst in range(1, 24):
        for size in (0, 1, 3, 10):
            assert b._transfer.delay(0, dst, size) == b.topology.unaware_delay_ns(0, dst, size), (dst, size)
