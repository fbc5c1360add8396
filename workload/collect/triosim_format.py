"""TrioSim's trace CSVs: row types, the tensor rows of an operator, and the writer.

The format is TrioSim's (tracer/dataprocess.py; docs/formats.md section D): the
headers are kept byte for byte, typo included (``TensorStorgeid``). Id and size
lists are written ``[4; 6; 8]``, shapes as a Python list repr, times in
microseconds (integers where the trace had whole microseconds, else up to three
decimals: newer Kineto traces have nanosecond resolution).
"""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from network.files import write_atomic
from workload.collect.execution_trace import EtNode, TensorArgs

TENSOR_HEADER = ("Index", "TensorID", "TensorShape", "TensorNumElement", "TensorEachByte",
                 "TensorType", "TensorStorgeid", "gpuid")
TRACE_HEADER = ("OperatorID", "OperatorName", "Operator_input", "Operator_output", "Operator_cudatime",
                "Operator_cudatimenooverlap", "InputSize", "OutputSize", "gpuid", "stage", "tpflag")


@dataclass(frozen=True, slots=True)
class TensorRow:
    """One tensor occurrence in one operator's argument list (a row of tensor.csv)."""

    tensor_id: int
    shape: object
    num_elements: int
    element_bytes: int
    kind: str                 # the op-schema argument name: input, weight, bias=None, output, ...
    storage_id: int


@dataclass(frozen=True, slots=True)
class OperatorRow:
    """One outermost operator (a row of trace.csv). Times in integer nanoseconds."""

    operator_id: int
    name: str
    inputs: tuple[TensorRow, ...]
    outputs: tuple[TensorRow, ...]
    span_ns: int              # Operator_cudatime: first kernel start to last kernel end
    busy_ns: int              # Operator_cudatimenooverlap: sum of kernel durations
    stage: str
    tpflag: int


def argument_kinds(op_schema: str) -> list[list[str]]:
    """The op schema cut into arguments, each a list of words (TrioSim's parse_op_schema).

    Copied on purpose, quirks included, so that TensorType matches TrioSim's
    tracer: the schema is cut at every comma (also inside defaults like
    ``padding=[0, 0]``), and the type column is the argument's second word, which
    gives ``bias=None`` for ``Tensor? bias=None``.
    """
    text = (op_schema.replace("Tensor(a!)", "Tensor").replace("Tensor(a)", "Tensor")
            .replace("Tensor(a -> *) self", "Tensor input").replace("Tensor self", "Tensor input"))
    parts = text.split(",")
    words = []
    for i, item in enumerate(parts):
        if i == 0:
            pieces = item.split("(")
            item = pieces[1] if len(pieces) > 1 else ""
        elif i == len(parts) - 1:
            item = item.split(")")[0]
        words.append(item.strip().split(" "))
    return words


def _is_tensor_record(value: object) -> bool:
    """ET encodes a tensor as [tensor_id, storage_id, offset, numel, itemsize, device]."""
    return isinstance(value, list) and len(value) >= 5 and all(isinstance(v, int) for v in value[:5])


def _row(value: list, shape: object, kind: str) -> TensorRow:
    return TensorRow(value[0], shape, value[3], value[4], kind, value[1])


def tensor_rows(args: TensorArgs, kinds: list[list[str]] | None) -> list[TensorRow]:
    """The tensors among one node's inputs (kinds given) or outputs (kinds None), in order."""
    rows = []
    for i, (value, typ) in enumerate(zip(args.values, args.types)):
        typ = str(typ)
        if "tensor" not in typ.lower():
            continue
        shape = args.shapes[i] if i < len(args.shapes) else []
        if "GenericList" not in typ:
            if _is_tensor_record(value):
                rows.append(_row(value, shape, "output" if kinds is None else _kind(kinds, i)))
            continue
        items = [t.strip() for t in typ.replace("GenericList[", "").replace("]", "").split(",")]
        for j, item in enumerate(items):                      # a list argument: every element
            if j < len(value) and "tensor" in item.lower() and _is_tensor_record(value[j]):
                sub = shape[j] if isinstance(shape, list) and j < len(shape) else []
                rows.append(_row(value[j], sub, "output" if kinds is None else "input"))
    return rows


def _kind(kinds: list[list[str]], i: int) -> str:
    if i < len(kinds) and len(kinds[i]) > 1:
        return kinds[i][1].replace(")", "").replace("(", "")
    return "input"            # TrioSim's script stops with an IndexError here; we say "input"


def operator_tensors(node: EtNode) -> tuple[list[TensorRow], list[TensorRow]]:
    kinds = argument_kinds(node.op_schema)
    return tensor_rows(node.inputs, kinds), tensor_rows(node.outputs, None)


def format_us(ns: int) -> str:
    """Nanoseconds as TrioSim's microseconds: ``10651`` or ``12.345``."""
    whole, frac = divmod(ns, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def _id_list(values: list[int]) -> str:
    return "[" + "; ".join(str(v) for v in values) + "]"


def write_triosim_csvs(out_dir: str | os.PathLike, tensors: list[TensorRow],
                       operators: list[OperatorRow]) -> tuple[Path, Path]:
    """Write ``tensor.csv`` and ``trace.csv`` into out_dir (created if needed)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tensor_path, trace_path = out / "tensor.csv", out / "trace.csv"
    f = io.StringIO(newline="")  # each file is written whole, then renamed: never half a CSV
    w = csv.writer(f, lineterminator="\n")
    w.writerow(TENSOR_HEADER)
    for index, t in enumerate(tensors):
        w.writerow((index, t.tensor_id, str(t.shape), t.num_elements, t.element_bytes, t.kind,
                    t.storage_id, 0))
    write_atomic(tensor_path, f.getvalue())
    f = io.StringIO(newline="")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(TRACE_HEADER)
    for op in operators:
        w.writerow((op.operator_id, op.name,
                    _id_list([t.tensor_id for t in op.inputs]), _id_list([t.tensor_id for t in op.outputs]),
                    format_us(op.span_ns), format_us(op.busy_ns),
                    _id_list([t.num_elements for t in op.inputs]),
                    _id_list([t.num_elements for t in op.outputs]), 0, op.stage, op.tpflag))
    write_atomic(trace_path, f.getvalue())
    return tensor_path, trace_path
