"""A graph read through chakra_proto/wire.py (a run that has not imported protobuf) is the graph
read through protobuf: every parsed field of every node, and every error's wording, on the
committed reference ETs and the bad-input corpus."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from workload.errors import WorkloadError
from workload.graph import Node, load_graph

ROOT = Path(__file__).resolve().parents[2]
_FIELDS = [s for s in Node.__slots__ if s not in ("children",)]

# one outcome per file: each node's fields, or the error; the same code runs in both processes
_OUTCOMES = '''
import json, sys, warnings
from workload.errors import WorkloadError
from workload.graph import load_graph
def outcomes(paths, fields):
    out = {}
    for p in paths:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = load_graph(p)
            out[p] = [[repr(getattr(n, f)) for f in fields] + [sorted(n.children)] for _, n in sorted(g.nodes.items())]
        except WorkloadError as e:
            out[p] = str(e)
    return out
'''


def test_wire_and_protobuf_read_the_same_graphs() -> None:
    good = sorted(str(p) for p in ROOT.glob("tests/data/**/*.et"))
    bad = sorted(str(p) for p in ROOT.glob("tests/bad_inputs/et/**/*.et"))
    assert len(good) > 100 and len(bad) > 20
    paths = good + bad  # once a file needs protobuf, read_node uses it for the rest: the good ones first
    code = _OUTCOMES + (
        "from chakra_proto import io\n"
        "io._wire_left = 10 ** 9  # every message through wire.py where it accepts it\n"
        f"first = outcomes({good!r}, {_FIELDS!r})\n"
        "imported_for_good = 'google.protobuf' in sys.modules\n"
        f"first.update(outcomes({bad!r}, {_FIELDS!r}))\n"
        "print(json.dumps([first, imported_for_good, 'google.protobuf' in sys.modules]))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    through_wire, imported_for_good, protobuf_imported = json.loads(r.stdout)
    assert not imported_for_good  # the reference ETs were read by wire.py alone
    scope: dict = {}
    exec(_OUTCOMES, scope)  # here protobuf is imported already, so io.read_node decodes with it
    assert "chakra_proto.et_def_pb2" in sys.modules
    through_protobuf = scope["outcomes"](paths, _FIELDS)
    assert through_wire == through_protobuf
    assert protobuf_imported  # some corrupt files were declined by wire.py and read by protobuf
    assert sum(isinstance(v, list) for v in through_wire.values()) > 100
    assert WorkloadError and load_graph  # the names the subprocess uses exist here too
