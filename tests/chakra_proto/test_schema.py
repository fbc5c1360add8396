"""The Chakra schema: generated code in step with the .proto, wire compatibility, framing."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need
from chakra_proto import EtFormatError, decode_et_bytes, encode_et_bytes, et_def_pb2 as pb, read_et, write_et

PROTO_DIR = Path(__file__).resolve().parents[2] / "chakra_proto"


def test_generated_module_matches_proto(tmp_path: Path) -> None:
    """Regenerate et_def_pb2.py from et_def.proto and compare the compiled descriptors."""
    need("grpc_tools", "test")
    r = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={tmp_path}",
                        str(PROTO_DIR / "et_def.proto")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    spec = importlib.util.spec_from_file_location("_regen_et_def_pb2", tmp_path / "et_def_pb2.py")
    # the regenerated module registers the same file name in the default pool; compare bytes only
    text = (tmp_path / "et_def_pb2.py").read_text()
    start = text.index("AddSerializedFile(b'") + len("AddSerializedFile(")
    end = text.index("')", start) + 1
    regenerated = eval(text[start:end])  # a bytes literal written by protoc
    assert regenerated == pb.DESCRIPTOR.serialized_pb, "chakra_proto/et_def_pb2.py is stale: regenerate it with grpc_tools.protoc"
    assert spec is not None


def test_wire_numbers_match_chakra() -> None:
    """Field numbers and enum values that files written by Chakra's tools rely on (formats.md A.1)."""
    node = {f.name: f.number for f in pb.Node.DESCRIPTOR.fields}
    assert node == {"id": 1, "name": 2, "type": 3, "ctrl_deps": 4, "data_deps": 5, "start_time_micros": 6,
                    "duration_micros": 7, "inputs": 8, "outputs": 9, "attr": 10}
    attr = {f.name: f.number for f in pb.AttributeProto.DESCRIPTOR.fields}
    assert attr["name"] == 1 and attr["doc_string"] == 2 and attr["double_val"] == 3
    assert attr["bool_list"] == 28 and attr["string_val"] == 29 and attr["bytes_list"] == 32
    assert pb.COMM_COLL_NODE == 7 and pb.METADATA_NODE == 1 and pb.REDUCE_SCATTER == 7 and pb.BARRIER == 9
    assert pb.DESCRIPTOR.package == "ChakraProtoMsg"


def test_plain_enums_equal_the_generated_ones() -> None:
    """chakra_proto/enums.py (read without the protobuf runtime) is et_def_pb2's enums, name for name."""
    from chakra_proto import enums

    for enum, names in ((pb.NodeType, enums.NODE_TYPE_NAMES), (pb.CollectiveCommType, enums.COLLECTIVE_NAMES)):
        assert names == {v.number: v.name for v in enum.DESCRIPTOR.values}
        assert all(getattr(enums, v.name) == v.number for v in enum.DESCRIPTOR.values)


def test_every_anchor_et_round_trips(anchors: Path) -> None:
    files = sorted(anchors.rglob("*.et"))
    assert len(files) > 100
    for f in files:
        md, nodes = read_et(f)
        assert encode_et_bytes(md, nodes) == f.read_bytes(), f


def test_write_then_read(tmp_path: Path) -> None:
    n = pb.Node(id=3, name="ar", type=pb.COMM_COLL_NODE, data_deps=[1, 2])
    n.attr.add(name="comm_size", int64_val=1 << 20)
    write_et(tmp_path / "x.0.et", pb.GlobalMetadata(version="0.0.4"), [n])
    md, nodes = read_et(tmp_path / "x.0.et")
    assert md.version == "0.0.4" and nodes == [n]


@pytest.mark.parametrize("blob,fragment", [
    (b"", "empty"),
    (b"\x05abc", "truncated"),
    (b"\xff\xff\xff\xff\xff\xff", "varint"),
    (b"\x07\x0a\x05\x30\x2e\x30\x2e\x34" + b"\x04\xff\xff\xff\xff", "not a valid protobuf"),
])
def test_bad_framing_names_the_offset(blob: bytes, fragment: str) -> None:
    with pytest.raises(EtFormatError) as e:
        decode_et_bytes(blob, "f.et")
    assert "f.et" in str(e.value) and fragment in str(e.value)
