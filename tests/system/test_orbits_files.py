"""One rank per orbit on a topology file (system/shortcuts/orbits.py with the links folded by
network/analytical/graph_links.py): the same answer as simulating every rank.

Rotations of the dp and tp groups are symmetries of a rail-optimized cluster when the tp groups
are its servers; on a fat-tree (two or three tiers) ECMP's hash may route an image pair elsewhere, and then the run
must notice (FastPathConflict) and redo itself on the every-event path. The property test draws
both, on both analytical backends, and compares every rank, the traffic counters and the report
(the per-link-class table included).
"""
from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings, strategies as st

from orbit_layouts import _config, check_against_event_path, write_layout

from network.config import NetworkConfig
from network.graph_symmetry import extend_to_graph
from network.topology_gen import fat_tree, rail_optimized
from system.main import run_simulation

COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]


def _network(spec: dict, npus: int) -> NetworkConfig:
    return NetworkConfig.from_dict({"topology-generator": spec, "npus_count": [npus]})


def _rail(servers: int, gpus: int, spines: int = 2) -> dict:
    return {"shape": "rail-optimized", "servers": servers, "gpus-per-server": gpus, "bandwidth": "200Gbps",
            "latency": "0.001ms", "scale-up-bandwidth": "2400Gbps", "scale-up-latency": "0.0005ms",
            "spines": spines}


@st.composite
def cases(draw):
    dp = draw(st.sampled_from([2, 3, 4]))
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2]))
    npus = dp * tp * pp
    per = draw(st.sampled_from([a for a in (2, 4, 8) if npus % a == 0 and a < npus] or [1]))
    shape = draw(st.sampled_from(["rail", "fat-tree", "fat-tree-3"]))
    if shape == "fat-tree-3" and per > 1 and (npus // per) % 2 == 0:
        spec = {"shape": "fat-tree-3", "npus-per-leaf": per, "leaves": 2, "pods": npus // per // 2}
    elif shape == "rail" and per > 1:
        spec = _rail(npus // per, per, draw(st.sampled_from([1, 2])))
    else:
        spec = {"shape": "fat-tree", "npus-per-leaf": per, "leaves": npus // per,
                "spines": draw(st.sampled_from(sorted({1, min(2, per)})))}
        if npus // per < 2:
            spec = _rail(npus // per, per) if per > 1 else {"shape": "fat-tree", "npus-per-leaf": npus, "leaves": 1}
    size = st.one_of(st.integers(1, 4 << 20), st.sampled_from([1 << 20, 96_000]))
    knobs = {
        "scheduling-policy": draw(st.sampled_from(["LIFO", "FIFO"])),
        "endpoint-delay": draw(st.sampled_from([0, 10])),
        "active-chunks-per-dimension": draw(st.sampled_from([1, 2])),
        "preferred-dataset-splits": draw(st.sampled_from([1, 2, 4])),
        "local-mem-bw": 1600,
    }
    stage_ns = [draw(st.sampled_from([0, 7_000, 60_000])) for _ in range(pp)]
    return (dp, tp, pp, draw(st.integers(1, 2)), draw(st.booleans()), spec, stage_ns,
            (draw(st.sampled_from(COLLS)), draw(size)), (draw(st.sampled_from(COLLS)), draw(size)),
            draw(st.sampled_from([None, None, None, 0])), knobs,
            draw(st.sampled_from(["congestion-aware", "congestion-aware", "congestion-unaware"])))


@settings(max_examples=int(os.environ.get("DTSIM_PROPERTY_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())
@example(case=(4, 2, 2, 2, False, _rail(8, 2), [60_000, 7_000], ("REDUCE_SCATTER", 96_000),
               ("ALL_REDUCE", 1 << 20), None, {"preferred-dataset-splits": 2, "local-mem-bw": 1600},
               "congestion-aware"))
def test_orbit_runs_on_files_equal_the_event_path(tmp_path_factory, case) -> None:
    dp, tp, pp, micros, dp_inner, spec, stage_ns, tp_coll, dp_coll, odd, knobs, backend = case
    tmp = tmp_path_factory.mktemp("orbf")
    wl, groups, npus = write_layout(tmp, dp, tp, pp, micros, dp_inner, stage_ns, tp_coll, dp_coll, odd)
    net, cfg = _network(spec, npus), _config(knobs, None, 1)
    check_against_event_path(wl, net, cfg, groups, backend=backend)


def test_a_rail_optimized_layout_runs_one_rank_per_stage(tmp_path: Path) -> None:
    """tp groups are servers, dp groups sit on one rail: rotating either is an automorphism of
    the cluster, and the product folds 16 ranks onto 2, the links with them."""
    wl, groups, npus = write_layout(tmp_path, 4, 2, 2, 2, False, [30_000, 20_000], ("ALL_REDUCE", 1 << 20),
                                    ("ALL_REDUCE", 3 << 20))
    net = _network(_rail(8, 2), npus)
    cfg = _config({"preferred-dataset-splits": 2, "local-mem-bw": 1600}, None, 1)
    fast = run_simulation(wl, net, cfg, comm_groups=groups, backend="congestion-aware")
    plain = run_simulation(wl, net, cfg, comm_groups=groups, backend="congestion-aware", symmetry=False)
    assert fast.inputs["shortcut"] == "orbits" and fast.inputs["simulated_ranks"] == 2
    assert fast.finish_ns == plain.finish_ns
    assert len(set(fast.finish_ns)) > 1
    assert fast.events * 4 < plain.events
    assert fast.network_stats["link_classes"] == plain.network_stats["link_classes"]
    assert fast.network_stats["links_used"] == plain.network_stats["links_used"]


def test_ecmp_that_breaks_the_symmetry_is_noticed(tmp_path: Path) -> None:
    """dp groups across the leaves of a fat-tree with two spines: the hash sends some image
    pairs over the other spine, which the folded run must not take for the same."""
    wl, groups, npus = write_layout(tmp_path, 4, 2, 1, 1, True, [0], ("ALL_REDUCE", 1 << 20),
                                    ("ALL_REDUCE", 4 << 20))
    net = _network({"shape": "fat-tree", "npus-per-leaf": 2, "leaves": 4, "spines": 2}, npus)
    cfg = _config({"preferred-dataset-splits": 1, "local-mem-bw": 1600}, None, 1)
    fast = run_simulation(wl, net, cfg, comm_groups=groups, backend="congestion-aware")
    plain = run_simulation(wl, net, cfg, comm_groups=groups, backend="congestion-aware", symmetry=False)
    assert fast.finish_ns == plain.finish_ns
    declined = fast.inputs["shortcuts_declined"]
    assert any(d.startswith("orbits: abandoned at run time") and "ECMP" in d for d in declined)


def test_rotations_extend_to_automorphisms_or_to_none() -> None:
    g = rail_optimized(4, 2, spines=2)
    shift = [(r + 2) % 8 for r in range(8)]  # server s -> s + 1
    ext = extend_to_graph(g, shift)
    assert ext is not None
    nodes, links = ext
    assert sorted(links) == list(range(2 * len(g.links)))
    for i, link in enumerate(g.links):  # every link onto one of the same rate between the images
        j = links[2 * i] >> 1
        assert {g.links[j].a, g.links[j].b} == {nodes[link.a], nodes[link.b]}
        assert g.links[j].bandwidth_gb_s == link.bandwidth_gb_s
    swap_rails = [r ^ 1 for r in range(8)]  # GPU 0 <-> GPU 1 in every server: rail 0 <-> rail 1
    assert extend_to_graph(g, swap_rails) is not None
    # GPU 0 of server 0 onto GPU 1 of server 0 alone: rail 0 would need to become rail 1 for
    # one server only, which is no automorphism
    lone = list(range(8))
    lone[0], lone[1] = 1, 0
    assert extend_to_graph(g, lone) is None
    ft = fat_tree(2, 4, spines=2)
    assert extend_to_graph(ft, [(r + 2) % 8 for r in range(8)]) is not None  # leaf onto leaf
    assert extend_to_graph(ft, [r ^ 2 if r < 4 else r for r in range(8)]) is not None
    assert extend_to_graph(ft, [(r + 1) % 8 for r in range(8)]) is None  # splits a leaf's NPUs
