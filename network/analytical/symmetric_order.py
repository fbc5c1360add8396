"""Same-tick order of the real run, seen from one representative NPU (symmetric_aware.py).

The event queue runs the events of one tick in insertion order, so an event's place is its
parent's place, then its index among the parent's children: two events of one tick compare by
walking back their parents until the ticks differ or the parents meet. The representative runs
rank 0's events only; the real run holds every rank's copy of them. So each event here is a
``Event`` record (tick, parent, index among the parent's children) plus ``shift``, the group
element g such that the real parent of rank 0's event is rank g's copy of the parent here: 0
mostly; at a link, the rank whose chunk ran on it before; at a delivery, the sender. A real
event is then (record, g): rank g's copy of the record's event. ``before`` walks two of them
back. Copies of one record by different ranks stay in lockstep down to the start, where rank
r's start runs before rank r+1's; ``z``, the sum of shifts down to the start, gives that rank
without walking. Chains are cut after ``HORIZON`` parents (memory); a walk that reaches a cut
answers None (unknown), and the caller gives up.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Sequence

HORIZON = 1 << 16  # generations kept: a 256-NPU direct all-reduce needs more than 512


class Group:
    """The ranks as a group, an element written as the rank it maps rank 0 to: per dimension
    addition mod n, or XOR (``xor_dims``)."""

    def __init__(self, sizes: Sequence[int], xor_dims: Sequence[bool]) -> None:
        self._dims = []
        st = 1
        for n, x in zip(sizes, xor_dims):
            self._dims.append((st, n, x))
            st *= n
        self._memo: dict[tuple[int, int, int], int] = {}
        if len(sizes) == 1 and not xor_dims[0]:
            n = sizes[0]
            self.add = lambda a, b: (a + b) % n  # the common case, without the memo

    def _op(self, a: int, b: int, sign: int) -> int:
        r = 0
        for st, n, x in self._dims:
            ca, cb = (a // st) % n, (b // st) % n
            r += (ca ^ cb if x else (ca + sign * cb) % n) * st
        return r

    def add(self, a: int, b: int) -> int:
        k = (a, b, 1)
        r = self._memo.get(k)
        if r is None:
            r = self._memo[k] = self._op(a, b, 1)
        return r

    def sub(self, a: int, b: int) -> int:
        k = (a, b, -1)
        r = self._memo.get(k)
        if r is None:
            r = self._memo[k] = self._op(a, b, -1)
        return r


class Event:
    __slots__ = ("tick", "parent", "shift", "idx", "z", "kids", "depth")

    def __init__(self, tick: int, parent: "Event | None", shift: int, group: Group) -> None:
        self.tick = tick
        self.kids = 0
        if parent is None:  # the start of rank 0 (its workload's first nodes, before the loop)
            self.parent, self.shift, self.idx, self.z, self.depth = None, 0, 0, 0, 0
            return
        self.reparent(parent, shift, group)

    def reparent(self, parent: "Event", shift: int, group: Group) -> None:
        self.idx = parent.kids
        parent.kids += 1
        self.shift = shift
        self.z = group.add(shift, parent.z)
        if parent.depth >= HORIZON:
            self.parent, self.depth = _CUT, 0
        else:
            self.parent, self.depth = parent, parent.depth + 1


_CUT = Event(-2, None, 0, None)  # type: ignore[arg-type]


def before(r1: Event, g1: int, r2: Event, g2: int, group: Group) -> bool | None:
    """Whether rank g1's copy of r1 runs before rank g2's copy of r2 in the real run (both of one
    tick; one real event counts as before itself: its own steps keep their order)."""
    add = group.add
    while True:
        if r1 is r2:
            return True if g1 == g2 else add(g1, r1.z) < add(g2, r1.z)
        p1, p2 = r1.parent, r2.parent
        if p1 is None:  # a start runs before every event of the loop
            return True
        if p2 is None:
            return False
        if p1 is _CUT or p2 is _CUT:
            return None
        h1, h2 = add(g1, r1.shift), add(g2, r2.shift)
        if p1 is p2 and h1 == h2:
            return r1.idx < r2.idx
        if p1.tick != p2.tick:
            return p1.tick < p2.tick
        r1, g1, r2, g2 = p1, h1, p2, h2
