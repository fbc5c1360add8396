"""What a run holds in memory per link and after a crowded tick (issue 26: on every rank of a
direct all-reduce on FullyConnected(512), congestion-aware, dtsim's peak RSS was 417 MB against
ASTRA-sim's 361 MB; the N^2 links and what the calendar and the Sys batches kept were most of it).

Sizes are measured with tracemalloc, which sees Python objects and PyMem allocations alike."""
from __future__ import annotations

import gc
import tracemalloc

import pytest

from network.analytical.aware import CongestionAwareBackend
from network.config import NetworkConfig
from network.event_queue import native_module
from system.config import SystemConfig
from system.sys import Sys
from system.sys_core import SYS_CORE

native = pytest.mark.skipif(native_module() is None or SYS_CORE is None, reason="the C modules are not built")


def _fc(npus: int) -> CongestionAwareBackend:
    return CongestionAwareBackend(NetworkConfig.from_dict(
        {"topology": ["FullyConnected"], "npus_count": [npus], "bandwidth": [50.0], "latency": [500.0]}))


def _traced(fn) -> int:
    """Bytes still held after fn() that were not before."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@native
def test_a_route_of_a_fully_connected_run_costs_under_480_bytes() -> None:
    """A C link, its one-link route and their two dictionary entries: 620 bytes a pair with a
    tuple key holding two ints in each dictionary and two bound methods on each link."""
    b = _fc(96)
    b._route(0, 1)  # the dictionaries' first growth, the dimension's delay table
    pairs = [(s, d) for s in range(96) for d in range(96) if s != d and (s, d) != (0, 1)]
    routes: list = []
    held = _traced(lambda: routes.extend(b._route(s, d) for s, d in pairs))
    assert held / len(pairs) < 480
    assert len({id(r[0]) for r in routes}) == len(pairs)  # one link each: the count is per link


@native
def test_plain_links_share_one_schedule_and_hold_no_bound_method_of_their_own() -> None:
    b = _fc(8)
    links = [b._route(s, d)[0] for s in range(8) for d in range(8) if s != d]
    assert {id(link._schedule) for link in links} == {id(b.schedule)}
    for link in links:
        assert not any(getattr(r, "__self__", None) is link for r in gc.get_referents(link))


@native
def test_a_subclass_link_still_frees_through_its_own_method() -> None:
    """A subclass's _on_free may differ: it keeps the bound method and the calendar calls it."""
    from network.analytical.aware import Link

    freed: list[int] = []

    class Counting(Link):
        def _on_free(self) -> None:
            freed.append(self.src)
            super()._on_free()

    b = _fc(4)
    link = Counting(0, 1, 0, 500.0, 50.0, {}, b.schedule, lambda chunk: None)
    assert any(getattr(r, "__self__", None) is link for r in gc.get_referents(link))
    from network.analytical.aware import Chunk

    b.queue.schedule(1, lambda: link.send(Chunk([], (link,), 1 << 20)))
    b.run()
    assert freed == [0]


@native
def test_the_calendar_gives_back_the_array_of_a_crowded_tick() -> None:
    """A tick of 50,000 events, then ticks of a few: the slot that held the crowded tick keeps no
    2 MB array for them."""
    b = _fc(4)
    q = b.queue

    def crowd() -> None:
        for _ in range(50_000):
            q.schedule(5, int)
        for t in range(6, 40):
            q.schedule(t, int)
        q.run()

    assert _traced(crowd) < 200_000


@native
def test_a_sys_gives_back_the_array_of_a_crowded_batch() -> None:
    """A Sys's per-tick batch of 20,000 events (a rank's receipts of one direct step, at scale),
    then batches of a few: the spare batches keep no 640 kB array."""
    b = _fc(4)
    s = Sys(0, b, SystemConfig.default())

    def crowd() -> None:
        for _ in range(20_000):
            s.register_event(3, int)
        for t in range(4, 40):
            b.queue.schedule(t, s.register_event, 1, int)
        b.run()

    assert _traced(crowd) < 200_000
