"""Differential testing against ASTRA-sim's analytical binaries (issue 21).

    python scripts/differential.py generate --seed 0 --cases 2000 --astra-sim-bin DIR --out C.jsonl.gz
    python scripts/differential.py check [--corpus C.jsonl.gz] [--mode all] [--case ID ...]
    python scripts/differential.py check --seed 12345 --cases 300 --astra-sim-bin DIR   # fresh, live
    python scripts/differential.py materialize --case ID --out DIR [--corpus C.jsonl.gz]

A *case* is a JSON-able spec: a network (``net.yml`` keys), a system JSON, optional communicator
groups and one Chakra graph per rank in a compact form (``materialize`` writes the files). Specs come
from ``generate_spec(seed)``, deterministic through one ``random.Random(seed)`` per case, and the
corpus stores the spec itself, so a stored case never depends on the generator staying the same.

ASTRA-sim's binaries are measuring instruments only (``run_astra_sim``): the corpus records, per
backend, ``ok`` with every rank's cycles, ``no-finish`` (exit 0, some rank never printed its
finished line), ``timeout``, ``crash rc=N`` or ``unsupported`` (the congestion-aware binary is 1-D
only). ``check`` runs dtsim in-process on each case and compares (``compare``): where ASTRA-sim
finished, every rank's cycles must be equal; where it did not, dtsim must refuse (InputError),
report a deadlock, or warn with a message naming ASTRA-sim, never answer silently.

Exit codes: 0 no mismatch, 1 some mismatch, 2 bad input (no corpus, no binaries).
"""
from __future__ import annotations

import argparse
import gzip
import inspect
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator

SPEC_VERSION = 1
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = PACKAGE_ROOT / "tests" / "data" / "differential" / "corpus.jsonl.gz"
BACKENDS = ("congestion-unaware", "congestion-aware")
ASTRA_BINARIES = {"congestion-unaware": "AstraSim_Analytical_Congestion_Unaware",
                  "congestion-aware": "AstraSim_Analytical_Congestion_Aware"}
#: dtsim modes: name → run_simulation keywords ("exact" = every rank, every message an event)
MODES = {
    "default": {"symmetry": True, "batching": True},
    "no-symmetry": {"symmetry": False, "batching": True},
    "no-batching": {"symmetry": True, "batching": False},
    "exact": {"symmetry": False, "batching": False},
}
COLLECTIVES = {"AR": "ALL_REDUCE", "AG": "ALL_GATHER", "RS": "REDUCE_SCATTER", "A2A": "ALL_TO_ALL"}
IMPL_KEYS = {"AR": "all-reduce-implementation", "AG": "all-gather-implementation",
             "RS": "reduce-scatter-implementation", "A2A": "all-to-all-implementation"}
MEM_JSON = {"memory-type": "NO_MEMORY_EXPANSION"}
_FINISHED = re.compile(rb"sys\[(\d+)\] finished, (\d+) cycles")
MESSAGE_BUDGET = 12000  #: estimated network messages of one case with every rank simulated
#: with ``large``: 65-512 NPUs, where the C paths, batching and orbits run at the sizes users run
LARGE_MESSAGE_BUDGET = 400_000


def verify_shortcuts_supported() -> bool:
    """Whether run_simulation takes ``verify_shortcuts`` (the shortcut checked against the event path)."""
    from system.simulation import run_simulation
    return "verify_shortcuts" in inspect.signature(run_simulation).parameters


# ---------------------------------------------------------------------------------------------
# The generator. Graph nodes, compact (indices into the rank's own node list for deps):
#   ["C", micros, deps(, num_ops, tensor_size)]  GPU COMP node (the two roofline fields optional)
#   ["c", micros, deps]                          CPU COMP node (is_cpu_op)
#   ["X", "AR"|"AG"|"RS"|"A2A", bytes, deps, pg_name|None, involved_dim|None]
#   ["S", dst, bytes, tag, deps]   ["R", src, bytes, tag, deps]
# ---------------------------------------------------------------------------------------------

def case_seed(seed: int, index: int) -> int:
    """The seed of case ``index`` of a run started with ``seed``."""
    return (seed << 20) + index


def _round_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.04:
        return rng.choice([1, 2, 3, 7, 16, 100, 512, 1000])
    if r < 0.12:
        return rng.choice([1024, 2048, 3000, 4000])
    k = rng.randint(12, 25)  # 4 KiB .. 32 MiB
    return rng.choice([1, 1, 3, 5]) << k if k < 24 else 1 << k


def _duration(rng: random.Random) -> int:
    return rng.choice([0, 1, 1, 2, 3, 5, 8, 10, 20, 50])


def _network(rng: random.Random, large: bool = False) -> dict:
    limit = 64 if rng.random() < 0.15 else 32
    while True:
        if large:
            nd = rng.choices([1, 2, 3], [55, 30, 15])[0]
            sizes = [rng.choice([65, 72, 96, 100, 128, 128, 192, 256, 256, 384, 512])] if nd == 1 else \
                [rng.choice([2, 3, 4, 4, 6, 8, 8, 16, 16, 32, 64]) for _ in range(nd)]
            if 64 < math.prod(sizes) <= 512:
                break
            continue
        nd = rng.choices([1, 2, 3], [46, 34, 20])[0]
        sizes = [rng.choice([2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 8]) for _ in range(nd)]
        if math.prod(sizes) <= limit:
            break
    if nd > 1 and rng.random() < 0.03:  # a dimension of 1 NPU: ASTRA-sim refuses it, dtsim warns
        sizes[rng.randrange(nd)] = 1
    return {
        "topology": [rng.choice(["Ring", "FullyConnected", "Switch"]) for _ in sizes],
        "npus_count": sizes,
        "bandwidth": [rng.choice([12.5, 25.0, 50.0, 100.0, 150.0, 200.0, 400.0]) for _ in sizes],
        "latency": [rng.choice([10.0, 50.0, 100.0, 250.0, 500.0, 700.0, 1000.0, 2000.0]) for _ in sizes],
    }


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _impl_name(rng: random.Random, coll: str, n: int, pos: int) -> str:
    names = ["ring", "direct", "directN", "halvingDoubling", "doubleBinaryTree",
             "oneRing", "oneDirect", "oneDirectN", "oneHalvingDoubling"]
    first = 1.0 if pos == 0 else 0.08
    hd = 0.5 if coll == "A2A" else 14 if _pow2(n) else 2  # ASTRA-sim's HalvingDoubling has no all-to-all
    weights = [30, 12, 9, hd, 8 if coll == "AR" else 0.6,
               5 * first, 4 * first, 2 * first, (0.3 if coll == "A2A" else 3) * first]
    name = rng.choices(names, weights)[0]
    if name.endswith("N"):
        name = name[:-1] + str(rng.randint(1, max(1, n - 1)))
    return name


def _system(rng: random.Random, net: dict) -> dict:
    sizes = net["npus_count"]
    s: dict[str, Any] = {
        "scheduling-policy": rng.choice(["LIFO", "FIFO"]),
        "endpoint-delay": 0 if rng.random() < 0.015 else rng.choice([1, 1, 5, 10, 10, 10, 20, 50, 100]),
        "active-chunks-per-dimension": rng.choice([1, 1, 1, 2, 4]),
        "preferred-dataset-splits": rng.choice([1, 1, 2, 4, 4, 8, 16, 32]),
        "collective-optimization": rng.choice(["localBWAware", "localBWAware", "baseline"]),
        "local-mem-bw": rng.choice([50, 100, 400, 1600, 1600]),
    }
    if rng.random() < 0.2:
        s["local-reduction-delay"] = rng.choice([1, 10, 100])
    if rng.random() < 0.3:
        s.update({"boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900})
    if rng.random() < 0.06:
        s.update({"roofline-enabled": 1, "peak-perf": rng.choice([10, 100, 900])})
    nd = len(sizes)
    for coll, key in IMPL_KEYS.items():
        r = rng.random()
        length = nd if r < 0.8 or nd == 1 else rng.randint(1, nd - 1)
        s[key] = [_impl_name(rng, coll, sizes[min(i, nd - 1)], i) for i in range(length)]
    return s


def _cli(rng: random.Random) -> dict:
    """ASTRA-sim's command-line knobs, where not the defaults."""
    cli = {}
    if rng.random() < 0.15:
        cli["num-queues-per-dim"] = rng.choice([2, 2, 4])
    if rng.random() < 0.08:
        cli["injection-scale"] = rng.choice([2, 3, 0.5])
    return cli


def _roofline(rng: random.Random, sysj: dict, graphs: list) -> None:
    """With roofline-enabled, give every GPU COMP node num_ops and tensor_size (ASTRA-sim throws
    inside an event callback on a node without them, and then never finishes)."""
    if not sysj.get("roofline-enabled"):
        return
    for g in graphs:
        for node in g:
            if node[0] == "C":
                node += [rng.choice([1, 3, 10, 30, 100]) * 10 ** rng.randint(5, 9),
                         rng.choice([1, 4, 16]) * 10 ** rng.randint(3, 7)]


def _involved_dim(rng: random.Random, nd: int) -> list[int] | None:
    if nd == 1 or rng.random() > 0.25:
        return None
    while True:
        bits = [rng.randint(0, 1) for _ in range(nd)]
        if any(bits):
            break
    if rng.random() < 0.1:
        bits += [1] * (4 - nd)  # ASTRA-sim's default length
    return bits


def _coll_type(rng: random.Random) -> str:
    return rng.choices(["AR", "AG", "RS", "A2A"], [40, 20, 20, 20])[0]


def _safe_size(rng: random.Random, ctype: str, splits: int) -> int:
    size = _round_size(rng)
    if ctype == "AG" and size < splits:  # ASTRA-sim loops forever there (an "edge" case does it on purpose)
        size = splits * rng.choice([1, 4, 1024])
    return size


def _deps_for(rng: random.Random, shape: str, i: int, prev: list[int]) -> list[int]:
    if not prev:
        return []
    if shape == "chain":
        return [prev[-1]]
    if shape == "independent":
        return [] if rng.random() < 0.7 else [prev[-1]]
    if shape == "fanout":
        return [prev[0]]
    if shape == "fanin":
        return []  # the last node (added by the caller) joins them all
    k = rng.randint(0, min(2, len(prev)))
    return sorted(rng.sample(prev, k))


def _uniform(rng: random.Random, net: dict, sysj: dict) -> tuple[list, dict | None]:
    """Every rank the same graph: world collectives and COMP nodes in some dependency shape."""
    nd, splits = len(net["npus_count"]), sysj["preferred-dataset-splits"]
    shape = rng.choice(["chain", "chain", "fanout", "fanin", "independent", "mixed"])
    nodes: list = []
    n_ops = rng.randint(1, 6)
    kinds = [rng.random() < 0.55 for _ in range(n_ops)]
    if not any(kinds):
        kinds[rng.randrange(n_ops)] = True
    for i, is_coll in enumerate(kinds):
        deps = _deps_for(rng, shape, i, list(range(len(nodes))))
        if is_coll:
            ct = _coll_type(rng)
            nodes.append(["X", ct, _safe_size(rng, ct, splits), deps, None, _involved_dim(rng, nd)])
        else:
            nodes.append(["C", _duration(rng), deps])
    if shape == "fanin" and len(nodes) > 1:
        ct = _coll_type(rng)
        nodes.append(["X", ct, _safe_size(rng, ct, splits), list(range(len(nodes))), None, None])
    return [nodes], None


def _factor(rng: random.Random, n: int, first_dim: int) -> tuple[int, int, int]:
    divs = [d for d in range(1, n + 1) if n % d == 0]
    tp = first_dim if rng.random() < 0.4 else rng.choice(divs)
    rest = n // tp
    pp = rng.choice([d for d in range(1, rest + 1) if rest % d == 0 and d <= 4])
    return tp, rest // pp, pp


class _Ranks:
    """Per-rank node lists under construction, each with its frontier (the nodes the next depends on)."""

    def __init__(self, n: int) -> None:
        self.nodes: list[list] = [[] for _ in range(n)]
        self.front: list[list[int]] = [[] for _ in range(n)]

    def add(self, r: int, node: list, deps: list[int] | None = None) -> int:
        nodes = self.nodes[r]
        node_deps = self.front[r] if deps is None else deps
        if node[0] in ("C", "c"):
            node[2] = list(node_deps)
        elif node[0] == "X":
            node[3] = list(node_deps)
        else:
            node[4] = list(node_deps)
        nodes.append(node)
        return len(nodes) - 1


def _layout(rng: random.Random, net: dict, sysj: dict, perturb: bool) -> tuple[list, dict | None]:
    """dp/tp/pp: tp fastest, then dp, then pp stages; tp collectives, pipeline send/recv, dp gradients."""
    n = math.prod(net["npus_count"])
    tp, dp, pp = _factor(rng, n, net["npus_count"][0])
    if tp == 1 and dp == 1 and pp == 1:
        tp = n
    splits = sysj["preferred-dataset-splits"]

    def rank(t: int, d: int, p: int) -> int:
        return p * tp * dp + d * tp + t

    groups: dict[str, list[int]] = {}
    tp_of: dict[int, str | None] = {}
    dp_of: dict[int, str | None] = {}
    for p in range(pp):
        for d in range(dp):
            members = [rank(t, d, p) for t in range(tp)]
            gid = None
            if 1 < tp < n:
                if perturb and rng.random() < 0.4:
                    k = rng.randrange(tp)
                    members = members[k:] + members[:k] if rng.random() < 0.7 else rng.sample(members, tp)
                gid = str(len(groups) + 1)
                groups[gid] = members
            for m in members:
                tp_of[m] = gid
    for p in range(pp):
        for t in range(tp):
            members = [rank(t, d, p) for d in range(dp)]
            gid = None
            if 1 < dp < n:
                if perturb and rng.random() < 0.3:
                    members = rng.sample(members, dp)
                gid = str(len(groups) + 1)
                groups[gid] = members
            for m in members:
                dp_of[m] = gid
    micro = rng.randint(1, 3) if pp > 1 else 1
    act = _round_size(rng)
    grad_type = rng.choice(["AR", "AR", "RS+AG"])
    grad = max(_round_size(rng), 4096)
    tp_type = rng.choice(["AR", "AR", "AG", "RS"]) if tp > 1 else None
    tp_size = _safe_size(rng, tp_type or "AR", splits)
    stage_fwd = [_duration(rng) for _ in range(pp)] if rng.random() < 0.5 else [_duration(rng)] * pp
    stage_bwd = [2 * f for f in stage_fwd]
    jitter = perturb and rng.random() < 0.5
    inv = _involved_dim(rng, len(net["npus_count"])) if (tp == n or dp == n) else None
    R = _Ranks(n)
    for r in range(n):
        t, d, p = r % tp, (r // tp) % dp, r // (tp * dp)
        for m in range(micro):
            if p > 0:
                R.front[r] = [R.add(r, ["R", rank(t, d, p - 1), act, 100000 + 2 * m, None])]
            dur = stage_fwd[p] + (rng.randint(0, 3) if jitter else 0)
            R.front[r] = [R.add(r, ["C", dur, None])]
            if tp_type:
                R.front[r] = [R.add(r, ["X", tp_type, tp_size, None, tp_of[r], inv if tp == n else None])]
            if p < pp - 1:
                R.front[r] = [R.add(r, ["S", rank(t, d, p + 1), act, 100000 + 2 * m, None])]
        for m in range(micro):
            if p < pp - 1:
                R.front[r] = [R.add(r, ["R", rank(t, d, p + 1), act, 100001 + 2 * m, None])]
            dur = stage_bwd[p] + (rng.randint(0, 3) if jitter else 0)
            R.front[r] = [R.add(r, ["C", dur, None])]
            if tp_type:
                R.front[r] = [R.add(r, ["X", tp_type, tp_size, None, tp_of[r], inv if tp == n else None])]
            if p > 0:
                R.front[r] = [R.add(r, ["S", rank(t, d, p - 1), act, 100001 + 2 * m, None])]
        if dp > 1:
            dinv = inv if dp == n else None
            if grad_type == "AR":
                R.front[r] = [R.add(r, ["X", "AR", grad, None, dp_of[r], dinv])]
            else:
                R.front[r] = [R.add(r, ["X", "RS", grad, None, dp_of[r], dinv])]
                R.front[r] = [R.add(r, ["X", "AG", max(grad // dp, splits), None, dp_of[r], dinv])]
        R.add(r, ["C", _duration(rng), None])
    return R.nodes, groups or None


def _partition(rng: random.Random, n: int) -> list[list[int]]:
    ranks = list(range(n))
    rng.shuffle(ranks)
    if n < 4 or rng.random() < 0.08:
        return [ranks]  # one group of every rank, in shuffled order
    out: list[list[int]] = []
    i = 0
    if rng.random() < 0.04:  # a group of one rank: ASTRA-sim never finishes its collectives, dtsim warns
        out.append([ranks[0]])
        i = 1
    while i < n:
        left = n - i
        k = left if left < 4 else rng.randint(2, left - 2)
        part = ranks[i:i + k]
        out.append(sorted(part) if rng.random() < 0.4 else part)
        i += k
    return out


def _irregular(rng: random.Random, net: dict, sysj: dict) -> tuple[list, dict | None]:
    """Per-rank graphs that differ: rounds of world collectives, group collectives on irregular
    groups (members unsorted), send/recv pairs and COMP nodes of per-rank durations."""
    n = math.prod(net["npus_count"])
    nd, splits = len(net["npus_count"]), sysj["preferred-dataset-splits"]
    groups: dict[str, list[int]] = {}
    R = _Ranks(n)
    partition: list[tuple[str, list[int]]] = []
    rounds = rng.randint(1, 6)
    equal_durations = rng.random() < 0.3
    for _ in range(rounds):
        kind = rng.choices(["world", "group", "p2p", "comp"], [35, 30, 22, 13])[0]
        if kind == "group" and n < 3:
            kind = "world"
        if kind in ("world", "group"):
            ct = _coll_type(rng)
            size = _safe_size(rng, ct, splits)
            if kind == "group" and (not partition or rng.random() < 0.5):
                partition = []
                for members in _partition(rng, n):
                    gid = str(len(groups) + 1)
                    groups[gid] = members
                    partition.append((gid, members))
            gid_of = {m: gid for gid, ms in partition for m in ms} if kind == "group" else {}
            inv = _involved_dim(rng, nd) if kind == "world" else None
            world_pg = rng.choice(["0", ""]) if kind == "world" and rng.random() < 0.04 else None
            pre = rng.choice(["none", "chain", "fanin", "free"])
            post = rng.choice(["none", "none", "one", "fanout"])
            d0 = _duration(rng)
            # messages beside the collective: issued from the same frontier (a send takes the
            # communication slot first, being the lower node id), joined by the next round
            side: dict[int, list[list]] = {}
            if n >= 2 and rng.random() < 0.25:
                pool = [ms for _, ms in partition if len(ms) >= 2] if kind == "group" else [list(range(n))]
                for _ in range(rng.randint(1, 3)):
                    src, dst = rng.sample(rng.choice(pool) if pool and rng.random() < 0.6 else list(range(n)), 2)
                    size, tag = _round_size(rng), rng.randint(100000, 999999)
                    side.setdefault(src, []).append(["S", dst, size, tag, None])
                    side.setdefault(dst, []).append(["R", src, size, tag, None])
            for r in range(n):
                base = list(R.front[r])
                extra = [R.add(r, node, deps=base) for node in side.get(r, [])]
                dur = d0 if equal_durations else _duration(rng)
                if pre == "chain":
                    R.front[r] = [R.add(r, ["C", dur, None])]
                elif pre == "fanin":
                    a = R.add(r, ["C", dur, None])
                    b = R.add(r, ["C", _duration(rng), None])
                    R.front[r] = [a, b]
                elif pre == "free":
                    R.add(r, ["C", dur, None], deps=[])
                x = R.add(r, ["X", ct, size, None, gid_of.get(r, world_pg), inv])
                R.front[r] = [x] + extra
                if post == "one":
                    R.front[r] = [R.add(r, ["C", _duration(rng), None])]
                elif post == "fanout":
                    R.front[r] = [R.add(r, ["C", _duration(rng), None]), R.add(r, ["C", _duration(rng), [x]], deps=[x])] + extra
        elif kind == "p2p":
            msgs = []
            for _ in range(rng.randint(1, max(1, n))):
                src, dst = rng.sample(range(n), 2)
                tag = rng.randint(0, 3) if rng.random() < 0.05 else rng.randint(100000, 999999)
                msgs.append((src, dst, _round_size(rng) or 1, tag))
            if rng.random() < 0.2 and msgs:  # a second message of the same key
                msgs.append(msgs[-1])
            new_front: dict[int, list[int]] = {}
            order = list(range(len(msgs)))
            for r in range(n):
                mine = [i for i in order if r in (msgs[i][0], msgs[i][1])]
                if rng.random() < 0.3:
                    rng.shuffle(mine)
                for i in mine:
                    src, dst, size, tag = msgs[i]
                    node = ["S", dst, size, tag, None] if r == src else ["R", src, size, tag, None]
                    new_front.setdefault(r, []).append(R.add(r, node))
            for r, f in new_front.items():
                R.front[r] = f
        else:
            for r in range(n):
                R.front[r] = [R.add(r, ["C", _duration(rng), None])]
    for r in range(n):
        if not R.nodes[r] or rng.random() < 0.5:
            R.add(r, ["C", _duration(rng), None])
    if not any(x[0] in "XSR" for nodes in R.nodes for x in nodes):
        ct = _coll_type(rng)
        for r in range(n):
            R.add(r, ["X", ct, _safe_size(rng, ct, splits), None, None, None])
    return R.nodes, groups or None


EDGES = ["ep0", "ag-tiny", "inv-false", "group-then-world", "order-swap", "recv-wrong-tag",
         "dbt-group", "skip-rank", "one-later", "impls-longer", "cpu-op"]
_EDGE_WEIGHTS = [10, 2, 10, 10, 10, 10, 10, 8, 10, 8, 6]


def _edge(rng: random.Random, net: dict, sysj: dict) -> tuple[list, dict | None, str]:
    """A workload or config on which ASTRA-sim is expected not to finish (or to be odd)."""
    n = math.prod(net["npus_count"])
    nd = len(net["npus_count"])
    edge = rng.choices(EDGES, _EDGE_WEIGHTS)[0]
    if edge in ("group-then-world", "dbt-group") and n < 4:
        edge = "order-swap"
    graphs, groups = _irregular(rng, net, sysj) if rng.random() < 0.5 else _uniform(rng, net, sysj)
    if len(graphs) == 1:
        graphs = [json.loads(json.dumps(graphs[0])) for _ in range(n)]
    R = _Ranks(n)
    R.nodes = graphs
    R.front = [[len(g) - 1] if g else [] for g in graphs]
    if edge == "ep0":
        sysj["endpoint-delay"] = 0
    elif edge == "ag-tiny":
        sysj["preferred-dataset-splits"] = max(4, sysj["preferred-dataset-splits"])
        for r in range(n):
            R.add(r, ["X", "AG", rng.randint(1, 3), None, None, None])
    elif edge == "inv-false":
        for r in range(n):
            R.add(r, ["X", _coll_type(rng), 65536, None, None, [0] * nd])
            R.add(r, ["C", 5, None])
    elif edge == "group-then-world":
        groups = dict(groups or {})
        gid = str(len(groups) + 1)
        members = rng.sample(range(n), rng.randint(2, n - 1))
        groups[gid] = members
        ct = _coll_type(rng)
        for r in range(n):
            if r in members:
                R.front[r] = [R.add(r, ["X", "AR", 65536, None, gid, None])]
            R.front[r] = [R.add(r, ["X", ct, 1 << 18, None, None, None])]
    elif edge == "order-swap":
        swapped = rng.randrange(n)
        for r in range(n):
            a, b = ["X", "AR", 1 << 16, None, None, None], ["X", "AG", 1 << 17, None, None, None]
            for node in ((b, a) if r == swapped else (a, b)):
                R.front[r] = [R.add(r, node)]
    elif edge == "recv-wrong-tag":
        src, dst = rng.sample(range(n), 2)
        R.add(src, ["S", dst, 4096, 100007, None])
        R.add(dst, ["R", src, 4096, 100008, None])
    elif edge == "dbt-group":
        sysj["all-reduce-implementation"] = ["doubleBinaryTree"] + sysj["all-reduce-implementation"][1:]
        groups = dict(groups or {})
        members = list(range(n))
        rng.shuffle(members)
        half = n // 2
        parts = [members[:half], members[half:]]
        for part in parts:
            gid = str(len(groups) + 1)
            groups[gid] = part
            for r in part:
                R.front[r] = [R.add(r, ["X", "AR", 1 << 20, None, gid, None])]
    elif edge == "skip-rank":
        skipped, ct = rng.randrange(n), _coll_type(rng)
        for r in range(n):
            if r != skipped:
                R.front[r] = [R.add(r, ["X", ct, 1 << 16, None, None, None])]
    elif edge == "one-later":
        if nd > 1:
            key = IMPL_KEYS[rng.choice(list(IMPL_KEYS))]
            sysj[key] = ["ring"] * (nd - 1) + [rng.choice(["oneRing", "oneDirect", "oneHalvingDoubling"])]
        else:
            sysj["all-reduce-implementation"] = ["oneRing", "ring"]
        ct = _coll_type(rng)
        for r in range(n):
            R.add(r, ["X", ct, 1 << 18, None, None, None])
    elif edge == "cpu-op":  # ASTRA-sim's statistics abort on a CPU COMP ("overlap extraction")
        for r in range(n):
            x = R.add(r, ["X", "AR", 1 << 16, None, None, None])
            R.add(r, ["C", _duration(rng), [x]])
            R.add(r, ["c", 1 + _duration(rng), [x]], deps=[x])
    elif edge == "impls-longer":
        key = IMPL_KEYS[rng.choice(list(IMPL_KEYS))]
        sysj[key] = ["ring"] * (nd + 1)
        for coll, k in IMPL_KEYS.items():
            if k == key:
                for r in range(n):
                    R.add(r, ["X", coll, 1 << 18, None, None, None])
    return R.nodes, groups, edge


def estimate_messages(spec: dict) -> int:
    """Rough count of network messages with every rank simulated (to keep cases small)."""
    sizes = spec["network"]["npus_count"]
    n_world = math.prod(sizes)
    splits = spec["system"]["preferred-dataset-splits"]
    groups = spec.get("groups") or {}
    total = 0
    for g in _rank_graphs(spec):
        for node in g:
            if node[0] in ("S", "R"):
                total += 1
            elif node[0] == "X":
                ct, pg = node[1], node[4]
                dims = [len(groups[pg])] if pg and pg in groups and len(groups[pg]) < n_world else sizes
                steps = sum(d * d // 2 + d if ct == "A2A" else 2 * d for d in dims)
                total += (splits + 1) * steps
    return total


def generate_spec(seed: int, large: bool = False) -> dict:
    """One case, deterministic in ``seed`` (one ``random.Random(seed)``, no other randomness);
    ``large``: 65-512 NPUs and a larger message budget (``check --large``)."""
    rng = random.Random(seed)
    budget = LARGE_MESSAGE_BUDGET if large else MESSAGE_BUDGET
    for _ in range(100):
        net = _network(rng, large)
        sysj = _system(rng, net)
        kind = rng.choices(["uniform", "layout", "layout-perturbed", "irregular", "edge"], [34, 26, 8, 24, 8])[0]
        edge = None
        if kind == "uniform":
            graphs, groups = _uniform(rng, net, sysj)
        elif kind.startswith("layout"):
            graphs, groups = _layout(rng, net, sysj, perturb=kind == "layout-perturbed")
        elif kind == "irregular":
            graphs, groups = _irregular(rng, net, sysj)
        else:
            graphs, groups, edge = _edge(rng, net, sysj)
        _roofline(rng, sysj, graphs)
        spec = _pack(kind, net, sysj, groups, graphs, edge)
        cli = _cli(rng)
        if cli:
            spec["cli"] = cli
        if estimate_messages(spec) <= budget:
            return spec
        sysj["preferred-dataset-splits"] = 1  # too big: the same case with one chunk, if that fits
        if estimate_messages(spec) <= budget:
            return spec
    raise RuntimeError(f"seed {seed}: no case within the message budget")


def _pack(kind: str, net: dict, sysj: dict, groups: dict | None, graphs: list, edge: str | None) -> dict:
    """Distinct graphs once, with each rank's index (uniform cases store one graph)."""
    n = math.prod(net["npus_count"])
    if len(graphs) == 1:
        graphs = graphs * n
    table: dict[str, int] = {}
    distinct: list = []
    rank_graph: list[int] = []
    for g in graphs:
        key = json.dumps(g, separators=(",", ":"))
        if key not in table:
            table[key] = len(distinct)
            distinct.append(g)
        rank_graph.append(table[key])
    spec = {"v": SPEC_VERSION, "kind": kind, "network": net, "system": sysj, "groups": groups,
            "graphs": distinct, "rank_graph": 0 if len(distinct) == 1 else rank_graph}
    if edge:
        spec["edge"] = edge
    return spec


def _rank_graphs(spec: dict) -> list[list]:
    n = math.prod(spec["network"]["npus_count"])
    rg = spec["rank_graph"]
    return [spec["graphs"][rg if isinstance(rg, int) else rg[r]] for r in range(n)]


# ---------------------------------------------------------------------------------------------
# Files of a case
# ---------------------------------------------------------------------------------------------

def _net_yml(net: dict) -> str:
    def fmt(v: list) -> str:
        return "[ " + ", ".join(str(x) for x in v) + " ]"
    return "".join(f"{k}: {fmt(net[k])}\n" for k in ("topology", "npus_count", "bandwidth", "latency"))


def materialize(spec: dict, out_dir: str | os.PathLike) -> Path:
    """Write the case: ``w.<r>.et`` per rank, net.yml, sys.json, mem.json, groups.json (if any)
    and case.json (the spec). Returns the folder."""
    from workload.builder import GraphBuilder

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / "net.yml").write_text(_net_yml(spec["network"]))
    (d / "sys.json").write_text(json.dumps(spec["system"], indent=1) + "\n")
    (d / "mem.json").write_text(json.dumps(MEM_JSON) + "\n")
    if spec.get("groups"):
        (d / "groups.json").write_text(json.dumps(spec["groups"]) + "\n")
    (d / "case.json").write_text(json.dumps(spec) + "\n")
    for r, g in enumerate(_rank_graphs(spec)):
        b = GraphBuilder()
        for i, node in enumerate(g):
            k = node[0]
            if k in ("C", "c"):
                roof = {"num_ops": node[3], "tensor_size": node[4]} if len(node) > 3 else {}
                b.comp(f"comp{i}", node[1] * 1000, node[2], is_cpu_op=k == "c", **roof)
            elif k == "X":
                _, ct, size, deps, pg, inv = node
                b.collective(f"{ct}{i}", COLLECTIVES[ct], size, deps, pg_name=pg,
                             involved_dim=None if inv is None else [bool(x) for x in inv])
            elif k == "S":
                b.send(f"send{i}", r, node[1], node[2], node[3], node[4])
            elif k == "R":
                b.recv(f"recv{i}", node[1], r, node[2], node[3], node[4])
            else:
                raise ValueError(f"unknown node kind {k!r}")
        b.write(d / "w", r, astra_sim_compatible=True)
    return d


def case_paths(d: str | os.PathLike) -> dict[str, Path | None]:
    d = Path(d)
    g = d / "groups.json"
    return {"workload": d / "w", "network": d / "net.yml", "system": d / "sys.json",
            "memory": d / "mem.json", "groups": g if g.is_file() else None}


# ---------------------------------------------------------------------------------------------
# ASTRA-sim (the instrument)
# ---------------------------------------------------------------------------------------------

def astra_sim_command(bin_dir: str | os.PathLike, backend: str, d: str | os.PathLike,
                      cli: dict | None = None, log_name: str = "log") -> list[str]:
    p = case_paths(d)
    cmd = [str(Path(bin_dir) / ASTRA_BINARIES[backend]),
           f"--workload-configuration={p['workload']}", f"--system-configuration={p['system']}",
           f"--network-configuration={p['network']}", f"--remote-memory-configuration={p['memory']}"]
    if p["groups"] is not None:
        cmd.append(f"--comm-group-configuration={p['groups']}")
    cmd += [f"--{k}={v}" for k, v in (cli or {}).items()]
    cmd.append(f"--logging-folder={Path(d) / log_name}")
    return cmd


def compress_cycles(cycles: list[int]) -> Any:
    return {"all": cycles[0]} if cycles and all(c == cycles[0] for c in cycles) else list(cycles)


def expand_cycles(value: Any, npus: int) -> list[int]:
    return [value["all"]] * npus if isinstance(value, dict) else list(value)


HEAP_WORDS = ("malloc", "free()", "corrupted", "double free", "fastbin")  #: glibc's heap-check aborts
HEAP_ATTEMPTS = 10
#: attempts at any other crash, each with a logging folder of another length: ASTRA-sim reads memory
#: it never wrote on some inputs, and the length of that path (its heap layout) then decides
#: between an assertion and a finished run (seed 20261214 case 853: CallbackTrackerEntry.cc's
#: '!send_event.has_value()' under one folder, every rank finished under another)
LAYOUT_ATTEMPTS = 4


def run_astra_sim(bin_dir: str | os.PathLike, backend: str, d: str | os.PathLike, npus: int,
                  timeout_s: float = 20.0, cli: dict | None = None) -> dict:
    """Run one ASTRA-sim binary on a case folder; its status and cycles (see the module doc).

    ASTRA-sim corrupts its heap on some inputs; glibc then aborts (or the process segfaults) at a
    point that moves from run to run (address-space randomisation), sometimes after every rank
    printed its finished line. So a segfault or a glibc heap abort is retried up to HEAP_ATTEMPTS
    times: an attempt where every rank finished gives status ``ok`` (with ``rc``, ``message`` and
    ``attempts``); otherwise, if any attempt showed a heap abort, the crash is kept with
    ``heap: true`` and is no reference (``compare`` skips it: nothing in the input says where
    glibc stops the run); a segfault on every attempt and nothing else stays a plain crash. Any
    other crash is tried LAYOUT_ATTEMPTS times, each under a logging folder of another length."""
    first = res = _run_astra_sim_once(bin_dir, backend, d, npus, timeout_s, cli)
    heap = _is_heap(res)
    if not res["status"].startswith("crash"):
        return res
    attempts = HEAP_ATTEMPTS if heap or res["status"] == "crash rc=139" else LAYOUT_ATTEMPTS
    for attempt in range(2, attempts + 1):
        res = _run_astra_sim_once(bin_dir, backend, d, npus, timeout_s, cli, log_name="log" + "-" * attempt)
        if res["status"] == "ok":
            res["attempts"] = attempt
            return res
        heap = heap or _is_heap(res)
    if heap:
        return {**first, "heap": True, "attempts": attempts}
    return first


def _is_heap(res: dict) -> bool:
    return res["status"].startswith("crash") and any(w in res.get("message", "") for w in HEAP_WORDS)


def _run_astra_sim_once(bin_dir: str | os.PathLike, backend: str, d: str | os.PathLike, npus: int,
                        timeout_s: float, cli: dict | None, log_name: str = "log") -> dict:
    cmd = astra_sim_command(Path(bin_dir).resolve(), backend, d, cli, log_name)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(d),
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return {"status": "timeout", "timeout_s": timeout_s}
    finally:
        shutil.rmtree(Path(d) / log_name, ignore_errors=True)
    finished = {int(r): int(c) for r, c in _FINISHED.findall(out)}
    rc = proc.returncode
    rc = rc if rc >= 0 else 128 - rc  # killed by signal N: as the shell shows it
    everyone = len(finished) == npus and set(finished) == set(range(npus))
    res: dict[str, Any]
    if everyone:  # a crash after every rank finished (in the statistics) keeps the answer
        res = {"status": "ok", "cycles": compress_cycles([finished[r] for r in range(npus)])}
        if rc != 0:
            res.update(rc=rc, message=crash_message(out))
        return res
    if rc == 0:
        res = {"status": "no-finish"}
    elif backend == "congestion-aware" and b"only support 1-dim" in out:
        return {"status": "unsupported", "message": "the congestion-aware binary supports 1-D topologies only"}
    else:
        res = {"status": f"crash rc={rc}", "message": crash_message(out)}
    res["finished"] = sorted([r, c] for r, c in finished.items())
    return res


_CRASH_WORDS = ("Assertion", "what()", "rror", "malloc", "Exiting because", "critical", "terminate", "free()")


def crash_message(out: bytes) -> str:
    """The line of ASTRA-sim's output that says why it stopped, shortened."""
    lines = [ln.strip() for ln in out.decode(errors="replace").splitlines()
             if ln.strip() and "[info]" not in ln and not ln.startswith(("ring of", "custom ring"))]
    lines = [ln for ln in lines if not ln.endswith("[warning] Exiting")]
    pick = next((ln for ln in reversed(lines) if any(w in ln for w in _CRASH_WORDS)), lines[-1] if lines else "")
    pick = re.sub(r"^\[[^\]]*\] (\[[^\]]*\] )*", "", pick)
    m = re.search(r"([\w.-]+\.(?:cc|cpp|hh|h):\d+):.*?(Assertion .*)", pick)
    if m:
        pick = f"{m.group(1)}: {m.group(2)}"
    return pick.replace("#########", "").strip()[:160]


def measure_case(spec: dict, bin_dir: str | os.PathLike, timeout_s: float = 20.0,
                 workdir: str | os.PathLike | None = None) -> dict:
    """Both ASTRA-sim backends on one spec, in a temporary folder."""
    npus = math.prod(spec["network"]["npus_count"])
    with tempfile.TemporaryDirectory(prefix="dtsim-diff-", dir=workdir) as tmp:
        d = materialize(spec, tmp)
        return {b: run_astra_sim(bin_dir, b, d, npus, timeout_s, spec.get("cli")) for b in BACKENDS}


# ---------------------------------------------------------------------------------------------
# dtsim, and the comparison
# ---------------------------------------------------------------------------------------------

def run_dtsim(d: str | os.PathLike, backend: str, mode: str = "default", verify_shortcuts: bool = False,
              max_wall_s: float = 120.0, cli: dict | None = None) -> dict:
    """dtsim in-process on a case folder: ``{"status": "ok", "cycles": [...], "warnings": [...]}``,
    or status ``input-error`` / ``deadlock`` / ``limit`` / ``internal-error`` with the message."""
    from network.errors import InputError, SimulationLimitError
    from system.simulation import Deadlock, run_simulation

    p = case_paths(d)
    kw = dict(MODES[mode])
    cli = cli or {}
    kw["num_queues_per_dim"] = int(cli.get("num-queues-per-dim", 1))
    kw["injection_scale"] = float(cli.get("injection-scale", 1.0))
    if verify_shortcuts:
        kw["verify_shortcuts"] = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = run_simulation(str(p["workload"]), str(p["network"]), str(p["system"]), backend=backend,
                                 comm_groups=None if p["groups"] is None else str(p["groups"]),
                                 max_wall_s=max_wall_s, **kw)
        except InputError as e:
            return {"status": "input-error", "message": _first_line(e)}
        except Deadlock as e:
            return {"status": "deadlock", "message": _first_line(e)}
        except SimulationLimitError as e:
            return {"status": "limit", "message": _first_line(e)}
        except Exception as e:  # noqa: BLE001 - a bug in dtsim is a result here
            return {"status": "internal-error", "message": f"{type(e).__name__}: {_first_line(e)}"}
    astra = [str(w.message) for w in caught if "ASTRA-sim" in str(w.message)]
    return {"status": "ok", "cycles": list(res.finish_ns), "warnings": astra}


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return (s.splitlines() or [type(e).__name__])[0][:300]


def compare(astra: dict, dtsim: dict, npus: int) -> str | None:
    """None when dtsim's answer is acceptable for ASTRA-sim's, else what is wrong."""
    st = astra["status"]
    if st == "unsupported" or astra.get("heap"):  # no reference: see run_astra_sim
        return None
    if st == "ok":
        want = expand_cycles(astra["cycles"], npus)
        if dtsim["status"] != "ok":
            return f"ASTRA-sim finishes ({_short(want)}) but dtsim: {dtsim['status']}: {dtsim.get('message', '')}"
        got = dtsim["cycles"]
        if got != want:
            return f"cycles differ: dtsim {_short(got)}, ASTRA-sim {_short(want)}"
        return None
    if dtsim["status"] in ("input-error", "deadlock"):
        return None
    if dtsim["status"] == "ok" and dtsim["warnings"]:
        return None
    if dtsim["status"] == "ok":
        return f"ASTRA-sim {st}, dtsim answers silently {_short(dtsim['cycles'])}"
    return f"ASTRA-sim {st}, dtsim {dtsim['status']}: {dtsim.get('message', '')}"


def _short(cycles: list[int]) -> str:
    if cycles and all(c == cycles[0] for c in cycles):
        return f"all {cycles[0]}"
    s = " ".join(map(str, cycles[:16]))
    return s + (f" ... ({len(cycles)} ranks)" if len(cycles) > 16 else "")


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------

def load_corpus(path: str | os.PathLike = DEFAULT_CORPUS) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_corpus(records: Iterable[dict], path: str | os.PathLike) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        for rec in records:
            f.write((json.dumps(rec, separators=(",", ":"), sort_keys=True) + "\n").encode())
    os.replace(tmp, path)


def _measure_job(args: tuple) -> dict:
    cid, seed, bin_dir, timeout_s, large = args
    spec = generate_spec(seed, large)
    t0 = time.perf_counter()
    astra = measure_case(spec, bin_dir, timeout_s)
    return {"id": cid, "seed": seed, "spec": spec, "astra": astra, "_wall": time.perf_counter() - t0}


def measure_seeds(seed: int, cases: int, bin_dir: str | os.PathLike, jobs: int = 2,
                  timeout_s: float = 20.0, progress: bool = True, large: bool = False) -> Iterator[dict]:
    """Generate ``cases`` specs from ``seed`` and run ASTRA-sim on each (``jobs`` processes)."""
    prefix = "L" if large else ""
    args = [(f"{prefix}c{i:04d}" if seed == 0 else f"{prefix}s{seed}-{i:04d}", case_seed(seed, i), str(bin_dir),
             timeout_s, large) for i in range(cases)]
    t0 = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for k, rec in enumerate(pool.imap(_measure_job, args, chunksize=4), 1):
            rec.pop("_wall", None)
            if progress and (k % 100 == 0 or k == cases):
                print(f"  {k}/{cases} cases measured, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            yield rec


def features(spec: dict) -> Counter:
    """What one case exercises, for the corpus statistics."""
    f: Counter = Counter()
    net, sysj = spec["network"], spec["system"]
    npus = math.prod(net["npus_count"])
    f[f"kind={spec['kind']}"] += 1
    if spec.get("edge"):
        f[f"edge={spec['edge']}"] += 1
    f[f"dims={len(net['npus_count'])}"] += 1
    f["npus=" + ("2-8" if npus <= 8 else "9-16" if npus <= 16 else "17-32" if npus <= 32 else "33-64" if npus <= 64
                 else "65-512")] += 1
    for t in set(net["topology"]):
        f[f"topology={t}"] += 1
    used = set()
    ctypes = set()
    graphs = spec["graphs"]
    for g in graphs:
        for node in g:
            if node[0] == "X":
                ctypes.add(node[1])
                if node[5] is not None:
                    used.add("involved_dim")
            elif node[0] in "SR":
                used.add("send/recv")
            elif node[0] == "c":
                used.add("cpu COMP")
    for ct in ctypes:
        f[f"collective={ct}"] += 1
        for impl in sysj[IMPL_KEYS[ct]]:
            f[f"impl[{ct}]={re.sub(r'[0-9]+$', 'N', impl)}"] += 1
        if len(sysj[IMPL_KEYS[ct]]) != len(net["npus_count"]):
            used.add("impl list length != dims")
    if any(node[0] == "X" and node[4] in ("0", "") for g in graphs for node in g):
        used.add("pg_name 0 or empty")
    for u in used:
        f[u] += 1
    if spec.get("groups"):
        f["comm groups"] += 1
        if any(ms != sorted(ms) for ms in spec["groups"].values()):
            f["comm groups listed unsorted"] += 1
    if "local-reduction-delay" in sysj:
        f["local-reduction-delay"] += 1
    for k in spec.get("cli") or {}:
        f[f"cli --{k}"] += 1
    if sysj.get("roofline-enabled"):
        f["roofline"] += 1
    f[f"symmetric={'yes' if spec['kind'] in ('uniform', 'layout') else 'no'}"] += 1
    f[f"splits={sysj['preferred-dataset-splits']}"] += 1
    f[f"collective-optimization={sysj['collective-optimization']}"] += 1
    f[f"scheduling-policy={sysj['scheduling-policy']}"] += 1
    f[f"active-chunks={sysj['active-chunks-per-dimension']}"] += 1
    if sysj["endpoint-delay"] == 0:
        f["endpoint-delay=0"] += 1
    return f


def corpus_stats(records: list[dict]) -> str:
    feats: Counter = Counter()
    statuses = {b: Counter() for b in BACKENDS}
    for rec in records:
        feats.update(features(rec["spec"]))
        for b in BACKENDS:
            st = rec["astra"][b]["status"]
            statuses[b][st.split(":")[0]] += 1
    lines = [f"{len(records)} cases"]
    for b in BACKENDS:
        lines.append(f"ASTRA-sim {b}: " + ", ".join(f"{k} {v}" for k, v in statuses[b].most_common()))
    lines.append("features (cases): " + ", ".join(f"{k} {v}" for k, v in sorted(feats.items()) if v))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Checking dtsim
# ---------------------------------------------------------------------------------------------

def check_runs(modes: Iterable[str], verify: bool) -> list[tuple[str, bool]]:
    """(mode, verify_shortcuts) pairs: each mode, and the default mode once more checked against the
    event path where run_simulation can do that."""
    runs = [(m, False) for m in modes]
    if verify and "default" in modes and verify_shortcuts_supported():
        runs.append(("default", True))
    return runs


def check_record(rec: dict, runs: Iterable[tuple[str, bool]], workdir: str | os.PathLike | None = None,
                 keep_dir: str | os.PathLike | None = None) -> list[dict]:
    """dtsim on one corpus record for each (mode, verify_shortcuts) of ``runs`` on each backend
    with an ASTRA-sim answer: one row each."""
    spec = rec["spec"]
    npus = math.prod(spec["network"]["npus_count"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="dtsim-diff-", dir=workdir) as tmp:
        d = materialize(spec, tmp)
        for b in BACKENDS:
            astra = rec["astra"][b]
            if astra["status"] == "unsupported":
                continue
            for mode, verify in runs:
                t0 = time.perf_counter()
                got = run_dtsim(d, b, mode, verify_shortcuts=verify, cli=spec.get("cli"))
                rows.append({"id": rec["id"], "backend": b, "mode": mode + ("+verify" if verify else ""),
                             "astra": astra["status"],
                             "astra_message": astra.get("message"), "dtsim": got["status"],
                             "dtsim_message": got.get("message"), "dtsim_warnings": got.get("warnings", []),
                             "mismatch": compare(astra, got, npus),
                             "wall_s": time.perf_counter() - t0})
        if keep_dir is not None and any(r["mismatch"] for r in rows):
            dest = Path(keep_dir) / rec["id"]
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(d, dest)
    return rows


def _check_job(args: tuple) -> list[dict]:
    rec, runs, keep_dir = args
    return check_record(rec, runs, keep_dir=keep_dir)


def check_records(records: list[dict], runs: list[tuple[str, bool]], jobs: int = 2,
                  keep_dir: str | None = None) -> list[dict]:
    args = [(rec, runs, keep_dir) for rec in records]
    if jobs <= 1:
        return [row for a in args for row in _check_job(a)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return [row for rows in pool.imap(_check_job, args, chunksize=4) for row in rows]


def summary_table(rows: list[dict]) -> str:
    """Runs per backend and mode: agreeing, mismatching, and "warned": ASTRA-sim finished and dtsim
    gave the same cycles with a warning naming ASTRA-sim (not a mismatch; some such warnings are
    notes, some claim ASTRA-sim would not finish, which is then a false alarm)."""
    cells: dict[tuple[str, str], Counter] = {}
    for r in rows:
        c = cells.setdefault((r["backend"], r["mode"]), Counter())
        c["runs"] += 1
        c["mismatch" if r["mismatch"] else "agree"] += 1
        if not r["mismatch"] and r["astra"] == "ok" and r.get("dtsim_warnings"):
            c["alarm"] += 1
    out = [f"{'backend':<20} {'mode':<15} {'runs':>6} {'agree':>6} {'mismatch':>9} {'warned':>7}"]
    for (b, m), c in sorted(cells.items()):
        out.append(f"{b:<20} {m:<15} {c['runs']:>6} {c['agree']:>6} {c['mismatch']:>9} {c['alarm']:>7}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def _bin_dir(value: str) -> Path:
    d = Path(value)
    missing = [n for n in ASTRA_BINARIES.values() if not (d / n).is_file()]
    if missing:
        raise SystemExit(f"--astra-sim-bin {value}: {', '.join(missing)} not found there")
    return d


def _modes(value: str) -> list[str]:
    return list(MODES) if value == "all" else [value]


def cmd_generate(a: argparse.Namespace) -> int:
    bin_dir = _bin_dir(a.astra_sim_bin)
    t0 = time.perf_counter()
    records = list(measure_seeds(a.seed, a.cases, bin_dir, a.jobs, a.timeout, large=a.large))
    write_corpus(records, a.out)
    print(corpus_stats(records))
    print(f"wrote {a.out} ({Path(a.out).stat().st_size / 1e6:.2f} MB) in {time.perf_counter() - t0:.0f} s")
    return 0


def _select(records: list[dict], ids: list[str] | None, sample: int | None) -> list[dict]:
    if ids:
        want = set(ids)
        records = [r for r in records if r["id"] in want]
        missing = want - {r["id"] for r in records}
        if missing:
            raise SystemExit(f"no such case: {', '.join(sorted(missing))}")
    if sample:
        records = ci_sample(records, sample)
    return records


def ci_sample(records: list[dict], n: int) -> list[dict]:
    """Every k-th record: the deterministic sample the CI test runs."""
    if n >= len(records):
        return list(records)
    step = len(records) / n
    return [records[int(i * step)] for i in range(n)]


def cmd_check(a: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if a.seed is not None:
        bin_dir = _bin_dir(a.astra_sim_bin) if a.astra_sim_bin else None
        if bin_dir is None:
            raise SystemExit("check --seed needs --astra-sim-bin (fresh cases are measured live)")
        records = list(measure_seeds(a.seed, a.cases, bin_dir, a.jobs, a.timeout, large=a.large))
        source = f"{len(records)} fresh {'large ' if a.large else ''}cases from seed {a.seed}"
        if a.save:
            write_corpus(records, a.save)
    else:
        records = _select(load_corpus(a.corpus), a.case, a.sample)
        source = f"{len(records)} cases of {a.corpus}"
    keep = Path(a.keep_dir)
    keep.mkdir(parents=True, exist_ok=True)
    runs = check_runs(_modes(a.mode), a.verify_shortcuts)
    rows = check_records(records, runs, a.jobs, str(keep))
    bad = [r for r in rows if r["mismatch"]]
    print(f"{source}; modes {', '.join(m + ('+verify' if v else '') for m, v in runs)}; {time.perf_counter() - t0:.1f} s")
    print(summary_table(rows))
    corpus_arg = "" if a.seed is not None else f" --corpus {a.corpus}"
    for r in bad:
        print(f"MISMATCH {r['id']} {r['backend']} {r['mode']}: {r['mismatch']}")
    ids = sorted({r["id"] for r in bad})
    for cid in ids:
        print(f"  {cid}: folder kept at {keep / cid}" + (
            "" if a.seed is not None else
            f"; or: python scripts/differential.py materialize --case {cid}{corpus_arg} --out /tmp/{cid}"))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=0) + "\n")
    print(f"{len(ids)} case(s) with a mismatch in {len(bad)} run(s)" if bad else "no mismatch")
    return 1 if bad else 0


def cmd_materialize(a: argparse.Namespace) -> int:
    if a.spec is not None:
        rec = {"id": a.spec, "spec": json.loads(Path(a.spec).read_text()), "astra": None}
    elif a.seed is not None:
        spec = generate_spec(case_seed(a.seed, a.index), a.large)
        rec = {"id": f"seed {a.seed} #{a.index}", "spec": spec, "astra": None}
    else:
        recs = _select(load_corpus(a.corpus), [a.case], None)
        rec = recs[0]
    d = materialize(rec["spec"], a.out)
    p = case_paths(d)
    groups = f" --comm-group-configuration {p['groups']}" if p["groups"] else ""
    print(f"{rec['id']}: wrote {d}")
    cli = rec["spec"].get("cli") or {}
    flags = "".join(f" --{k} {v}" for k, v in cli.items())
    print(f"  dtsim:     python -m system.main --workload {p['workload']} --network {p['network']} "
          f"--system {p['system']}{groups}{flags} [--backend congestion-aware] [--no-symmetry] [--no-batching]")
    print("  ASTRA-sim: " + " ".join(astra_sim_command("BIN_DIR", "congestion-unaware", d, cli)))
    if rec.get("astra"):
        for b, res in rec["astra"].items():
            print(f"  ASTRA-sim {b}: {json.dumps(res)}")
    return 0


def cmd_stats(a: argparse.Namespace) -> int:
    print(corpus_stats(load_corpus(a.corpus)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="differential", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="generate cases and measure them with ASTRA-sim into a corpus")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--cases", type=int, default=2000)
    g.add_argument("--astra-sim-bin", required=True, metavar="DIR")
    g.add_argument("--out", default=str(DEFAULT_CORPUS))
    c = sub.add_parser("check", help="compare dtsim with a stored corpus, or with fresh seeds live")
    c.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    c.add_argument("--case", action="append", metavar="ID", help="only this case (repeatable)")
    c.add_argument("--sample", type=int, default=None, metavar="N", help="the CI test's N-case sample")
    c.add_argument("--seed", type=int, default=None, help="fresh cases from this seed, measured live")
    c.add_argument("--cases", type=int, default=300)
    c.add_argument("--astra-sim-bin", metavar="DIR")
    c.add_argument("--save", metavar="C.jsonl.gz", help="with --seed: also store the fresh cases")
    c.add_argument("--mode", choices=[*MODES, "all"], default="all")
    c.add_argument("--keep-dir", default=os.path.join(tempfile.gettempdir(), "dtsim-differential"),
                   help="where the folders of mismatching cases are kept")
    c.add_argument("--json", metavar="OUT.json", help="also write every run's row as JSON")
    c.add_argument("--no-verify-shortcuts", dest="verify_shortcuts", action="store_false",
                   help="do not pass verify_shortcuts=True in default mode (when run_simulation has it)")
    m = sub.add_parser("materialize", help="write one case's folder to reproduce it by hand")
    m.add_argument("--case", help="case id in the corpus")
    m.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    m.add_argument("--seed", type=int, default=None, help="instead of --case: a generated case")
    m.add_argument("--index", type=int, default=0)
    m.add_argument("--large", action="store_true", help="with --seed: a case of check --large")
    m.add_argument("--spec", metavar="case.json", help="instead of --case: a spec file (a case folder's case.json)")
    m.add_argument("--out", required=True, metavar="DIR")
    s = sub.add_parser("stats", help="print what a corpus covers")
    s.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    for sp in (g, c):
        sp.add_argument("--large", action="store_true",
                        help="with --seed (check) or in generate: cases of 65-512 NPUs (larger message budget)")
        sp.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
        sp.add_argument("--timeout", type=float, default=20.0, help="seconds per ASTRA-sim run (default 20)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.cmd == "materialize" and a.case is None and a.seed is None and a.spec is None:
        raise SystemExit("materialize needs --case ID, --spec case.json or --seed S [--index I]")
    return {"generate": cmd_generate, "check": cmd_check, "materialize": cmd_materialize,
            "stats": cmd_stats}[a.cmd](a)


def console_main() -> None:
    sys.exit(main())
