"""Ring phases of every rank at once, without an event per message (issue 13).

On a network whose message delay is fixed (congestion-unaware: no link state), one phase of
the ring algorithm is a max-plus recurrence over the ring (system/collective/ring.py and
docs/astra-sim-semantics.md §7.2, with one packet in flight per phase):

* rank i's first message leaves at ``T[i] = S[i] + E`` (S: the phase's start on rank i, E the
  endpoint delay, or 10 on group rings);
* message k reaches rank i at ``A = T_k[pred(i)] + D[i]`` and its receive fires at
  ``R_k[i] = max(A, T_k[i])`` (posted when rank i sent its own message k);
* message k+1 leaves at ``R_k[i] + E + P_(k+1)``, P the reduction of a packet that carries one;
* after the last receive the last packet goes through the memory bus and the phase exits.

Every rank's exit depends on every rank's start, so the recurrence can run when the last rank of
the ring starts its phase: one vector step per message for all ranks, instead of some three
events per rank and message. The last packet then takes the ordinary path (a memory-bus event
at the last receive's time), so the exit, the next phase and everything after it run exactly as
in the plain event path.

The batcher only takes phases it can prove equal to the event path; when it meets something
that could pair messages differently (two open phases of one pairing key on a rank, ranks that
disagree on a phase), it raises ``BatchAbandoned`` and the run is redone without batching.
"""
from __future__ import annotations

import sys
from operator import add

from chakra_proto import enums as pb
# the clock's end, which network.api re-exports: importing that module (a typing.Protocol) costs typing
from network.event_queue import MAX_TIME_NS
from network.errors import FastPathConflict
from system.collective.algorithm import ComType
from system.collective.ring import Ring
from system.config import CONFIG_NAMES, ImplType
from system.shortcuts.decline import Decline
from system.sys_core import SYS_CORE

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any, Sequence
    import numpy as np

#: below this many rank-steps a phase runs the recurrence in plain Python (numpy's per-call cost)
_NUMPY_MIN_WORK = 2048
#: rank-steps of a run's phases done in plain Python before it pays numpy's import: that import
#: costs 0.07-0.2 s and 14 MB of peak memory, a rank-step 0.1-0.4 µs in Python, so a run whose
#: batched work stays below this (a 64-rank layout's few ring phases) never needs numpy, and one
#: that goes past it pays at most about twice what knowing its total work ahead would have cost
_PYTHON_WORK_BEFORE_NUMPY = 250_000
#: on the congestion-unaware network a phase of fewer steps runs on the event path (where every rank
#: runs, the C core joins ring phases first: phase_batch.py, whose join is cheaper): joining the
#: batch here costs a rank some 10 µs of Python, a step of the event path some three events in C
#: (0.3-0.5 µs each), so the rings of 2 ranks that tensor-parallel groups make (2 steps; all-gathers
#: of 3 ranks) ran slower batched (a 64-rank layout of such groups: 5-10% of its wall), where rings
#: of 4 (6 steps) ran as fast either way and 8 or more faster batched. Not on the
#: congestion-aware network, whose batcher is proved only where every ring phase of the run is
#: batched (prove_on_pipes)
MIN_STEPS = 4
#: the unaware recurrence in C (None: not compiled, or DTSIM_PURE_PYTHON=1)
_RING_RECURRENCE = None if SYS_CORE is None else SYS_CORE.ring_recurrence
#: decline the congestion-aware batcher on a built-in topology where a collective's ranks run
#: different compute (prove_on_pipes); tests of the batcher's own equality turn it off
DECLINE_UNEVEN_COMPUTE = True


def prove_on_pipes(graphs: Sequence[Any], config: Any, groups: dict[int, list[int]],
                   built_in: bool = True) -> None:
    """Decline where batched ring phases cannot be proved on the congestion-aware network.

    There a phase's hand-back to the event path lands at the right times but not at the same
    place among the events of its tick, and the order of same-tick messages decides link queue
    order. Every rank's next phase then starts in another order against traffic the batcher does
    not run. The batcher is taken only where every message of the run is a ring phase's.

    On a built-in topology (``built_in``) it is also declined where the ranks of one collective
    run different compute: they reach its ring phases at different times, the phase waits for
    its last rank while other traffic uses its links or a chunk reaches a link in the very tick
    it frees, and the batcher gives the whole run up for the event path, after up to a third of
    the run's time (50 of 51 drawn mixed layouts of 16-128 ranks; on the differential corpus's
    small cases the batched runs that did finish were slower than the event path)."""
    npus = len(graphs)
    seen: set[int] = set()
    types: set[tuple[int, bool]] = set()
    compute: dict[int, tuple] = {}  # graph → its compute nodes in id order (what paces a rank to its collectives)
    used: set[str] = set()  # the groups of its collectives ("" the world)
    for g in graphs:
        if id(g) in seen:
            continue
        seen.add(id(g))
        mine = []
        for n in g.nodes.values():
            if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                raise Decline(f"{g.path}: node {n.id} is point-to-point traffic, which runs as events")
            if n.type == pb.COMM_COLL_NODE and n.comm_type != pb.BROADCAST:
                sub = n.pg_name not in (None, "", "0") and len(groups.get(int(n.pg_name), ())) < npus
                types.add((n.comm_type, sub))
                used.add(n.pg_name if sub else "")
            elif n.type == pb.COMP_NODE:
                mine.append((n.id, n.duration_ns, n.num_ops, n.tensor_size, n.is_cpu_op))
        compute[id(g)] = tuple(c[1:] for c in sorted(mine))
    if built_in and DECLINE_UNEVEN_COMPUTE:
        for pg in sorted(used):
            members = range(npus) if pg == "" else groups.get(int(pg), ())
            if len({compute[id(graphs[r])] for r in members if 0 <= r < npus}) > 1:
                raise Decline(f"the ranks of {'the world' if pg == '' else f'communicator group {pg}'} run different "
                              "compute before its collectives: its ring phases would wait for their ranks while "
                              "other traffic uses their links, where the congestion-aware batcher gives the run up")
    for ct, sub in types:
        name = CONFIG_NAMES.get(ct)
        impls = config.impls_for(name) if name is not None else ()
        if name is None or name in config.custom_implementations or config.per_node_custom:
            raise Decline(f"a {name or ct} collective does not run the Ring algorithm")
        if sub and len(impls) > 1:
            continue  # a sub-group runs a several-entry list as one ring (comm_group.py)
        if any(i.type not in (ImplType.RING, ImplType.ONE_RING) for i in impls):
            kinds = ", ".join(i.type.value for i in impls)
            raise Decline(f"'{name}-implementation' [{kinds}] runs other algorithms beside Ring, whose "
                          "messages are events")


class BatchAbandoned(FastPathConflict):
    """A phase the batcher cannot prove equal to the event path: rerun without batching."""


class _Group:
    __slots__ = ("key", "label", "n", "need", "members", "exited", "flows")

    def __init__(self, key: tuple, label: object, n: int, need: int) -> None:
        self.key = key
        self.label = label
        self.n = n
        self.need = need  # the ranks that join it: n, or 1 for one orbit (RingBatcher._need)
        self.members: dict[int, tuple[int, "Ring"]] = {}  # index in ring → (start ns, algorithm)
        self.exited = 0
        self.flows = None  # its phase in the network's RingFlows, where it runs there


class RingBatcher:
    """Collects the ranks of each ring phase and advances the phase for all of them at once.

    The network says how: ``fixed_delay_ns(src, dst, size)`` where a message's delay depends on
    nothing else (congestion-unaware), or ``pipes_possible(pairs)`` / ``pipes(pairs, size)``
    where flows that share no link can be advanced together (congestion-aware,
    network/analytical/link_pipes.py). ``account_flows`` books the messages' traffic.
    """

    @classmethod
    def for_backend(cls, backend: Any) -> "RingBatcher | None":
        if getattr(backend, "fixed_delay_ns", None) is None and getattr(backend, "pipes", None) is None:
            return None
        return cls(backend)

    def __init__(self, backend: Any) -> None:
        self._delay = getattr(backend, "fixed_delay_ns", None)
        self._pipes_possible = getattr(backend, "pipes_possible", None)
        self._pipes = getattr(backend, "pipes", None)
        ring_flows = getattr(backend, "ring_flows", None)
        #: on a topology file (congestion-aware) phases run in the network's RingFlows as their
        #: ranks join, sharing links and overlapping in time (network/analytical/ring_flows.py)
        self._rings = ring_flows() if ring_flows is not None else None
        self._account = backend.account_flows
        self._schedule = backend.schedule
        self._now = backend.now
        self._can_pipe: dict[tuple, bool] = {}  # ring and direction → flows share no link
        self._open: dict[tuple, list[_Group]] = {}
        self._plans: dict[tuple, tuple[list[int], bool, int]] = {}  # per-step delays of a phase shape
        self._delays: dict[tuple, list[int]] = {}  # per ring, direction and size
        self._shapes: dict[tuple, tuple[list[int], list[int], list[tuple[int, int]]]] = {}
        #: an orbit run (system/shortcuts/orbit_network.py) simulates rank x only where rep_of[x] == x
        self._rep_of: list[int] | None = getattr(backend, "rep_of", None)
        self._python_work = 0  # rank-steps run in plain Python so far (_vectorise)
        self._needed: dict[tuple, int] = {}  # ring → how many of its ranks join a phase
        self.messages = 0

    # -- joining ----------------------------------------------------------------------
    def join(self, algo: "Ring") -> bool:
        """Rank ``algo.id`` starts this ring phase now; False: run it on the event path."""
        if type(algo) is not Ring:
            return False  # the recurrence is the Ring algorithm's; Direct (a Ring subclass) sends otherwise
        sys = algo.sys
        steps = algo.stream_count
        if steps <= 0 or steps < MIN_STEPS and self._delay is not None:
            return False
        if not algo.msg_size:
            sys.note_zero_message(algo.stream)  # what Sys.collective_send_recv would note
        if not algo.fast and not sys.communication_delay and not self._now():
            sys.note_zero_delay()  # what Sys.mem_bus_transfer would note of the phase's first packet
        topo = algo.topology
        n = algo.nodes_in_ring
        stream = algo.stream
        tag = stream.stream_id
        ring_id = topo.identity
        if self._delay is None and self._rings is None and not self._pipes_ok(algo):
            return False
        need = n if self._rep_of is None else self._need(algo, ring_id, n)
        if not need:
            return False
        key = (tag, ring_id, algo.direction, algo.msg_size, algo.com_type, steps, algo.fast)
        groups = self._open.get(key)
        if groups is None:
            groups = self._open[key] = []
        index = topo.index_in_ring
        label = stream.dataset.label
        for g in groups:
            member = g.members.get(index)
            if member is None:
                break
            if member[1]._batch_group is not None:
                # this rank still runs a phase of the same pairing key: its messages would mix
                raise BatchAbandoned(f"rank {algo.id}: two open ring phases share tag {tag}")
        else:
            g = _Group(key, label, n, need)
            groups.append(g)
        if label != g.label:
            raise BatchAbandoned(f"rank {algo.id}: ring phase of {label} meets one of {g.label}")
        if sys.local_mem_bw <= 0 and _processes(algo, 2):
            raise BatchAbandoned("a reduction with local-mem-bw <= 0: the event path reports it")
        g.members[index] = (self._now(), algo)
        algo._batch_group = g
        if self._rings is not None:
            self._join_flows(g, algo, index)
        elif len(g.members) == need:
            self._advance(g)
        return True

    def _join_flows(self, g: _Group, algo: "Ring", index: int) -> None:
        """The rank's part of its phase in the network's RingFlows, which hands it back at its
        last receive, as _advance's schedule does."""
        steps = algo.stream_count
        size = algo.msg_size
        if g.flows is None:
            ids, pred, flows = self._shape(algo)
            endpoint, extra, processed, _ = self._plan(algo)
            g.flows = (self._rings.phase(ids, pred, steps, size, endpoint, extra), processed)
            self._account(flows, size, steps)
            self.messages += g.n * steps
        phase, processed = g.flows
        self._rings.join(phase, index, lambda _t: algo.finish_batched(steps, processed))

    def _need(self, algo: "Ring", ring_id: tuple, n: int) -> int:
        """In an orbit run: n where every rank of the ring is simulated; 1 where the ring is one
        orbit, whose ranks all do what its simulated one does, at the same time, with one delay
        on every hop (σ maps hop onto hop); else 0, the event path."""
        need = self._needed.get(ring_id)
        if need is None:
            rep_of = self._rep_of
            members = algo.topology.members
            reps = {rep_of[m] for m in members}
            if all(rep_of[m] == m for m in members):
                need = n
            elif len(reps) == 1:
                size = algo.msg_size
                need = 1 if len({self._delay(a, b, size) for a, b in self._shape(algo)[2]}) == 1 else 0
            else:
                need = 0
            self._needed[ring_id] = need
        return need

    def _pipes_ok(self, algo: "Ring") -> bool:
        k = (algo.topology.identity, algo.direction)
        ok = self._can_pipe.get(k)
        if ok is None:
            ok = self._can_pipe[k] = self._pipes_possible(self._shape(algo)[2])
        return ok

    def _shape(self, algo: "Ring") -> tuple[list[int], list[int], list[tuple[int, int]]]:
        """The ring's ranks in ring order, each one's predecessor index, the flows pred → rank."""
        k = (algo.topology.identity, algo.direction)
        shape = self._shapes.get(k)
        if shape is None:
            ids = algo.topology.members
            n = len(ids)
            step = -1 if algo.direction.value == 0 else 1  # clockwise: receive from index − 1
            pred = [(i + step) % n for i in range(n)]
            shape = self._shapes[k] = (ids, pred, [(ids[pred[i]], ids[i]) for i in range(n)])
        return shape

    def retired(self, rank: int) -> None:
        """Rank ``rank``'s workload is over: it starts no ring phase any more."""
        if self._rings is not None:
            self._rings.retire(rank)

    def exited(self, algo: "Ring") -> None:
        g = algo._batch_group
        algo._batch_group = None
        g.exited += 1
        if g.exited == g.need:
            groups = self._open[g.key]
            groups.remove(g)
            if not groups:
                del self._open[g.key]

    def open_phases(self) -> list[str]:
        """Ring phases still waiting for some of their ranks (for a stuck report)."""
        out = []
        for groups in self._open.values():
            for g in groups:
                if len(g.members) < g.need:
                    out.append(f"ring phase of {g.label}: {len(g.members)} of {g.need} ranks started")
        if self._rings is not None:
            out += self._rings.open_phases()
        return out

    # -- the recurrence -----------------------------------------------------------------
    def _plan(self, first: "Ring") -> tuple[int, list[int], bool, int]:
        """A phase's endpoint time, the time between a receive and the next send per message,
        whether its last packet is reduced, and the sum of those times."""
        sys = first.sys
        steps = first.stream_count
        endpoint = 10 if first.fast else sys.communication_delay
        reduction = 3 * int(first.msg_size / sys.local_mem_bw * 1e9) if sys.local_mem_bw > 0 else 0
        plan_key = (first.nodes_in_ring, first.com_type, steps, endpoint, reduction)
        plan = self._plans.get(plan_key)
        if plan is None:
            extra = [endpoint + (reduction if _processes(first, j) else 0) for j in range(steps + 2)]
            plan = self._plans[plan_key] = (extra, _processes(first, steps + 1), sum(extra[2:steps + 1]))
        extra, processed, between = plan
        return endpoint, extra, processed, between

    def _advance(self, g: _Group) -> None:
        members = g.members
        n = g.n
        first = next(iter(members.values()))[1]  # one orbit: the simulated rank, wherever it sits in the ring
        steps = first.stream_count
        size = first.msg_size
        _, pred, flows = self._shape(first)
        endpoint, extra, processed, between = self._plan(first)
        if len(members) < n:  # one orbit (_need): every rank starts with the simulated one
            (index, (start, algo)), = members.items()
            delay = self._delay(*flows[index], size)
            self._account([flows[index]], size, steps)
            self.messages += steps
            self._schedule(start + endpoint + steps * delay + between - self._now(),
                           algo.finish_batched, steps, processed)
            return
        order = [members[i][1] for i in range(n)]
        starts = [members[i][0] for i in range(n)]
        if self._delay is None:
            vectorised = self._vectorise(n * steps)
            pipes = self._pipes(flows, size, vectorised)
            recur = _recurrence_pipes if vectorised else _recurrence_pipes_py
            last = recur(starts, pred, pipes, endpoint, extra, steps)
            pipes.close(steps)
        else:
            dk = (g.key[1], first.direction, size)
            delays = self._delays.get(dk)
            if delays is None:
                delays = self._delays[dk] = [self._delay(a, b, size) for a, b in flows]
            s0, d0 = starts[0], delays[0]
            if starts.count(s0) == n and delays.count(d0) == n:
                # lock-step: every receive waits exactly one delay, on every rank alike
                last = [s0 + endpoint + steps * d0 + between] * n
            else:
                last = self._recurrence(starts, pred, delays, endpoint, extra, steps)
        self._account(flows, size, steps)
        self.messages += n * steps
        now = self._now()
        schedule = self._schedule
        for algo, t in zip(order, last):
            schedule(int(t) - now, algo.finish_batched, steps, processed)

    def _recurrence(self, starts: list[int], pred: list[int], delays: list[int], endpoint: int,
                    extra: list[int], steps: int) -> Any:
        """Each rank's last receive of a phase on the congestion-unaware network: in C where
        compiled (system/_ring_recurrence.c, which needs no numpy, whose import is 14 MB of peak
        memory); else numpy for a big phase; Python's integers where int64 might wrap, where the
        run then ends by the clock as the event path's does."""
        if _RING_RECURRENCE is not None:
            last = _RING_RECURRENCE(starts, pred, delays, endpoint, extra, steps)
            if last is not None:
                return last
        if not self._vectorise(len(starts) * steps) or \
                max(starts) + endpoint + steps * max(delays) + sum(extra[2:steps + 1]) > MAX_TIME_NS:
            return _recurrence_py(starts, pred, delays, endpoint, extra, steps)
        return _recurrence_np(starts, pred, delays, endpoint, extra, steps)

    def _vectorise(self, work: int) -> bool:
        """Whether a phase of ``work`` rank-steps runs on numpy: a big phase where numpy is
        imported already or the run's plain-Python work (this phase's included) pays its import."""
        if work < _NUMPY_MIN_WORK:
            return False
        if _numpy_loaded() or self._python_work + work >= _PYTHON_WORK_BEFORE_NUMPY:
            return True
        self._python_work += work
        return False


def _numpy_loaded() -> bool:
    return "numpy" in sys.modules


def _processes(algo: "Ring", packet: int) -> bool:
    """Whether packet ``packet`` (1-based) of a ring phase carries a reduction
    (PacketAlgorithm._take_packet: groups of one zero-latency and n−1 non-zero-latency packets,
    the toggle set in odd groups)."""
    n = algo.nodes_in_ring
    j = packet - 1
    if j % n == 0:
        return False
    ct = algo.com_type
    return ct is ComType.REDUCE_SCATTER or (ct is ComType.ALL_REDUCE and (j // n) % 2 == 0)


def _recurrence_py(starts: list[int], pred: list[int], delays: list[int], endpoint: int,
                   extra: list[int], steps: int) -> list[int]:
    n = len(starts)
    t = [s + endpoint for s in starts]
    shift = pred[0] % n  # pred(i) = i + shift (mod n): the ring is a rotation
    d = delays[0]
    uniform = delays.count(d) == n
    for k in range(1, steps + 1):
        tp = t[shift:] + t[:shift]  # each rank's predecessor's send k
        a = [x + d for x in tp] if uniform else list(map(add, tp, delays))
        r = list(map(max, a, t))
        if uniform and r == a:
            return _rotate(t, pred, d, extra, k, steps)
        if k < steps:
            e = extra[k + 1]
            t = [x + e for x in r]
        else:
            t = r
    return t


def _rotate(t: Any, pred: list[int], delay: int, extra: list[int], k: int, steps: int) -> list[int]:
    """The rest of the phase once every receive of step k waits for its message (uniform delay):
    from then on each step hands every rank its predecessor's time plus one delay, so rank i's
    last receive is its (steps − k + 1)-th predecessor's send k plus that many delays and the
    steps' endpoint and reduction times (which keeps every receive waiting, step after step)."""
    n = len(pred)
    hops = steps - k + 1
    shift = (pred[0] - 0) % n  # pred(i) = i + shift: ±1 around the ring
    add = hops * delay + sum(extra[k + 1:steps + 1])
    return [int(t[(i + shift * hops) % n]) + add for i in range(n)]


def _recurrence_np(starts: list[int], pred: list[int], delays: list[int], endpoint: int,
                   extra: list[int], steps: int) -> Any:
    import numpy as np  # here, not at the top: a small run must not pay numpy's import

    t = np.asarray(starts, dtype=np.int64) + endpoint
    p = np.asarray(pred, dtype=np.intp)
    d = np.asarray(delays, dtype=np.int64)
    uniform = delays.count(delays[0]) == len(delays)
    a = np.empty_like(t)
    for k in range(1, steps + 1):
        np.take(t, p, out=a)
        a += d
        if uniform and (a >= t).all():
            return _rotate(t, pred, delays[0], extra, k, steps)
        np.maximum(a, t, out=t)
        if k < steps:
            t += extra[k + 1]
    return t


def _recurrence_pipes(starts: list[int], pred: list[int], pipes: Any, endpoint: int,
                      extra: list[int], steps: int) -> "np.ndarray":
    """As _recurrence_np, with arrivals from the links' queues (flow i is pred(i) → i)."""
    import numpy as np
    if max(starts) > MAX_TIME_NS - endpoint:
        raise FastPathConflict("a time past the 64-bit clock")
    t = np.asarray(starts, dtype=np.int64) + endpoint
    p = np.asarray(pred, dtype=np.intp)
    for k in range(1, steps + 1):
        np.maximum(pipes.step(t[p]), t, out=t)
        if k < steps:
            if (t > MAX_TIME_NS - extra[k + 1]).any():  # int64 would wrap
                raise FastPathConflict("a time past the 64-bit clock")
            t += extra[k + 1]
    return t


def _recurrence_pipes_py(starts: list[int], pred: list[int], pipes: Any, endpoint: int,
                         extra: list[int], steps: int) -> list[int]:
    """_recurrence_pipes on lists, with network/analytical/list_pipes.py's pipes (and its checks)."""
    t = [s + endpoint for s in starts]
    if max(t) > MAX_TIME_NS:
        raise FastPathConflict("a time past the 64-bit clock")
    for k in range(1, steps + 1):
        a = pipes.step([t[j] for j in pred])
        t = [u if u > v else v for u, v in zip(a, t)]
        if k < steps:
            e = extra[k + 1]
            t = [u + e for u in t]
            if max(t) > MAX_TIME_NS:
                raise FastPathConflict("a time past the 64-bit clock")
    return t
