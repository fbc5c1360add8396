"""The send/receive pairing in C (network/_pairing.c) against its Python reference
(network/analytical/base.py: PyPairing): random interleavings of exchanges, sends, receives and
deliveries give the same callbacks in the same order at the same times, the same messages,
counters and unmatched list, and the same errors."""
from __future__ import annotations

import random

import numpy
import pytest

from network.analytical import base
from network.analytical.base import SENT_AT, AnalyticalBackend, PyPairing
from network.errors import MessageMismatchError
from network.event_queue import EventQueue, PyEventQueue, native_module

_native = native_module()
native = pytest.mark.skipif(_native is None, reason="the C module is not built")


class _Topology:
    def __init__(self, dims: int) -> None:
        self.dims = dims

    def dim_to_transfer(self, a: int, b: int) -> int:
        return (a + b) % self.dims


def _backend_class(pairing: type) -> type:
    """A backend on ``pairing`` whose links deliver after a random delay; the point-to-point
    calls and the report are AnalyticalBackend's own, the pairing under them ``pairing``'s."""

    class Backend(pairing):
        send = AnalyticalBackend.send
        recv = AnalyticalBackend.recv
        unmatched = AnalyticalBackend.unmatched
        _in_flight = AnalyticalBackend._in_flight

        def __init__(self, queue, dims: int, rng: random.Random) -> None:
            self.queue = queue
            self._channels = {}
            self.messages = self.bytes_sent = self.bytes_received = 0
            self.bytes_per_dim = [0] * dims
            self._dim_cache = {}
            self._one_dim = dims == 1
            self.topology = _Topology(dims)
            self.rng = rng
            self.log: list = []

        def _transfer(self, src: int, dst: int, size: int, msg: list) -> None:
            self.log.append(("transfer", self.queue.now, src, dst, size, msg[SENT_AT]))
            self.queue.schedule(self.rng.choice([0, 0, 1, 4]), self._on_arrival, msg)

    return Backend


def _run(pairing: type, queue_type: type, seed: int, dims: int, labels: bool, tags: int = 3,
         steps: int = 300, huge: bool = False, sizes: tuple[int, ...] = (0, 8, 1 << 20)) -> tuple:
    """A random program of exchanges, sends and receives on ``tags`` tags; ``huge``: a third of
    the tags beyond 64 bits (the C table's other path; sizes are 64-bit counters in both)."""
    rng = random.Random(seed)
    q = queue_type()
    b = _backend_class(pairing)(q, dims, random.Random(seed + 1))

    def cb(*args: object) -> None:
        b.log.append(("cb", q.now, args))

    def act(kind: str, me: int, peer: int, other: int, size: int, tag: int, label: object) -> None:
        if kind == "exchange":
            b.exchange(me, peer, other, size, tag, label, cb, ("x", me, tag))
        elif kind == "send":
            b.send(me, peer, size, tag, cb, "s", me, label=label)
        else:
            b.recv(me, peer, size, tag, cb, "r", me, label=label)

    for _ in range(steps):
        me, peer, other, tag = rng.randrange(4), rng.randrange(4), rng.randrange(4), rng.randrange(tags)
        if huge and tag % 3 == 0:
            tag += 1 << 64
        # mostly the tag's own label, sometimes none, rarely another: a mismatch late in the run
        label = rng.choices([("L", tag), None, "stray"], [50, 10, 1])[0] if labels else None
        q.schedule(rng.randrange(30), act, rng.choice(["exchange", "exchange", "send", "recv"]), me, peer, other,
                   rng.choice(sizes), tag, label)
    try:
        q.run()
        error = None
    except MessageMismatchError as e:
        error = str(e)
    counters = (b.messages, b.bytes_sent, b.bytes_received, list(b.bytes_per_dim), dict(b._dim_cache))
    channels = {k: (ch.sends, ch.recvs, [list(m) for m in ch.waiting]) for k, ch in b._channels.items()}
    return b.log, counters, channels, b.unmatched(), error, q.now


def _comparable(result: tuple) -> tuple:
    """Callbacks by name: the C and the Python ``cb`` closures are different objects."""
    log, counters, channels, unmatched, error, now = result
    strip = {k: (s, r, [[getattr(x, "__name__", x) for x in m] for m in w]) for k, (s, r, w) in channels.items()}
    return log, counters, strip, unmatched, error, now


@native
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("dims", [1, 3])
def test_random_exchanges_pair_alike(seed: int, dims: int) -> None:
    ref = _comparable(_run(PyPairing, EventQueue, seed, dims, labels=False))
    assert ref[0], "the program ran nothing"
    assert any(e[0] == "cb" for e in ref[0]) and ref[3], "no delivery or nothing left unmatched: a weak program"
    assert _comparable(_run(_native.Pairing, EventQueue, seed, dims, labels=False)) == ref


@native
@pytest.mark.parametrize("seed", range(6))
def test_a_reference_queue_and_labels_give_the_same_result_and_error(seed: int) -> None:
    """Against a queue that is not the C one (schedule through its method) and with labels that
    may disagree: the same answer, or the same MessageMismatchError at the same point."""
    ref = _comparable(_run(PyPairing, PyEventQueue, seed, 2, labels=True))
    assert _comparable(_run(_native.Pairing, PyEventQueue, seed, 2, labels=True)) == ref


@native
@pytest.mark.parametrize("seed", range(3))
def test_byte_counts_stay_exact_past_64_bits(seed: int) -> None:
    """Messages of 2^63 - 1 bytes (the largest int64 size attribute): the C counters hold the
    totals past 2^63 as the Python ints do (a 64-bit counter overflowed: exit 1, found by the
    graph fuzzer), and accounting flows on top of them adds as Python does."""
    results = []
    for pairing in (PyPairing, _native.Pairing):
        log, counters, *rest = _comparable(_run(pairing, EventQueue, seed, 2, labels=False, steps=200,
                                                sizes=(1, (1 << 63) - 1)))
        results.append((log, counters, *rest))
    assert results[0] == results[1]
    assert results[1][1][1] > 1 << 64  # bytes_sent
    b = _backend_class(_native.Pairing)(EventQueue(), 1, random.Random(0))
    for v in (0, -5, (1 << 63) - 1, 1 << 63, -(1 << 63) - 1, (1 << 100) + 7, -(1 << 100) - 3, (1 << 127) - 1,
              -(1 << 127), numpy.int64(5)):  # numpy's ints are the int they stand for, as in the reference
        b.bytes_sent = v
        assert b.bytes_sent == int(v) and type(b.bytes_sent) is int
    with pytest.raises(OverflowError):
        b.bytes_sent = 1 << 127
    with pytest.raises(TypeError):
        b.bytes_sent = 1.5


@native
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("huge", [False, True])
def test_many_keys_pair_alike(seed: int, huge: bool) -> None:
    """Hundreds of keys at once (the C table grows and moves slots back as keys are forgotten),
    and keys beyond 64 bits (kept in a dict of Channel objects): the same run as the reference."""
    ref = _comparable(_run(PyPairing, EventQueue, seed, 2, labels=False, tags=400, steps=3000, huge=huge))
    assert len(ref[2]) > 200, "too few keys left open to fill the table"
    if huge:
        assert any(k[0] >= 1 << 64 for k in ref[2]) and any(k[0] < 1 << 64 for k in ref[2])
    assert _comparable(_run(_native.Pairing, EventQueue, seed, 2, labels=False, tags=400, steps=3000,
                            huge=huge)) == ref


@native
def test_channels_can_be_read_and_replaced() -> None:
    """``_channels`` is a snapshot of the C table; setting it replaces the table (a backend starts
    with {}); a key that is not four integers is refused."""
    b = _backend_class(_native.Pairing)(EventQueue(), 1, random.Random(0))
    b.recv(1, 0, 8, 5, print)
    b.recv(1, 0, 8, 1 << 64, print)
    snap = b._channels
    assert set(snap) == {(5, 0, 1, 8), (1 << 64, 0, 1, 8)}
    assert [(ch.sends, ch.recvs, len(ch.waiting)) for ch in snap.values()] == [(0, 1, 1)] * 2
    snap[(5, 0, 1, 8)].pop()  # a copy: the table keeps its message
    assert len(b._channels[(5, 0, 1, 8)].waiting) == 1
    b._channels = {(7, 2, 3, 8): snap[(1 << 64, 0, 1, 8)]}
    assert set(b._channels) == {(7, 2, 3, 8)}
    b._channels = {}
    assert b._channels == {} and b.unmatched() == []
    with pytest.raises(TypeError, match="integers"):
        b.recv(1, 0, 8.0, 5, print)

    class Five:  # an integer of another type (numpy's): the key of the int it stands for
        def __index__(self) -> int:
            return 5

    b.recv(1, 0, 8, Five(), print)
    assert b._channels[(5, 0, 1, 8)].recvs == 1
    with pytest.raises(TypeError):
        b._channels = {(1, 2): _native.Channel()}


def test_the_labels_program_does_raise_a_mismatch() -> None:
    """The labelled programs above are worth comparing: most of them stop on a mismatch."""
    errors = [_run(PyPairing, PyEventQueue, s, 2, labels=True)[4] for s in range(6)]
    assert sum(e is not None for e in errors) >= 3, errors


@native
def test_the_backends_run_on_the_c_pairing() -> None:
    assert issubclass(AnalyticalBackend, _native.Pairing)
    assert base._Channel is _native.Channel and base._noop is _native.noop


@native
def test_a_channel_is_first_in_first_out_and_refuses_an_empty_pop() -> None:
    ch = _native.Channel()
    for i in range(7):
        ch.push([i])
    assert [ch.pop()[0] for _ in range(3)] == [0, 1, 2]
    for i in range(7, 12):
        ch.push([i])
    assert [m[0] for m in ch.waiting] == list(range(3, 12))
    while ch.waiting:
        ch.pop()
    with pytest.raises(IndexError):
        ch.pop()


@native
def test_exchange_checks_its_arguments() -> None:
    b = _backend_class(_native.Pairing)(EventQueue(), 1, random.Random(0))
    with pytest.raises(TypeError):
        b.exchange(0, 1, 2)
    with pytest.raises(TypeError):
        b._on_arrival([1, 2])
