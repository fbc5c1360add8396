"""The event core: integer nanoseconds, a calendar of per-tick FIFO lists.

ASTRA-sim's analytical EventQueue keeps one FIFO list per time and runs events added for the
current time in the same pass (common/event-queue/EventList.cpp). We do the same: ``_cal`` maps
a tick to its list of (callback, args) in insertion order, and a heap holds the ticks that have
a list. An event scheduled for the tick being run is appended to that tick's list, so it runs in
the same pass after everything already there: exactly the (time, insertion) order of one heap
entry per event, at one heap operation per distinct tick instead of one per event (in a
lock-step collective a thousand ranks share each tick).

``EventQueue`` is the same queue in C (network/_event_core.c) where pip install could compile it,
and this module's ``PyEventQueue`` otherwise or with ``DTSIM_PURE_PYTHON=1``: the Python class is
the reference, and a property test holds the two to one order.
"""
from __future__ import annotations

import heapq
import os
import time as _time
from types import ModuleType

from network.errors import SimulationLimitError

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Callable


class PyEventQueue:
    __slots__ = ("now", "_cal", "_times", "events_processed", "max_events", "wall_limit_s", "on_tick", "wall_origin")

    #: ``on_tick(now_ns, events)`` runs once per this many events (a progress bar's hook)
    TICK_EVENTS = 1 << 16

    def __init__(self, max_events: int | None = None, wall_limit_s: float | None = None) -> None:
        self.now = 0
        self._cal: dict[int, list[tuple[Callable[..., None], tuple]]] = {}
        self._times: list[int] = []
        self.events_processed = 0
        self.max_events = max_events
        self.wall_limit_s = wall_limit_s
        #: time.monotonic() the wall budget counts from (None: from the start of run()); a caller
        #: that tries a run more than once sets it so that all tries share one budget
        self.wall_origin: float | None = None
        self.on_tick: Callable[[int, int], None] | None = None

    def time(self) -> int:
        """``now`` as a call (the C core's ``time``): what the system layer's now() is where a
        backend's clock is this queue (network/api.py ``clock_queue``)."""
        return self.now

    def schedule(self, delay_ns: int, callback: Callable[..., None], *args: object) -> None:
        t = self.now + delay_ns
        lst = self._cal.get(t)
        if lst is None:
            self._cal[t] = [(callback, args)]
            heapq.heappush(self._times, t)
        else:
            lst.append((callback, args))

    def schedule_two(self, delay_a: int, callback_a: Callable[..., None], args_a: tuple,
                     delay_b: int, callback_b: Callable[..., None], args_b: tuple) -> None:
        """``schedule(delay_a, callback_a, *args_a)`` then ``schedule(delay_b, callback_b, *args_b)``,
        in one call: a congestion-aware link starts every message hop this way (an arrival and its
        release), and on multi-hop routes the second call was a fifth of the hop's cost."""
        now = self.now
        cal = self._cal
        t = now + delay_a
        lst = cal.get(t)
        if lst is None:
            cal[t] = [(callback_a, args_a)]
            heapq.heappush(self._times, t)
        else:
            lst.append((callback_a, args_a))
        t = now + delay_b
        lst = cal.get(t)
        if lst is None:
            cal[t] = [(callback_b, args_b)]
            heapq.heappush(self._times, t)
        else:
            lst.append((callback_b, args_b))

    def __len__(self) -> int:
        return sum(map(len, self._cal.values()))

    def run(self) -> None:
        if self.max_events is None and self.wall_limit_s is None and self.on_tick is None:
            self._run_plain()
        else:
            self._run_checked()

    def _run_plain(self) -> None:
        cal, times, pop = self._cal, self._times, heapq.heappop  # locals: the hot loop
        n = 0
        try:
            while times:
                t = pop(times)
                if t > MAX_TIME_NS:
                    heapq.heappush(times, t)
                    raise _time_overflow_error(self.now, t - self.now)
                self.now = t
                lst = cal[t]
                # a list iterator re-reads the length: events appended for this tick run in this pass
                for callback, args in lst:
                    callback(*args)
                n += len(lst)
                del cal[t]
        finally:  # an exception out of a callback ends the run; the count stays honest
            self.events_processed += n

    def _halt(self, n: int, lst: list, i: int, t: int) -> None:
        """Stop mid-tick: the events of tick ``t`` not yet run (``lst[i:]``) stay queued."""
        self.events_processed = n
        del lst[:i]
        heapq.heappush(self._times, t)

    def _run_checked(self) -> None:
        """The same order, one event at a time, with budgets and the progress hook."""
        cal, times, pop = self._cal, self._times, heapq.heappop
        limit = self.max_events
        wall = self.wall_limit_s
        tick = self.on_tick
        deadline = None if wall is None else (self.wall_origin or _time.monotonic()) + wall
        every = self.TICK_EVENTS
        n = self.events_processed
        next_tick = (n // every + 1) * every
        while times:
            t = pop(times)
            if t > MAX_TIME_NS:
                heapq.heappush(times, t)
                self.events_processed = n
                raise _time_overflow_error(self.now, t - self.now)
            self.now = t
            lst = cal[t]
            i = 0
            while i < len(lst):
                callback, args = lst[i]
                i += 1
                callback(*args)
                n += 1
                if limit is not None and n >= limit and (i < len(lst) or times):
                    self._halt(n, lst, i, t)
                    raise _event_budget_error(self, limit)
                # every 64 events: a budget must hold even when single events are slow (generating
                # a large collective is one event); a clock read per 64 events costs nothing measurable
                if deadline is not None and not (n & 0x3F) and _time.monotonic() > deadline:
                    self._halt(n, lst, i, t)
                    raise _wall_budget_error(self, wall)
                if tick is not None and n == next_tick:
                    next_tick += every
                    self.events_processed = n
                    tick(self.now, n)
            del cal[t]
        self.events_processed = n
        if tick is not None and limit is None and wall is None and n != next_tick - every:
            tick(self.now, n)  # the plain loop's last tick: the bar ends on the final count


#: ASTRA-sim's ticks are 64-bit and so is the C queue's clock: a time past this is refused
MAX_TIME_NS = (1 << 63) - 1


def _time_overflow_error(now: int, delay: int) -> SimulationLimitError:
    return SimulationLimitError(
        f"an event {delay} ns after {now} ns lies past 2^63 ns (292 years) of simulated time, the end of a 64-bit "
        "clock (ASTRA-sim's and ours): a latency, bandwidth or duration in the inputs is beyond any real run")


def _event_budget_error(q, limit: int) -> SimulationLimitError:
    return SimulationLimitError(f"event budget of {limit} events exhausted at simulated time {q.now} ns "
                                f"with {len(q)} events still queued (raise --max-events)")


def _wall_budget_error(q, wall: float) -> SimulationLimitError:
    return SimulationLimitError(f"wall-time budget of {wall:g} s exhausted at simulated time {q.now} ns "
                                f"after {q.events_processed} events (raise --max-wall-seconds)")


def _load_native() -> ModuleType | None:
    from network.native_build import load_checked

    # os.path, not pathlib: this runs at every start-up (network/files.py says what pathlib costs)
    return load_checked("network._event_core", os.path.dirname(os.path.realpath(__file__)))


_NATIVE = _load_native()
_Core = None if _NATIVE is None else _NATIVE.Core


def native_module() -> ModuleType | None:
    """The C module (its Core queue, the congestion-aware Link, Chunk and ChunkArrival, and the
    analytical backends' Pairing and Channel), or None where the Python classes run."""
    return _NATIVE


if _Core is None:
    EventQueue = PyEventQueue
else:
    class EventQueue(_Core):  # type: ignore[no-redef,valid-type,misc]
        """PyEventQueue's calendar, order and budgets, run in C (network/_event_core.c)."""

        __slots__ = ()

        TICK_EVENTS = PyEventQueue.TICK_EVENTS

        def run(self) -> None:
            limit, wall, tick = self.max_events, self.wall_limit_s, self.on_tick
            if limit is None and wall is None and tick is None:
                self._run(-1, 0.0, None, 0, 0)
                return
            deadline = 0.0 if wall is None else (self.wall_origin or _time.monotonic()) + wall
            every = self.TICK_EVENTS if tick is not None else 0
            n = self.events_processed
            next_tick = (n // every + 1) * every if every else 0
            status, next_tick = self._run(-1 if limit is None else limit, deadline,
                                          None if wall is None else _time.monotonic, every, next_tick)
            if status == 1:
                raise _event_budget_error(self, limit)
            if status == 2:
                raise _wall_budget_error(self, wall)
            if tick is not None and limit is None and wall is None and self.events_processed != next_tick - every:
                tick(self.now, self.events_processed)  # the plain loop's last tick: the bar ends on the final count


def core_name(queue: object) -> str:
    """The report's ``network.core``: "c" for the C queue, "python" for the reference."""
    return "c" if _Core is not None and isinstance(queue, _Core) else "python"
