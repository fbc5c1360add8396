"""Write the bad-input corpus: ``python tests/bad_inputs/make_corpus.py`` (from the repo root).

The files are committed; this script is how they were made, so a case can be read as code and
remade after a schema change. ``cases.yaml`` (written by hand) says how each case is run and
what it must answer. Every ET workload has 4 ranks (``common/ring4.yml``); a bad case spoils
one rank's file (usually rank 2) and keeps the others good, as a real mistake would.
"""
from __future__ import annotations

import gzip
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
OUT = HERE  # where the files go; test_bad_inputs.py remakes the corpus elsewhere and compares
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # conftest for the collect tests

from chakra_proto import encode_et_bytes, et_def_pb2 as pb  # noqa: E402
from chakra_proto.attrs import attr_bool_list, attr_int64, attr_string  # noqa: E402
from chakra_proto.io import _varint  # noqa: E402
from workload.builder import ET_VERSION, GraphBuilder  # noqa: E402

NPUS = 4
BAD_RANK = 2
META = pb.GlobalMetadata(version=ET_VERSION)


# -- ET helpers -----------------------------------------------------------------------------

def good(rank: int) -> GraphBuilder:
    """Every rank's good graph: compute, a 64 KiB all-reduce, compute."""
    b = GraphBuilder()
    a = b.comp("fwd", 1000)
    x = b.collective("grad_ar", "ALL_REDUCE", 65536, deps=[a])
    b.comp("opt", 500, deps=[x])
    return b


def et_bytes(b: GraphBuilder) -> bytes:
    return encode_et_bytes(META, b.nodes)


def ranks(folder: str, make: Callable[[int], bytes | None]) -> None:
    """folder/w.{r}.et for every rank; ``make(r)`` returns the bytes, or None to leave it out."""
    d = OUT / folder
    d.mkdir(parents=True, exist_ok=True)
    for r in range(NPUS):
        data = make(r)
        if data is not None:
            (d / f"w.{r}.et").write_bytes(data)


def spoil(folder: str, bad: Callable[[], bytes]) -> None:
    """Rank BAD_RANK gets ``bad()``, the others the good graph."""
    ranks(folder, lambda r: bad() if r == BAD_RANK else et_bytes(good(r)))


def edit(folder: str, change: Callable[[list[pb.Node]], None]) -> None:
    """Rank BAD_RANK's good graph with ``change(nodes)`` applied."""
    def bad() -> bytes:
        b = good(BAD_RANK)
        change(b.nodes)
        return et_bytes(b)
    spoil(folder, bad)


def set_attr(node: pb.Node, attr: pb.AttributeProto) -> None:
    for i, a in enumerate(node.attr):
        if a.name == attr.name:
            node.attr[i].CopyFrom(attr)
            return
    node.attr.append(attr)


def drop_attr(node: pb.Node, name: str) -> None:
    keep = [a for a in node.attr if a.name != name]
    del node.attr[:]
    node.attr.extend(keep)


def framed(*messages: bytes) -> bytes:
    return b"".join(_varint(len(m)) + m for m in messages)


def p2p(folder: str, make: Callable[[int, GraphBuilder], None]) -> None:
    def one(r: int) -> bytes:
        b = GraphBuilder()
        make(r, b)
        if not b.nodes:
            b.comp("idle", 1000)
        return et_bytes(b)
    ranks(folder, one)


# -- the ET cases ---------------------------------------------------------------------------

def et_cases() -> None:
    good_bytes = et_bytes(good(BAD_RANK))
    meta = META.SerializeToString()
    ranks("common/ok", lambda r: et_bytes(good(r)))

    # framing
    spoil("et/empty", lambda: b"")
    spoil("et/truncated_varint", lambda: good_bytes + b"\x85")
    spoil("et/huge_varint", lambda: framed(meta) + b"\xff\xff\xff\xff\xff\x01")
    spoil("et/length_beyond_eof", lambda: framed(meta) + _varint(2**31) + b"\x08\x01")
    spoil("et/garbage_binary", lambda: bytes(random.Random(9).randrange(256) for _ in range(300)))
    spoil("et/json_not_et", lambda: json.dumps({"nodes": [{"id": 0, "type": "COMP"}]}).encode())
    spoil("et/gzip_corrupt", lambda: b"\x1f\x8b\x08\x00" + b"not really gzip" * 4)
    spoil("et/gzip_of_garbage", lambda: gzip.compress(b"\xff" * 64, mtime=0))
    spoil("et/metadata_only", lambda: framed(meta))
    spoil("et/bad_utf8_name", lambda: framed(meta, b"\x08\x01\x12\x02\xff\xfe"))
    spoil("et/corrupt_wire_type", lambda: framed(meta, b"\x08\x01\x0f\x01"))

    # values
    edit("et/negative_comm_size", lambda n: set_attr(n[1], attr_int64("comm_size", -65536)))
    edit("et/negative_num_ops", lambda n: set_attr(n[0], attr_int64("num_ops", -5)))
    edit("et/negative_tensor_size", lambda n: set_attr(n[0], attr_int64("tensor_size", -1)))
    edit("et/negative_duration_ns", lambda n: set_attr(n[0], attr_int64("duration_ns", -1000)))
    edit("et/comm_size_as_double",
         lambda n: set_attr(n[1], pb.AttributeProto(name="comm_size", double_val=65536.0)))
    edit("et/comm_type_as_string", lambda n: set_attr(n[1], attr_string("comm_type", "ALL_REDUCE")))
    edit("et/unknown_comm_type", lambda n: set_attr(n[1], attr_int64("comm_type", 99)))
    edit("et/unsupported_collective", lambda n: set_attr(n[1], attr_int64("comm_type", pb.GATHER)))
    edit("et/involved_dim_not_bool_list", lambda n: set_attr(n[1], attr_int64("involved_dim", 1)))
    edit("et/comm_node_is_cpu_op", lambda n: set_attr(n[1], pb.AttributeProto(name="is_cpu_op", bool_val=True)))
    edit("et/pg_name_not_an_id", lambda n: set_attr(n[1], attr_string("pg_name", "tensor_parallel")))

    # ids and dependencies
    edit("et/dep_id_out_of_range", lambda n: n[2].data_deps.append(2**64 - 1))
    edit("et/self_dependency", lambda n: n[1].data_deps.append(1))
    # what Chakra's converter leaves behind: control edges to the node itself, to nodes it
    # dropped, and ones that close a cycle with the data dependencies
    edit("et/ctrl_deps_left_by_converter_ok",
         lambda n: (n[1].ctrl_deps.extend([1, 77]), n[2].ctrl_deps.append(99), n[0].ctrl_deps.append(2)))
    edit("et/cycle_of_three", lambda n: n[0].data_deps.append(2))
    edit("et/duplicate_node_id", lambda n: setattr(n[2], "id", 0))

    # sends and receives: attributes
    def send_to(dst: int, tag: int | None = 7) -> Callable[[int, GraphBuilder], None]:
        def make(r: int, b: GraphBuilder) -> None:
            if r == BAD_RANK:
                b.send("s", BAD_RANK, dst, 4096, tag if tag is not None else 0)
        return make
    p2p("et/send_to_self", send_to(BAD_RANK))
    p2p("et/send_dst_out_of_range", send_to(NPUS))

    def spoil_send(folder: str, change: Callable[[pb.Node], None]) -> None:
        def make(r: int, b: GraphBuilder) -> None:
            if r == BAD_RANK:
                b.send("s", BAD_RANK, 0, 4096, 7)
                change(b.nodes[-1])
            if r == 0:
                b.recv("r", BAD_RANK, 0, 4096, 7)
        p2p(folder, make)
    spoil_send("et/send_missing_comm_dst", lambda n: drop_attr(n, "comm_dst"))
    spoil_send("et/send_missing_comm_tag", lambda n: drop_attr(n, "comm_tag"))
    spoil_send("et/send_from_wrong_rank", lambda n: set_attr(n, attr_int64("comm_src", 3)))

    def recv_missing_src(r: int, b: GraphBuilder) -> None:
        if r == BAD_RANK:
            b.recv("r", 0, BAD_RANK, 4096, 7)
            drop_attr(b.nodes[-1], "comm_src")
    p2p("et/recv_missing_comm_src", recv_missing_src)

    # memory nodes
    def mem(r: int) -> bytes:
        b = GraphBuilder()
        a = b.comp("c", 1000)
        b.memory("load", "load", 1 << 20, deps=[a])
        return et_bytes(b)
    ranks("et/mem_nodes", mem)

    # process groups declared inside the ET (METADATA nodes, PyTorch's form)
    def metadata(values: str) -> Callable[[int], bytes]:
        def one(r: int) -> bytes:
            b = GraphBuilder()
            m = pb.Node(id=0, name="pg_metadata", type=pb.METADATA_NODE)
            m.inputs.values = values
            b.nodes.append(m)
            b.collective("tp_ar", "ALL_REDUCE", 4096, deps=[0], pg_name="3")
            return et_bytes(b)
        return one
    ranks("et/metadata_group_bad_rank", metadata('["' + json.dumps([{"pg_name": "3", "ranks": [0, 1, 2, 3, 99]}]) + '"]'))
    ranks("et/metadata_nested_too_deep", metadata('["' + "[" * 5000 + '"]'))

    # layout on disk
    ranks("et/missing_rank_file", lambda r: None if r == BAD_RANK else et_bytes(good(r)))
    ranks("et/two_prefixes", lambda r: et_bytes(good(r)))
    for r in range(NPUS):
        (OUT / "et/two_prefixes" / f"other.{r}.et").write_bytes(et_bytes(good(r)))
    (OUT / "et/no_rank_files").mkdir(parents=True, exist_ok=True)
    (OUT / "et/no_rank_files" / "README.txt").write_text("a folder without <prefix>.<rank>.et files\n")

    # ranks that disagree: caught up front (exit 2)
    edit("et/coll_size_differs", lambda n: set_attr(n[1], attr_int64("comm_size", 131072)))
    edit("et/coll_tiny_size_differs", lambda n: set_attr(n[1], attr_int64("comm_size", 3)))
    edit("et/coll_type_differs", lambda n: set_attr(n[1], attr_int64("comm_type", pb.ALL_GATHER)))

    def extra(r: int) -> bytes:
        b = good(r)
        if r == BAD_RANK:
            b.collective("extra_ar", "ALL_REDUCE", 4096, deps=[2])
        return et_bytes(b)
    ranks("et/coll_extra_on_one_rank", extra)

    def group_coll(r: int) -> bytes:
        b = GraphBuilder()
        a = b.comp("c", 1000)
        size = 8192 if r == 1 else 4096  # rank 1 disagrees with rank 0, its group peer
        b.collective("dp_ar", "ALL_REDUCE", size, deps=[a], pg_name="1" if r < 2 else "2")
        return et_bytes(b)
    ranks("et/group_coll_size_differs", group_coll)
    (OUT / "et/group_coll_size_differs" / "groups.json").write_text('{"1": [0, 1], "2": [2, 3]}\n')

    def group_not_member(r: int) -> bytes:
        b = GraphBuilder()
        b.collective("ar", "ALL_REDUCE", 4096, pg_name="1")
        return et_bytes(b)
    ranks("et/pg_not_member", group_not_member)
    (OUT / "et/pg_not_member" / "groups.json").write_text('{"1": [0, 1]}\n')
    ranks("et/pg_undefined", group_not_member)

    # messages that never pair: exit 3
    def send_only(r: int, b: GraphBuilder) -> None:
        if r == 0:
            b.send("s", 0, 1, 4096, 7)
    p2p("et/send_without_recv", send_only)

    def size_mismatch(r: int, b: GraphBuilder) -> None:
        if r == 0:
            b.send("s", 0, 1, 4096, 7)
        if r == 1:
            b.recv("r", 0, 1, 2048, 7)
    p2p("et/recv_size_differs", size_mismatch)

    def tag_mismatch(r: int, b: GraphBuilder) -> None:
        if r == 0:
            b.send("s", 0, 1, 4096, 7)
        if r == 1:
            b.recv("r", 0, 1, 4096, 8)
    p2p("et/recv_tag_differs", tag_mismatch)

    def circular(r: int, b: GraphBuilder) -> None:
        if r in (0, 1):  # each receives first, then sends: both wait forever
            peer = 1 - r
            x = b.recv("r", peer, r, 4096, 7)
            b.send("s", r, peer, 4096, 7, deps=[x])
    p2p("et/p2p_circular_wait", circular)

    def swapped(r: int) -> bytes:
        b = GraphBuilder()
        first, second = ("ALL_GATHER", "REDUCE_SCATTER") if r == BAD_RANK else ("REDUCE_SCATTER", "ALL_GATHER")
        x = b.collective("x", first, 65536)
        b.collective("y", second, 65536, deps=[x])
        return et_bytes(b)
    ranks("et/coll_order_swapped", swapped)

    # extreme but valid: must finish (exit 0)
    def extreme(r: int) -> bytes:
        b = GraphBuilder()
        a = b.comp("long", 2**62)
        x = b.collective("huge_ar", "ALL_REDUCE", 2**62, deps=[a])
        y = b.collective("empty_ag", "ALL_GATHER", 0, deps=[x])
        b.comp("zero", 0, deps=[y])
        return et_bytes(b)
    ranks("et/extreme_sizes_ok", extreme)


# -- text configs ---------------------------------------------------------------------------

NET = "topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n"
BIG = "1" + "0" * 400


def text(path: str, content: str | bytes) -> None:
    p = OUT / path
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")


def network_cases() -> None:
    text("common/ring4.yml", NET)
    cases = {
        "empty": "",
        "top_level_list": "- Ring\n- 4\n",
        "not_utf8": b"topology: [Ring]\nnpus_count: [4]\n\xff\xfe\n",
        "missing_latency": "topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\n",
        "npus_one": NET.replace("[4]", "[1]"),
        "npus_zero": NET.replace("[4]", "[0]"),
        "npus_text": NET.replace("[4]", "[four]"),
        "npus_huge": NET.replace("[4]", f"[{BIG}]"),
        "npus_product_huge": "topology: [Ring, Ring, Ring]\nnpus_count: [1024, 1024, 4]\n"
                             "bandwidth: [50, 50, 50]\nlatency: [5, 5, 5]\n",
        "bandwidth_nan": NET.replace("[50]", "[.nan]"),
        "bandwidth_exponent_text": NET.replace("[50]", "[1e3]"),
        "bandwidth_400_digits": NET.replace("[50]", f"[{BIG}]"),
        "bandwidth_tiny": NET.replace("[50]", "[1.0e-300]"),
        "bandwidth_zero": NET.replace("[50]", "[0]"),
        "latency_negative": NET.replace("[500]", "[-1]"),
        "latency_inf": NET.replace("[500]", "[.inf]"),
        "latency_text": NET.replace("[500]", "[fast]"),
        "topology_recursive_alias": NET.replace("topology: [Ring]", "topology: &a [*a]"),
        "backend_unknown": NET + "backend: quantum\n",
        "backend_not_text": NET + "backend: [congestion-aware]\n",
        "ns3_not_mapping": NET + "ns3: 5\n",
        "nested_too_deep": "topology: " + "[" * 5000 + "\n",
        "digits_5000": NET.replace("[500]", "[" + "9" * 5000 + "]"),
        "ns3_buffer_beyond_uint32": NET + "ns3:\n  snd_buf_size: 4611686018427387904\n",
        "ns3_latency_beyond_clock": NET.replace("[500]", "[4611686018427387904]"),
        "ns3_bandwidth_beyond_uint64": NET.replace("[50]", "[1.0e+18]"),
        "dimensions_disagree": "topology: [Ring, Switch]\nnpus_count: [2, 2]\nbandwidth: [50]\nlatency: [5, 5]\n",
    }
    for name, content in cases.items():
        text(f"network/{name}.yml", content)
    (OUT / "network/a_folder.yml").mkdir(parents=True, exist_ok=True)
    (OUT / "network/a_folder.yml" / "README.txt").write_text("a folder where a file is expected\n")


def system_cases() -> None:
    base = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
            "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring"],
            "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["ring"],
            "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
            "local-mem-bw": 1600, "boost-mode": 0}
    text("common/system.json", json.dumps(base, indent=1) + "\n")

    def with_(**kw: object) -> str:
        d = dict(base)
        for k, v in kw.items():
            k = k.replace("_", "-")
            if v is None:
                d.pop(k, None)
            else:
                d[k] = v
        return json.dumps(d, indent=1) + "\n"

    cases = {
        "empty.json": "",
        "top_level_list.json": "[4, 4]\n",
        "not_utf8.json": b'{"preferred-dataset-splits": 4, "x": "\xff"}\n',
        "trailing_comma.json": '{"preferred-dataset-splits": 4,}\n',
        "splits_missing.json": with_(preferred_dataset_splits=None),
        "splits_zero.json": with_(preferred_dataset_splits=0),
        "splits_huge.json": with_(preferred_dataset_splits=10**9),
        "splits_fraction.json": with_(preferred_dataset_splits=2.5),
        "policy_unknown.json": with_(scheduling_policy="RANDOM"),
        "impl_unknown.json": with_(all_reduce_implementation=["bogus"]),
        "impl_direct_zero.json": with_(all_reduce_implementation=["direct0"]),
        "impl_not_a_list.json": with_(all_reduce_implementation=5),
        "impl_more_than_dims.json": with_(all_reduce_implementation=["ring", "ring"]),
        "impl_missing_for_workload.json": with_(all_reduce_implementation=None),
        "local_mem_bw_zero.json": with_(local_mem_bw=0),
        "local_mem_bw_tiny.json": with_(local_mem_bw=1e-320),
        "local_mem_bw_400_digits.json": with_(local_mem_bw=None)[:-2] + f',\n "local-mem-bw": {BIG}\n}}\n',
        "peak_perf_tiny.json": with_(peak_perf=1e-300, roofline_enabled=1),
        "endpoint_delay_nan.json": with_(endpoint_delay=None)[:-2] + ',\n "endpoint-delay": NaN\n}\n',
        "endpoint_delay_1e400.json": with_(endpoint_delay=None)[:-2] + ',\n "endpoint-delay": 1e400\n}\n',
        "active_chunks_negative.json": with_(active_chunks_per_dimension=-1),
        "model_shared_bus.json": with_(model_shared_bus=1),
        "flag_as_text.json": with_(roofline_enabled="yes"),
        "per_node_custom_missing.json": with_(per_node_custom_implementation="/nonexistent/custom.yaml"),
        "nested_too_deep.json": "[" * 5000 + "\n",
        "digits_5000.json": with_(endpoint_delay=None)[:-2] + ',\n "endpoint-delay": ' + "9" * 5000 + "\n}\n",
        "invalid.yml": "scheduling-policy: LIFO\npreferred-dataset-splits: [4\n",
    }
    for name, content in cases.items():
        text(f"system/{name}", content)
    # relative to the repository root, where the test runs (the path is read relative to the cwd)
    text("system/per_node_custom.yaml.txt", b"0: \xff\xfe\n")
    text("system/per_node_custom_not_utf8.json",
         with_(per_node_custom_implementation="tests/bad_inputs/system/per_node_custom.yaml.txt"))


def comm_group_cases() -> None:
    cases = {
        "invalid_json": '{"1": [0, 1]\n',
        "top_level_list": "[[0, 1], [2, 3]]\n",
        "id_not_integer": '{"dp": [0, 1]}\n',
        "id_zero": '{"0": [0, 1]}\n',
        "rank_out_of_range": '{"1": [0, 4]}\n',
        "rank_listed_twice": '{"1": [0, 1, 1]}\n',
        "group_without_ranks": '{"1": []}\n',
        "rank_as_text": '{"1": ["0", "1"]}\n',
        "ranks_not_a_list": '{"1": 3}\n',
        "not_utf8": b'{"1": [0, 1], "\xff": []}\n',
        "nonempty_with_bad_rank": '{"1": [0, 7]}\n',
    }
    for name, content in cases.items():
        text(f"comm_group/{name}.json", content)


def remote_memory_cases() -> None:
    base = '{"memory-type": "PER_NPU_MEMORY_EXPANSION", "remote-mem-latency": 100, "remote-mem-bw": 50}\n'
    text("common/memory.json", base)
    cases = {
        "invalid_json": base[:-3],
        "top_level_list": "[1, 2]\n",
        "unknown_key": base.replace('"remote-mem-bw"', '"remote-mem-bandwidth"'),
        "type_unknown": base.replace("PER_NPU_MEMORY_EXPANSION", "INFINITE_MEMORY"),
        "latency_nan": base.replace("100", "NaN"),
        "latency_infinity": base.replace("100", "Infinity"),
        "latency_negative": base.replace("100", "-100"),
        "bandwidth_nan": base.replace("50}", "NaN}"),
        "bandwidth_tiny": base.replace("50}", "1e-320}"),
        "bandwidth_zero": base.replace("50}", "0}"),
        "per_node_without_npus": base.replace("PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION"),
        "no_expansion": base.replace("PER_NPU_MEMORY_EXPANSION", "NO_MEMORY_EXPANSION"),
    }
    for name, content in cases.items():
        text(f"remote_memory/{name}.json", content)


# -- TrioSim CSVs ---------------------------------------------------------------------------

TENSOR = """\
Index,TensorID,TensorShape,TensorNumElement,TensorEachByte,TensorType,TensorStorgeid,gpuid
0,1,"[8, 16]",128,4,input,2,0
1,3,"[4, 16]",64,4,weight,4,0
2,5,[4],4,4,bias,6,0
3,7,"[8, 4]",32,4,output,8,0
4,9,"[8, 4]",32,4,grad_output,10,0
5,11,"[4, 16]",64,4,grad_weight,12,0
"""
TRACE = """\
OperatorID,OperatorName,Operator_input,Operator_output,Operator_cudatime,Operator_cudatimenooverlap,InputSize,OutputSize,gpuid,stage,tpflag
1,aten::linear,[1; 3; 5],[7],12,10,[128; 64; 4],[32],0,forward,1
2,autograd::engine::evaluate_function: AddmmBackward0,[9; 3],[11],20,18,[32; 64],[64],0,backward,0
3,aten::_foreach_add_,[3; 11],[],5,4,[64; 64],[],0,optimizer,0
"""


def triosim_cases() -> None:
    def case(name: str, tensor: str | bytes | None = TENSOR, trace: str | bytes | None = TRACE) -> None:
        d = OUT / "triosim" / name
        d.mkdir(parents=True, exist_ok=True)
        for fname, content in (("tensor.csv", tensor), ("trace.csv", trace)):
            if content is not None:
                text(f"triosim/{name}/{fname}", content)

    case("ok")
    case("tensor_empty", tensor="")
    case("trace_missing", trace=None)
    case("missing_column", trace=TRACE.replace(",tpflag", "").replace(",forward,1", ",forward")
         .replace(",backward,0", ",backward").replace(",optimizer,0", ",optimizer"))
    case("tensor_id_not_integer", tensor=TENSOR.replace("0,1,", "0,one,", 1))
    case("negative_time", trace=TRACE.replace(",12,10,", ",12,-10,"))
    case("time_exponent_huge", trace=TRACE.replace(",12,10,", ",12,1e999999999,"))
    case("id_5000_digits", tensor=TENSOR.replace("0,1,", "0," + "1" * 5000 + ",", 1))
    case("unknown_stage", trace=TRACE.replace("forward", "sideways"))
    case("stages_out_of_order", trace=TRACE.replace(",backward,", ",TMP,").replace(",forward,", ",backward,")
         .replace(",TMP,", ",forward,"))
    case("tpflag_two", trace=TRACE.replace(",forward,1", ",forward,2"))
    case("field_count", trace=TRACE.replace("aten::linear", "aten::linear, bias"))
    case("unknown_tensor", trace=TRACE.replace("[1; 3; 5]", "[1; 3; 77]"))
    case("duplicate_operator", trace=TRACE.replace("\n2,", "\n1,"))
    case("sizes_count_differs", trace=TRACE.replace("[128; 64; 4]", "[128; 64]"))
    case("tensor_size_conflict", tensor=TENSOR + '6,3,"[4, 16]",65,4,weight,4,0\n')
    case("not_utf8", trace=TRACE.encode() + b"4,\xff\xfe,[],[],1,1,[],[],0,optimizer,0\n")


# -- profiler JSON --------------------------------------------------------------------------

def profiler_cases() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_collect_tests", ROOT / "tests/workload/test_collect_convert.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    SYNTHETIC_ET, SYNTHETIC_KINETO = mod.SYNTHETIC_ET, mod.SYNTHETIC_KINETO

    def case(name: str, et: object = SYNTHETIC_ET, kineto: object = SYNTHETIC_KINETO) -> None:
        for fname, doc in (("et.json", et), ("kineto.json", kineto)):
            if doc is None:
                continue
            text(f"profiler/{name}/{fname}", doc if isinstance(doc, (str, bytes)) else json.dumps(doc, indent=1))

    case("ok")
    case("kineto_malformed", kineto='{"traceEvents": [\n')
    case("kineto_no_trace_events", kineto={"schemaVersion": 1, "events": []})
    case("kineto_nested_too_deep", kineto="[" * 5000)
    case("kineto_not_utf8", kineto=b'{"traceEvents": ["\xff"]}')
    case("kineto_without_kernels", kineto={"schemaVersion": 1, "traceEvents": [
        e for e in SYNTHETIC_KINETO["traceEvents"] if e.get("cat") != "kernel"]})
    case("et_malformed", et='{"schema": "1.1.1-chakra.0.0.4", "nodes": [}')
    case("et_empty", et="")
    case("et_top_level_list", et=[1, 2, 3])
    case("et_node_missing_name", et={**SYNTHETIC_ET, "nodes": [
        {k: v for k, v in n.items() if k != "name"} for n in SYNTHETIC_ET["nodes"]]})
    case("et_nested_too_deep", et="[" * 5000)
    case("et_missing", et=None)


def main(out: Path = HERE) -> None:
    global OUT
    OUT = out
    for sub in ("common", "et", "network", "system", "comm_group", "remote_memory", "triosim", "profiler"):
        shutil.rmtree(OUT / sub, ignore_errors=True)
    et_cases()
    network_cases()
    system_cases()
    comm_group_cases()
    remote_memory_cases()
    triosim_cases()
    profiler_cases()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
    print(f"wrote the corpus under {OUT}")
