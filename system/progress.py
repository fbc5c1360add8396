"""A one-line progress display on stderr for long runs: simulated time reached, events, events/s.

It is the ``progress`` object ``run_simulation`` accepts (``start(backend)`` / ``stop()``). It
hooks the analytical backends' event queue, whose ``on_tick(now_ns, events)`` runs once per
``EventQueue.TICK_EVENTS`` events (2^16), so the event loop itself pays nothing per event.
Nothing is drawn during the first ``delay_s`` seconds (most runs end before), and at most one
redraw per ``interval_s``. The ns-3 backend's queue calls ``on_tick`` from its Python callbacks
(ns-3 runs its own loop), and its seconds of import and set-up are announced with ``note``
before they start. The CLI turns it off with ``--quiet`` and when stderr is not a terminal.
"""
from __future__ import annotations

import sys
import time

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, TextIO


def _si(x: float) -> str:
    for unit, f in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= f:
            return f"{x / f:.3g}{unit}"
    return f"{x:.3g}"


def format_sim_time(ns: int) -> str:
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.4g} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.4g} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.4g} us"
    return f"{ns} ns"


class ProgressBar:
    """Draws ``[dtsim] simulated 1.234 ms | 2.1M events | 640k events/s | 3.2 s`` in place."""

    def __init__(self, stream: TextIO | None = None, delay_s: float = 2.0, interval_s: float = 0.25,
                 clock: Any = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.delay_s = delay_s
        self.interval_s = interval_s
        self.clock = clock
        self._queue: Any = None
        self._t0 = 0.0
        self._last_draw = 0.0
        self._width = 0
        self.draws = 0

    @classmethod
    def for_terminal(cls, quiet: bool, stream: TextIO | None = None) -> "ProgressBar | None":
        """A bar when stderr is an interactive terminal and the user did not ask for quiet."""
        stream = stream if stream is not None else sys.stderr
        if quiet or not getattr(stream, "isatty", lambda: False)():
            return None
        return cls(stream)

    def start(self, backend: Any) -> None:
        self._t0 = self._last_draw = self.clock()
        queue = getattr(backend, "queue", None)
        if queue is not None and hasattr(queue, "on_tick"):
            self._queue = queue
            queue.on_tick = self.on_tick

    def note(self, text: str) -> None:
        """Say at once what a long step about to start is (the next tick or ``stop`` clears it)."""
        self._draw(f"[dtsim] {text} ...")

    def _draw(self, line: str) -> None:
        pad = max(0, self._width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._width = len(line)
        self.draws += 1

    def on_tick(self, now_ns: int, events: int) -> None:
        t = self.clock()
        if t - self._t0 < self.delay_s or t - self._last_draw < self.interval_s:
            return
        self._last_draw = t
        elapsed = t - self._t0
        self._draw(f"[dtsim] simulated {format_sim_time(now_ns)} | {_si(events)} events | "
                   f"{_si(events / elapsed)} events/s | {elapsed:.1f} s")

    def stop(self) -> None:
        if self._queue is not None:
            self._queue.on_tick = None
            self._queue = None
        if self._width:  # clear the line so the summary starts clean
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
