"""workload/_graph_core.c's parse_node against graph._parse_node, the rules it stands in for.

parse_node answers the common node and declines (None) everything else, for _parse_node to decide:
on generated fields (every node type and some unknown ones; attributes of every kind, right and
wrong; negative, boolean, textual and unicode values; duplicated and control dependencies), a Node
from C must equal _parse_node's slot for slot, value and type, and wherever _parse_node raises, C
must decline. On fields drawn only from what a writer sends (valid nodes that are not host-side
launchers) it must never decline. Every node of the ET files under examples/ and tests/data goes
through both as well."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

import workload.graph as graph
from chakra_proto import enums as pb
from chakra_proto import read_et_split, read_node_fields
from chakra_proto.attrs import INTEGER_MEMBERS
from workload.errors import WorkloadError

pytestmark = pytest.mark.skipif(graph._FAST_PARSE is None, reason="workload._graph_core is not built")

ROOT = Path(__file__).resolve().parents[2]
COMM = (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
INT_KINDS = sorted(INTEGER_MEMBERS)
KEYS = ("duration_ns", "is_cpu_op", "comm_size", "comm_priority", "pg_name", "comm_type", "involved_dim",
        "comm_src", "comm_dst", "comm_tag", "tensor_size", "num_ops", "other")


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _slots(n: graph.Node) -> dict:
    return {s: getattr(n, s) for s in graph.Node.__slots__}


def _check(fields: tuple, index: int) -> str:
    """'c' where C answered (and agreed), 'declined' where it left the node to _parse_node."""
    fast = graph._FAST_PARSE(fields, index)
    try:
        want = graph._parse_node("f.et", fields, index)
    except (WorkloadError, TypeError, ValueError, AttributeError, IndexError):
        assert fast is None, f"C answered where _parse_node raises: {fields}"
        return "declined"
    if fast is None:
        return "declined"
    got, ref = _slots(fast), _slots(want)
    bad = {k: (got[k], ref[k]) for k in ref if not _same(got[k], ref[k])}
    assert not bad, (fields, bad)
    assert fast.children is not want.children and fast.children == []
    return "c"


def _int_value(rng: random.Random, valid: bool) -> object:
    if valid:
        return rng.choice([0, 1, 2, 7, 1 << 20, (1 << 63) - 1, 1 << 70, True, False])
    return rng.choice([-1, -(1 << 40), 3, "12", " 4 ", "x", "", "١٢", 2.5, None, (1, 2)])


def _attr(rng: random.Random, key: str, valid: bool) -> tuple:
    if valid:
        if key == "pg_name":
            return rng.choice([("string_val", rng.choice(["", "0", "3", "17"])),
                               (rng.choice(INT_KINDS), rng.choice([0, 2, 5]))])
        if key == "involved_dim":
            return ("bool_list", tuple(rng.random() < 0.5 for _ in range(rng.randint(0, 4))))
        if key == "comm_type":
            return (rng.choice(INT_KINDS), rng.choice(sorted(graph.SUPPORTED_COLLECTIVES)))
        return (rng.choice(INT_KINDS), _int_value(rng, True))
    kind = rng.choice([*INT_KINDS, "string_val", "bool_list", "float_val", None, "int64_list"])
    value = rng.choice([_int_value(rng, rng.random() < 0.5), "-3", "0", "g1", " 8", "1_0", (True, 1), 1.0,
                        rng.choice(list(graph.COLL_TYPES) + [99])])
    return (kind, value)


def _fields(rng: random.Random, valid: bool) -> tuple:
    types = list(graph.NODE_TYPES)
    t = rng.choice(types) if valid or rng.random() < 0.9 else rng.choice([0, 99, -1])
    nid = rng.randint(0, 50)
    deps = tuple(rng.randint(0, 60) for _ in range(rng.choice([0, 0, 1, 2, 3, 6])))
    ctrl = tuple(rng.randint(0, 60) for _ in range(rng.choice([0, 0, 0, 1, 3])))
    attrs: dict = {}
    if valid:
        wanted = {pb.COMM_COLL_NODE: ["comm_size", "comm_type"], pb.COMM_SEND_NODE: ["comm_size"],
                  pb.COMM_RECV_NODE: ["comm_size"], pb.MEM_LOAD_NODE: ["tensor_size"],
                  pb.MEM_STORE_NODE: ["tensor_size"]}.get(t, [])
        keys = wanted + [k for k in KEYS if k not in wanted and rng.random() < 0.3]
        for k in keys:
            attrs[k] = _attr(rng, k, True)
        if t in COMM:
            attrs.pop("is_cpu_op", None)  # a host-side launcher: _parse_node's own branch
            if t != pb.COMM_COLL_NODE and "comm_tag" not in attrs:
                attrs["comm_tag"] = _attr(rng, "comm_tag", True)
    else:
        for k in KEYS:
            if rng.random() < 0.35:
                attrs[k] = _attr(rng, k, rng.random() < 0.5)
    inputs = rng.choice([None, "", "[1, 2]"])
    return (nid, rng.choice(["", "n", "ß"]), t, ctrl, deps, rng.choice([0, 3, 1 << 40]), inputs, attrs)


def test_generated_fields_agree_with_parse_node() -> None:
    rng = random.Random(20261204)
    seen = {"c": 0, "declined": 0}
    for i in range(6000):
        seen[_check(_fields(rng, valid=False), i)] += 1
    # both outcomes were exercised, and many times
    assert seen["c"] > 500 and seen["declined"] > 500, seen


def test_valid_fields_are_never_declined() -> None:
    rng = random.Random(7)
    for i in range(3000):
        fields = _fields(rng, valid=True)
        assert _check(fields, i) == "c", fields


def _et_files(root: Path) -> list[Path]:
    return sorted(root.glob("**/*.et"))


@pytest.mark.parametrize("where", ["bundled", "anchors"])
def test_every_node_of_real_files_agrees(where: str) -> None:
    """Every node of the ET files under examples/ and tests/data (or, an extra layer, those of
    ../shared/anchors: ASTRA-sim's examples, Chakra's converter output of a real DDP run): the same
    Node from both, and none that _parse_node accepts declined unless it is a host-side launcher."""
    if where == "bundled":
        files = _et_files(ROOT / "examples") + _et_files(ROOT / "tests" / "data")
    else:
        anchors = ROOT.parent / "shared" / "anchors"
        if not anchors.is_dir():
            pytest.skip("no ../shared/anchors (a clone outside the workspace)")
        files = _et_files(anchors)
    assert len(files) > 20
    answered = 0
    for f in files:
        try:
            _, frames, starts = read_et_split(str(f), read_only=True)
        except Exception:  # a deliberately broken file: the loader's tests cover it
            continue
        for i, frame in enumerate(frames):
            try:
                fields = read_node_fields(frame, str(f), i, starts[i])
            except Exception:
                continue
            outcome = _check(fields, i)
            answered += outcome == "c"
            if outcome == "declined":
                try:
                    n = graph._parse_node(str(f), fields, i)
                except WorkloadError:
                    continue
                assert n.host_launcher is not None, (f, i, fields)
    assert answered > 300


def test_parse_node_refuses_what_is_not_fields() -> None:
    with pytest.raises(TypeError):
        graph._FAST_PARSE((1, 2, 3), 0)
    assert graph._FAST_PARSE((1, "", "not an int", (), (), 0, None, {}), 0) is None
