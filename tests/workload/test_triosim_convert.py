"""TrioSim → Chakra conversion on the VGG-13 (and ResNet-50) sample traces: node counts,
dependency structure, collective sizes, exact time sums, gradient bytes, pipeline schedules."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

import pytest

from chakra_proto import et_def_pb2 as pb
from chakra_proto.attrs import attr_map, attr_value
from chakra_proto.io import encode_et_bytes, read_et
from workload.triosim import Layout, LayoutError, convert_triosim, load_trace
from workload.triosim.layout import CommGroups
from workload.triosim.rank_graph import round_half_up
from workload.triosim.stages import schedule

ROOT = Path(__file__).resolve().parents[2]
VGG = ROOT / "examples" / "triosim" / "vgg13"
RESNET = ROOT / "examples" / "triosim" / "resnet50"
VGG_GRAD_BYTES = 532_191_392
MIB25 = 25 << 20


def convert(tmp_path: Path, trace: Path = VGG, **kw):
    kw.setdefault("batch_size", 128)
    res = convert_triosim(trace, out_prefix=tmp_path / "out" / "w", **kw)
    ranks = []
    for r in range(res.ranks):
        meta, nodes = read_et(res.et_path(r))
        assert meta.version == "0.0.4"
        ranks.append(nodes)
    return res, ranks


def attrs(node: pb.Node) -> dict:
    return {k: attr_value(v) for k, v in attr_map(node).items()}


def comps(nodes):
    return [n for n in nodes if n.type == pb.COMP_NODE]


def colls(nodes):
    return [n for n in nodes if n.type == pb.COMM_COLL_NODE]


def op_id(node: pb.Node) -> int:
    return int(node.name.split("[op ")[1].split("]")[0])


# ------------------------------------------------------------------------------ one GPU


@pytest.mark.parametrize("trace, bs_sim, total_ns", [
    (VGG, None, 94_038_000), (VGG, 64, 47_019_000), (RESNET, None, 70_723_000), (RESNET, 64, 35_361_500),
], ids=["vgg13-128", "vgg13-64", "resnet50-128", "resnet50-64"])
def test_single_gpu_compute_adds_up_exactly(tmp_path: Path, trace: Path, bs_sim, total_ns: int) -> None:
    res, (nodes,) = convert(tmp_path, trace, batch_size_sim=bs_sim)
    ops = load_trace(trace).operators
    assert [op_id(n) for n in nodes] == [op.id for op in ops]  # replay order = file order
    assert all(n.type == pb.COMP_NODE for n in nodes)
    assert [n.id for n in nodes] == list(range(len(ops)))
    assert [list(n.data_deps) for n in nodes] == [[]] + [[i] for i in range(len(ops) - 1)]  # one chain
    assert sum(attrs(n)["duration_ns"] for n in nodes) == total_ns
    assert sum(n.duration_micros for n in nodes) == round_half_up(Fraction(total_ns, 1000))  # µs add up too
    assert all(attrs(n)["is_cpu_op"] is False and n.ListFields() for n in nodes)
    assert res.summary["single_gpu_time_ns"] == total_ns


def test_rounding_is_cumulative_not_per_operator(tmp_path: Path) -> None:
    """bsRatio 128/100: per-op rounding would drift; cumulative rounding lands on round(Σ)."""
    _, (nodes,) = convert(tmp_path, batch_size_sim=100)
    exact = [op.time_us * 1000 * Fraction(100, 128) for op in load_trace(VGG).operators]
    durations = [attrs(n)["duration_ns"] for n in nodes]
    assert sum(durations) == round_half_up(sum(exact)) == 73_467_188
    assert sum(round_half_up(x) for x in exact) != sum(durations)  # the naive way would be off
    assert all(abs(d - x) < 1 for d, x in zip(durations, exact))


@pytest.mark.parametrize("trace, tensors, grad_bytes", [(VGG, 26, VGG_GRAD_BYTES), (RESNET, 161, 102_228_128)],
                         ids=["vgg13", "resnet50"])
def test_gradient_totals(tmp_path: Path, trace: Path, tensors: int, grad_bytes: int) -> None:
    res, _ = convert(tmp_path, trace)
    g = res.summary["gradients"]
    assert (g["tensors"], g["trace_bytes"], g["scaled_bytes"]) == (tensors, grad_bytes, grad_bytes)
    assert "_foreach_addcdiv_" in g["rule"]


# ------------------------------------------------------------------------------ data parallel


def test_dp_sync_adds_one_all_reduce_of_all_gradients(tmp_path: Path) -> None:
    res, ranks = convert(tmp_path, dp=2)
    assert json.loads(res.comm_groups_path.read_text()) == {}
    for rank, nodes in enumerate(ranks):
        assert len(nodes) == 78 and len(comps(nodes)) == 77
        (ar,) = colls(nodes)
        a = attrs(ar)
        assert (a["comm_type"], a["comm_size"], a["is_cpu_op"]) == (pb.ALL_REDUCE, VGG_GRAD_BYTES, False)
        assert "pg_name" not in a  # the group is every rank
        by_op = {op_id(n): n for n in comps(nodes)}
        assert list(ar.data_deps) == [by_op[99].id]  # after the last backward operator
        assert list(by_op[103].data_deps) == [ar.id]  # before the first optimizer operator
        assert sum(attrs(n)["duration_ns"] for n in comps(nodes)) == 94_038_000
    assert ranks[0] == ranks[1]


@pytest.mark.parametrize("bs_sim, scale, size", [(64, True, VGG_GRAD_BYTES // 2), (64, False, VGG_GRAD_BYTES)],
                         ids=["scaled-like-triosim", "no-scale-weights"])
def test_dp_gradient_bytes_follow_the_weight_scaling_flag(tmp_path: Path, bs_sim, scale, size) -> None:
    res, ranks = convert(tmp_path, dp=2, batch_size_sim=bs_sim, scale_weights=scale)
    assert attrs(colls(ranks[0])[0])["comm_size"] == size
    assert sum(attrs(n)["duration_ns"] for n in comps(ranks[0])) == 47_019_000  # times scale either way


def test_ddp_buckets_in_reverse_layer_order_overlap_backward(tmp_path: Path) -> None:
    res, ranks = convert(tmp_path, dp=2, dp_mode="ddp")
    nodes = ranks[0]
    buckets = colls(nodes)
    sizes = [attrs(b)["comm_size"] for b in buckets]
    assert sum(sizes) == VGG_GRAD_BYTES
    assert all(s >= MIB25 for s in sizes[:-1]) and len(sizes) == 4
    # PyTorch's greedy cap over parameters in reverse order: fc3+fc2 | fc1 | conv8..conv6 | rest
    assert sizes == [83_513_248, 411_058_176, 28_317_696, 9_302_272]
    summary = res.summary["stages"][0]["ddp_buckets"]
    assert summary[0]["tensors"] == [256, 254, 232, 230] and summary[1]["tensors"] == [208, 206]
    first_opt = next(n for n in comps(nodes) if op_id(n) == 103)
    for b, s in zip(buckets, summary):
        (dep,) = b.data_deps  # waits for its producing backward operator only
        producer = nodes[dep]
        assert producer.type == pb.COMP_NODE and "Backward" in producer.name
        assert op_id(producer) == s["ready_after_op"]
        waiting = [n.id for n in nodes if b.id in n.data_deps]
        assert waiting == [first_opt.id]  # only the optimizer waits for a bucket
    assert [s["ready_after_op"] for s in summary] == [45, 51, 68, 99]
    assert set(first_opt.data_deps) == {next(n for n in comps(nodes) if op_id(n) == 99).id, *(b.id for b in buckets)}
    # backward compute after a bucket is issued does not wait for it
    after = next(n for n in comps(nodes) if op_id(n) == 49)
    assert list(after.data_deps) == [next(n for n in comps(nodes) if op_id(n) == 45).id]


def test_ddp_bucket_cap_flag(tmp_path: Path) -> None:
    _, ranks = convert(tmp_path, dp=2, dp_mode="ddp", bucket_mb=1)
    sizes = [attrs(b)["comm_size"] for b in colls(ranks[0])]
    assert sum(sizes) == VGG_GRAD_BYTES and len(sizes) == 10
    assert sizes[:3] == [16_388_000, 67_125_248, 411_058_176]  # a layer's weight and bias stay together
    ids = [b.id for b in colls(ranks[0])]
    assert ids == sorted(ids)  # issue order = bucket order on every rank


# ------------------------------------------------------------------------------ tensor parallel


def test_tp_splits_tpflag_ops_and_all_reduces_their_outputs(tmp_path: Path) -> None:
    _, ranks = convert(tmp_path, tp=2)
    trace = load_trace(VGG)
    ops = {op.id: op for op in trace.operators}
    nodes = ranks[0]
    assert len(comps(nodes)) == 77 and len(colls(nodes)) == 26
    for ar in colls(nodes):
        (dep,) = ar.data_deps
        op = ops[op_id(nodes[dep])]
        assert op.tpflag == 1 and nodes[dep].type == pb.COMP_NODE
        expected = sum(trace.tensors[t].bytes for t in op.outputs) // 2
        assert attrs(ar)["comm_size"] == expected and "pg_name" not in attrs(ar)
        assert list(nodes[ar.id + 1].data_deps) == [ar.id]  # blocking: the next operator waits for it
    first = attrs(colls(nodes)[0])
    assert first["comm_size"] == 411_041_792 * 4 // 2
    exact = sum(op.time_us * 1000 / (2 if op.tpflag else 1) for op in trace.operators)
    assert sum(attrs(n)["duration_ns"] for n in comps(nodes)) == round_half_up(exact)
    assert ranks[0] == ranks[1]


def test_tp_and_dp_groups_and_rank_numbering(tmp_path: Path) -> None:
    res, ranks = convert(tmp_path, dp=2, tp=2)
    assert json.loads(res.comm_groups_path.read_text()) == {"1": [0, 1], "2": [2, 3], "3": [0, 2], "4": [1, 3]}
    layout = json.loads(res.layout_path.read_text())
    assert layout["coordinates"][3] == {"rank": 3, "dp": 1, "tp": 1, "pp": 0}
    for rank, nodes in enumerate(ranks):
        pgs = Counter(attrs(c)["pg_name"] for c in colls(nodes))
        tp_group = "1" if rank < 2 else "2"
        dp_group = "3" if rank % 2 == 0 else "4"
        assert pgs == {tp_group: 26, dp_group: 1}
        dp_ar = next(c for c in colls(nodes) if attrs(c)["pg_name"] == dp_group)
        assert attrs(dp_ar)["comm_size"] == VGG_GRAD_BYTES // 2  # every VGG parameter is tp-sharded
        assert layout["per_rank"][rank]["nodes"] == len(nodes)


def test_layout_rank_formula() -> None:
    lay = Layout(dp=3, tp=2, pp=4)
    seen = set()
    for p in range(4):
        for d in range(3):
            for t in range(2):
                r = lay.rank(d, t, p)
                assert r == t + 2 * (d + 3 * p) and lay.coordinates(r) == (d, t, p)
                seen.add(r)
    assert seen == set(range(24))
    groups = CommGroups.of(lay)
    assert groups.members[groups.tp_group(1, 2)] == [14, 15]
    assert groups.members[groups.dp_group(1, 3)] == [19, 21, 23]
    assert {k for k in groups.kinds.values()} == {"tp", "dp"} and len(groups.members) == 12 + 8


# ------------------------------------------------------------------------------ pipeline parallel


def test_schedules() -> None:
    assert schedule("gpipe", 4, 1, 3) == [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)]
    assert schedule("1f1b", 4, 0, 6) == [("F", 0), ("F", 1), ("F", 2), ("F", 3), ("B", 0), ("F", 4),
                                         ("B", 1), ("F", 5), ("B", 2), ("B", 3), ("B", 4), ("B", 5)]
    assert schedule("1f1b", 4, 3, 3) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)]
    assert schedule("1f1b", 4, 0, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]


def test_pp_count_split_matches_triosim_and_sends_pair_with_recvs(tmp_path: Path) -> None:
    res, ranks = convert(tmp_path, pp=2, micro_batches=2, pp_balance="count")
    stages = res.summary["stages"]
    fwd = [op.id for op in load_trace(VGG).operators if op.stage == "forward"]
    assert stages[0]["forward_ops"] == fwd[:17] and stages[1]["forward_ops"] == fwd[17:]  # [i·n/pp, (i+1)·n/pp)
    assert len(stages[1]["backward_ops"]) == 21 and len(stages[0]["backward_ops"]) == 14
    assert [o for o, _ in stages[0]["optimizer_ops"]] == [103, 104, 105, 158, 159, 160, 161]
    act = 128 * 512 * 28 * 28 * 4 // 2  # op 17's output, per micro-batch
    assert stages[0]["activation_bytes_per_micro_batch"] == act
    kinds = [Counter(n.type for n in nodes) for nodes in ranks]
    assert kinds[0][pb.COMM_SEND_NODE] == 2 and kinds[0][pb.COMM_RECV_NODE] == 2
    assert kinds[0][pb.COMP_NODE] == 2 * 17 + 2 * 14 + 7 and kinds[1][pb.COMP_NODE] == 2 * 18 + 2 * 21
    sends, recvs = Counter(), Counter()
    for rank, nodes in enumerate(ranks):
        for n in nodes:
            a = attrs(n)
            if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                key = (a["comm_src"], a["comm_dst"], a["comm_tag"], a["comm_size"])
                (sends if n.type == pb.COMM_SEND_NODE else recvs)[key] += 1
                own = a["comm_src"] if n.type == pb.COMM_SEND_NODE else a["comm_dst"]
                assert a["comm_size"] == act and own == rank
    assert sends == recvs and len(sends) == 4 and set(sends.values()) == {1}
    # stage 0 (GPipe): F0 F1, then B0 B1, each backward pass after its gradient arrives
    names = [n.name for n in ranks[0] if n.type != pb.COMP_NODE]
    assert names == ["send activations mb0 to stage 1", "send activations mb1 to stage 1",
                     "recv activation gradients mb0 from stage 1", "recv activation gradients mb1 from stage 1"]
    send0 = next(n for n in ranks[0] if n.type == pb.COMM_SEND_NODE)
    last_fwd = next(n for n in ranks[0] if n.name == "aten::relu_ [op 17] mb0")
    assert list(send0.data_deps) == [last_fwd.id]
    assert list(ranks[0][send0.id + 1].data_deps) == [last_fwd.id]  # compute does not wait for the send
    for nodes in ranks:
        for n in nodes:
            if n.type == pb.COMM_RECV_NODE:
                assert list(nodes[n.id + 1].data_deps) == [n.id]  # the next operator needs the data


def test_pp_1f1b_order_on_the_first_stage(tmp_path: Path) -> None:
    _, ranks = convert(tmp_path, pp=2, micro_batches=3, pp_schedule="1f1b")
    passes = []
    for n in ranks[0]:
        if n.type == pb.COMP_NODE and " mb" in n.name:
            tag = ("B" if "Backward" in n.name else "F") + n.name.rsplit("mb", 1)[1]
            if not passes or passes[-1] != tag:
                passes.append(tag)
    assert passes == ["F0", "F1", "B0", "F2", "B1", "B2"]  # one warm-up forward, then alternate


def test_pp_time_balance_and_exact_totals(tmp_path: Path) -> None:
    res, ranks = convert(tmp_path, RESNET, pp=4, micro_batches=4)
    trace = load_trace(RESNET)
    stages = res.summary["stages"]
    fwd = [op.id for op in trace.operators if op.stage == "forward"]
    bwd = [op.id for op in trace.operators if op.stage == "backward"]
    assert [o for s in stages for o in s["forward_ops"]] == fwd  # contiguous runs, in order
    assert sorted(o for s in stages for o in s["backward_ops"]) == bwd
    compute = [r["compute_ns"] for r in res.summary["per_rank"]]
    assert abs(sum(compute) - 70_723_000) <= 4  # each rank rounds once
    assert max(compute) < 1.2 * 70_723_000 / 4  # balanced by time (count gives 2.3x spread)
    shares = [Fraction(s["optimizer_ops"][0][1]) for s in stages]
    assert sum(shares) == 1


def test_every_collective_group_sees_the_same_sequence(tmp_path: Path) -> None:
    """Collectives match across ranks by issue order: every member lists the same sizes in order."""
    res, ranks = convert(tmp_path, RESNET, dp=2, tp=2, pp=2, micro_batches=2, dp_mode="ddp", pp_schedule="1f1b",
                         batch_size_sim=32)
    groups = {int(k): v for k, v in json.loads(res.comm_groups_path.read_text()).items()}
    assert len(groups) == 8
    seqs = defaultdict(dict)
    for rank, nodes in enumerate(ranks):
        for c in colls(nodes):
            seqs[int(attrs(c)["pg_name"])].setdefault(rank, []).append(attrs(c)["comm_size"])
    for gid, members in groups.items():
        assert sorted(seqs[gid]) == sorted(members)
        first = seqs[gid][members[0]]
        assert len(first) > 0 and all(seqs[gid][r] == first for r in members)


def test_output_is_deterministic_and_nodes_never_empty(tmp_path: Path) -> None:
    a, ranks_a = convert(tmp_path / "a", dp=2, tp=2, pp=2, micro_batches=2, dp_mode="ddp")
    b, ranks_b = convert(tmp_path / "b", dp=2, tp=2, pp=2, micro_batches=2, dp_mode="ddp")
    for r in range(a.ranks):
        assert a.et_path(r).read_bytes() == b.et_path(r).read_bytes()
        assert all(n.ByteSize() > 0 and n.name for n in ranks_a[r])
        assert [n.id for n in ranks_a[r]] == list(range(len(ranks_a[r])))
        assert all(not n.ctrl_deps and all(d < n.id for d in n.data_deps) for n in ranks_a[r])
    assert encode_et_bytes(pb.GlobalMetadata(version="0.0.4"), ranks_a[0])


def test_layout_errors() -> None:
    with pytest.raises(LayoutError, match="--pp: 36 stages"):
        convert_triosim(VGG, batch_size=128, pp=36, out_prefix="/nonexistent/x")
    with pytest.raises(LayoutError, match="--micro-batches"):
        Layout(micro_batches=0)
    with pytest.raises(LayoutError, match="--bucket-mb"):
        Layout(bucket_mb=0)


def test_forward_only_trace_is_inference(tmp_path: Path) -> None:
    """No backward operators: no backward passes, no gradient sync, only activations flow."""
    d = tmp_path / "fwd"
    d.mkdir()
    (d / "tensor.csv").write_bytes((VGG / "tensor.csv").read_bytes())
    lines = (VGG / "trace.csv").read_text().split("\n")
    (d / "trace.csv").write_text("\n".join(line for line in lines if ",backward," not in line
                                           and ",optimizer," not in line))
    res, ranks = convert(tmp_path, d, dp=2, pp=2, micro_batches=2, dp_mode="ddp")
    for nodes in ranks:
        assert not colls(nodes)
        assert not any("gradient" in n.name for n in nodes)
    assert Counter(n.type for n in ranks[2])[pb.COMM_RECV_NODE] == 2  # stage 1 receives 2 micro-batches
    fwd_ns = sum(op.time_us for op in load_trace(d).operators) * 1000
    assert sum(r["compute_ns"] for r in res.summary["per_rank"][::2]) == fwd_ns
