"""Reading a PyTorch execution trace (``ExecutionTraceObserver`` JSON) without torch.

An execution trace (ET) is the host-side graph of one training step: one node per
``RecordFunction`` (operator, autograd function or user annotation), each with its
parent, its record-function id (``rf_id``, a process-wide counter, so it orders
nodes by start), its autograd sequence number and its tensor arguments.

Two layouts are in use, told apart by the ``schema`` string:

* ``1.0.1`` (PyTorch 2.0/2.1): flat keys ``parent``, ``rf_id``, ``inputs``,
  ``input_shapes``, ``input_types``, ...
* ``1.0.2-chakra.0.0.4`` up to ``1.1.x-chakra.0.0.4`` (PyTorch 2.2 onward):
  ``ctrl_deps`` for the parent, ``inputs``/``outputs`` as
  ``{"values", "shapes", "types", ...}`` and the scalars in ``attrs``.

Both are read into the same :class:`EtNode`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from network.files import parse_json, read_text
from workload.collect.errors import ProfilerTraceError

#: RecordScope::USER_SCOPE: record_function annotations such as
#: ``Optimizer.step#Adam.step``, ``ProfilerStep#3`` and the thread roots.
USER_SCOPE = 7
THREAD_ROOT = "[pytorch|profiler|execution_trace|thread]"

FLAT_SCHEMAS = frozenset({"1.0.1"})
NESTED_SCHEMA = re.compile(r"^1\.(0\.[2-9]|1\.\d+)-chakra\.(0\.0\.4|1\.0\.0)$")
SUPPORTED = ("1.0.1 (PyTorch 2.0/2.1) or 1.0.2-chakra.0.0.4 ... 1.1.x-chakra.0.0.4 / 1.1.x-chakra.1.0.0 "
             "(PyTorch 2.2 and later)")


@dataclass(frozen=True, slots=True)
class TensorArgs:
    """The arguments (or results) of one node: parallel lists, one entry per argument."""

    values: list
    shapes: list
    types: list

    def is_empty(self) -> bool:
        return not (self.values or self.shapes or self.types)


@dataclass(frozen=True, slots=True)
class EtNode:
    """One RecordFunction of the execution trace (PyTorch: an ET node)."""

    id: int
    name: str
    parent: int
    rf_id: int
    seq_id: int
    scope: int
    tid: int
    op_schema: str
    inputs: TensorArgs
    outputs: TensorArgs

    def has_io(self) -> bool:
        return not (self.inputs.is_empty() and self.outputs.is_empty())

    def is_annotation(self) -> bool:
        """A record_function scope (no operator of its own): look through it."""
        return self.scope == USER_SCOPE and not self.op_schema and not self.has_io()


class ExecutionTrace:
    """The nodes of one ET file, with children listed in start order (by rf_id)."""

    def __init__(self, path: Path, schema: str, nodes: list[EtNode]) -> None:
        self.path = path
        self.schema = schema
        self.nodes = {n.id: n for n in nodes}
        self.children: dict[int, list[EtNode]] = {}
        # An operator whose parent the trace never wrote belongs to its thread's root: the observer
        # writes a record when it ends, so one still open when tracing stopped (the optimizer step
        # whose post-hook stops the profiler) is missing while the operators inside it are there.
        roots = {n.tid: n.id for n in nodes if n.name == THREAD_ROOT}
        for node in nodes:
            if node.parent == node.id:             # the process root is its own parent
                continue
            parent = node.parent
            if parent not in self.nodes and node.tid in roots:
                parent = roots[node.tid]
            self.children.setdefault(parent, []).append(node)
        for kids in self.children.values():
            kids.sort(key=lambda n: (n.rf_id, n.id))

    def thread_roots(self) -> list[EtNode]:
        return sorted((n for n in self.nodes.values() if n.name == THREAD_ROOT),
                      key=lambda n: (n.tid, n.id))

    def kids(self, node: EtNode) -> list[EtNode]:
        return self.children.get(node.id, [])


def load_execution_trace(path: str | os.PathLike) -> ExecutionTrace:
    """Read and check an ET file; raise ProfilerTraceError naming the file and the place."""
    path = Path(path)
    return execution_trace_from_doc(path, _read_json(path))


def execution_trace_from_doc(path: Path, doc: Any) -> ExecutionTrace:
    """Check an already parsed ET document (see load_execution_trace)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise ProfilerTraceError(path, "top level", "expected a JSON object with a 'nodes' list "
                                 "(a PyTorch ExecutionTraceObserver file)")
    schema = doc.get("schema")
    if schema in FLAT_SCHEMAS:
        read = _flat_node
    elif isinstance(schema, str) and NESTED_SCHEMA.match(schema):
        read = _nested_node
    else:
        raise ProfilerTraceError(path, "'schema'", f"execution-trace schema version {schema!r} is "
                                 f"not supported; expected {SUPPORTED}")
    nodes = []
    for index, raw in enumerate(doc["nodes"]):
        try:
            nodes.append(read(raw))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            ident = raw.get("id", "?") if isinstance(raw, dict) else "?"
            raise ProfilerTraceError(path, f"nodes[{index}] (id {ident})",
                                     f"not a schema {schema} node: missing or bad field {exc}") from None
    trace = ExecutionTrace(path, schema, nodes)
    if not trace.thread_roots():
        raise ProfilerTraceError(path, "nodes", f"no '{THREAD_ROOT}' node: the trace recorded nothing")
    return trace


def _read_json(path: Path, **json_options: Any) -> Any:
    return parse_json(read_text(path, ProfilerTraceError), path, ProfilerTraceError, **json_options)


def _flat_node(raw: dict) -> EtNode:
    return EtNode(
        id=int(raw["id"]), name=str(raw["name"]), parent=int(raw["parent"]),
        rf_id=int(raw.get("rf_id", 0)), seq_id=int(raw.get("seq_id", -1)),
        scope=int(raw.get("scope", 0)), tid=int(raw.get("tid", 0)),
        op_schema=str(raw.get("op_schema", "")),
        inputs=TensorArgs(list(raw["inputs"]), list(raw["input_shapes"]), list(raw["input_types"])),
        outputs=TensorArgs(list(raw["outputs"]), list(raw["output_shapes"]), list(raw["output_types"])),
    )


def _nested_node(raw: dict) -> EtNode:
    attrs = {a["name"]: a.get("value") for a in raw.get("attrs", [])}
    return EtNode(
        id=int(raw["id"]), name=str(raw["name"]), parent=int(raw["ctrl_deps"]),
        rf_id=int(attrs.get("rf_id", 0)), seq_id=int(attrs.get("seq_id", -1)),
        scope=int(attrs.get("scope", 0)), tid=int(attrs.get("tid", 0)),
        op_schema=str(attrs.get("op_schema", "") or ""),
        inputs=_nested_args(raw["inputs"]), outputs=_nested_args(raw["outputs"]),
    )


def _nested_args(io: dict) -> TensorArgs:
    return TensorArgs(list(io["values"]), list(io["shapes"]), list(io["types"]))
