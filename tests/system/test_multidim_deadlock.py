"""ASTRA-sim issue #370: active-chunks-per-dimension < preferred-dataset-splits on
multi-dimensional rings. Such configs must run to the end (never hang, never a stuck report),
and the per-queue limit must really hold chunks back (fewer active chunks is never faster)."""
from __future__ import annotations

import itertools

import pytest

from network.config import NetworkConfig
from system.config import SystemConfig
from system.main import run_simulation
from workload.builder import write_collective_microbenchmark

DIMS = [[("Ring", 4), ("Ring", 4)], [("Ring", 2), ("Ring", 4), ("Ring", 2)], [("Switch", 4), ("Ring", 4)]]


def _cfg(active: int, splits: int, opt: str, n: int) -> SystemConfig:
    impl = ["ring"] * n
    return SystemConfig.from_dict({
        "preferred-dataset-splits": splits, "active-chunks-per-dimension": active,
        "collective-optimization": opt, "local-mem-bw": 1600,
        **{f"{c}-implementation": impl for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")},
    })


@pytest.mark.parametrize("dims,coll,queues,opt", list(itertools.product(
    DIMS, ["ALL_REDUCE", "ALL_GATHER", "ALL_TO_ALL"], [1, 2, 4], ["localBWAware", "baseline"])))
def test_fewer_active_chunks_than_splits_finishes(tmp_path, dims, coll, queues, opt) -> None:
    npus = 1
    for _, k in dims:
        npus *= k
    net = NetworkConfig.from_dict({"topology": [k for k, _ in dims], "npus_count": [k for _, k in dims],
                                   "bandwidth": [50] * len(dims), "latency": [500] * len(dims)})
    spec = write_collective_microbenchmark(tmp_path / "w", npus, coll, 1 << 20, shared=True)
    ends = []
    for active in (1, 2, 8):
        r = run_simulation(spec, net, _cfg(active, 8, opt, len(dims)), num_queues_per_dim=queues, symmetry=False)
        assert len(set(r.finish_ns)) == 1
        ends.append(r.end_ns)
    assert ends[0] >= ends[1] >= ends[2]
