"""Loading ET files: the split framing and the per-message parse cache give exactly what a plain,
one-file-at-a-time decode gives."""
from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from chakra_proto import decode_et_bytes, encode_et_bytes, et_def_pb2 as pb, split_et_bytes
from workload.builder import GraphBuilder
from workload.graph import Node, load_graph
from workload.loader import load_workload_graphs

_FIELDS = [s for s in Node.__slots__ if s not in ("children", "index")]


def _fields(n: Node) -> tuple:
    return tuple(getattr(n, s) for s in _FIELDS)


def test_split_frames_are_the_encoded_messages() -> None:
    meta = pb.GlobalMetadata(version="0.0.4")
    # names long enough for two- and three-byte length prefixes
    nodes = [pb.Node(id=i, name="x" * (60 * i * i), type=pb.COMP_NODE, duration_micros=i) for i in range(6)]
    raw = encode_et_bytes(meta, nodes)
    got_meta, frames, starts = split_et_bytes(raw, "f.et")
    assert got_meta == meta
    assert frames == [n.SerializeToString() for n in nodes]
    assert decode_et_bytes(raw, "f.et") == (meta, nodes)
    for s, f in zip(starts, frames):  # each start is the length prefix in front of its message
        assert raw[s:].find(f) in (1, 2, 3)


def test_clone_copies_every_parsed_field(tmp_path: Path) -> None:
    b = GraphBuilder()
    c = b.comp("c", 1000, tensor_size=64, num_ops=9)
    b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c], involved_dim=[True, False])
    g = load_graph(b.write(tmp_path / "w.et"))
    for n in g.nodes.values():
        twin = n.clone(7)
        assert twin is not n and twin.index == 7 and twin.children == [] and twin.children is not n.children
        assert _fields(twin) == _fields(n)
        for s in Node.__slots__:
            assert hasattr(twin, s), s
    full = Node()  # a field added to Node later must be copied too: every slot its own value
    marks = {s: object() for s in Node.__slots__}
    for s, v in marks.items():
        setattr(full, s, v)
    twin = full.clone(3)
    assert twin.index == 3 and twin.children == []
    assert all(getattr(twin, s) is v for s, v in marks.items() if s not in ("children", "index"))


def test_the_c_copy_is_the_clone_method(tmp_path: Path) -> None:
    """workload/_graph_core.c's clone_node (what linking clones with) copies what Node.clone copies,
    and declines (the method runs, and raises) where a field is unset."""
    import pytest

    from workload.shared_nodes import GRAPH_CORE

    if GRAPH_CORE is None:
        pytest.skip("workload._graph_core is not built: the method is the only clone")
    b = GraphBuilder()
    c = b.comp("c", 1000, tensor_size=64, num_ops=9, is_cpu_op=True)
    b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[c], involved_dim=[True, False])
    b.send("s", 0, 1, 64, 3, deps=[c])
    for n in load_graph(b.write(tmp_path / "w.et")).nodes.values():
        twin = GRAPH_CORE.clone_node(n, 7)
        assert type(twin) is Node and twin is not n and twin.index == 7 and twin.children == []
        assert twin.children is not n.children and _fields(twin) == _fields(n)
    full = Node()
    marks = {s: object() for s in Node.__slots__}
    for s, v in marks.items():
        setattr(full, s, v)
    twin = GRAPH_CORE.clone_node(full, 3)
    assert twin.index == 3 and twin.children == []
    assert all(getattr(twin, s) is v for s, v in marks.items() if s not in ("children", "index"))
    del full.comm_tag  # Node.clone raises AttributeError here: the C copy leaves it to the method
    assert GRAPH_CORE.clone_node(full, 3) is None
    with pytest.raises(AttributeError):
        full.clone(3)


def test_the_c_scan_for_host_side_communication_is_the_python_one(tmp_path: Path) -> None:
    """Whether host_comms.py is needed: the C scan answers as any(map(_host_comms_may_change, ...))."""
    from workload import graph
    from workload.shared_nodes import GRAPH_CORE

    cases = []
    for cpu, peer in ((False, True), (True, True), (False, False)):
        b = GraphBuilder()
        c = b.comp("c", 1000, is_cpu_op=cpu)
        b.send("s", 0, 1, 64, 3, deps=[c])
        b.recv("r", 1, 0, 64, 3, deps=[c])
        nodes = load_graph(b.write(tmp_path / f"w{len(cases)}.et")).nodes
        if not peer:  # a send that does not name its peer (host_comms.py fills it in)
            next(n for n in nodes.values() if n.name == "s").comm_dst = None
        cases.append(nodes)
    want = [any(map(graph._host_comms_may_change, nodes.values())) for nodes in cases]
    assert want == [False, True, True]
    assert [graph._any_host_comms(nodes) for nodes in cases] == want
    if GRAPH_CORE is not None:
        assert [GRAPH_CORE.host_comms_may_change(nodes) for nodes in cases] == want
        assert GRAPH_CORE.host_comms_may_change({0: object()}) is None  # not a Node: Python asks


def _write_ranks(tmp: Path, ranks: list[list[tuple[str, int, list[int]]]]) -> Path:
    for r, ops in enumerate(ranks):
        b = GraphBuilder()
        for kind, amount, deps in ops:
            if kind == "comp":
                b.comp(f"c{amount}", amount, deps=deps)
            else:
                b.collective("ar", "ALL_REDUCE", amount, deps=deps)
        b.write(tmp / "w", r)
    return tmp / "w"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), n_ranks=st.integers(2, 4))
def test_shared_parse_equals_separate_parses(tmp_path_factory, data, n_ranks: int) -> None:
    # ranks drawn from a few variants of each position, so that many nodes repeat byte for byte
    length = data.draw(st.integers(1, 8))
    ranks = []
    for _ in range(n_ranks):
        ops = []
        for i in range(length):
            kind = data.draw(st.sampled_from(["comp", "coll"]))
            amount = data.draw(st.sampled_from([1000, 2000])) if kind == "comp" else data.draw(
                st.sampled_from([1 << 10, 1 << 20]))
            deps = data.draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
            ops.append((kind, amount, deps))
        ranks.append(ops)
    spec = _write_ranks(tmp_path_factory.mktemp("g"), ranks)
    shared = load_workload_graphs(spec, n_ranks)
    for r, g in enumerate(shared):
        alone = load_graph(f"{spec}.{r}.et")
        assert sorted(g.nodes) == sorted(alone.nodes) and g.roots == alone.roots
        for nid, n in g.nodes.items():
            a = alone.nodes[nid]
            assert _fields(n) == _fields(a) and n.children == a.children and n.index == a.index
    # graphs share a Node only where each would hold an equal one (checked above against the
    # separate parses); the ranks whose files are equal share every node
    first = {}
    for r, ops in enumerate(ranks):
        first.setdefault(repr(ops), r)
    for r, ops in enumerate(ranks):
        twin = shared[first[repr(ops)]]
        assert all(shared[r].nodes[nid] is twin.nodes[nid] for nid in twin.nodes)


def test_children_stay_per_file(tmp_path: Path) -> None:
    # node 0 is byte-identical in both files; its children are not
    spec = _write_ranks(tmp_path, [[("comp", 5, []), ("comp", 6, [0])],
                                   [("comp", 5, []), ("comp", 7, []), ("comp", 8, [0, 1])]])
    a, b = load_workload_graphs(spec, 2)
    assert a.nodes[0].children == [1] and b.nodes[0].children == [2]


def test_what_one_graph_changes_in_a_node_stays_in_that_graph(tmp_path: Path) -> None:
    # a later rule may adjust a node per file (say, drop a dependency): the cache must not carry it over
    spec = _write_ranks(tmp_path, [[("comp", 5, []), ("comp", 6, [0])]] * 2)
    cache: dict = {}
    a = load_graph(f"{spec}.0.et", cache)
    a.nodes[1].parents = ()
    b = load_graph(f"{spec}.1.et", cache)
    assert b.nodes[1].parents == (0,) and b.nodes[0].children == [1]


def _node(nid: int, data: list[int] = (), ctrl: list[int] = ()) -> pb.Node:
    n = pb.Node(id=nid, name=f"n{nid}", type=pb.COMP_NODE, duration_micros=1)
    n.data_deps.extend(data)
    n.ctrl_deps.extend(ctrl)
    return n


def test_shared_graphs_repair_and_warn_as_separate_loads(tmp_path: Path) -> None:
    import warnings

    from chakra_proto import write_et

    meta = pb.GlobalMetadata(version="0.0.4")
    common = [_node(0), _node(1, ctrl=[3]), _node(2, ctrl=[99, 2]), _node(3, data=[0])]  # 1 waits on a later id
    write_et(tmp_path / "w.0.et", meta, common + [_node(4, ctrl=[5]), _node(5, data=[0], ctrl=[4])])  # a cycle
    write_et(tmp_path / "w.1.et", meta, common + [_node(4), _node(5, data=[0], ctrl=[4])])
    write_et(tmp_path / "w.2.et", meta, common + [_node(4), _node(5, data=[0], ctrl=[4])])
    with warnings.catch_warnings(record=True) as together:
        warnings.simplefilter("always")
        shared = load_workload_graphs(tmp_path / "w", 3)
    with warnings.catch_warnings(record=True) as alone_w:
        warnings.simplefilter("always")
        alone = [load_graph(tmp_path / f"w.{r}.et") for r in range(3)]
    assert [str(w.message) for w in together] == [str(w.message) for w in alone_w]
    assert any("that would close a cycle" in str(w.message) for w in together)
    for g, a in zip(shared, alone):
        assert list(g.nodes) == list(a.nodes) and g.roots == a.roots
        for nid, n in g.nodes.items():
            m = a.nodes[nid]
            assert (_fields(n), n.children, n.index) == (_fields(m), m.children, m.index)
    assert shared[1].nodes[1] is shared[2].nodes[1]  # equal in context: one Node
    assert shared[0].nodes[4] is not shared[1].nodes[4]  # the repaired file keeps its own


def test_ranks_share_exactly_the_nodes_may_share_allows(tmp_path: Path) -> None:
    """Byte-identical rank files share their compute and collective nodes, never a CPU operator,
    send or receive (host_comms.py may rewrite those per file), through C linking and Python's."""
    from workload import graph

    for r in range(2):
        b = GraphBuilder()
        c = b.comp("c", 1000)
        cpu = b.comp("cpu", 500, deps=[c], is_cpu_op=True)
        s = b.send("s", 0, 1, 64, 3, deps=[cpu])
        v = b.recv("r", 1, 0, 64, 3, deps=[cpu])
        b.collective("ar", "ALL_REDUCE", 1 << 20, deps=[s, v])
        b.write(tmp_path / "w", r)
    g0, g1 = load_workload_graphs(tmp_path / "w", 2)
    kinds = {}
    for nid, n in g0.nodes.items():
        kinds[n.name] = g1.nodes[nid] is n
        assert (g1.nodes[nid] is n) == graph._may_share(n), n.name
    assert kinds == {"c": True, "cpu": False, "s": False, "r": False, "ar": True}
