"""system.report's fast paths answer as their plain formulations do, byte for byte: dump_json
as the lift-and-splice writer it replaced (json's indented layout, each long list of records
one per line), on drawn data whose strings hold what could confuse a splice (quotes, braces,
``}, {``, NUL, %, non-ASCII); a rank's breakdown as the unions and intersections of its
intervals, on drawn intervals (overlapping, touching, empty, backwards, in any order); a rank's
collective records as nccl_bandwidths per record; the summary of weighted lists of records as
that of the records, each repeated as often as its list's weight."""
from __future__ import annotations

import io
import json
import math
from typing import Any

from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

import system.report
from chakra_proto import enums as pb
from intervals import intersection_length, length, union
from system.collective_records import (collective_group_size, collective_records, nccl_bandwidths,
                                       summarise_collectives, summarise_parts)
from system.report import _COMM_TYPES, _MIN_ROWS, NS_PER_S, dump_json, rank_breakdown


def reference_dump(data: Any, fp: Any, indent: int | None = None) -> None:
    """dump_json as it was: the long lists lifted out as tokens, json.dumps(indent=...) for
    the rest, a json.dumps per record spliced in at each token."""
    if indent is None:
        fp.write(json.dumps(data))
        return
    rows: dict[str, list] = {}

    def lift(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: lift(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            if len(obj) >= _MIN_ROWS and all(isinstance(x, dict) for x in obj):
                token = f"\0records {len(rows)}\0"
                rows[json.dumps(token)] = obj
                return token
            return [lift(x) for x in obj]
        return obj

    text = json.dumps(lift(data), indent=indent)
    at = 0
    for token, records in rows.items():
        i = text.index(token, at)
        lead = text[text.rfind("\n", 0, i) + 1:i]
        pad = lead[:len(lead) - len(lead.lstrip(" "))]
        fp.write(text[at:i])
        sep = "[\n" + pad + " " * indent
        for r in records:
            fp.write(sep)
            fp.write(json.dumps(r))
            sep = ",\n" + pad + " " * indent
        fp.write("\n" + pad + "]")
        at = i + len(token)
    fp.write(text[at:])


TEXT = st.text(st.sampled_from(['"', "%", "\\", "{", "}", "[", "]", ",", " ", ":", "\n", "\0", "é", "€", "𝄞", "a", "0"]),
               max_size=8) | st.sampled_from(["}, {", '"}, {"', "],\n [", "\0records 0", "NaN", ""])
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | TEXT
           | st.sampled_from([0.1, 1e300, -0.0, 5e-324, math.inf, -math.inf]))
KEYS = TEXT | st.integers(-5, 5) | st.sampled_from([1.5, True, False, None])


def _containers(children: Any) -> Any:
    return (st.lists(children, max_size=4) | st.lists(children, max_size=3).map(tuple)
            | st.dictionaries(KEYS, children, max_size=4))


VALUES = st.recursive(SCALARS, _containers, max_leaves=12)
RECORD = st.dictionaries(KEYS, VALUES, max_size=5)
COLUMNS = [st.integers(-2**70, 2**70), TEXT | st.just("%s"), st.floats() | st.none(), SCALARS,  # one kind a column
           st.sampled_from([0.0, -0.0, 1.0, 2.5, math.nan, None]), st.sampled_from([1, 1.0, True, 0, 0.0, False, -0.0])]


@st.composite
def records(draw: Any) -> Any:
    """A list long enough to be written a record per line: of drawn records, or of records of
    one shape (the collectives' case); or, one entry not a dict, not."""
    n = _MIN_ROWS + draw(st.integers(-1, 3))
    if draw(st.booleans()):
        few = draw(st.lists(RECORD, min_size=1, max_size=4))
        rows = (few * (n // len(few) + 1))[:n]
    else:  # columns of a few values each, taken in turn: one shape, values differing from row to row
        keys = draw(st.lists(KEYS, min_size=1, max_size=6, unique_by=lambda k: json.dumps({k: 0})))
        columns = [draw(st.lists(draw(st.sampled_from(COLUMNS)), min_size=1, max_size=5)) for _ in keys]
        rows = [{k: c[i % len(c)] for k, c in zip(keys, columns)} for i in range(n)]
        if draw(st.booleans()):  # one record of another shape: its keys reversed, or drawn
            rows[draw(st.integers(0, n - 1))] = draw(RECORD | st.just(dict(reversed(rows[0].items()))))
    if draw(st.booleans()):
        rows[draw(st.integers(0, len(rows) - 1))] = draw(VALUES)
    return tuple(rows) if draw(st.booleans()) else rows


REPORTS = st.recursive(SCALARS | records(), _containers, max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(data=REPORTS, indent=st.sampled_from([None, 0, 1, 2, 4]), small_blocks=st.booleans())
def test_dump_json_writes_what_the_splice_wrote(data: Any, indent: int | None, small_blocks: bool) -> None:
    got, want = io.StringIO(), io.StringIO()
    reference_dump(data, want, indent=indent)
    with pytest.MonkeyPatch.context() as m:
        if small_blocks:  # every flush and block boundary taken
            m.setattr(system.report, "_BLOCK", 5)
            m.setattr(system.report, "_ROWS_AT_ONCE", 100)
        dump_json(data, got, indent=indent)
    assert got.getvalue() == want.getvalue()


@settings(max_examples=300, deadline=None)
@given(data=VALUES, indent=st.sampled_from([0, 1, 3]))
def test_without_long_lists_it_is_json_dumps(data: Any, indent: int) -> None:
    got = io.StringIO()
    dump_json(data, got, indent=indent)
    assert got.getvalue() == json.dumps(data, indent=indent)


@pytest.mark.parametrize("column", [[1, 1.0, True], [1.0, True], [0.0, -0.0], [-0.0, 0.0, 0.0, None], [math.nan, 1.0],
                                    [2.5, 2.5, 7.0], [0.0, 0.0, 0.0]])
def test_values_that_compare_equal_keep_their_own_spelling(column: list) -> None:
    rows = [{"a": i, "v": column[i % len(column)]} for i in range(2 * _MIN_ROWS)]
    for data in (rows, rows[:9]):
        got, want = io.StringIO(), io.StringIO()
        reference_dump(data, want, indent=1)
        dump_json(data, got, indent=1)
        assert got.getvalue() == want.getvalue()


@pytest.mark.parametrize("keys", [[1, True, 1.0], [0, False, 0.0, -0.0], [None, "null"]])
def test_keys_that_compare_equal_keep_their_own_spelling(keys: list) -> None:
    rows = [{keys[i % len(keys)]: i} for i in range(2 * _MIN_ROWS)]
    for data in (rows, rows[:9]):
        got, want = io.StringIO(), io.StringIO()
        reference_dump(data, want, indent=1)
        dump_json(data, got, indent=1)
        assert got.getvalue() == want.getvalue()


def test_what_json_cannot_write_it_refuses_as_json_does() -> None:
    for bad in ({"a": {1, 2}}, {"a": [object()]}, [{"k": b"x"}] * _MIN_ROWS, {(1, 2): 0}):
        with pytest.raises(TypeError) as want:
            json.dumps(bad, indent=1)
        with pytest.raises(TypeError) as got:
            dump_json(bad, io.StringIO(), indent=1)
        assert str(got.value) == str(want.value)


def reference_breakdown(workload: Any, comm_starts: dict[int, int] | None = None) -> dict[str, Any]:
    """rank_breakdown as it was: the unions, then the intersections of unions."""
    nodes = workload.graph.nodes
    begun = comm_starts or {}
    comp, comm, cpu, wait = [], [], [], []
    for nid, s, e in workload.records:
        n = nodes[nid]
        if n.type == pb.COMP_NODE:
            (cpu if n.is_cpu_op else comp).append((s, e))
        elif n.type in _COMM_TYPES:
            c = begun.get(nid, s)
            if c > s:
                wait.append((s, c))
                comm.append((c, e))
            else:
                comm.append((s, e))
    comp_u, comm_u, cpu_u, wait_u = union(comp), union(comm), union(cpu), union(wait)
    gpu_u = union(comp_u + comm_u)
    busy_u = union(gpu_u + cpu_u)
    finish = workload.finish_time or 0
    compute, comm_total, cpu_total = length(comp_u), length(comm_u), length(cpu_u)
    overlap = intersection_length(comp_u, comm_u)
    exposed = comm_total - overlap
    exposed_cpu = cpu_total - intersection_length(cpu_u, gpu_u)
    return {
        "rank": workload.rank, "finish_cycles": finish, "finish_seconds": finish / NS_PER_S,
        "compute_cycles": compute, "comm_cycles": comm_total, "exposed_comm_cycles": exposed,
        "cpu_cycles": cpu_total, "exposed_cpu_cycles": exposed_cpu,
        "idle_cycles": finish - compute - exposed - exposed_cpu,
        "wait_cycles": length(wait_u) - intersection_length(wait_u, busy_u),
        "overlap_pct": round(100.0 * overlap / comm_total, 3) if comm_total else 0.0,
        "nodes": len(nodes),
    }


KINDS = st.sampled_from([(pb.COMP_NODE, False), (pb.COMP_NODE, True), (pb.COMM_COLL_NODE, False),
                         (pb.COMM_SEND_NODE, False), (pb.COMM_RECV_NODE, False), (pb.MEM_LOAD_NODE, False),
                         (pb.MEM_STORE_NODE, False), (pb.METADATA_NODE, False)])
TIME = st.integers(0, 40)  # few distinct times: touching, nested and equal intervals are common


@st.composite
def ranks(draw: Any) -> tuple[Any, dict[int, int]]:
    kinds = draw(st.lists(KINDS, max_size=14))
    nodes = {nid: SimpleNamespace(type=t, is_cpu_op=cpu) for nid, (t, cpu) in enumerate(kinds)}
    records = []
    for nid in draw(st.permutations(list(nodes))):
        s = draw(TIME)
        records.append((nid, s, s + draw(st.integers(-3, 15))))  # some empty, some backwards
    begun = {nid: s + draw(st.integers(-2, 20)) for nid, s, _ in records if draw(st.booleans())}
    w = SimpleNamespace(graph=SimpleNamespace(nodes=nodes), records=records, rank=draw(st.integers(0, 7)),
                        finish_time=draw(st.none() | st.integers(0, 80)))
    return w, begun


@settings(max_examples=1000, deadline=None)
@given(ranks())
def test_breakdown_is_the_unions_and_intersections(drawn: tuple[Any, dict[int, int]]) -> None:
    w, begun = drawn
    for starts in (begun, None):
        got, want = rank_breakdown(w, starts), reference_breakdown(w, starts)
        assert json.dumps(got) == json.dumps(want)  # the same values, of the same types, in the same order


def reference_records(workload: Any, comm_starts: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """collective_records as it was: nccl_bandwidths per record."""
    begun = comm_starts or {}
    out = []
    for c in workload.collectives:
        node = workload.graph.nodes[c["node"]]
        n = collective_group_size(workload, node)
        wait = begun.get(c["node"], c["start"]) - c["start"]
        data, algbw, busbw = nccl_bandwidths(c["type"], c["size"], n, c["end"] - c["start"] - wait)
        out.append({"rank": workload.rank, "node": c["node"], "name": node.name, "type": c["type"], "size_bytes": c["size"],
                    "algorithm": c.get("algorithm"), "group_size": n, "pg": c["pg"] or None, "start_cycles": c["start"],
                    "end_cycles": c["end"], "duration_cycles": c["end"] - c["start"], "wait_cycles": wait,
                    "algbw_bytes": data, "algbw_gb_s": algbw, "busbw_gb_s": busbw})
    return out


@st.composite
def collectives(draw: Any) -> tuple[Any, dict[int, int]]:
    groups = {g: SimpleNamespace(involved_npus=list(range(draw(st.integers(0, 9))))) for g in (1, 2, 3)}
    dims = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3))
    nodes, colls = {}, []
    for nid in range(draw(st.integers(0, 12))):
        pg = draw(st.sampled_from([None, "", "0", "1", "2", "3", "7"]))  # 7: no such group
        nodes[nid] = SimpleNamespace(name=f"c{nid}", pg_name=pg,
                                     involved_dim=draw(st.none() | st.lists(st.booleans(), max_size=4)))
        start = draw(st.integers(0, 10**6))
        colls.append({"node": nid, "start": start, "end": start + draw(st.integers(0, 10**6)), "pg": pg,
                      "type": draw(st.sampled_from(["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL",
                                                    "BROADCAST", "SOMETHING_ELSE"])),
                      "size": draw(st.integers(0, 2**40)), "algorithm": draw(st.sampled_from(["ring", "ring,direct"]))})
    begun = {c["node"]: c["start"] + draw(st.integers(0, 2 * (c["end"] - c["start"]) + 1))
             for c in colls if draw(st.booleans())}
    w = SimpleNamespace(graph=SimpleNamespace(nodes=nodes), collectives=colls, rank=3, comm_groups=groups,
                        sys=SimpleNamespace(physical_dims=dims))
    return w, begun


@settings(max_examples=1000, deadline=None)
@given(collectives())
def test_records_are_nccl_bandwidths_per_record(drawn: tuple[Any, dict[int, int]]) -> None:
    w, begun = drawn
    for starts in (begun, None):
        assert json.dumps(collective_records(w, starts)) == json.dumps(reference_records(w, starts))


def reference_summary(records: list[dict[str, Any]], weight: int = 1) -> list[dict[str, Any]]:
    """summarise_collectives as it was: each group's records listed, then summed."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["type"], r["size_bytes"], r["algorithm"], r["group_size"]), []).append(r)
    out = []
    for (ctype, size, algo, n), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]), kv[0][3])):
        mean = sum(r["duration_cycles"] for r in rs) / len(rs)
        mean_wait = sum(r.get("wait_cycles", 0) for r in rs) / len(rs)
        data, algbw, busbw = nccl_bandwidths(ctype, size, n, mean - mean_wait)
        out.append({"type": ctype, "size_bytes": size, "algorithm": algo, "group_size": n, "count": len(rs) * weight,
                    "mean_duration_cycles": round(mean, 3), "max_duration_cycles": max(r["duration_cycles"] for r in rs),
                    "mean_wait_cycles": round(mean_wait, 3), "algbw_gb_s": algbw, "busbw_gb_s": busbw})
    return out


RECORDS = st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["ALL_REDUCE", "ALL_GATHER", "BROADCAST"]), "size_bytes": st.sampled_from([0, 1, 3 << 20]),
     "algorithm": st.sampled_from(["ring", "direct", None]), "group_size": st.integers(0, 4),
     "duration_cycles": st.integers(0, 10**12)},
    optional={"wait_cycles": st.integers(0, 10**12)}), max_size=8)


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(st.tuples(RECORDS, st.integers(1, 5)), max_size=4), weight=st.integers(1, 3))
def test_a_summary_of_weighted_parts_is_that_of_the_records_repeated(parts: list, weight: int) -> None:
    every = [r for records, k in parts for r in records for _ in range(k)]
    want = json.dumps(reference_summary(every, weight))
    assert json.dumps(summarise_parts((records, k * weight) for records, k in parts)) == want
    assert json.dumps(summarise_collectives(every, weight)) == want


_ENDPOINT = st.one_of(st.integers(0, 60), st.integers(-5, 2**64), st.sampled_from([0, 2**63 - 1, 2**63, -1]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_ENDPOINT, _ENDPOINT), max_size=200))
def test_the_union_in_c_is_the_sweeps_or_declines(intervals: list[tuple[int, int]]) -> None:
    """system/_sys_core.c union_length gives the Python sweep's length on pairs in 0 .. 2^63 - 1
    (overlapping, touching, empty, backwards, unsorted, more than its 128 on the stack), and None,
    which sends _covered to the sweep, on anything else."""
    from system.report import _covered, _covered_sweep, _union_length

    if _union_length is None:
        pytest.skip("the C system core is not built")
    fits = all(0 <= x < 2**63 for pair in intervals for x in pair)
    got = _union_length(list(intervals))
    assert got == (_covered_sweep(intervals) if fits else None)
    assert _covered(intervals) == _covered_sweep(intervals)
    assert _union_length(tuple(intervals)) is None and _union_length([(1, 2, 3)]) is None


def test_the_union_in_c_on_long_lists() -> None:
    import random

    from system.report import _covered_sweep, _union_length

    if _union_length is None:
        pytest.skip("the C system core is not built")
    rng = random.Random(3)
    for n in (127, 128, 129, 1000):
        intervals = [(a, a + rng.randint(-5, 50)) for a in (rng.randint(0, 10 * n) for _ in range(n))]
        assert _union_length(intervals) == _covered_sweep(intervals)


@pytest.mark.parametrize("layout", ["mixed-3", "mixed-21", "irregular", "symmetric"])
def test_rows_are_the_records_summary_fields(tmp_path, layout: str) -> None:
    """collective_records(rows=True), read from the workload's collective_timings, holds what the
    summary reads of each record (type, size, algorithm, ranks, duration, wait), for every rank
    of real runs: drawn layouts with groups and a symmetric one whose ranks are views."""
    from conftest import EXAMPLES
    from dtsim_tools.bench import _write_irregular, _write_mixed
    from system.simulation import run_simulation
    from system.waiting import communication_starts
    from workload.builder import write_collective_microbenchmark

    net = tmp_path / "ring.yml"
    net.write_text("topology: [ Ring ]\nnpus_count: [ 16 ]\nbandwidth: [ 50.0 ]\nlatency: [ 500.0 ]\n")
    kind, _, seed = layout.partition("-")
    if kind == "symmetric":
        prefix, groups = write_collective_microbenchmark(tmp_path / "ar", 16, "ALL_REDUCE", 1 << 20), None
    else:
        prefix = _write_mixed(tmp_path, 16, int(seed)) if kind == "mixed" else _write_irregular(tmp_path, 16)
        groups = tmp_path / "groups.json"
    result = run_simulation(prefix, net, EXAMPLES / "system" / "Ring_4chunks.json", comm_groups=groups)
    begun = communication_starts(result.workloads)
    rows = 0
    for w, b in zip(result.workloads, begun):
        want = [(r["type"], r["size_bytes"], r["algorithm"], r["group_size"], r["duration_cycles"], r["wait_cycles"])
                for r in collective_records(w, b)]
        assert collective_records(w, b, rows=True) == want
        rows += len(want)
    assert rows > 0
