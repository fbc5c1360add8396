"""The inputs review found answered wrongly or silently (issue 21), rebuilt here with our writer.

Each expected number is ASTRA-sim's own output for the same files (the analytical binaries of
../shared/tools/astra-sim; the reproducers are ../shared/anchors/fidelity-repro, whose README
lists them). Where ASTRA-sim gives no answer, dtsim refuses (exit 2) or answers with an
``AstraSimDiffers`` warning that says what ASTRA-sim does.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from conftest import run_cli
from network.config import NetworkConfig
from network.errors import InputError
from system.config import SystemConfig
from system.divergence import AstraSimDiffers
from system.simulation import ShortcutMismatch, run_simulation
from workload.builder import GraphBuilder

BASE = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
        "all-reduce-implementation": ["ring"], "all-gather-implementation": ["ring"],
        "reduce-scatter-implementation": ["ring"], "all-to-all-implementation": ["ring"]}
MODES = [{}, {"symmetry": False}, {"symmetry": False, "batching": False}]


def _net(kinds: list[str], npus: list[int], backend: str = "congestion-unaware") -> NetworkConfig:
    return NetworkConfig.from_dict({"topology": kinds, "npus_count": npus, "bandwidth": [50] * len(kinds),
                                    "latency": [500] * len(kinds), "backend": backend})


def _sys(**knobs: object) -> SystemConfig:
    return SystemConfig.from_dict({**BASE, **{k.replace("_", "-"): v for k, v in knobs.items()}})


def _run(prefix: Path, net: NetworkConfig, cfg: SystemConfig, groups: dict | None = None, **kw: object):
    g = None
    if groups is not None:
        g = prefix.parent / "groups.json"
        g.write_text(json.dumps({str(k): v for k, v in groups.items()}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_simulation(str(prefix), net, cfg, comm_groups=g, **kw)
    return r, [str(w.message) for w in caught if issubclass(w.category, AstraSimDiffers)]


def _direct1(tmp: Path) -> Path:
    for r in range(4):
        b = GraphBuilder()
        ag = b.collective("n0", "ALL_GATHER", 65536)
        b.comp("n1", 2000 if r == 0 else 1000, deps=[ag])
        b.write(tmp / "w", r)
    return tmp / "w"


@pytest.mark.parametrize("mode", MODES, ids=["default", "no-symmetry", "no-batching"])
@pytest.mark.parametrize("backend, expected", [("congestion-unaware", [7700, 6700, 6700, 6700]),
                                               ("congestion-aware", [8920, 7920, 7920, 7920])])
def test_direct_with_a_window_is_not_batched_as_a_ring(tmp_path: Path, backend, expected, mode) -> None:
    r, _ = _run(_direct1(tmp_path), _net(["Ring"], [4], backend), _sys(all_gather_implementation=["direct1"]),
                **mode)
    assert r.finish_ns == expected


def _rotated_hd(tmp: Path) -> tuple[Path, dict]:
    groups = {1: [0, 1, 2, 3], 2: [5, 6, 7, 4], 3: [8, 9, 10, 11],
              4: [0, 4, 8], 5: [1, 5, 9], 6: [2, 6, 10], 7: [3, 7, 11]}
    for r in range(12):
        b = GraphBuilder()
        b.collective("n0", "ALL_GATHER", 65536, pg_name=str(1 + r // 4))
        b.write(tmp / "w", r)
    return tmp / "w", groups


@pytest.mark.parametrize("mode", MODES, ids=["default", "no-symmetry", "no-batching"])
def test_orbits_refuse_halving_doubling_on_an_image_that_is_rotated(tmp_path: Path, mode) -> None:
    prefix, groups = _rotated_hd(tmp_path)
    r, _ = _run(prefix, _net(["Ring"], [12]), _sys(all_gather_implementation=["halvingDoubling"]), groups, **mode)
    assert r.finish_ns == [5191] * 4 + [6191, 5191, 5191, 6191] + [5191] * 4
    assert r.inputs["simulated_ranks"] == 12


def test_involved_dim_with_no_dimension_is_refused(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        ar = b.collective("n0", "ALL_REDUCE", 1 << 20, involved_dim=[False])
        b.comp("n1", 5000, deps=[ar])
        b.write(tmp_path / "w", r)
    with pytest.raises(InputError, match=r"involved_dim \[False\].*ASTRA-sim never finishes"):
        run_simulation(str(tmp_path / "w"), _net(["Ring"], [4]), _sys())


def test_world_collective_after_a_group_one_warns(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        prev = [b.collective("n0", "ALL_REDUCE", 65536, pg_name="1")] if r < 2 else []
        b.collective("n1", "ALL_REDUCE", 65536, deps=prev)
        b.write(tmp_path / "w", r)
    r, notes = _run(tmp_path / "w", _net(["Ring"], [4]), _sys(), {1: [0, 1]})
    assert len(notes) == 1 and "never finishes" in notes[0] and "rank(s) 0, 1: tag 1" in notes[0]
    assert r.inputs["astra_sim_differs"] == notes
    # ranks that run the same group collectives before it agree with ASTRA-sim: no warning
    for rank in range(4):
        b = GraphBuilder()
        g = b.collective("n0", "ALL_REDUCE", 65536, pg_name=str(1 + rank // 2))
        b.collective("n1", "ALL_REDUCE", 65536, deps=[g])
        b.write(tmp_path / "v", rank)
    _, notes = _run(tmp_path / "v", _net(["Ring"], [4]), _sys(), {1: [0, 1], 2: [2, 3]})
    assert notes == []


def test_all_gather_smaller_than_its_splits_warns(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        b.collective("n0", "ALL_GATHER", 2)
        b.write(tmp_path / "w", r)
    r, notes = _run(tmp_path / "w", _net(["Ring"], [4]), _sys(preferred_dataset_splits=4))
    assert len(notes) == 1 and "loops forever" in notes[0]
    assert r.finish_ns == [3080] * 4  # two 1-byte chunks


def test_double_binary_tree_on_a_sub_group_warns(tmp_path: Path) -> None:
    for r in range(4):
        b = GraphBuilder()
        b.collective("ar", "ALL_REDUCE", 1 << 20, pg_name=str(1 + r // 2))
        b.write(tmp_path / "w", r)
    _, notes = _run(tmp_path / "w", _net(["Switch"], [4]), _sys(preferred_dataset_splits=4,
                    all_reduce_implementation=["doubleBinaryTree"]), {1: [0, 1], 2: [2, 3]})
    assert len(notes) == 1 and "segmentation fault" in notes[0] and "as a ring" in notes[0]


@pytest.mark.parametrize("mode", MODES, ids=["default", "no-symmetry", "no-batching"])
def test_zero_byte_messages_warn_in_every_mode(tmp_path: Path, mode) -> None:
    b = GraphBuilder()
    b.collective("ar", "ALL_REDUCE", 4096)
    spec = b.write(tmp_path / "w.et")
    net = NetworkConfig.from_dict({"topology": ["FullyConnected", "Ring"], "npus_count": [16, 8],
                                   "bandwidth": [200, 200], "latency": [700, 100]})
    r, notes = _run(spec, net, _sys(preferred_dataset_splits=32, all_reduce_implementation=["ring", "halvingDoubling"]),
                    **mode)
    assert len(notes) == 1 and "HalvingDoubling phase sends 0-byte messages" in notes[0]
    assert "chunk_size > 0" in notes[0]


def test_no_warning_on_an_ordinary_run(tmp_path: Path) -> None:
    r, notes = _run(_direct1(tmp_path), _net(["Ring"], [4]), _sys())
    assert notes == [] and r.inputs["astra_sim_differs"] == []


def _left_out_warnings(spec: Path, net: NetworkConfig, cfg: SystemConfig) -> tuple[list[str], list[int]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_simulation(str(spec), net, cfg)
    return [str(w.message) for w in caught if "carry none of it" in str(w.message)], r.finish_ns


def test_dimension_left_out_by_a_short_implementation_list_warns_once(tmp_path: Path) -> None:
    net = NetworkConfig.from_dict({"topology": ["Ring", "Switch"], "npus_count": [8, 4], "bandwidth": [50, 2],
                                   "latency": [500, 500]})
    b = GraphBuilder()
    b.collective("ar", "ALL_REDUCE", 8 << 20)
    msgs, finish = _left_out_warnings(b.write(tmp_path / "ar.et"), net, _sys(preferred_dataset_splits=4))
    assert len(msgs) == 1 and "all-reduce" in msgs[0] and "all-gather" not in msgs[0]
    assert "dimension(s) 1 (Switch, 4 NPUs)" in msgs[0] and '["ring", "ring"]' in msgs[0]
    assert finish == [315684] * 32  # ASTRA-sim's cycles: dimension 0 alone
    b.collective("ag", "ALL_GATHER", 1 << 20)
    msgs, _ = _left_out_warnings(b.write(tmp_path / "both.et"), net, _sys())
    assert len(msgs) == 1 and "all-reduce" in msgs[0] and "all-gather" in msgs[0]
    full = _sys(all_reduce_implementation=["ring", "ring"], all_gather_implementation=["ring", "ring"])
    assert _left_out_warnings(b.write(tmp_path / "both.et"), net, full)[0] == []


@pytest.mark.usefixtures("batch_every_ring")  # its 4-rank phases, batched (conftest.py)
def test_verify_shortcuts_names_both_answers(tmp_path: Path, monkeypatch) -> None:
    prefix = _direct1(tmp_path)
    net, cfg = _net(["Ring"], [4]), _sys(all_gather_implementation=["ring"])
    ok = run_simulation(str(prefix), net, cfg, verify_shortcuts=True)
    assert ok.inputs["shortcut"] == "batched" and ok.inputs["shortcuts_verified"] is True
    assert ok.finish_ns == run_simulation(str(prefix), net, cfg, batching=False).finish_ns
    from system.shortcuts import phase_batch, ring_batch

    # a wrong shortcut: the batched recurrences (phase_batch in C, ring_batch in Python) with
    # every message 100 ns faster than the network's (the every-event path keeps the true delay)
    for cls in (phase_batch.PhaseBatcher, ring_batch.RingBatcher):
        def wrong(self, *a, real=cls.__init__, **k) -> None:
            real(self, *a, **k)
            true_delay = self._delay
            assert true_delay is not None  # the congestion-unaware network's fixed delays
            self._delay = lambda src, dst, size: true_delay(src, dst, size) - 100
        monkeypatch.setattr(cls, "__init__", wrong)
    fast = run_simulation(str(prefix), net, cfg).finish_ns
    assert fast[0] < ok.finish_ns[0]
    with pytest.raises(ShortcutMismatch, match=f"batched shortcut finishes rank 0 at {fast[0]} cycles, "
                                               f"the every-event path at {ok.finish_ns[0]}"):
        run_simulation(str(prefix), net, cfg, verify_shortcuts=True)


def test_cli_verify_shortcuts_and_report_to_stdout(tmp_path: Path, example_args: list[str]) -> None:
    r = run_cli(*example_args, "--verify-shortcuts", "--report", "-")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)  # stdout is the JSON alone; the table went to stderr
    assert rep["inputs"]["shortcut"] == "representative" and rep["inputs"]["shortcuts_verified"] is True
    assert "end 64440 cycles" in r.stderr


@pytest.mark.parametrize("name", ["report", "report.yaml", "r.json"])
def test_report_takes_any_file_name(tmp_path: Path, example_args: list[str], name: str) -> None:
    out = tmp_path / name
    if name == "report":
        out.write_text("")  # as mktemp leaves it
    r = run_cli(*example_args, "--report", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["totals"]["end_cycles"] == 64440


def test_report_to_dev_stdout(example_args: list[str]) -> None:
    if not Path("/dev/stdout").exists():
        pytest.skip("no /dev/stdout on this system")
    r = run_cli(*example_args, "--report", "/dev/stdout")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["end_cycles"] == 64440


def test_a_group_ring_and_a_strided_ring_never_share_an_identity() -> None:
    from system.logical_topology import RingTopology

    listed = RingTopology(3, [2, 3, 4], local=True)  # a communicator group's ring
    strided = RingTopology.homogeneous(3, 2, 4)  # ranks 3 and 7: dimension 1 of FC(4) x FC(2)
    assert strided.members == [3, 7] and listed.identity != strided.identity


@pytest.mark.parametrize("mode", MODES, ids=["default", "no-symmetry", "no-batching"])
def test_world_ring_after_group_rings_of_three_is_batched_exactly(tmp_path: Path, mode) -> None:
    """Found by the differential corpus (c2903): the batcher took the shape of group [2, 3, 4]'s
    ring for the dimension-1 ring of ranks 3 and 7, whose identity tuple was the same."""
    groups = {1: [6, 5, 7], 2: [2, 3, 4], 3: [0, 1], 4: [4, 5, 6, 7], 5: [3, 2], 6: [0, 1]}
    own = {r: g for g in (1, 2, 3) for r in groups[g]}
    for r in range(8):
        b = GraphBuilder()
        ar = b.collective("AR0", "ALL_REDUCE", 655360, pg_name=str(own[r]))
        b.collective("AG1", "ALL_GATHER", 24576, deps=[ar])
        b.write(tmp_path / "w", r)
    net = NetworkConfig.from_dict({"topology": ["FullyConnected", "FullyConnected"], "npus_count": [4, 2],
                                   "bandwidth": [50, 200], "latency": [1000, 500]})
    cfg = _sys(scheduling_policy="FIFO", endpoint_delay=5, local_mem_bw=50, collective_optimization="baseline",
               all_reduce_implementation=["doubleBinaryTree", "ring"], all_gather_implementation=["ring", "ring"],
               reduce_scatter_implementation=["oneRing", "direct1"], all_to_all_implementation=["ring", "ring"])
    r, notes = _run(tmp_path / "w", net, cfg, groups, **mode)
    assert r.finish_ns == [52929] * 4 + [52315, 52929, 52929, 52315]  # ASTRA-sim's
    assert notes == []  # a several-entry list with a tree runs as a ring on a group in ASTRA-sim too


@pytest.mark.parametrize("mode", MODES, ids=["default", "no-symmetry", "no-batching"])
def test_endpoint_delay_zero_warns_only_where_an_event_falls_at_time_zero(tmp_path: Path, mode) -> None:
    b = GraphBuilder()
    b.collective("ar", "ALL_REDUCE", 1 << 20)
    first = b.write(tmp_path / "now.et")
    b = GraphBuilder()
    b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[b.comp("c", 5000)])
    later = b.write(tmp_path / "later.et")
    cfg = _sys(endpoint_delay=0, preferred_dataset_splits=4)
    _, notes = _run(first, _net(["Ring"], [4]), cfg, **mode)
    assert len(notes) == 1 and "time 0" in notes[0] and "exit 134" in notes[0]
    _, notes = _run(later, _net(["Ring"], [4]), cfg, **mode)
    assert notes == []  # ASTRA-sim's event queue takes same-time events once it runs


def test_tiny_message_at_time_zero_on_the_aware_backend_warns(tmp_path: Path) -> None:
    for r in range(2):
        b = GraphBuilder()
        (b.send if r == 0 else b.recv)("p", 0, 1, 16, 7)
        b.write(tmp_path / "w", r)
    _, notes = _run(tmp_path / "w", _net(["FullyConnected"], [2], "congestion-aware"), _sys())
    assert len(notes) == 1 and "16 B" in notes[0] and "0 ns" in notes[0]
    _, notes = _run(tmp_path / "w", _net(["FullyConnected"], [2]), _sys())
    assert notes == []  # the unaware backend adds the latency: no event at time 0


def test_aware_ring_of_two_warns(tmp_path: Path) -> None:
    b = GraphBuilder()
    b.collective("ar", "ALL_REDUCE", 1 << 20)
    spec = b.write(tmp_path / "w.et")
    r, notes = _run(spec, _net(["Ring"], [2], "congestion-aware"), _sys())
    assert len(notes) == 1 and "Ring of 2 NPUs" in notes[0]
    fc, _ = _run(spec, _net(["FullyConnected"], [2], "congestion-aware"), _sys())
    assert r.finish_ns == fc.finish_ns


def test_implementation_list_longer_than_the_network_is_refused_even_unused(tmp_path: Path) -> None:
    b = GraphBuilder()
    b.collective("rs", "REDUCE_SCATTER", 1 << 20)
    with pytest.raises(InputError, match="all-reduce-implementation.*lists 2 implementations.*whether or not"):
        run_simulation(str(b.write(tmp_path / "w.et")), _net(["Ring"], [4]),
                       _sys(all_reduce_implementation=["oneRing", "ring"]))


def test_roofline_node_without_tensor_size_warns(tmp_path: Path) -> None:
    b = GraphBuilder()
    c = b.comp("c", 0, num_ops=1000, tensor_size=0)
    b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c])
    r, notes = _run(b.write(tmp_path / "w.et"), _net(["Ring"], [4]), _sys(roofline_enabled=1, peak_perf=900))
    assert any("tensor_size 0" in n and "never finishes" in n for n in notes)
    assert r.finish_ns[0] > 0


@pytest.mark.parametrize("duration_ns, warned", [(1500, True), (2000, False)])
def test_durations_finer_than_a_microsecond_say_astra_sim_differs(tmp_path, duration_ns, warned) -> None:
    """A compute node of 1.5 us (duration_ns): dtsim runs 1500 ns, ASTRA-sim reads duration_micros
    (1) and runs 1000, so the cycles differ, and the run says so (found comparing a workload of
    ours against ASTRA-sim's binary: every rank 2-4 k cycles apart, with no word)."""
    for rank in range(2):
        b = GraphBuilder()
        b.collective("ar", "ALL_REDUCE", 1 << 16, [b.comp("c", duration_ns)])
        b.write(tmp_path / "w", rank)
    (tmp_path / "r2.yml").write_text("topology: [Ring]\nnpus_count: [2]\nbandwidth: [50]\nlatency: [500]\n")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = run_simulation(tmp_path / "w", tmp_path / "r2.yml")
    notes = [str(w.message) for w in got if issubclass(w.category, AstraSimDiffers)]
    assert bool(notes) == warned and bool(res.inputs["astra_sim_differs"]) == warned
    if warned:
        assert "2 compute node(s) of 2 workload file(s)" in notes[0] and "duration_micros" in notes[0]


@pytest.mark.parametrize("mode", MODES, ids=["default", "no-symmetry", "no-batching"])
def test_a_collective_of_a_one_rank_group_warns_and_takes_no_time(tmp_path: Path, mode) -> None:
    """ASTRA-sim never finishes a collective over a group of one rank (review of drawn mixed
    layouts: tp 8 on 8 NPUs left dp groups of one); dtsim said nothing and answered."""
    for r in range(4):
        b = GraphBuilder()
        c = b.comp("c", 1000)
        rs = b.collective("rs", "REDUCE_SCATTER", 1 << 20, deps=[c], pg_name=str(r + 1))
        b.comp("d", 1000 * (r + 1), deps=[rs])
        b.write(tmp_path / "w", r)
    r, notes = _run(tmp_path / "w", _net(["Switch"], [4]), _sys(), {1: [0], 2: [1], 3: [2], 4: [3]}, **mode)
    assert len(notes) == 1 and "only member is rank" in notes[0] and "never finishes" in notes[0]
    assert r.finish_ns == [2000, 3000, 4000, 5000]


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_a_network_dimension_of_one_npu_warns_and_changes_nothing(tmp_path: Path, backend: str) -> None:
    """ASTRA-sim's analytical network refuses npus_count 1 in any dimension (it prints an error
    and runs nothing); dtsim runs it, as the network without that dimension."""
    for r in range(4):
        b = GraphBuilder()
        c = b.comp("c", 1000)
        b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c])
        b.write(tmp_path / "w", r)
    two = _sys(all_reduce_implementation=["ring", "ring"])
    with_one, notes = _run(tmp_path / "w", _net(["Ring", "Switch"], [4, 1], backend), two)
    assert len(notes) == 1 and "dimension(s) 1 of 1 NPU" in notes[0] and "should be larger than 1" in notes[0]
    plain, notes = _run(tmp_path / "w", _net(["Ring"], [4], backend), _sys())
    assert notes == [] and with_one.finish_ns == plain.finish_ns
