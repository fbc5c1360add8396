"""The event queue in C (network/_event_core.c) against the Python one (network/event_queue.py):
the same order, clock, counts, budgets and errors; nothing left behind."""
from __future__ import annotations

import gc
import random
import shutil
import subprocess
import sys
import sysconfig
import weakref

import pytest

from network import event_queue
from network.errors import SimulationLimitError
from network.event_queue import EventQueue, PyEventQueue

native = pytest.mark.skipif(EventQueue is PyEventQueue, reason="the C event queue is not built")


def _compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


def test_pip_install_built_the_c_queue() -> None:
    """Where a C compiler exists, pip install compiles the queue and the simulator uses it. The
    build is optional (a compiler without Python's headers is common): elsewhere a run uses the
    Python queue and this test skips, but not under CI=true, whose machine has both."""
    from conftest import IN_CI

    if EventQueue is PyEventQueue:
        why = ("no C compiler" if _compiler() is None else "setup.py's network._event_core did not build "
               "(pip install -v says why; Python's headers missing is the usual cause)")
        if IN_CI:
            pytest.fail(f"CI=true and {why}", pytrace=False)
        pytest.skip(f"{why}: the Python queue is the one in use, with the same results")
    assert issubclass(EventQueue, event_queue._Core)
    assert event_queue.native_module() is not None


def test_dtsim_pure_python_selects_the_python_queue() -> None:
    code = "from network.event_queue import EventQueue, PyEventQueue; print(EventQueue is PyEventQueue)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"DTSIM_PURE_PYTHON": "1", "PATH": "", "PYTHONPATH": ":".join(sys.path)})
    assert out.stdout.strip() == "True"


def _program(q, rng: random.Random, log: list, budget: int = 3000) -> None:
    """A random cascade: events at random delays (0 included) scheduling more, singly and in pairs."""
    def ev(i: int, *extra: object) -> None:
        log.append((q.now, i, extra))
        if len(log) >= budget:
            return
        r = rng.random()
        if r < 0.4:
            q.schedule(rng.choice([0, 0, 1, 2, 5, 1 << 40]), ev, i + 1)
        elif r < 0.8:
            q.schedule_two(rng.randrange(4), ev, (i + 2, "a"), rng.randrange(4), ev, (i + 3,))
        if r > 0.6:
            q.schedule(rng.randrange(3), ev, i + 4, "b", None)
    for i in range(20):
        q.schedule(rng.randrange(10), ev, i)


@native
@pytest.mark.parametrize("seed", range(12))
def test_random_cascades_run_alike(seed: int) -> None:
    runs = []
    for cls in (PyEventQueue, EventQueue):
        q, log = cls(), []
        _program(q, random.Random(seed), log)
        q.run()
        runs.append((log, q.now, q.events_processed, len(q)))
    assert runs[0] == runs[1]
    assert runs[0][2] == len(runs[0][0])


@native
@pytest.mark.parametrize("limit", [1, 7, 64, 1000])
def test_an_event_budget_stops_both_at_the_same_event_and_a_rerun_resumes(limit: int) -> None:
    outs = []
    for cls in (PyEventQueue, EventQueue):
        q, log = cls(max_events=limit), []
        _program(q, random.Random(5), log)
        with pytest.raises(SimulationLimitError) as e:
            q.run()
        stopped = (list(log), q.now, q.events_processed, len(q), str(e.value))
        q.max_events = None
        q.run()  # what was left, the stopped tick's remainder first
        outs.append((stopped, log, q.events_processed, len(q)))
    assert outs[0] == outs[1]


@native
def test_a_wall_budget_stops_the_c_loop() -> None:
    q = EventQueue(wall_limit_s=0.05)

    def forever() -> None:
        q.schedule(1, forever)
    q.schedule(0, forever)
    with pytest.raises(SimulationLimitError, match="wall-time budget of 0.05 s"):
        q.run()
    assert q.events_processed > 0 and len(q) == 1


@native
def test_an_exception_in_a_callback_propagates_and_keeps_the_rest_queued() -> None:
    q = EventQueue()
    ran: list[int] = []

    def ok(i: int) -> None:
        ran.append(i)

    def bad() -> None:
        raise ValueError("boom")
    q.schedule(1, ok, 1)
    q.schedule(1, bad)
    q.schedule(1, ok, 2)
    q.schedule(2, ok, 3)
    with pytest.raises(ValueError, match="boom"):
        q.run()
    assert ran == [1] and len(q) == 2 and q.events_processed == 1
    q.run()
    assert ran == [1, 2, 3] and q.now == 2


@native
def test_bad_arguments_are_type_errors() -> None:
    q = EventQueue()
    with pytest.raises(TypeError):
        q.schedule(1)
    with pytest.raises(TypeError):
        q.schedule("1", print)
    with pytest.raises(TypeError):
        q.schedule_two(1, print, [], 2, print, ())
    assert len(q) == 0


@native
def test_a_queue_in_a_reference_cycle_is_collected() -> None:
    """A backend's callbacks hold the backend, which holds its queue: the C queue takes part in
    the garbage collector, or every simulation of a long process would stay in memory."""
    class Backend:
        def __init__(self) -> None:
            self.queue = EventQueue()
            self.queue.schedule(5, self.cb)
            self.queue.on_tick = self.cb

        def cb(self, *a: object) -> None:
            pass
    b = Backend()
    ref = weakref.ref(b)
    del b
    gc.collect()
    assert ref() is None


@native
def test_many_ticks_grow_and_reuse_the_calendar() -> None:
    """Far more distinct ticks than the initial tables hold, inserted out of order, then drained
    and refilled: the map's deletion keeps every later lookup right."""
    rng = random.Random(1)
    for cls_runs in range(2):
        out = []
        for cls in (PyEventQueue, EventQueue):
            q, seen = cls(), []
            times = [rng.randrange(1 << 50) for _ in range(5000)] if cls is PyEventQueue else times
            for k, t in enumerate(times):
                q.schedule(t, seen.append, (t, k))
                if k % 3 == 0:
                    q.schedule(t, seen.append, (t, -k))  # the same tick again: joins its list
            q.run()
            out.append(seen)
        assert out[0] == out[1] and len(out[0]) == 5000 + 1667


@native
def test_a_binary_compiled_from_other_sources_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited or updated checkout whose binary was not rebuilt runs the Python classes, with a
    warning that says how to rebuild: never C code whose sources are gone."""
    import network.native_build as nb

    monkeypatch.setattr(nb, "source_checksum", lambda folder, sources=nb.SOURCES: "00000000")
    with pytest.warns(RuntimeWarning, match="pip install -e"):
        assert event_queue._load_native() is None
    monkeypatch.setattr(nb, "source_checksum", lambda folder, sources=nb.SOURCES: None)  # a wheel: no sources beside it
    assert event_queue._load_native() is not None


def test_the_checksum_covers_every_source(tmp_path) -> None:
    from pathlib import Path

    import network.native_build as nb

    root = Path(event_queue.__file__).resolve().parents[1]
    for folder, sources in (("network", nb.SOURCES), ("system", nb.SYSTEM_SOURCES)):
        src, dst = root / folder, tmp_path / folder
        dst.mkdir()
        for name in sources:
            (dst / name).write_bytes((src / name).read_bytes())
        base = nb.source_checksum(dst, sources)
        assert base == nb.source_checksum(src, sources)
        for name in sources:
            data = (dst / name).read_bytes()
            (dst / name).write_bytes(data + b"\n")
            assert nb.source_checksum(dst, sources) != base, name


@native
def test_links_run_as_native_events_only_where_the_callee_is_ours() -> None:
    """A plain C Link's free and a ChunkArrival's hop are native events (no Python call); a
    subclass's own _on_free and any other arrival callable are still called, at the same places:
    two chunks sent at once on one link start back to back, each arrival a serialization later."""
    native_mod = event_queue.native_module()
    for subclass in (False, True):
        q = EventQueue()
        log: list = []

        class Traced(native_mod.Link):
            def _on_free(self) -> None:
                log.append(("free", q.now))
                super()._on_free()

        cls = Traced if subclass else native_mod.Link
        link = cls(0, 1, 0, 10.0, 1.0, {}, q.schedule, lambda c: log.append(("arrive", q.now, c.size_bytes)))
        route = (link,)
        for size in (100, 50):
            link.send(native_mod.Chunk([None], route, size))
        q.run()
        arrivals = [e for e in log if e[0] == "arrive"]
        assert arrivals == [("arrive", 110, 100), ("arrive", 160, 50)], arrivals
        assert [e for e in log if e[0] == "free"] == ([("free", 100), ("free", 150)] if subclass else [])
        assert not link.busy and link.chunks == 2


@pytest.mark.parametrize("queue_class", [EventQueue, PyEventQueue])
def test_time_is_the_clock_as_a_call_and_the_system_layer_reads_it(queue_class) -> None:
    """``time()`` answers ``now`` at every event; a Sys on an analytical backend takes its now()
    from the backend's queue (network/api.py ``clock_queue``), with the backend's answer."""
    q = queue_class()
    seen = []
    for d in (0, 3, 3, 10):
        q.schedule(d, lambda: seen.append((q.time(), q.now)))
    q.run()
    assert seen == [(0, 0), (3, 3), (3, 3), (10, 10)] and q.time() == 10

    from network.config import NetworkConfig
    from network.registry import backend_class
    from system.config import SystemConfig
    from system.sys import Sys

    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [4], "bandwidth": [50.0], "latency": [500.0]})
    backend = backend_class("congestion-unaware")(net)
    s = Sys(0, backend, SystemConfig.default())
    backend.queue.schedule(7, lambda: seen.append((s.now(), backend.now())))
    backend.run()
    assert seen[-1] == (7, 7) and s.now.__self__ is backend.queue
