"""The progress line: the event queue's periodic hook, the bar's throttling, and when it is off."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from network.errors import SimulationLimitError
from network.event_queue import EventQueue
from system.progress import ProgressBar, format_sim_time


def _chain(q: EventQueue, n: int, log: list[int]) -> None:
    """n events, each scheduling the next 3 ns later; two start at once (ties keep FIFO order)."""
    def step(i: int) -> None:
        log.append(i)
        if i + 2 < n:
            q.schedule(3, step, i + 2)
    q.schedule(0, step, 0)
    q.schedule(0, step, 1)


@pytest.mark.parametrize("max_events", [None, 10**9])  # the fast loop and the budgeted one
def test_queue_ticks_every_tick_events_and_changes_nothing(monkeypatch: pytest.MonkeyPatch, max_events) -> None:
    monkeypatch.setattr(EventQueue, "TICK_EVENTS", 64)
    plain, ticked = EventQueue(max_events), EventQueue(max_events)
    a: list[int] = []
    b: list[int] = []
    _chain(plain, 1000, a)
    _chain(ticked, 1000, b)
    ticks: list[tuple[int, int]] = []
    ticked.on_tick = lambda now, n: ticks.append((now, n))
    plain.run()
    ticked.run()
    assert a == b == list(range(1000))
    assert plain.now == ticked.now and plain.events_processed == ticked.events_processed == 1000
    assert [n for _, n in ticks][:15] == [64 * k for k in range(1, 16)]
    assert all(now == (n - 1) // 2 * 3 for now, n in ticks[:15])  # the time of the n-th event
    if max_events is None:
        assert ticks[-1][1] == 1000  # the fast loop ticks once more at the end


def test_budget_still_stops_a_ticked_queue() -> None:
    q = EventQueue(max_events=100)
    q.on_tick = lambda now, n: None
    _chain(q, 1000, [])
    with pytest.raises(SimulationLimitError, match="event budget of 100"):
        q.run()


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Backend:
    def __init__(self) -> None:
        self.queue = EventQueue()


def test_bar_waits_throttles_and_clears() -> None:
    out, clock, backend = io.StringIO(), _Clock(), _Backend()
    bar = ProgressBar(stream=out, delay_s=2.0, interval_s=0.5, clock=clock)
    bar.start(backend)
    assert backend.queue.on_tick == bar.on_tick
    clock.t += 1.0
    bar.on_tick(5_000, 65_536)
    assert out.getvalue() == ""  # a short run shows nothing
    clock.t += 1.5
    bar.on_tick(2_500_000, 131_072)
    line = out.getvalue()
    assert line.startswith("\r[dtsim] simulated 2.5 ms | 131k events | 52.4k events/s | 2.5 s")
    clock.t += 0.1
    bar.on_tick(2_600_000, 196_608)
    assert out.getvalue() == line and bar.draws == 1  # at most one redraw per interval
    bar.stop()
    assert backend.queue.on_tick is None
    assert out.getvalue().endswith("\r" + " " * (len(line) - 1) + "\r")


def test_bar_only_for_an_interactive_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert ProgressBar.for_terminal(quiet=False, stream=io.StringIO()) is None
    assert ProgressBar.for_terminal(quiet=True, stream=Tty()) is None
    assert isinstance(ProgressBar.for_terminal(quiet=False, stream=Tty()), ProgressBar)
    assert ProgressBar(stream=Tty()).start(object()) is None  # a backend without the hook: no bar


def test_the_cli_asks_for_a_bar_only_where_stderr_is_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """system.main imports the bar's module only for a terminal; where it is one, the bar is the
    one for_terminal gives, on stderr."""
    from system import main

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    bar = main._progress_bar(quiet=False)
    assert isinstance(bar, ProgressBar) and bar.stream is sys.stderr
    assert main._progress_bar(quiet=True) is None
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert main._progress_bar(quiet=False) is None
    monkeypatch.setattr(sys, "stderr", object())  # a stream without isatty
    assert main._progress_bar(quiet=False) is None


def test_sim_time_units() -> None:
    assert [format_sim_time(t) for t in (999, 64_440, 42_887_980, 3_000_000_000)] == \
        ["999 ns", "64.44 us", "42.89 ms", "3 s"]


def test_cli_draws_nothing_when_stderr_is_not_a_terminal(example_args: list[str], tmp_path: Path) -> None:
    r = run_cli(*example_args)
    assert r.returncode == 0 and "[dtsim]" not in r.stderr and "\r" not in r.stderr


def test_run_simulation_drives_the_bar(example_args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from system.main import run_simulation

    monkeypatch.setattr(EventQueue, "TICK_EVENTS", 16)
    out = io.StringIO()
    bar = ProgressBar(stream=out, delay_s=0.0, interval_s=0.0)
    args = dict(zip(example_args[::2], example_args[1::2]))
    result = run_simulation(args["--workload"], args["--network"], args["--system"], progress=bar, symmetry=False,
                            batching=False)  # every message an event: enough ticks to draw
    assert result.finish_ns == [64440] * 8  # ASTRA-sim's B_unaware_Ring8_all_reduce_Ring_4chunks
    assert bar.draws == result.events // 16 + (result.events % 16 > 0)
    assert "[dtsim] simulated 64.44 us | 1.15k events" in out.getvalue()
    assert out.getvalue().endswith("\r")  # cleared for the summary
