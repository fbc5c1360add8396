"""Property tests over random small workloads (issue 3): every run ends, no rank finishes before
its compute allows, and every byte sent is received."""
from __future__ import annotations

import heapq
import itertools

from hypothesis import HealthCheck, given, settings, strategies as st

from network.config import NetworkConfig
from system.config import SystemConfig
from system.main import run_simulation
from workload.builder import GraphBuilder

COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]


@st.composite
def workloads(draw):
    npus = draw(st.sampled_from([2, 3, 4, 6, 8]))
    n_coll = draw(st.integers(0, 3))
    colls = [(draw(st.sampled_from(COLLS)), draw(st.integers(1, 1 << 20))) for _ in range(n_coll)]
    n_p2p = draw(st.integers(0, 3))
    p2p = []
    for k in range(n_p2p):
        a = draw(st.integers(0, npus - 1))
        b = draw(st.integers(0, npus - 2))
        b = b if b < a else b + 1
        p2p.append((a, b, draw(st.integers(1, 1 << 16)), k))
    per_rank = []
    for _ in range(npus):
        comps = draw(st.lists(st.tuples(st.integers(1, 50_000), st.booleans()), min_size=1, max_size=5))
        per_rank.append(comps)
    return npus, colls, p2p, per_rank, draw(st.data())


def _build(tmp, npus, colls, p2p, per_rank, data):
    crit = []
    for r in range(npus):
        b = GraphBuilder()
        ids: list[int] = []
        dur: dict[int, int] = {}
        longest: dict[int, int] = {}
        prev_coll = None
        items = [("comp", c) for c in per_rank[r]] + [("coll", c) for c in colls] + \
                [("p2p", x) for x in p2p if r in x[:2]]
        order = data.draw(st.permutations(range(len(items))))
        coll_seen = 0
        tainted: set[int] = set()  # point-to-point nodes and what waits on them
        for i in order:
            kind, x = items[i]
            # collectives and sends never wait on a receive: that would make the graph itself
            # deadlock (a blocked send holds no slot, but a collective holds the comm slot)
            pool = ids if kind == "comp" or (kind == "p2p" and x[1] == r) else [d for d in ids if d not in tainted]
            deps = [d for d in pool if data.draw(st.booleans())] if pool else []
            if kind == "comp":
                nid = b.comp(f"c{len(ids)}", x[0], deps=deps, is_cpu_op=x[1])
                dur[nid] = x[0]
            elif kind == "coll":
                c = colls[coll_seen]  # collectives keep one order on every rank
                coll_seen += 1
                if prev_coll is not None:
                    deps = sorted(set(deps) | {prev_coll})
                nid = b.collective(f"k{coll_seen}", c[0], c[1], deps=deps)
                prev_coll = nid
                dur[nid] = 0
            else:
                a, bb, size, tag = x
                nid = (b.send if r == a else b.recv)(f"p{tag}", a, bb, size, tag, deps=deps)
                dur[nid] = 0
            if kind == "p2p" or tainted.intersection(deps):
                tainted.add(nid)
            longest[nid] = dur[nid] + max((longest[d] for d in deps), default=0)
            ids.append(nid)
        b.write(tmp / "w", r)
        gpu = sum(c[0] for c in per_rank[r] if not c[1])
        crit.append(max([gpu] + list(longest.values())))
    return crit


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(w=workloads(), backend=st.sampled_from(["congestion-unaware", "congestion-aware"]),
       splits=st.sampled_from([1, 2, 4]), active=st.sampled_from([1, 2]))
def test_random_workloads_end_and_conserve_bytes(tmp_path_factory, w, backend, splits, active) -> None:
    npus, colls, p2p, per_rank, data = w
    tmp = tmp_path_factory.mktemp("prop")
    crit = _build(tmp, npus, colls, p2p, per_rank, data)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": splits, "active-chunks-per-dimension": active,
                                  "local-mem-bw": 1600, **{f"{c}-implementation": ["ring"] for c in
                                                           ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    r = run_simulation(tmp / "w", net, cfg, backend=backend, symmetry=False)  # a Deadlock would raise
    for rank, (fin, c) in enumerate(zip(r.finish_ns, crit)):
        assert fin >= c, (rank, fin, c)
    s = r.network_stats
    assert s["bytes_sent"] == s["bytes_received"]
    assert s["bytes_sent"] == sum(s["bytes_per_dim"])


# -- the fast event core against the plain event path (issue 13) -----------------------------
# The plain path is what the core was before: one heap entry per event ordered by (time, seq),
# and pairing by a dict of (tag, src, dst, size, n) entries with a send and a receive per step.
class HeapQueue:
    def __init__(self, max_events=None, wall_limit_s=None) -> None:
        self.now, self._heap, self._seq = 0, [], itertools.count()
        self.events_processed, self.max_events, self.wall_limit_s, self.on_tick = 0, max_events, wall_limit_s, None

    def schedule(self, delay_ns, callback, *args) -> None:
        heapq.heappush(self._heap, (self.now + delay_ns, next(self._seq), callback, args))

    def run(self) -> None:
        while self._heap:
            self.now, _, callback, args = heapq.heappop(self._heap)
            callback(*args)
            self.events_processed += 1


def _plain(cls):
    """``cls`` with the plain queue and the plain pairing."""
    class Plain(cls):
        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            self.queue = HeapQueue()
            self.schedule = self.queue.schedule
            self._ids, self._entries = {}, {}

        def send(self, src, dst, size, tag, callback, *args, label=None) -> None:
            key = (tag, src, dst, size)
            full = (key, self._ids.setdefault(("s", key), itertools.count(1)).__next__())
            e = self._entries.setdefault(full, [None, None, None, None, False])
            e[0], e[1] = callback, args
            self.messages += 1
            self.bytes_sent += size
            self.bytes_per_dim[self.topology.dim_to_transfer(src, dst)] += size
            self._transfer(src, dst, size, full)

        def recv(self, dst, src, size, tag, callback, *args, label=None) -> None:
            key = (tag, src, dst, size)
            full = (key, self._ids.setdefault(("r", key), itertools.count(1)).__next__())
            e = self._entries.setdefault(full, [None, None, None, None, False])
            if e[4]:
                del self._entries[full]
                self.bytes_received += size
                self.queue.schedule(0, callback, *args)
            else:
                e[2], e[3] = callback, args

        def exchange(self, me, dst, src, size, tag, label, callback, arg) -> None:
            self.send(me, dst, size, tag, lambda: None)
            self.recv(me, src, size, tag, callback, arg)

        def _on_arrival(self, full) -> None:
            e = self._entries[full]
            recv_cb = e[2]
            e[0](*e[1])
            if recv_cb is not None:
                del self._entries[full]
                self.bytes_received += full[0][3]
                recv_cb(*e[3])
            else:
                e[4] = True

        def unmatched(self) -> list[str]:
            return [str(k) for k, e in self._entries.items() if e[0] is None or e[4]]
    return Plain


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 4), max_size=3)), min_size=1, max_size=40))
def test_calendar_queue_runs_events_in_the_heap_order(program) -> None:
    """Events that schedule more events (delay 0 included) run in the same order at the same times,
    in the Python queue and in the C one (network/_event_core.c) where it is built."""
    from network.event_queue import EventQueue, PyEventQueue

    def drive(q) -> list[tuple[int, int]]:
        log: list[tuple[int, int]] = []

        def ev(i: int) -> None:
            log.append((q.now, i))
            for d in program[i][1]:
                if len(log) < 200:
                    q.schedule(d, ev, (i + d + 1) % len(program))
        for i, (delay, _) in enumerate(program):
            q.schedule(delay, ev, i)
        q.run()
        return log
    plain = drive(HeapQueue())
    assert drive(PyEventQueue()) == plain
    assert drive(EventQueue()) == plain


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.lists(st.integers(0, 4), max_size=4)), min_size=1, max_size=40))
def test_schedule_two_runs_as_two_schedules(program) -> None:
    """A link's hop schedules its arrival and its release in one call: the same order and times as
    two calls to schedule (delay 0 and equal delays included)."""
    from network.event_queue import EventQueue, PyEventQueue

    def drive(q, paired: bool) -> list[tuple[int, int]]:
        log: list[tuple[int, int]] = []

        def ev(i: int) -> None:
            log.append((q.now, i))
            ds = program[i][1] if len(log) < 200 else []
            j = 0
            while j < len(ds):
                a = (i + ds[j] + 1) % len(program)
                if paired and j + 1 < len(ds):
                    b = (i + ds[j + 1] + 1) % len(program)
                    q.schedule_two(ds[j], ev, (a,), ds[j + 1], ev, (b,))
                    j += 2
                else:
                    q.schedule(ds[j], ev, a)
                    j += 1
        for i, (delay, _) in enumerate(program):
            q.schedule(delay, ev, i)
        q.run()
        return log
    plain = drive(HeapQueue(), False)
    assert drive(PyEventQueue(), True) == plain
    assert drive(EventQueue(), True) == plain


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(w=workloads(), backend=st.sampled_from(["congestion-unaware", "congestion-aware"]),
       splits=st.sampled_from([1, 2, 4]), active=st.sampled_from([1, 2]), impl=st.sampled_from(["ring", "direct"]))
def test_fast_core_gives_the_plain_event_paths_cycles(tmp_path_factory, monkeypatch, w, backend, splits, active,
                                                      impl) -> None:
    """The calendar queue, channel pairing and exchange() change no cycle on any rank."""
    from network.registry import backend_class
    import system.simulation as simulation

    npus, colls, p2p, per_rank, data = w
    tmp = tmp_path_factory.mktemp("core")
    _build(tmp, npus, colls, p2p, per_rank, data)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": splits, "active-chunks-per-dimension": active,
                                  "local-mem-bw": 1600, **{f"{c}-implementation": [impl] for c in
                                                           ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    fast = run_simulation(tmp / "w", net, cfg, backend=backend, symmetry=False)
    with monkeypatch.context() as m:
        m.setattr(simulation, "backend_class", lambda name: _plain(backend_class(name)))
        plain = run_simulation(tmp / "w", net, cfg, backend=backend, symmetry=False)
    assert type(plain.systems[0].backend).__name__ == "Plain"
    assert fast.finish_ns == plain.finish_ns
    assert fast.events == plain.events
    for k in ("messages", "bytes_sent", "bytes_received", "bytes_per_dim"):
        assert fast.network_stats[k] == plain.network_stats[k], k
