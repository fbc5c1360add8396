"""workload/_graph_core.c (link_shared for files whose every kept dependency is on a node of a
lower id) against the Python linking it stands in for: on random multi-rank workloads
(nodes repeated byte for byte across ranks, in other entries and contexts, CPU operators and
point-to-point nodes that are never shared, control dependencies on missing nodes or on
themselves, which both drop and say, and dependencies on higher ids, which the C path declines
untouched), both load the same graphs:
every node's fields, parents, children and entry, the same nodes shared between files, and the
same warnings and errors."""
from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

import workload.shared_nodes as shared_nodes
from chakra_proto import et_def_pb2 as pb
from chakra_proto.io import write_et
from workload.errors import WorkloadError
from workload.graph import Node
from workload.loader import load_workload_graphs

pytestmark = pytest.mark.skipif(shared_nodes.GRAPH_CORE is None, reason="workload._graph_core is not built")

_FIELDS = [s for s in Node.__slots__ if s != "data_deps"]


def _attr(name: str, **value: object) -> pb.AttributeProto:
    a = pb.AttributeProto(name=name)
    for k, v in value.items():
        setattr(a, k, v)
    return a


def _workload(d: Path, seed: int) -> tuple[str, int]:
    rng = random.Random(seed)
    ranks = rng.randint(2, 6)
    size = rng.randint(3, 25)
    odd = rng.random() < 0.4  # some files leave the common shape
    for r in range(ranks):
        nodes = []
        for i in range(size):
            nid = 10 + 3 * i
            kind = rng.choice(["comp", "comp", "coll", "cpu", "send"])
            n = pb.Node(id=nid, name=f"n{i}")
            if kind in ("comp", "cpu"):
                n.type = pb.COMP_NODE
                n.duration_micros = rng.choice([5, 5, 5, 7]) if r % 2 else 5
                if kind == "cpu":
                    n.attr.append(_attr("is_cpu_op", bool_val=True))
            elif kind == "coll":
                n.type = pb.COMM_COLL_NODE
                n.attr.extend([_attr("comm_type", int64_val=pb.ALL_REDUCE), _attr("comm_size", int64_val=1024)])
            else:
                n.type = pb.COMM_SEND_NODE if r % 2 == 0 else pb.COMM_RECV_NODE
                peer = (r + 1) % ranks if n.type == pb.COMM_SEND_NODE else (r - 1) % ranks
                n.attr.extend([_attr("comm_size", int64_val=64), _attr("comm_tag", int64_val=i),
                               _attr("comm_dst" if n.type == pb.COMM_SEND_NODE else "comm_src", int64_val=peer)])
            lower = [10 + 3 * j for j in range(i)]
            deps = sorted(rng.sample(lower, min(len(lower), rng.choice([0, 1, 1, 2, 3]))))
            if deps and rng.random() < 0.3:
                deps = deps[::-1]  # the same parents in another order
            n.data_deps.extend(deps)
            if odd and rng.random() < 0.15:
                n.ctrl_deps.append(rng.choice([nid, nid + 1, nid + 3, 10_000]))  # itself, nothing, higher, nothing
            nodes.append(n)
        if rng.random() < 0.3:
            rng.shuffle(nodes)  # entries in another order: same bytes, other entries
        write_et(d / f"w.{r}.et", pb.GlobalMetadata(version="0.0.4"), nodes)
    return str(d / "w"), ranks


def _load(prefix: str, ranks: int, core: object, monkeypatch: pytest.MonkeyPatch) -> tuple:
    monkeypatch.setattr(shared_nodes, "GRAPH_CORE", core)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            graphs = load_workload_graphs(prefix, ranks)
        except WorkloadError as e:
            return ("error", str(e)), [str(w.message) for w in caught]
    seen: dict[int, int] = {}  # each distinct Node object, numbered in order of first appearance
    out = []
    for g in graphs:
        for nid in sorted(g.nodes):
            n = g.nodes[nid]
            out.append((nid, seen.setdefault(id(n), len(seen)), tuple(getattr(n, s) for s in _FIELDS)))
    return out, [str(w.message) for w in caught]


def test_the_c_linking_loads_what_the_python_linking_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    core = shared_nodes.GRAPH_CORE
    answered = declined = dropped = 0
    calls: list = []

    class Counting:  # which files the C path answered, and with control dependencies dropped
        @staticmethod
        def link_ascending(*args: object) -> object:
            r = core.link_ascending(*args)
            calls.append(r is not None)
            nonlocal dropped
            dropped += r is not None and bool(args[5])
            return r

    for seed in range(150):
        d = tmp_path / str(seed)
        d.mkdir()
        prefix, ranks = _workload(d, seed)
        calls.clear()
        ours = _load(prefix, ranks, Counting, monkeypatch)
        answered += sum(calls)
        declined += len(calls) - sum(calls)
        assert ours == _load(prefix, ranks, None, monkeypatch), f"seed {seed}"
    assert answered > 200 and declined > 20 and dropped > 10, (answered, declined, dropped)  # every path, often


@pytest.mark.parametrize("parents,data_deps", [((3,), (3,)), ((5,), ()), ((9, 5), ())],
                         ids=["data dependency on no node", "on a higher id", "and a control one on no node"])
def test_a_file_the_c_path_declines_is_left_untouched(parents: tuple, data_deps: tuple) -> None:
    """None, and neither ``shared`` nor ``missing`` changed, so the Python linking starts from
    the same state and says what it finds."""
    a, b, c = Node.__new__(Node), Node.__new__(Node), Node.__new__(Node)
    for n, nid, deps, data in ((a, 1, (), ()), (b, 2, parents, data_deps), (c, 5, (), ())):
        n.id, n.parents, n.data_deps, n.index, n.children = nid, deps, data, 0, []
    shared: dict = {}
    missing: list = []
    assert shared_nodes.GRAPH_CORE.link_ascending([b"a", b"b", b"c"], [a, b, c], shared, lambda n: True, 8,
                                             missing) is None
    assert shared == {} and missing == []
    with pytest.raises(TypeError, match="link_ascending"):
        shared_nodes.GRAPH_CORE.link_ascending((b"a",), [a], shared, lambda n: True, 8, missing)
