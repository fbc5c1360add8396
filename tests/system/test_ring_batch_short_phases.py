"""Short ring phases go on the event path on the congestion-unaware network (there, with every rank
simulated, the C core's batcher joins them: phase_batch.MIN_STEPS), long ones are batched: one run
mixes both, and its cycles are the event path's on every rank. The congestion-aware batcher,
proved only where every ring phase is batched, still takes them all."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from network.config import NetworkConfig
from system.config import SystemConfig
from system.main import run_simulation
from system.shortcuts import phase_batch
from workload.builder import GraphBuilder


def _two_rings(tmp: Path, small: int, npus: int, uneven: bool) -> str:
    """Every rank: an all-reduce on its group of ``small`` ranks (a tensor-parallel group), then
    compute (``uneven``: longer on each rank), then an all-reduce on all ``npus``."""
    for r in range(npus):
        b = GraphBuilder()
        a = b.collective("tp", "ALL_REDUCE", 1 << 20, pg_name=str(r // small + 1))
        c = b.comp("layer", 1_000 * (r + 1 if uneven else 1), deps=[a])
        b.collective("dp", "ALL_REDUCE", 1 << 22, deps=[c])
        b.write(tmp / "w", r)
    groups = {str(g + 1): list(range(g * small, (g + 1) * small)) for g in range(npus // small)}
    (tmp / "groups.json").write_text(json.dumps(groups))
    return str(tmp / "w")


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_short_phases_take_the_event_path_and_long_ones_are_batched(tmp_path: Path, backend: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    npus, small = 8, 2  # the groups' rings: 2·1 steps each; the world's: 2·7
    steps_small, steps_world = 2 * (small - 1), 2 * (npus - 1)
    monkeypatch.setattr(phase_batch, "MIN_STEPS", steps_small + 1)  # the groups' phases below it, the world's not
    # the congestion-aware batcher declines uneven compute on a built-in topology (ring_batch.prove_on_pipes)
    spec = _two_rings(tmp_path, small, npus, uneven=backend == "congestion-unaware")
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 1, "local-mem-bw": 1600,
                                  "all-reduce-implementation": ["ring"]})
    kw = dict(backend=backend, comm_groups=str(tmp_path / "groups.json"), symmetry=False)
    mixed = run_simulation(spec, net, cfg, **kw)
    plain = run_simulation(spec, net, cfg, batching=False, **kw)
    assert mixed.finish_ns == plain.finish_ns
    assert plain.inputs["batched_ring_messages"] == 0
    assert plain.network_stats["messages"] == npus * (steps_small + steps_world)
    if backend == "congestion-unaware":  # the world's phase alone: the groups' 2 messages a rank were events
        assert mixed.inputs["batched_ring_messages"] == npus * steps_world
    else:
        assert mixed.inputs["batched_ring_messages"] == plain.network_stats["messages"]


def test_a_phase_too_short_for_the_c_batcher_is_too_short_for_the_python_one() -> None:
    """system/_sys_core.c sends a ring phase below phase_batch.MIN_STEPS straight to the event path
    (where every rank runs on the congestion-unaware network), without asking ring_batch.py, whose
    join would decline it by its own MIN_STEPS."""
    from system.shortcuts import ring_batch

    assert 1 < phase_batch.MIN_STEPS <= ring_batch.MIN_STEPS
