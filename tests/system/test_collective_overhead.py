"""collective-fixed-delay and collective-copy-bw: dtsim's once-per-collective cost (the NCCL model's
base latency and per-byte pass). Off by default, so ASTRA-sim's files keep their cycles; on, each
collective ends exactly that much later, whatever the NPU count."""
from __future__ import annotations

import pytest

from network.config import NetworkConfig
from system.config import SystemConfig
from system.errors import SystemConfigError
from system.simulation import run_simulation
from workload.builder import write_collective_microbenchmark

BASE = {"preferred-dataset-splits": 2, "endpoint-delay": 10, "local-mem-bw": 1600, "all-reduce-implementation": ["ring"],
        "all-gather-implementation": ["ring"]}


def end_ns(tmp_path, npus: int, system: dict, collective: str = "ALL_REDUCE", size: int = 1 << 20, backend="congestion-unaware") -> int:
    w = write_collective_microbenchmark(tmp_path / f"{collective}_{npus}_{size}", 1, collective, size, shared=True)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50.0], "latency": [500.0]})
    return run_simulation(w, net, SystemConfig.from_dict(dict(BASE, **system)), backend=backend).end_ns


def test_off_by_default_and_zero_is_off(tmp_path) -> None:
    cfg = SystemConfig.from_dict(BASE)
    assert cfg.collective_fixed_delay_ns == 0 and cfg.collective_copy_bw_gb_s == 0.0
    plain = end_ns(tmp_path, 4, {})
    assert end_ns(tmp_path, 4, {"collective-fixed-delay": 0, "collective-copy-bw": 0}) == plain


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_added_once_per_collective_whatever_the_npu_count(tmp_path, backend: str) -> None:
    size, fixed, bw = 1 << 20, 7000, 250.0  # 2^20 B at 250 GB/s = 4194 ns
    extra = fixed + int(size / bw)
    for npus in (4, 8):
        plain = end_ns(tmp_path, npus, {}, size=size, backend=backend)
        with_cost = end_ns(tmp_path, npus, {"collective-fixed-delay": fixed, "collective-copy-bw": bw}, size=size,
                           backend=backend)
        assert with_cost - plain == extra, (npus, with_cost - plain)


def test_per_byte_cost_counts_the_collectives_size(tmp_path) -> None:
    # an all-gather's Chakra comm_size is the per-rank input: the copy term follows it
    plain = end_ns(tmp_path, 4, {}, "ALL_GATHER", 1 << 18)
    assert end_ns(tmp_path, 4, {"collective-copy-bw": 100.0}, "ALL_GATHER", 1 << 18) - plain == int((1 << 18) / 100.0)


@pytest.mark.parametrize("key, value", [("collective-fixed-delay", -1), ("collective-fixed-delay", 1.5),
                                        ("collective-copy-bw", -3), ("collective-copy-bw", "fast")])
def test_bad_values_are_refused(key: str, value) -> None:
    with pytest.raises(SystemConfigError, match=key):
        SystemConfig.from_dict(dict(BASE, **{key: value}))
