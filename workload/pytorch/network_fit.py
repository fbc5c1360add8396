"""The network a traced job ran on, fitted from its own collectives' measured times.

Every collective of a trace is a measurement of the network: the size it moved and the time the
backend took (gloo's record on its worker thread, NCCL's kernel). On one rank that time also holds
the wait for the other ranks to arrive, which is not the network's; so a collective's time is
counted from the moment the last rank joined it (measured.collective_time: to the last rank's
end on one machine, whose ranks share a clock; the shortest span over the ranks across machines).

The fitted network is what ``python -m system.main`` will run the workload on: a ``Ring`` of the
job's ranks (the topology of gloo's and NCCL's ring algorithms) with the default system
configuration. Its two numbers, link bandwidth and per-hop latency, are chosen so that the
simulator reproduces the measured times, using network.calibrate's model: the simulated time of a
collective on the congestion-unaware backend is linear in latency and in 1/bandwidth, so three
runs per distinct collective give it in closed form, and a Nelder–Mead search picks the two
numbers that reproduce the time the step spends in collectives: the count-weighted squared error
of each distinct collective's mean time, relative to the measured total. Repeats of one collective
differ by up to 20x on a loaded host and the step pays their sum, so means, not medians, and
absolute time, not log error: a fit of the log makes the rare slow collectives vanish and
the simulated step short (FSDP2 on gloo: -42 % with the log fit, -23 % with this one). The
result is checked by simulating every distinct collective once more with the fitted numbers; the
per-collective errors go into the file's description and the converter's summary. With one
distinct size the two numbers cannot be told apart: the latency is kept at ASTRA-sim's example
value (500 ns) and the bandwidth is fitted alone.

Collectives that overlap in time share the network (gloo runs each on its own worker thread: DDP's
buckets, FSDP's prefetches), so each one's span holds the others' transfers too; fitted one by
one they make the size look irrelevant (grad_accum on gloo: two all-reduces of 1.1 and 1.6 MB
overlapping, the larger one measured shorter, fitted as 10^6 GB/s and 3 ms per hop, and the step
+64 %). Where the ranks share a clock the measurements are therefore grouped into busy periods
(maximal runs of overlapping spans) and a busy period is fitted as a whole: one server working
through its collectives as they arrive ends at max_k (a_k + sum over j >= k of T_j) after the
first arrival, with a_k the arrivals and T_j the collectives' times alone, whatever the order or
the sharing (any work-conserving discipline ends a busy period at the same time). A collective
that overlaps nothing is its own busy period, so the fit above is the special case.

The collectives of the world and of every process group are fitted, each simulated on its own
ranks of the ring (a tensor-parallel pair, a data-parallel pair), and so are the messages of sends
and receives, from the later of the two records' starts to the receive's end, where the ranks share
a clock (a pipeline's activations and gradients); two measurements share a busy
period only where they overlap in time and have a rank in common. Broadcasts are replayed locally
with their measured time instead (the simulator sends no messages for them).
"""
from __future__ import annotations

import math
import statistics
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from network.calibrate.model import nelder_mead
from network.config import NetworkConfig
from workload.builder import write_collective_microbenchmark

BACKEND = "congestion-unaware"
DEFAULT_LATENCY_NS = 500.0
_PROBES = ((1000.0, 10.0), (5000.0, 10.0), (1000.0, 2.0))      # (latency ns, bandwidth GB/s)


@dataclass(frozen=True)
class Measurement:
    kind: str              # ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL; SEND_RECV: one message
    size: int              # comm_size as written (an all-gather's per-rank input)
    time_ns: int           # from the last rank's arrival (measured.collective_time)
    start_ns: int | None = None     # that arrival on the ranks' shared clock (None: no shared clock)
    members: tuple[int, ...] | None = None     # the group's ranks (a message's: source, destination); None: every rank

    @property
    def key(self) -> tuple[str, int, tuple[int, ...]]:
        """What one simulation measures: kind, size and ranks (() for every rank)."""
        return (self.kind, self.size, self.members or ())


@dataclass(frozen=True)
class NetworkFit:
    npus: int
    bandwidth_gb_s: float
    latency_ns: float
    measurements: int
    points: list[tuple[str, int, float, float]]     # kind, size, measured mean ns, simulated ns
    busy_periods: list[tuple[int, float, float]] = field(default_factory=list)  # collectives, measured, simulated ns

    @property
    def errors(self) -> list[float]:
        return [sim / meas - 1 for _, _, meas, sim in self.points]

    def describe(self) -> str:
        head = (f"fitted by workload.convert pytorch from {self.measurements} measured collective(s): "
                f"Ring({self.npus}) {self.bandwidth_gb_s:.4g} GB/s, {self.latency_ns:.4g} ns per hop")
        parts = []
        if self.points:
            errs = [abs(e) for e in self.errors]
            parts.append(f"simulated vs measured, mean per distinct collective ({len(self.points)}): median |error| "
                         f"{100 * statistics.median(errs):.1f} %, worst {100 * max(errs):.1f} %")
        if self.busy_periods:
            errs = [abs(sim / meas - 1) for _, meas, sim in self.busy_periods]
            n = sum(k for k, _, _ in self.busy_periods)
            parts.append(f"{n} overlapping in {len(self.busy_periods)} busy period(s), each fitted as a whole: "
                         f"median |error| {100 * statistics.median(errs):.1f} %, worst {100 * max(errs):.1f} %")
        return "; ".join([head, *parts])

    def network_dict(self) -> dict:
        return {"topology": ["Ring"], "npus_count": [self.npus], "bandwidth": [float(f"{self.bandwidth_gb_s:.6g}")],
                "latency": [float(f"{self.latency_ns:.6g}")], "backend": BACKEND, "description": self.describe()}


def fit_network(measurements: list[Measurement], npus: int) -> NetworkFit | None:
    """The Ring(npus) that best reproduces the measurements; None without any (or with 1 rank)."""
    if npus < 2 or not measurements:
        return None
    ms = [m for m in measurements if m.time_ns > 0]
    if not ms:
        return None
    keys = sorted({m.key for m in ms})
    column = {k: i for i, k in enumerate(keys)}
    alone, periods = busy_periods(ms)
    groups: dict[int, list[int]] = {}
    for m in alone:
        groups.setdefault(column[m.key], []).append(m.time_ns)
    single_cols = np.array(sorted(groups), int)
    target = np.array([statistics.fmean(groups[c]) for c in single_cols], float)
    weight = np.array([len(groups[c]) for c in single_cols], float)
    spans = [_Period(p, column) for p in periods]
    scale = float(np.sum(weight * target ** 2) + sum(sp.measured ** 2 for sp in spans))
    with tempfile.TemporaryDirectory(prefix="dtsim-netfit-") as tmp:
        sim = _Simulator(Path(tmp), npus)
        # T = c0 + cl·latency + cb/bandwidth, per distinct collective
        (l1, b1), (l2, _), (_, b3) = _PROBES
        t1, t2, t3 = (np.array([sim.time_ns(k, lat, bw) for k in keys], float) for lat, bw in _PROBES)
        cl = (t2 - t1) / (l2 - l1)
        cb = (t3 - t1) / (1 / b3 - 1 / b1)
        c0 = t1 - cl * l1 - cb / b1

        def model(lat: float, bw: float) -> np.ndarray:
            return np.maximum(c0 + cl * lat + cb / bw, 1.0)

        def misfit(x: np.ndarray) -> float:
            lat, bw = (math.exp(x[0]), math.exp(x[1])) if len(x) == 2 else (DEFAULT_LATENCY_NS, math.exp(x[0]))
            t = model(lat, bw)
            err = float(np.sum(weight * (t[single_cols] - target) ** 2))
            err += sum((sp.predict(t) - sp.measured) ** 2 for sp in spans)
            return err / scale

        if len(keys) >= 2:
            starts = [np.log([lat, bw]) for lat in (1e2, 1e4, 1e6) for bw in (0.01, 1.0, 100.0)]
            best = min((nelder_mead(misfit, x0, step=1.0, max_evals=400) for x0 in starts), key=lambda r: r[1])
            lat, bw = math.exp(best[0][0]), math.exp(best[0][1])
        else:
            best = min((nelder_mead(misfit, np.log([bw]), step=1.0, max_evals=200) for bw in (0.01, 1.0, 100.0)),
                       key=lambda r: r[1])
            lat, bw = DEFAULT_LATENCY_NS, math.exp(best[0][0])
        lat, bw = float(f"{lat:.6g}"), float(f"{bw:.6g}")
        check = np.array([sim.time_ns(k, lat, bw) for k in keys], float)
    points = [(keys[c][0], keys[c][1], float(t), float(check[c])) for c, t in zip(single_cols, target)]
    busy = [(len(sp.cols), sp.measured, sp.predict(check)) for sp in spans]
    return NetworkFit(npus, bw, lat, len(ms), points, busy)


def busy_periods(ms: list[Measurement]) -> tuple[list[Measurement], list[list[Measurement]]]:
    """The measurements that overlap no other, and the maximal sets of overlapping ones (each in
    order of arrival); two overlap where their spans do and their ranks meet (collectives of
    disjoint groups do not wait for each other). Without a shared clock (no start) every
    measurement stands alone."""
    timed = sorted((m for m in ms if m.start_ns is not None), key=lambda m: m.start_ns)
    runs: list[tuple[list[Measurement], float, set[int] | None]] = []   # (members, end, ranks: None = all)
    for m in timed:
        ranks = None if m.members is None else set(m.members)
        joined = [k for k, (_, end, rs) in enumerate(runs)
                  if m.start_ns < end and (ranks is None or rs is None or ranks & rs)]
        run, end = [m], m.start_ns + m.time_ns
        for k in reversed(joined):              # merge every run it meets, in arrival order
            other, other_end, rs = runs.pop(k)
            run = other + run
            end = max(end, other_end)
            ranks = None if ranks is None or rs is None else ranks | rs
        run.sort(key=lambda x: x.start_ns)
        runs.append((run, end, ranks))
    alone = [m for m in ms if m.start_ns is None] + [r[0] for r, _, _ in runs if len(r) == 1]
    periods = [r for r, _, _ in runs if len(r) > 1]
    return alone, periods


class _Period:
    """A busy period: when the last collective of overlapping ones ends, given each one's time alone."""

    def __init__(self, run: list[Measurement], column: dict[tuple[str, int], int]) -> None:
        first = run[0].start_ns
        self.cols = np.array([column[m.key] for m in run], int)
        self.arrivals = np.array([m.start_ns - first for m in run], float)
        self.measured = float(max(m.start_ns + m.time_ns for m in run) - first)

    def predict(self, times: np.ndarray) -> float:
        work_left = np.cumsum(times[self.cols][::-1])[::-1]   # sum over j >= k of T_j
        return float(np.max(self.arrivals + work_left))


class _Simulator:
    """One collective on Ring(npus), simulated with the default system configuration: over every
    rank, or over a group's ranks (the others run nothing)."""

    def __init__(self, tmp: Path, npus: int) -> None:
        from system.config import SystemConfig   # here: the simulator loads workloads, i.e. this package
        self.tmp, self.npus = tmp, npus
        self._workloads: dict[tuple, tuple[str, str | None]] = {}
        self._system = SystemConfig.default()

    def time_ns(self, key: tuple, latency_ns: float, bandwidth_gb_s: float) -> int:
        """``key``: (kind, size) or (kind, size, ranks), ranks () for every rank."""
        if key not in self._workloads:
            self._workloads[key] = self._write(key[0], key[1], tuple(key[2]) if len(key) > 2 else ())
        workload, groups = self._workloads[key]
        net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [self.npus],
                                       "bandwidth": [bandwidth_gb_s], "latency": [latency_ns]})
        from system.simulation import run_simulation
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return run_simulation(workload, net, self._system, backend=BACKEND, comm_groups=groups).end_ns

    def _write(self, kind: str, size: int, ranks: tuple[int, ...]) -> tuple[str, str | None]:
        name = f"{kind.lower()}_{size}"
        if not ranks:
            return write_collective_microbenchmark(self.tmp / name, 1, kind, size, shared=True), None
        import json

        from workload.builder import GraphBuilder

        prefix = self.tmp / f"{name}_{'-'.join(map(str, ranks))}"
        for r in range(self.npus):
            b = GraphBuilder()
            if kind == "SEND_RECV" and r == ranks[0]:       # one message from ranks[0] to ranks[1]
                b.send("send", ranks[0], ranks[1], size, 0)
            elif kind == "SEND_RECV" and r == ranks[1]:
                b.recv("recv", ranks[0], ranks[1], size, 0)
            elif kind != "SEND_RECV" and r in ranks:
                b.collective(kind, kind, size, pg_name="1")
            else:   # a rank outside the group: a 1 ns node (a file needs one)
                b.comp("idle", 1, [])
            b.write(prefix, r)
        if kind == "SEND_RECV":
            return str(prefix), None
        groups = Path(f"{prefix}.groups.json")
        groups.write_text(json.dumps({"1": list(ranks)}))
        return str(prefix), str(groups)
