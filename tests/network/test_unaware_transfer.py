"""The congestion-unaware backend's message in C (network/_pairing.c: FixedDelayTransfer) against
its Python method: random exchanges and point-to-point messages, interleaved with other events
at the same ticks, arrive at the same times in the same order with the same counters; where the
C path cannot answer (a delay past 64 bits, a clock that would pass 2^63 ns) the run ends as the
method ends it; and the C path stands only where the method is the plain one."""
from __future__ import annotations

import random

import pytest

from network.analytical.pair_recorder import PairRecorder
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from network.errors import SimulationLimitError
from network.event_queue import native_module

_native = native_module()
pytestmark = pytest.mark.skipif(_native is None, reason="the C module is not built")


def _config(kind: str = "Switch", npus: int = 8) -> NetworkConfig:
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
@pytest.mark.parametrize("kind", ["Switch", "Ring", "FullyConnected"])
def test_messages_arrive_as_the_python_method_delivers_them(seed: int, kind: str) -> None:
    ours = _program(_backend(True, kind), seed)
    assert ours[0] and ours[3] > 100  # the program did send and deliver
    assert ours == _program(_backend(False, kind), seed)


def test_the_c_path_answers_from_the_cache_the_method_fills() -> None:
    """The first message of a (src, dst, size) calls the method, which caches the delay; the
    next ones are C's: a delay changed in the cache afterwards (which the backend never does)
    shows which one answered."""
    b = _backend(True)
    got: list[int] = []
    b.queue.schedule(1, b.send, 0, 1, 4096, 0, lambda: got.append(b.now()))
    b.queue.schedule(1, b.recv, 1, 0, 4096, 0, lambda: None)
    b.run()
    first = got[0] - 1
    assert b._delay_cache == {(0, 1, 4096): first}
    b._delay_cache[(0, 1, 4096)] = 7
    b.queue.schedule(0, b.send, 0, 1, 4096, 1, lambda: got.append(b.now()))
    b.queue.schedule(0, b.recv, 1, 0, 4096, 1, lambda: None)
    b.run()
    assert got[1] == got[0] + 7


@pytest.mark.parametrize("use_c", [True, False])
def test_a_delay_past_the_clock_ends_the_run_as_the_method_does(use_c: bool) -> None:
    """A cached delay beyond 64 bits goes to the method; one that fits but passes 2^63 ns with
    the clock is the queue's error: both end the run with the same SimulationLimitError."""
    messages = []
    for delay in (1 << 64, (1 << 63) - 2):
        b = _backend(use_c)
        b._delay_cache[(0, 1, 8)] = delay
        b.queue.schedule(5, b.exchange, 0, 1, 1, 8, 0, None, print, None)
        with pytest.raises(SimulationLimitError) as e:
            b.run()
        messages.append(str(e.value))
    b = _backend(not use_c)
    b._delay_cache[(0, 1, 8)] = 1 << 64
    b.queue.schedule(5, b.exchange, 0, 1, 1, 8, 0, None, print, None)
    with pytest.raises(SimulationLimitError, match=str(messages[0])[:40].replace("(", r"\(")):
        b.run()


def test_the_c_path_stands_only_for_the_plain_method() -> None:
    """A subclass with its own _transfer (the pair recorder) keeps it."""
    assert isinstance(CongestionUnawareBackend(_config())._transfer, _native.FixedDelayTransfer)
    recorder = PairRecorder(_config())
    assert not isinstance(recorder._transfer, _native.FixedDelayTransfer)
    recorder.queue.schedule(1, recorder.exchange, 0, 1, 1, 8, 0, None, print, None)
    recorder.run()
    assert recorder.pairs == {(0, 1)}
