"""The congestion-aware representative rank (network/analytical/symmetric_aware.py) gives exactly the
general path's cycles and stats, takes the fast path where it should, and falls back on a tie."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from network.analytical.symmetric_aware import SymmetricAwareBackend, SymmetryBroken
from network.config import NetworkConfig
from system.config import SystemConfig
from system.simulation import run_simulation
from system.shortcuts.representative import symmetry_group
from system.sys import Sys
from workload.builder import GraphBuilder, write_collective_microbenchmark
from workload.loader import load_workload_graphs
from workload.workload import Workload

KINDS = ["Ring", "Switch", "FullyConnected"]
COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]
STATS = ["messages", "bytes_sent", "bytes_received", "bytes_per_dim", "links_used", "max_link_queue"]


def _draw(rng: random.Random, tmp: Path) -> tuple[str, NetworkConfig, SystemConfig, int]:
    while True:
        dims = [(rng.choice(KINDS), rng.randint(2, 8)) for _ in range(rng.randint(1, 3))]
        if math.prod(n for _, n in dims) <= 36:
            break
    impls: dict[str, list[str]] = {}
    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        per_dim = []
        for kind, n in dims:
            algos = ["ring", "direct"]
            if c != "all-to-all" and n & (n - 1) == 0:
                algos.append("halvingDoubling")  # the fast path refuses it on Ring dims of > 2 NPUs
            per_dim.append(rng.choice(algos))
        impls[f"{c}-implementation"] = per_dim
    if rng.random() < 0.5:  # mostly one algorithm per dimension, so that XOR dimensions occur
        for c in ("all-reduce", "all-gather", "reduce-scatter"):
            impls[f"{c}-implementation"] = list(impls["all-reduce-implementation"])
    net = NetworkConfig.from_dict({
        "topology": [k for k, _ in dims], "npus_count": [n for _, n in dims], "backend": "congestion-aware",
        "bandwidth": [rng.choice([12.5, 25, 50, 100, 200]) for _ in dims],
        "latency": [rng.choice([0, 1, 100, 500, 700.5]) for _ in dims],
    })
    cfg = SystemConfig.from_dict({
        "scheduling-policy": rng.choice(["LIFO", "FIFO"]), "endpoint-delay": rng.choice([0, 1, 10, 37]),
        "active-chunks-per-dimension": rng.choice([1, 2, 4]),
        "preferred-dataset-splits": rng.choice([1, 2, 3, 4, 8]),
        "collective-optimization": rng.choice(["localBWAware", "baseline"]), "local-mem-bw": 1600, **impls,
    })
    b = GraphBuilder()
    prev: list[int] = []
    for i in range(rng.randint(1, 4)):
        if rng.random() < 0.3:
            nid = b.comp(f"c{i}", rng.randint(1, 50_000))
        else:
            nid = b.collective(f"k{i}", rng.choice(COLLS), rng.randint(1, 1 << 20), deps=prev)
        prev = [nid] if rng.random() < 0.6 else []  # some independent, concurrent collectives
    spec = str(b.write(tmp / "w.et"))
    return spec, net, cfg, rng.choice([1, 2])


def test_representative_equals_general_path_on_random_workloads(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    taken = fell_back = 0
    for i in range(80):
        d = tmp_path / str(i)
        d.mkdir()
        spec, net, cfg, queues = _draw(rng, d)
        graphs = load_workload_graphs(spec, net.topology.npus_count)
        eligible = symmetry_group(graphs, cfg, net.topology.npus_count_per_dim, "congestion-aware",
                                  [x.kind.value for x in net.topology.dims]) is not None
        fast = run_simulation(spec, net, cfg, num_queues_per_dim=queues)
        slow = run_simulation(spec, net, cfg, num_queues_per_dim=queues, symmetry=False, batching=False)
        assert not slow.inputs["symmetric_fast_path"]
        assert fast.finish_ns == slow.finish_ns, (i, net.topology.describe())
        if fast.inputs["symmetric_fast_path"]:
            assert queues == 1  # several queues: every rank (test_several_queues_per_dimension_run_every_rank)
            taken += 1
            assert fast.network_stats["representative_rank"]
            for k in STATS:
                assert fast.network_stats[k] == slow.network_stats[k], (i, k)
        elif eligible:
            fell_back += 1
    assert taken >= 25 and fell_back >= 1, (taken, fell_back)


def _ring_4chunks(dims: list[tuple[str, int]], algo: str = "ring") -> tuple[NetworkConfig, SystemConfig]:
    net = NetworkConfig.from_dict({"topology": [k for k, _ in dims], "npus_count": [n for _, n in dims],
                                   "bandwidth": [50.0] * len(dims), "latency": [500.0] * len(dims),
                                   "backend": "congestion-aware"})
    cfg = SystemConfig.from_dict({
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
        **{f"{c}-implementation": [algo] * len(dims) for c in ("all-reduce", "all-gather", "reduce-scatter")},
        "all-to-all-implementation": ["direct"] * len(dims),
    })
    return net, cfg


@pytest.mark.parametrize("kind", ["Ring", "Switch"])
def test_bench_shapes_take_the_fast_path(tmp_path: Path, kind: str) -> None:
    """The 1,024-NPU bench cases' shape (ring all-reduce, Ring_4chunks) at 32 NPUs."""
    spec = write_collective_microbenchmark(tmp_path / "ar", 32, "ALL_REDUCE", 1 << 26, shared=True)
    net, cfg = _ring_4chunks([(kind, 32)])
    fast = run_simulation(spec, net, cfg)
    slow = run_simulation(spec, net, cfg, symmetry=False, batching=False)
    assert fast.inputs["symmetric_fast_path"]
    assert fast.finish_ns == slow.finish_ns
    assert all(fast.network_stats[k] == slow.network_stats[k] for k in STATS)
    assert fast.network_stats["events"] * 10 < slow.network_stats["events"]


def test_opposite_rings_tie_and_fall_back(tmp_path: Path) -> None:
    """Two queues run rings in opposite directions: rank 0 gets a packet from each neighbour at one
    tick, and in the real run their order is set by which of the two senders started first,
    not by rank 0's own order. The representative gives up, the run is redone on the general
    path, and the answer is the general path's."""
    b = GraphBuilder()
    b.collective("ag", "ALL_GATHER", 690878)
    spec = str(b.write(tmp_path / "w.et"))
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [3], "bandwidth": [12.5], "latency": [1],
                                   "backend": "congestion-aware"})
    cfg = SystemConfig.from_dict({"endpoint-delay": 10, "preferred-dataset-splits": 4, "local-mem-bw": 1600,
                                  "all-gather-implementation": ["ring"]})
    graphs = load_workload_graphs(spec, 3)
    assert symmetry_group(graphs, cfg, [3], "congestion-aware", ["Ring"]) is not None
    backend = SymmetricAwareBackend(net)  # the representative alone
    Workload(Sys(0, backend, cfg, [2]), graphs[0], {}, None).fire()
    with pytest.raises(SymmetryBroken):
        backend.run()
    r = run_simulation(spec, net, cfg, num_queues_per_dim=2)
    assert not r.inputs["symmetric_fast_path"]
    assert r.finish_ns == run_simulation(spec, net, cfg, num_queues_per_dim=2, symmetry=False, batching=False).finish_ns


@pytest.mark.parametrize("kind,npus,ag", [("FullyConnected", 4, "oneDirect1"), ("Ring", 4, "oneDirect1"),
                                          ("Ring", 8, "direct2")])
def test_several_queues_per_dimension_run_every_rank(tmp_path: Path, kind: str, npus: int, ag: str) -> None:
    """An all-reduce on two queues (its all-gather half anticlockwise) and then a windowed direct
    all-gather: ASTRA-sim and the every-event path finish ranks at different cycles, while the
    representative passed its same-tick checks and gave every rank the last one's (a fresh
    differential seed found it). With several queues per dimension the congestion-aware backend
    takes no rank-folding shortcut, and says so."""
    b = GraphBuilder()
    ar = b.collective("ar", "ALL_REDUCE", 327680)
    b.collective("ag", "ALL_GATHER", 327680, deps=[ar])
    spec = str(b.write(tmp_path / "w.et"))
    net = NetworkConfig.from_dict({"topology": [kind], "npus_count": [npus], "bandwidth": [150.0],
                                   "latency": [10.0], "backend": "congestion-aware"})
    cfg = SystemConfig.from_dict({"endpoint-delay": 100, "preferred-dataset-splits": 4, "local-mem-bw": 50,
                                  "all-reduce-implementation": ["ring"], "all-gather-implementation": [ag]})
    every = run_simulation(spec, net, cfg, num_queues_per_dim=2, symmetry=False, batching=False)
    assert len(set(every.finish_ns)) > 1, "the ranks finish together: no longer a counterexample"
    r = run_simulation(spec, net, cfg, num_queues_per_dim=2)
    assert r.inputs["shortcut"] == "none" and r.finish_ns == every.finish_ns
    assert any(d.startswith("representative: --num-queues-per-dim > 1") for d in r.inputs["shortcuts_declined"])
    one = run_simulation(spec, net, cfg)  # one queue: the representative still runs and agrees
    assert one.inputs["symmetric_fast_path"]
    assert one.finish_ns == run_simulation(spec, net, cfg, symmetry=False, batching=False).finish_ns


def test_direct_all_to_all_on_a_switch_takes_the_fast_path(tmp_path: Path) -> None:
    """Sources feed rank 0's down-link at one tick; the real order is known, so no rerun."""
    spec = write_collective_microbenchmark(tmp_path / "a2a", 8, "ALL_TO_ALL", 1 << 20, shared=True)
    net, cfg = _ring_4chunks([("Switch", 8)])
    fast = run_simulation(spec, net, cfg)
    slow = run_simulation(spec, net, cfg, symmetry=False, batching=False)
    assert fast.inputs["symmetric_fast_path"]
    assert fast.finish_ns == slow.finish_ns
    assert all(fast.network_stats[k] == slow.network_stats[k] for k in STATS)


@pytest.mark.parametrize("coll", ["ALL_REDUCE", "ALL_TO_ALL"])
def test_a_direct_collective_on_64_npus_is_decided_far_back(tmp_path: Path, coll: str) -> None:
    """63 messages a chunk put the common ancestor of two same-tick events more than 512 events
    back: the walk must reach it (symmetric_order.HORIZON), not give up and rerun every rank."""
    spec = write_collective_microbenchmark(tmp_path / "d", 64, coll, 1 << 20, shared=True)
    net, cfg = _ring_4chunks([("Switch", 64)], algo="direct")
    cfg = SystemConfig.from_dict({**{k: v for k, v in {
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600}.items()},
        **{f"{c}-implementation": ["direct"] for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    fast = run_simulation(spec, net, cfg)
    slow = run_simulation(spec, net, cfg, symmetry=False, batching=False)
    assert fast.inputs["symmetric_fast_path"], fast.inputs["shortcuts_declined"]
    assert fast.finish_ns == slow.finish_ns
    assert all(fast.network_stats[k] == slow.network_stats[k] for k in STATS)


@pytest.mark.parametrize("kind,coll", [("FullyConnected", "ALL_REDUCE"), ("FullyConnected", "ALL_TO_ALL"),
                                       ("FullyConnected", "REDUCE_SCATTER")])
def test_deliveries_of_one_tick_from_many_senders_are_put_in_order(tmp_path: Path, kind: str, coll: str) -> None:
    """A direct collective on FullyConnected: every peer's message reaches rank 0 at one tick, and
    the representative runs their deliveries in another order than the real run (senders in
    rank order). Equal calls leave equal state in any order; the events they schedule are handed
    to the real callers (SymmetricAwareBackend._join_run), so the run stays on one rank."""
    spec = write_collective_microbenchmark(tmp_path / "d", 16, coll, 1 << 20, shared=True)
    net, _ = _ring_4chunks([(kind, 16)])
    cfg = SystemConfig.from_dict({
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
        **{f"{c}-implementation": ["direct"] for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    fast = run_simulation(spec, net, cfg)
    slow = run_simulation(spec, net, cfg, symmetry=False, batching=False)
    assert fast.inputs["symmetric_fast_path"], fast.inputs["shortcuts_declined"]
    assert fast.finish_ns == slow.finish_ns
    assert all(fast.network_stats[k] == slow.network_stats[k] for k in STATS)


@pytest.mark.parametrize("dims,algo,ok", [
    ([("Ring", 8)], "halvingDoubling", False),  # XOR pairing is no ring translation
    ([("Switch", 8)], "halvingDoubling", True),  # on a Switch it is an automorphism
    ([("FullyConnected", 4), ("Ring", 2)], "halvingDoubling", True),
])
def test_halving_doubling_only_where_xor_is_an_automorphism(tmp_path: Path, dims, algo, ok) -> None:
    npus = math.prod(n for _, n in dims)
    spec = write_collective_microbenchmark(tmp_path / "ar", npus, "ALL_REDUCE", 1 << 22, shared=True)
    net, cfg = _ring_4chunks(dims, algo)
    fast = run_simulation(spec, net, cfg)
    assert fast.inputs["symmetric_fast_path"] is ok
    assert fast.finish_ns == run_simulation(spec, net, cfg, symmetry=False, batching=False).finish_ns
