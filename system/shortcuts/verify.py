"""``--verify-shortcuts``: a shortcut's answer held against the every-event path's."""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Sequence


class ShortcutMismatch(Exception):
    """A shortcut's answer differs from the every-event path's (a bug in dtsim: exit 1)."""


def _collective_times(w: Any) -> list[tuple]:
    return [(c["type"], c["size"], c["pg"], c["start"], c["end"]) for c in w.collectives]


def verify(shortcut: str, fast: Sequence[Any], plain: Sequence[Any]) -> None:
    """Every rank's finish and collective times, shortcut against events; ShortcutMismatch names
    the first difference."""
    for a, b in zip(fast, plain):
        if a.finish_time != b.finish_time:
            raise ShortcutMismatch(
                f"--verify-shortcuts: the {shortcut} shortcut finishes rank {b.rank} at {a.finish_time} cycles, "
                f"the every-event path at {b.finish_time} (rerun with --no-symmetry --no-batching for the "
                "event path's answer, and please report the workload)")
        ca, cb = _collective_times(a), _collective_times(b)
        if ca != cb:
            k = next((i for i, (x, y) in enumerate(zip(ca, cb)) if x != y), min(len(ca), len(cb)))
            raise ShortcutMismatch(
                f"--verify-shortcuts: rank {b.rank}'s collective #{k + 1} runs {ca[k] if k < len(ca) else None} "
                f"(type, size, group, start, end) with the {shortcut} shortcut and "
                f"{cb[k] if k < len(cb) else None} on the every-event path")
