"""Batched ring phases on topology files (network/analytical/ring_flows.py) against the every-event
path: the same finish and collective times on every rank, where flows share links, drift apart by
whole steps and phases overlap; and the conflicts that send a run back to the event path."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from network.analytical.aware import CongestionAwareBackend
from network.config import NetworkConfig
from system.simulation import run_simulation
from workload.builder import GraphBuilder, write_collective_microbenchmark

pytestmark = pytest.mark.usefixtures("batch_every_ring")  # small rings, batched (conftest.py)

MB = 1 << 20


def _system(d: Path, splits: int = 4, active: int = 1, policy: str = "LIFO", endpoint: int = 10) -> Path:
    cfg = {"scheduling-policy": policy, "endpoint-delay": endpoint, "active-chunks-per-dimension": active,
           "preferred-dataset-splits": splits, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
           **{f"{c}-implementation": ["ring"] for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}}
    p = d / f"sys{splits}{active}{policy}{endpoint}.json"
    p.write_text(json.dumps(cfg))
    return p


def _net(d: Path, gen: dict, **extra) -> Path:
    p = d / "net.yml"
    p.write_text(json.dumps({"topology-generator": gen, "backend": "congestion-aware", **extra}))
    return p


def _both(w, net, sys, **kw):
    """The batched run, checked by the run itself against every message as an event."""
    fast = run_simulation(w, net, sys, symmetry=False, verify_shortcuts=True, **kw)
    plain = run_simulation(w, net, sys, symmetry=False, batching=False, **kw)
    return fast, plain


# One spine: every ring flow that leaves a server crosses the same rail-to-spine and
# spine-to-rail links, so those links are shared, queue, and the flows drift apart.
ONE_SPINE = {"shape": "rail-optimized", "servers": 4, "gpus-per-server": 2, "spines": 1, "spine-bandwidth": "100Gbps"}


@pytest.mark.parametrize("size", [MB, 3 * MB + 12345, 1 << 26])
def test_shared_links_and_overlapping_phases_equal_the_event_path(tmp_path, size):
    w = write_collective_microbenchmark(tmp_path / "ar", 8, "ALL_REDUCE", size, shared=True)
    fast, plain = _both(w, _net(tmp_path, ONE_SPINE), _system(tmp_path))
    assert fast.inputs["shortcut"] == "batched" and fast.inputs["shortcuts_verified"]
    assert fast.inputs["batched_ring_messages"] == plain.network_stats["messages"]  # every one
    assert fast.finish_ns == plain.finish_ns
    # the shared links really queued, and the queue statistic is the event path's
    assert plain.network_stats["max_link_queue"] >= 1
    assert fast.network_stats["max_link_queue"] == plain.network_stats["max_link_queue"]
    assert fast.network_stats["link_classes"] == plain.network_stats["link_classes"]
    assert fast.events * 3 < plain.events  # the messages were not events


def test_sequences_groups_and_compute_equal_the_event_path(tmp_path):
    """A world all-reduce, then all-gathers on two rings of four (shuffled members), with compute
    of different lengths per rank before each: phases start apart and new flows join the links."""
    groups = {"1": [0, 3, 5, 6], "2": [1, 2, 4, 7]}
    (tmp_path / "g.json").write_text(json.dumps(groups))
    for r in range(8):
        b = GraphBuilder()
        c = b.comp("c0", 1000 * (r % 3))
        x = b.collective("ar", "ALL_REDUCE", 2 * MB, [c])
        c = b.comp("c1", 1000 * (r % 5), [x])
        g = next(k for k, m in groups.items() if r in m)
        b.collective("ag", "ALL_GATHER", MB // 2, [c], pg_name=g)
        b.write(tmp_path / "w", r)
    gen = {"shape": "fat-tree", "leaves": 2, "npus-per-leaf": 4, "oversubscription": 4}
    fast, plain = _both(tmp_path / "w", _net(tmp_path, gen), _system(tmp_path, splits=2, policy="FIFO"),
                        comm_groups=tmp_path / "g.json")
    assert fast.inputs["shortcut"] == "batched"
    assert fast.finish_ns == plain.finish_ns


def test_packets_of_any_size(tmp_path):
    w = write_collective_microbenchmark(tmp_path / "rs", 8, "REDUCE_SCATTER", 5 * MB, shared=True)
    for packet in (512, 1 << 30):
        fast, plain = _both(w, _net(tmp_path, ONE_SPINE, congestion_aware={"packet_bytes": packet}),
                            _system(tmp_path, splits=8))
        assert fast.inputs["shortcut"] == "batched"
        assert fast.finish_ns == plain.finish_ns


def test_two_chunks_at_once_on_a_rank_go_back_to_the_event_path(tmp_path):
    """Two active chunks put two phases' messages on one flow in an order the batched phases do
    not keep: the run is redone with every message an event, and says so."""
    w = write_collective_microbenchmark(tmp_path / "ar", 8, "ALL_REDUCE", 4 * MB, shared=True)
    fast, plain = _both(w, _net(tmp_path, ONE_SPINE), _system(tmp_path, active=2))
    assert fast.inputs["shortcut"] == "none"
    assert any(d.startswith("batched: abandoned at run time") for d in fast.inputs["shortcuts_declined"])
    assert fast.finish_ns == plain.finish_ns


def test_same_tick_arrivals_are_served_by_input_link_not_by_event_order(tmp_path):
    """Two messages reach the switch's down-link in the same nanosecond: the one from the lower
    input link id goes first, whichever the simulator happened to run first."""
    (tmp_path / "t.txt").write_text("4 1 3\n3\n0 3 400Gbps 0.0005ms 0\n1 3 400Gbps 0.0005ms 0\n"
                                    "2 3 400Gbps 0.0005ms 0\n")
    results = []
    for order in ((0, 1), (1, 0)):
        b = CongestionAwareBackend(NetworkConfig.from_dict({"topology-file": str(tmp_path / "t.txt")}))
        got: dict[int, int] = {}
        for src in order:
            b.recv(2, src, MB, 7, lambda s=src: got.__setitem__(s, b.now()))
            b.send(src, 2, MB, 7, lambda: None)
        b.run()
        results.append(got)
    assert results[0] == results[1]
    assert results[0][0] < results[0][1]  # input link 0 -> 3 is served before 1 -> 3


def _random_case(seed: int, d: Path) -> tuple[Path, Path, Path, Path | None]:
    """A random ring workload on a generated fat-tree or rail-optimized cluster: groups, compute,
    sizes, chunks, policies, endpoint times and packet sizes (the random check in
    docs/network-backends.md ran this generator on many more seeds)."""
    import random

    rng = random.Random(seed)
    if rng.random() < 0.5:
        leaves, per = rng.choice([2, 3, 4]), rng.choice([2, 4, 8])
        gen = {"shape": "fat-tree", "leaves": leaves, "npus-per-leaf": per, "oversubscription": rng.choice([1, 2, 4]),
               "bandwidth": rng.choice(["400Gbps", "100Gbps"]), "latency": rng.choice(["0.0005ms", "0.000123ms"])}
        npus = leaves * per
    else:
        servers, gps = rng.choice([2, 3, 4]), rng.choice([2, 4, 8])
        gen = {"shape": "rail-optimized", "servers": servers, "gpus-per-server": gps, "spines": rng.choice([1, 2, 3]),
               "spine-bandwidth": rng.choice(["400Gbps", "100Gbps"])}
        npus = servers * gps
    extra = {"congestion_aware": {"packet_bytes": rng.choice([512, 4096, 1 << 30])}} if rng.random() < 0.3 else {}
    net = _net(d, gen, **extra)
    groups = None
    if rng.random() < 0.4 and npus >= 4:
        k = rng.choice([g for g in (2, 4) if npus % g == 0])
        perm = list(range(npus))
        rng.shuffle(perm)
        groups = {str(i + 1): sorted(perm[i * k:(i + 1) * k]) for i in range(npus // k)}
        (d / "groups.json").write_text(json.dumps(groups))
    plan = [(rng.choice(["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"]), rng.choice([1 << 10, 1 << 16, 1 << 20, 12345]),
             rng.random() < 0.5) for _ in range(rng.randint(1, 3))]
    for r in range(npus):
        b = GraphBuilder()
        prev: list[int] = []
        for i, (ct, size, on_group) in enumerate(plan):
            prev = [b.comp(f"c{i}", 1000 * rng.randint(0, 20), prev)]
            pg = next(g for g, m in groups.items() if r in m) if on_group and groups else None
            prev = [b.collective(f"x{i}", ct, size, prev, pg_name=pg)]
        b.write(d / "w", r)
    sys = _system(d, splits=rng.choice([1, 2, 4, 8]), policy=rng.choice(["LIFO", "FIFO"]),
                  endpoint=rng.choice([10, 1, 100]))
    return d / "w", net, sys, (d / "groups.json") if groups else None


def test_random_ring_workloads_on_generated_clusters(tmp_path):
    batched = 0
    for seed in range(8):
        d = tmp_path / str(seed)
        d.mkdir()
        w, net, sys, groups = _random_case(seed, d)
        fast, plain = _both(w, net, sys, comm_groups=groups)
        assert fast.finish_ns == plain.finish_ns, seed
        batched += fast.inputs["shortcut"] == "batched"
    assert batched >= 5  # the sample exercises the batched phases, not only their fallback
