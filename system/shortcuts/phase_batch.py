"""Ring and halving-doubling phases of every rank at once, joined in C, on the congestion-unaware network.

There a message's delay depends on nothing but its pair and size, so a phase of either algorithm
is one max-plus recurrence (ring_batch.py's, with a partner per rank and step):

* rank i's first message leaves at ``T_0[i] = S[i] + X_0`` (S: the phase's start on rank i;
  ``X_j``: the endpoint delay, 10 on group rings, plus packet j's reduction if it carries one);
* message j reaches rank i from its partner ``p_j(i)`` (a ring: its predecessor at every step;
  halving-doubling: the rank it exchanges with at that step) at ``A = T_j[p_j(i)] + D_j(i)``, and
  its receive fires at ``R_j[i] = max(A, T_j[i])`` (posted when rank i sent its own message j);
* message j+1 leaves at ``R_j[i] + X_(j+1)``; after the last receive the last packet goes through
  the memory bus and the phase exits on the event path, as ring_batch.py's phases do.

Sizes and reductions come from stepping a copy of the rank's own algorithm with the event path's
methods; a ring's predecessors from its ranks' own algorithms; halving-doubling's partners from the
algorithm's own pairing rule. The per-rank work is in C (system/_sys_core.c): a rank's stream start
joins its phase's list (``phase_join``), and the last rank to join runs the phase on its shape's
plan (``phase_complete``: the recurrence on int64 arrays, each rank's ``finish_phase`` at its last
receive). A phase whose shape has no plan yet comes here first (``advance``), which makes it.

Taken where every rank runs (no orbit or representative run) and the C core is built; elsewhere, and
for what C declines (a phase of fewer than MIN_STEPS messages, a zero-byte message, a zero endpoint
delay), a ring phase goes to ring_batch.py as before. A phase the recurrence cannot prove (ranks of
two collectives under one key, a rank in it twice, 0-byte messages, a time past 2^63 ns) raises
``BatchAbandoned``, and the run is redone without batching.
"""
from __future__ import annotations

from array import array

from network.event_queue import MAX_TIME_NS
from system.collective.halving_doubling import HalvingDoubling, _partner_index as _hd_partner_index
from system.collective.ring import Ring
from system.shortcuts.ring_batch import BatchAbandoned

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

#: phases of fewer messages run on the event path (or ring_batch.py's); 1 batches every phase (the
#: equality tests). A 2-message phase costs about as much either way, a 4-message one 11 % less
#: wall (64-rank layouts of 4-rank halving-doubling all-gathers and all-reduces)
MIN_STEPS = 2


def attach(backend: Any, systems: list[Any]) -> "PhaseBatcher | None":
    """The phase batcher of a run where every rank runs on the congestion-unaware network,
    attached to each rank's C core; None elsewhere."""
    delay = getattr(backend, "fixed_delay_ns", None)
    if delay is None or getattr(backend, "rep_of", None) is not None:
        return None
    batcher = PhaseBatcher(delay, backend.account_flows)
    return batcher if batcher.attach(systems) else None


class PhaseBatcher:
    """The batched ring and halving-doubling phases of one run (every rank, congestion-unaware).

    The C core fills ``open`` (a phase's key → the ``(start ns, algorithm)`` of the ranks that
    joined it) and runs a full phase itself where ``plans`` holds its shape (the ring, the
    message size, the collective, group ring or not, the direction: what fixes its steps, sizes and
    partners), counting it in ``uses``; ``advance`` makes each shape's plan from its first phase."""

    def __init__(self, delay: Callable[[int, int, int], int], account: Callable[[list, int, int], None]) -> None:
        self._delay = delay
        self._account = account
        self.open: dict[tuple, list[tuple[int, Any]]] = {}
        self.plans: dict[tuple, tuple] = {}  # shape → the C core's plan (int64 arrays as bytes, ...)
        self.uses: dict[tuple, int] = {}  # shape → phases run with it (flush books their traffic)
        self._packets: dict[tuple, tuple] = {}  # (ranks, collective, size, ...) → its packets and partners
        self._flows: dict[tuple, tuple[int, list]] = {}  # shape → its messages, [(pairs, size, count)]
        self.messages = 0

    def attach(self, systems: list[Any]) -> bool:
        """Let every rank's C core join its phases here; False where one has no C core."""
        fasts = [getattr(s, "_fast", None) for s in systems]
        if any(f is None or not hasattr(f, "enable_phase_batch") for f in fasts):
            return False
        for f in fasts:
            f.enable_phase_batch(self.open, self.advance, MIN_STEPS, self.plans, self.uses, MAX_TIME_NS,
                                 BatchAbandoned)
        return True

    def advance(self, key: tuple, entries: list[tuple[int, Any]]) -> None:
        """A phase the C core hands over before it runs it: its shape's first (whose plan this
        makes), or one it cannot run (a rank in it twice; a rank of another collective under its
        key, handed over as it joins), for which this raises BatchAbandoned."""
        first = entries[0][1]
        n = first.nodes_in_ring
        last_algo = entries[-1][1]
        if last_algo.stream.dataset.label != first.stream.dataset.label:
            raise BatchAbandoned(f"rank {last_algo.id}: {_kind(first)} phase of {last_algo.stream.dataset.label} "
                                 f"meets one of {first.stream.dataset.label}")
        algos: list[Any] = [None] * n
        for _, algo in entries:
            i = algo.topology.index_in_ring
            if algos[i] is not None:
                raise BatchAbandoned(f"rank {algo.id}: two open {_kind(first)} phases share tag {key[0]}")
            algos[i] = algo
        if len(entries) != n:
            raise BatchAbandoned(f"{_kind(first)} phase of {first.stream.dataset.label}: {len(entries)} of {n} "
                                 "ranks joined")
        shape = key[1:]
        if shape not in self.plans:
            self._make_plan(shape, algos, 10 if first.fast else first.sys.communication_delay)

    def _make_plan(self, shape: tuple, algos: list[Any], endpoint: int) -> None:
        """The shape's flat partner indices and delays (a row per step, or one for a ring), the
        time from each receive to the next send, and the last packet's reduction and size, as the
        C core reads them (int64 arrays in one bytes)."""
        algo = algos[0]
        ids = algo.topology.members
        n = len(ids)
        steps = algo.stream_count
        packets, partners = self._steps(algos)
        bw = algo.sys.local_mem_bw
        if bw <= 0 and any(r for _, r in packets):
            raise BatchAbandoned("a reduction with local-mem-bw <= 0: the event path reports it")
        rows = len(partners) // n
        delays: list[int] = []
        flows: list[tuple[list[tuple[int, int]], int, int]] = []
        for j in range(rows):
            size = packets[j][0]
            row = partners[j * n:(j + 1) * n]
            pairs = [(ids[row[i]], ids[i]) for i in range(n)]
            delays += [self._delay(a, b, size) for a, b in pairs]
            flows.append((pairs, size, steps if rows == 1 else 1))
        extra = [endpoint + (3 * int(size / bw * 1e9) if r else 0) for size, r in packets]
        size, processed = packets[steps]
        values = partners + delays + extra
        if not all(-(1 << 63) <= v < (1 << 63) for v in values):
            raise BatchAbandoned("a delay past the 64-bit clock")
        self._flows[shape] = (n * steps, flows)
        self.plans[shape] = (array("q", values).tobytes(), processed, size, steps, rows)

    def _steps(self, algos: list[Any]) -> tuple[list[tuple[int, bool]], list[int]]:
        """Each packet's (size, reduction), and the partner indices: a ring's predecessors (one
        row), or halving-doubling's partners (a row per message). The same on every ring of one
        size for one collective, message size and direction."""
        algo = algos[0]
        ring = type(algo) is Ring
        key = (algo.nodes_in_ring, algo.com_type, algo.msg_size, algo.stream_count, algo.parallel_reduce,
               algo.direction if ring else None)
        got = self._packets.get(key)
        if got is None:
            n = algo.nodes_in_ring
            packets = algo.schedule()  # (offset, size, reduction): messages 1..stream_count, then the last packet
            if any(size == 0 for _, size, _ in packets[:-1]):
                # the event path notes them (ASTRA-sim aborts on them): its run is the one to keep
                raise BatchAbandoned(f"a {_kind(algo)} phase with 0-byte messages")
            if ring:  # every message from the rank's predecessor, as each rank's own algorithm names it
                index_of = {m: i for i, m in enumerate(algo.topology.members)}
                partners = [index_of[a.curr_sender] for a in algos]
            else:
                partners = []
                for offset, _, _ in packets[:-1]:
                    partners += [_partner_index(i, offset, n) for i in range(n)]
            rows = len(partners) // n
            for j in range(rows):
                row = partners[j * n:(j + 1) * n]
                if not ring and any(row[row[i]] != i for i in range(n)):
                    raise BatchAbandoned(f"a halving-doubling step on {n} ranks does not pair up")
            got = self._packets[key] = ([(size, r) for _, size, r in packets], partners)
        return got

    def flush(self) -> None:
        """Book the batched phases' messages on the network (its byte counts for the report)."""
        for shape, uses in self.uses.items():
            messages, flows = self._flows[shape]
            self.messages += messages * uses
            for pairs, size, count in flows:
                self._account(pairs, size, count * uses)
        self.uses.clear()

    def open_phases(self) -> list[str]:
        """Phases still waiting for some of their ranks (for a stuck report)."""
        out = []
        for entries in self.open.values():
            first = entries[0][1]
            out.append(f"{_kind(first)} phase of {first.stream.dataset.label}: {len(entries)} of "
                       f"{first.nodes_in_ring} ranks started")
        return out


def _kind(algo: Any) -> str:
    return "halving-doubling" if isinstance(algo, HalvingDoubling) else "ring"


def _partner_index(index: int, offset: int, n: int) -> int:
    """HalvingDoubling._find_partner's ring position: the rank itself at offset 0."""
    return index if offset == 0 else _hd_partner_index(index, offset, n)
