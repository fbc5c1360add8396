"""A closed-form model of NCCL's ring all-reduce inside one node, after NCCL's own tuning model
(src/graph/tuning.cc, ``ncclTopoTuneModel``), fitted to one GPU count and used for the others.

Per protocol p (LL128, Simple), NCCL estimates ``latency_p + size / busBw_p`` with
``latency_p = baseLat[ring][p] + nsteps x hwLat[NVLink][ring][p]`` (nsteps = 2(N-1) for an
all-reduce) and ``busBw_p = nChannels x bw x eff_p`` (eff 0.92 for LL128, 1 for Simple), and runs
the protocol with the smaller time. We keep that structure and NCCL's constants for the *shape*,
and fit two numbers to the one table:

* ``latency_scale``: one factor on both protocols' latencies. Measured fixed costs are several
  times NCCL's estimates (launch, framework), but NCCL's split between the per-collective base
  and the per-step part is what moves a latency from one GPU count to another.
* ``per_byte_us``: a cost per byte of the buffer that does not depend on N (the local copy and
  reduction passes over HBM); it is what makes 2 GPUs' busbw lower than 8 GPUs' on NVSwitch.

The ring bandwidth comes from the node's topology, not from the fit: on NVSwitch every GPU count
gets the full per-GPU NVLink bandwidth; on a direct NVLink mesh (DGX-1's hybrid cube-mesh) the
bandwidth is the number of rings the GPUs 0..N-1 can form over distinct links, times one link's
bandwidth (see ``rings_on_mesh``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

#: tuning.cc (NCCL master, 2026): ring baseLat and NVLink hwLat (µs), and the bandwidth factor per protocol
PROTOCOLS = {"LL128": (14.0, 1.9, 0.92), "Simple": (8.4, 3.4, 1.0)}

#: DGX-1 (V100) hybrid cube-mesh: NVLinks between GPU pairs (NVIDIA DGX-1 system architecture white
#: paper; nvidia-smi topo -m shows NV1/NV2). Six links per GPU.
DGX1_LINKS = {(0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2, (2, 6): 1,
              (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2}


def rings_on_mesh(n: int, links: dict[tuple[int, int], int]) -> int:
    """How many rings NCCL can lay over GPUs 0..n-1 using every NVLink once per direction: the
    largest set of directed Hamiltonian cycles that fits the link counts. Two GPUs form one ring
    over their links (there and back). Where the links admit no ring, NCCL routes a hop through a
    neighbouring GPU; we then take the smallest NVLink count of a GPU inside the set."""
    cap = {}
    for (a, b), k in links.items():
        if a < n and b < n:
            cap[(a, b)] = cap[(b, a)] = k
    if n == 2:
        return cap.get((0, 1), 0)
    cycles: list[tuple[tuple[int, int], ...]] = []

    def walk(path: list[int]) -> None:
        if len(path) == n:
            if (path[-1], 0) in cap:
                cycles.append(tuple(zip(path, path[1:] + [0])))
            return
        for nxt in range(1, n):
            if nxt not in path and (path[-1], nxt) in cap:
                walk(path + [nxt])

    walk([0])
    best = 0

    def pack(start: int, used: dict, count: int) -> None:
        nonlocal best
        best = max(best, count)
        for i in range(start, len(cycles)):
            if all(used.get(e, 0) < cap[e] for e in cycles[i]):
                for e in cycles[i]:
                    used[e] = used.get(e, 0) + 1
                pack(i, used, count + 1)  # a cycle may be used again where links allow
                for e in cycles[i]:
                    used[e] -= 1

    pack(0, {}, 0)
    if best:
        return best
    return min(sum(k for (a, b), k in cap.items() if a == g) for g in range(n))


@dataclass(frozen=True)
class NcclRingModel:
    """All-reduce time in µs on N GPUs of one node: the faster of LL128 and Simple."""

    link_gb_s: float  # one ring's bandwidth, GB/s (10^9 B, as nccl-tests' busbw)
    rings: Callable[[int], int]
    latency_scale: float = 1.0
    per_byte_us: float = 0.0

    def time_us(self, n: int, size: float | np.ndarray) -> np.ndarray:
        bus, steps = 2 * (n - 1) / n, 2 * (n - 1)
        bw = self.rings(n) * self.link_gb_s * 1e3  # bytes/µs
        size = np.asarray(size, float)
        return np.min([self.latency_scale * (base + steps * hw) + size * (bus / (eff * bw) + self.per_byte_us)
                       for base, hw, eff in PROTOCOLS.values()], axis=0)

    def fit(self, n: int, sizes: Sequence[float], times_us: Sequence[float]) -> "NcclRingModel":
        """The latency scale and per-byte cost that best fit one table (mean |log| misfit)."""
        from network.calibrate.model import nelder_mead
        s, t = np.asarray(sizes, float), np.asarray(times_us, float)

        def misfit(x: np.ndarray) -> float:
            m = NcclRingModel(self.link_gb_s, self.rings, math.exp(x[0]), math.exp(x[1]))
            return float(np.mean(np.abs(np.log(m.time_us(n, s) / t))))

        best = min((nelder_mead(misfit, np.array(x0), step=0.5, max_evals=600, tol=1e-10)
                    for x0 in ([0.0, -15.0], [1.0, -13.0], [2.0, -17.0])), key=lambda r: r[1])
        return NcclRingModel(self.link_gb_s, self.rings, math.exp(best[0][0]), math.exp(best[0][1]))


def topology_rings(name: str) -> tuple[Callable[[int], int], float]:
    """(rings per GPU count, one ring's GB/s) of a node type, from its data sheet."""
    if name == "nvswitch-a100":  # 12 NVLink3 links x 25 GB/s per direction, all through NVSwitch
        return (lambda n: 1), 300.0
    if name == "nvswitch-h100":  # 18 NVLink4 links x 25 GB/s
        return (lambda n: 1), 450.0
    if name == "dgx1-v100":  # NVLink2: 25 GB/s per link and direction
        return _dgx1_rings, 25.0
    raise ValueError(f"unknown node topology {name!r}")


@functools.lru_cache(maxsize=None)
def _dgx1_rings(n: int) -> int:
    return rings_on_mesh(n, DGX1_LINKS)  # a search over cycles: once per GPU count, not per fit step


@dataclass(frozen=True)
class RingEquivalent:
    """What the simulator's ring can run: ``fixed + 2(N-1) x step + size x (bus(N) / bw(N) + per_byte)``
    with ``bw(N) = bw_scale x rings(N) x link``: one protocol's shape, no switch by size.

    NCCL's envelope (LL128 below a crossover, Simple above, the crossover moving with N) is concave
    in the size and cannot be one such line; ``ring_equivalent`` picks the line closest to the
    envelope over every GPU count from 2 to the fitted one and the fitted sizes, so that the files
    written are the envelope's best single-protocol stand-in (docs/calibration.md)."""

    fixed_us: float
    step_us: float
    bw_scale: float
    per_byte_us: float

    def bus_bytes_per_us(self, model: NcclRingModel, n: int) -> float:
        return self.bw_scale * model.rings(n) * model.link_gb_s * 1e3

    def time_us(self, model: NcclRingModel, n: int, size: float | np.ndarray) -> np.ndarray:
        size = np.asarray(size, float)
        return (self.fixed_us + 2 * (n - 1) * self.step_us
                + size * (2 * (n - 1) / n / self.bus_bytes_per_us(model, n) + self.per_byte_us))


def ring_equivalent(model: NcclRingModel, npus: int, sizes: Sequence[float]) -> RingEquivalent:
    """The single-protocol line nearest (mean |log|) to ``model``'s envelope at 2..npus GPUs.
    Only the model enters here, so no table other than the fitted one shapes the result."""
    from network.calibrate.model import nelder_mead
    s = np.asarray(sizes, float)
    counts = range(2, max(npus, 2) + 1)
    target = [(n, model.time_us(n, s)) for n in counts]

    def line(x: np.ndarray) -> RingEquivalent:
        return RingEquivalent(math.exp(x[0]), math.exp(x[1]), math.exp(x[2]), model.per_byte_us)

    def misfit(x: np.ndarray) -> float:
        eq = line(x)
        return float(np.mean([np.mean(np.abs(np.log(eq.time_us(model, n, s) / t))) for n, t in target]))

    base, hw, eff = PROTOCOLS["Simple"]
    starts = [np.log([model.latency_scale * b, model.latency_scale * h, e]) for b, h, e in PROTOCOLS.values()]
    best = min((nelder_mead(misfit, x0, step=0.3, max_evals=900, tol=1e-10) for x0 in starts), key=lambda r: r[1])
    return line(best[0])


#: node types --node accepts (topology_rings): NVSwitch nodes and DGX-1's cube-mesh
NODE_TYPES = ("nvswitch-a100", "nvswitch-h100", "dgx1-v100")


def ring_machine(eq: RingEquivalent, model: NcclRingModel, n: int, backend: str) -> "MachineParams":
    """The simulator's files for ``eq`` at ``n`` GPUs. On a 1-D ``Ring`` with one chunk a ring
    all-reduce takes ``(2N-1) ED + 2(N-1) (lat + (S/N)/bw)`` on both analytical backends
    (semantics §7.2), so: ED + lat = the step cost (half each, as the Switch fits split it),
    bw = the bus bandwidth, collective-fixed-delay = the fixed cost less the one extra ED, and
    collective-copy-bw = 1 / per-byte. local-mem-bw is set so high that the per-step reduction
    rounds to 0 ns: the model's memory cost is the N-independent per-byte term."""
    from network.calibrate.model import gib_per_s
    from network.calibrate.params import Level, MachineParams
    step_ns = 1e3 * eq.step_us
    ed = max(1, round(step_ns / 2))
    # two GPUs: ASTRA-sim's congestion-aware backend aborts on a Ring of 2; FullyConnected(2) is the
    # same one hop each way
    level = Level(n, gib_per_s(eq.bus_bytes_per_us(model, n)), max(step_ns - ed, 0.0), "Ring" if n > 2 else "FullyConnected")
    fixed = max(0, round(1e3 * eq.fixed_us - ed))
    copy = 1e-3 / eq.per_byte_us if eq.per_byte_us > 0 else 0.0  # bytes/µs → GB/s of 10^9 B
    return MachineParams((level,), ed, 1, 1, REDUCTION_HIDDEN_GB_S, backend, fixed, copy)


#: local-mem-bw (GB/s) at which 3 x trunc(m / bw) is 0 for every message up to the reader's 2^44 B
REDUCTION_HIDDEN_GB_S = float(1 << 45)
