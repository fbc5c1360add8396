"""The native and custom collective algorithms against their closed-form αβ times and step structure.

Each closed form is docs/astra-sim-semantics.md §7.2, evaluated here from the configuration
parameters (congestion-unaware backend, one chunk at a time): ED = endpoint-delay,
t(m, hops) = trunc(hops·latency + m / (bandwidth·2^30/10^9)), P(m) = 3·trunc(m / local-mem-bw).
The structure tests record every message the network is asked to carry.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb
from chakra_proto.attrs import attr_bool, attr_int32, attr_int64, attr_string
from chakra_proto.io import write_et
from network.analytical.base import AnalyticalBackend
from network.errors import InputError
from system.collective.custom import resolve_custom_prefix
from system.collective.double_binary_tree import BinaryTree, DoubleBinaryTreeTopology, NodeType, TreeType
from system.main import run_simulation

MB = 1 << 20
LAT, BW, ED, LMBW, SPLITS = 500.0, 50.0, 10, 1600, 4


# -- inputs -------------------------------------------------------------------------------------
def _network(tmp: Path, topology: str, npus: int) -> Path:
    p = tmp / f"{topology}_{npus}.yml"
    p.write_text(f"topology: [ {topology} ]\nnpus_count: [ {npus} ]\nbandwidth: [ {BW} ]\nlatency: [ {LAT} ]\n")
    return p


def _system(tmp: Path, impl: str, splits: int = SPLITS, **extra: object) -> Path:
    cfg = {"scheduling-policy": "LIFO", "endpoint-delay": ED, "active-chunks-per-dimension": 1,
           "preferred-dataset-splits": splits, "collective-optimization": "localBWAware", "local-mem-bw": LMBW}
    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        cfg[f"{c}-implementation"] = [impl]
    cfg.update(extra)
    p = tmp / f"sys_{impl}_{splits}.json"
    p.write_text(json.dumps(cfg))
    return p


def _collective(tmp: Path, comm_type: int, size: int = MB) -> Path:
    """One COMM_COLL node, one file that every rank runs."""
    p = tmp / f"coll_{comm_type}_{size}.et"
    n = pb.Node(id=0, name="coll", type=pb.COMM_COLL_NODE)
    n.attr.extend([attr_bool("is_cpu_op", False), attr_int64("comm_type", comm_type), attr_int64("comm_size", size)])
    write_et(p, pb.GlobalMetadata(version="0.0.4"), [n])
    return p


def _run(tmp: Path, comm_type: int, impl: str, topology: str, npus: int, splits: int = SPLITS,
         batching: bool = True) -> list[int]:
    """Finish time per rank, simulating every rank (and, where the run qualifies, checking that
    the one-representative-rank fast path of system/shortcuts/representative.py agrees). With
    ``batching`` False every message is an event (the tests that log them)."""
    args = (_collective(tmp, comm_type), _network(tmp, topology, npus), _system(tmp, impl, splits))
    every_rank = run_simulation(*args, backend="congestion-unaware", symmetry=False, batching=batching).finish_ns
    fast = run_simulation(*args, backend="congestion-unaware").finish_ns
    assert fast == every_rank
    return every_rank


# -- the αβ model ---------------------------------------------------------------------------------
def t(m: int, hops: int) -> int:
    return int(hops * LAT + m / (BW * (1 << 30) / 1e9))


def p(m: int) -> int:
    return 3 * int(m / (LMBW * 1e9) * 1e9)


def hops(topology: str, n: int, a: int, b: int) -> int:
    if topology == "FullyConnected":
        return 1
    if topology == "Switch":
        return 2
    d = (b - a) % n
    return min(d, n - d)


def chunk_of(size: int, n: int, all_gather: bool = False) -> int:
    c = size // SPLITS
    return c if all_gather else max(c, n)


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int, int]]:
    """Every message handed to the network: (time ns, src, dst, bytes)."""
    log: list[tuple[int, int, int, int]] = []
    original_send, original_exchange = AnalyticalBackend.send, AnalyticalBackend.exchange

    def send(self, src, dst, size_bytes, tag, callback, *args, **kw):
        log.append((self.now(), src, dst, size_bytes))
        return original_send(self, src, dst, size_bytes, tag, callback, *args, **kw)

    def exchange(self, me, dst, src, size_bytes, *rest):  # a collective step: a send and a receive
        log.append((self.now(), me, dst, size_bytes))
        return original_exchange(self, me, dst, src, size_bytes, *rest)

    monkeypatch.setattr(AnalyticalBackend, "send", send)
    monkeypatch.setattr(AnalyticalBackend, "exchange", exchange)
    return log


# -- Direct (AllToAll.cc) -----------------------------------------------------------------------
@pytest.mark.parametrize("topology", ["FullyConnected", "Ring", "Switch"])
def test_direct_all_reduce_closed_form(tmp_path: Path, topology: str) -> None:
    n = 8
    m = chunk_of(MB, n) // n
    t_max = max(t(m, hops(topology, n, 0, j)) for j in range(1, n))
    per_chunk = 3 * ED + p(m) + 2 * t_max
    assert _run(tmp_path, pb.ALL_REDUCE, "direct", topology, n) == [SPLITS * per_chunk] * n


@pytest.mark.parametrize("topology", ["FullyConnected", "Ring"])
def test_direct_all_to_all_and_reduce_scatter_closed_forms(tmp_path: Path, topology: str) -> None:
    n = 8
    m = chunk_of(MB, n) // n
    t_max = max(t(m, hops(topology, n, 0, j)) for j in range(1, n))
    assert _run(tmp_path, pb.ALL_TO_ALL, "direct", topology, n) == [SPLITS * (2 * ED + t_max)] * n
    assert _run(tmp_path, pb.REDUCE_SCATTER, "direct", topology, n) == [SPLITS * (2 * ED + p(m) + t_max)] * n


def test_direct_all_reduce_sends_to_every_peer_once_per_half(tmp_path: Path, sends: list) -> None:
    n = 8
    _run(tmp_path, pb.ALL_REDUCE, "direct", "FullyConnected", n, splits=1)
    mine = [(time, dst, size) for time, src, dst, size in sends if src == 0]
    assert len(mine) == 2 * (n - 1)
    assert {size for _, _, size in mine} == {MB // n}
    first, second = mine[:n - 1], mine[n - 1:]
    assert [d for _, d, _ in first] == list(range(1, n))   # k-th packet to the k-th peer clockwise
    assert [d for _, d, _ in second] == list(range(1, n))
    assert {time for time, _, _ in first} == {ED}             # all at once: no injection limit
    assert len({time for time, _, _ in second}) == 1          # the gather starts after every reduction


def test_direct_window_limits_messages_in_flight(tmp_path: Path, sends: list) -> None:
    n, window = 8, 2
    _run(tmp_path, pb.ALL_TO_ALL, f"direct{window}", "FullyConnected", n, splits=1)
    mine = [(time, dst) for time, src, dst, _ in sends if src == 0]
    assert [d for _, d in mine] == list(range(1, n))
    assert [time for time, _ in mine[:window]] == [ED] * window
    assert all(time > ED for time, _ in mine[window:])


# -- HalvingDoubling (HalvingDoubling.cc) -------------------------------------------------------
def _hd_terms(topology: str, n: int, c: int) -> tuple[list[int], list[int]]:
    """Per reduce-scatter step k = 1..log2 N: the message size c/2^k and its hop count (offset 2^(k-1))."""
    steps = int(math.log2(n))
    sizes = [c >> k for k in range(1, steps + 1)]
    hop = [hops(topology, n, 0, 1 << (k - 1)) for k in range(1, steps + 1)]
    return sizes, hop


@pytest.mark.parametrize("topology", ["Ring", "FullyConnected"])
def test_halving_doubling_all_reduce_closed_form(tmp_path: Path, topology: str) -> None:
    n = 8
    c = chunk_of(MB, n)
    sizes, hop = _hd_terms(topology, n, c)
    steps = len(sizes)
    per_chunk = (ED + 2 * sum(t(m, h) for m, h in zip(sizes, hop)) + 2 * steps * ED
                 + sum(p(m) for m in sizes[1:]))
    assert _run(tmp_path, pb.ALL_REDUCE, "halvingDoubling", topology, n) == [SPLITS * per_chunk] * n


def test_halving_doubling_reduce_scatter_and_all_gather_closed_forms(tmp_path: Path) -> None:
    n, topology = 8, "Ring"
    c = chunk_of(MB, n)
    sizes, hop = _hd_terms(topology, n, c)
    steps = len(sizes)
    rs = (steps + 1) * ED + sum(t(m, h) for m, h in zip(sizes, hop)) + sum(p(m) for m in sizes[1:])
    assert _run(tmp_path, pb.REDUCE_SCATTER, "halvingDoubling", topology, n) == [SPLITS * rs] * n
    c = chunk_of(MB, n, all_gather=True)  # offsets N/2 … 1 with c, 2c, 4c … (no reduction)
    ag = (steps + 1) * ED + sum(t(c << k, hops(topology, n, 0, n >> (k + 1))) for k in range(steps))
    assert _run(tmp_path, pb.ALL_GATHER, "halvingDoubling", topology, n) == [SPLITS * ag] * n


def test_halving_doubling_partners_and_sizes(tmp_path: Path, sends: list) -> None:
    n = 8
    # every message an event: batched phases (system/shortcuts/phase_batch.py) send none
    plain = _run(tmp_path, pb.ALL_REDUCE, "halvingDoubling", "FullyConnected", n, splits=1, batching=False)
    assert _run(tmp_path, pb.ALL_REDUCE, "halvingDoubling", "FullyConnected", n, splits=1) == plain
    c = MB
    # position 2: offset 1 clockwise (2/1 even) → 3; offset 2 anticlockwise (2/2 odd) → 0;
    # offset 4 clockwise → 6; then back: 6, 0, 3 with the sizes doubling
    assert [(dst, size) for _, src, dst, size in sends if src == 2] == [
        (3, c // 2), (0, c // 4), (6, c // 8), (6, c // 8), (0, c // 4), (3, c // 2)]


def test_halving_doubling_refuses_rings_that_do_not_pair(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not pair up"):
        _run(tmp_path, pb.ALL_REDUCE, "halvingDoubling", "Ring", 6)
    # all-gather on 6 pairs up (offsets 3, 1) and runs, as in ASTRA-sim
    assert len(set(_run(tmp_path, pb.ALL_GATHER, "halvingDoubling", "Ring", 6))) == 1
    # the check remembers what paired (halving_doubling._PAIRED), never what did not: refused again
    with pytest.raises(InputError, match="does not pair up"):
        _run(tmp_path, pb.ALL_REDUCE, "halvingDoubling", "Ring", 6)


# -- DoubleBinaryTree (DoubleBinaryTreeAllReduce.cc) --------------------------------------------
def test_binary_trees_are_numbered_in_order() -> None:
    mx = BinaryTree(TreeType.ROOT_MAX, 8, 0, 1)
    assert mx.get_node_type(7) is NodeType.ROOT and mx.get_left_child_id(7) == 3
    assert (mx.get_left_child_id(3), mx.get_right_child_id(3)) == (1, 5)
    assert (mx.get_left_child_id(5), mx.get_right_child_id(5)) == (4, 6)
    assert [r for r in range(8) if mx.get_node_type(r) is NodeType.LEAF] == [0, 2, 4, 6]
    mn = BinaryTree(TreeType.ROOT_MIN, 8, 0, 1)
    assert mn.get_node_type(0) is NodeType.ROOT and mn.get_right_child_id(0) == 4
    assert mn.get_parent_id(2) == 4 and mn.get_parent_id(1) == 2
    strided = BinaryTree(TreeType.ROOT_MIN, 4, 1, 4)  # dimension 1 of a 4×4 network, column 1
    assert sorted(strided.parent) == [1, 5, 9, 13] and strided.get_node_type(1) is NodeType.ROOT


def test_trees_alternate_per_chunk() -> None:
    dbt = DoubleBinaryTreeTopology(0, 8, 0, 1)
    assert [dbt.get_topology().tree_type for _ in range(4)] == [TreeType.ROOT_MAX, TreeType.ROOT_MIN] * 2


def test_double_binary_tree_closed_form_per_rank(tmp_path: Path) -> None:
    """One chunk on a fully connected network, so every message costs t(c); the root-at-max tree.
    Up the tree each level adds t + ED + P, the root reduces once more, and down each level adds
    t + ED + P again; a leaf ends with one plain memory-bus pass (ED)."""
    n = 8
    c = MB
    tc, step = t(c, 1), t(c, 1) + ED + p(c)
    depth = int(math.log2(n))                     # the leaves' depth; root 7, then 3, then 1 and 5
    root_sends = (depth + 1) * ED + depth * p(c) + depth * tc
    level = {7: 0, 3: 1, 1: 2, 5: 2}
    expected = []
    for r in range(n):
        if r in level:
            expected.append(root_sends + level[r] * step)
        else:
            expected.append(root_sends + depth * tc + (depth - 1) * (ED + p(c)) + ED)
    assert _run(tmp_path, pb.ALL_REDUCE, "doubleBinaryTree", "FullyConnected", n, splits=1) == expected


def test_double_binary_tree_refuses_non_power_of_two(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="power of two"):
        _run(tmp_path, pb.ALL_REDUCE, "doubleBinaryTree", "Ring", 6)


# -- custom collectives (CustomAlgorithm.cc) ----------------------------------------------------
def _custom_ring_all_reduce(folder: Path, n: int, size: int, reduce_us: int) -> Path:
    """A ring all-reduce as a Chakra ET per rank: N−1 steps of send → receive → reduce, then N−1
    of send → receive, one chain (like ASTRA-sim's MSCCL-derived example)."""
    folder.mkdir(parents=True, exist_ok=True)
    m = size // n
    for r in range(n):
        nodes: list[pb.Node] = []

        def add(kind: int, **attrs: int) -> None:
            node = pb.Node(id=len(nodes), name=f"n{len(nodes)}", type=kind)
            if nodes:
                node.data_deps.append(len(nodes) - 1)
            if kind == pb.COMP_NODE:
                node.duration_micros = reduce_us
            for k, v in attrs.items():
                node.attr.append(attr_int32(k, v) if k != "comm_size" else attr_int64(k, v))
            nodes.append(node)

        for step in range(2 * (n - 1)):
            add(pb.COMM_SEND_NODE, comm_dst=(r + 1) % n, comm_tag=0, comm_size=m)
            add(pb.COMM_RECV_NODE, comm_src=(r - 1) % n, comm_tag=0, comm_size=m)
            if step < n - 1:
                add(pb.COMP_NODE)
        write_et(folder / f"ring_ar.{r}.et", pb.GlobalMetadata(), nodes)
    return folder / "ring_ar"


@pytest.mark.parametrize("topology", ["Ring", "FullyConnected"])
def test_custom_collective_closed_form(tmp_path: Path, topology: str) -> None:
    n, reduce_us = 4, 7
    prefix = _custom_ring_all_reduce(tmp_path / "et", n, MB, reduce_us)
    system = _system(tmp_path, "ring", splits=1, **{"all-reduce-implementation-custom": [str(prefix)]})
    r = run_simulation(_collective(tmp_path, pb.ALL_REDUCE), _network(tmp_path, topology, n), system,
                       backend="congestion-unaware")
    tm = t(MB // n, 1)  # neighbours; no endpoint delay, no chunking: the ET is the whole collective
    assert r.finish_ns == [2 * (n - 1) * tm + (n - 1) * reduce_us * 1000] * n


def test_custom_collective_in_a_communicator_group(tmp_path: Path) -> None:
    """Odd ranks of 8 run a 4-position ET; position k is the k-th smallest member, whatever the
    order the group lists them in."""
    n, members, reduce_us = 8, [7, 5, 3, 1], 7
    prefix = _custom_ring_all_reduce(tmp_path / "et", len(members), MB, reduce_us)
    coll = pb.Node(id=0, name="coll", type=pb.COMM_COLL_NODE)
    coll.attr.extend([attr_bool("is_cpu_op", False), attr_int64("comm_type", pb.ALL_REDUCE),
                      attr_int64("comm_size", MB), attr_string("pg_name", "1")])
    idle = pb.Node(id=0, name="idle", type=pb.COMP_NODE, duration_micros=1)
    for r in range(n):
        write_et(tmp_path / f"w.{r}.et", pb.GlobalMetadata(), [coll] if r in members else [idle])
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"1": members}))
    system = _system(tmp_path, "ring", splits=1, **{"all-reduce-implementation-custom": [str(prefix)]})
    r = run_simulation(tmp_path / "w", _network(tmp_path, "FullyConnected", n), system,
                       backend="congestion-unaware", comm_groups=groups)
    k = len(members)
    done = 2 * (k - 1) * t(MB // k, 1) + (k - 1) * reduce_us * 1000
    assert r.finish_ns == [done if rank in members else 1000 for rank in range(n)]


def test_custom_prefix_resolves_from_the_astra_sim_repo_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ASTRA-sim's shipped config names examples/system/custom_collectives/… (from its repo root);
    a copy that keeps the files under system/examples/custom_collectives/… still finds them."""
    copy = tmp_path / "anchors" / "system" / "examples" / "custom_collectives"
    prefix = _custom_ring_all_reduce(copy / "ring_8", 2, 1024, 1)
    config = copy / "custom_collective.json"
    config.write_text("{}")
    monkeypatch.chdir(tmp_path)
    named = "examples/system/custom_collectives/ring_8/ring_ar"
    assert Path(resolve_custom_prefix(named, config, 1)) == prefix
    monkeypatch.chdir(tmp_path / "anchors")  # ASTRA-sim's rule first: relative to the working directory
    assert resolve_custom_prefix("system/examples/custom_collectives/ring_8/ring_ar", config, 0) == \
        "system/examples/custom_collectives/ring_8/ring_ar"
    with pytest.raises(InputError, match="cannot find"):
        resolve_custom_prefix("examples/system/custom_collectives/other/ring_ar", config, 0)


def test_shipped_custom_collective_example(anchors: Path, reference_cases: list[dict]) -> None:
    """ASTRA-sim's A4 example: a ring all-reduce ET with 7 µs reductions, 1 MB on 8 NPUs."""
    case = next(c for c in reference_cases if c["case"].startswith("A4_"))
    r = run_simulation(anchors / case["workload"], anchors / case["network"], anchors / case["system"],
                       backend="congestion-unaware")
    n, tm = 8, t(MB // 8, 1)
    assert r.finish_ns == [2 * (n - 1) * tm + (n - 1) * 7000] * n == case["per_rank_cycles"]
