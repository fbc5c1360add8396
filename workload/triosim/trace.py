"""A TrioSim trace: ``tensor.csv`` + ``trace.csv`` as TrioSim's tracer writes them, read and checked.

The tracer's quirks are accepted (docs/formats.md §D.1): shapes quoted only when they hold a comma
(``"[128, 3, 224, 224]"``, bare ``[64]``, ``[]``), id and size lists separated by ``; ``, types such
as ``bias=None``, one tensor row per (operator, occurrence) so tensor ids repeat, gaps in
OperatorID, no trailing newline. Everything else is checked, and an error names the file, the line
and the column. Times stay exact (``Fraction`` microseconds) so later scaling never rounds.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from workload.triosim.errors import TrioSimTraceError
from workload.triosim.folder import is_trace_dir  # noqa: F401 (its old home)

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Iterator

TENSOR_COLUMNS = (
    "Index", "TensorID", "TensorShape", "TensorNumElement", "TensorEachByte",
    "TensorType", "TensorStorgeid", "gpuid",
)
TRACE_COLUMNS = (
    "OperatorID", "OperatorName", "Operator_input", "Operator_output", "Operator_cudatime",
    "Operator_cudatimenooverlap", "InputSize", "OutputSize", "gpuid", "stage", "tpflag",
)
STAGES = ("forward", "backward", "optimizer")

# Bounded: a 5,000-digit integer makes int() raise, and 1e999999999 makes Fraction() run for hours.
_INT = re.compile(r"[0-9]{1,20}")
_NUMBER = re.compile(r"\+?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,2})?")


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor id of ``tensor.csv``; sizes are the unscaled trace values."""

    id: int
    shape: tuple[int, ...]
    num_elements: int
    element_bytes: int
    types: frozenset[str]  #: every TensorType seen for this id (input, weight, bias=None ...)
    storage_id: int
    line: int  #: first line of the id in tensor.csv

    @property
    def bytes(self) -> int:
        return self.num_elements * self.element_bytes


@dataclass(frozen=True, slots=True)
class Operator:
    """One row of ``trace.csv`` (TrioSim: Layer). Times in microseconds, exact."""

    id: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    cuda_time_us: Fraction
    time_us: Fraction  #: Operator_cudatimenooverlap, the time TrioSim replays
    input_sizes: tuple[int, ...]
    output_sizes: tuple[int, ...]
    stage: str
    tpflag: int
    line: int

    @property
    def tensor_ids(self) -> tuple[int, ...]:
        return self.inputs + self.outputs


@dataclass(frozen=True)
class Trace:
    """A whole trace: tensors by id, operators in replay (file) order."""

    directory: Path
    tensors: dict[int, Tensor]
    operators: tuple[Operator, ...]

    @property
    def tensor_path(self) -> Path:
        return self.directory / "tensor.csv"

    @property
    def trace_path(self) -> Path:
        return self.directory / "trace.csv"

    def stage_ops(self, stage: str) -> list[Operator]:
        return [op for op in self.operators if op.stage == stage]

    def total_time_us(self) -> Fraction:
        return sum((op.time_us for op in self.operators), Fraction(0))


def load_trace(trace_dir: str | Path) -> Trace:
    """Read and validate ``tensor.csv`` and ``trace.csv`` in ``trace_dir``."""
    d = Path(trace_dir)
    if not d.is_dir():
        raise TrioSimTraceError(d, "", "not a folder; expected a TrioSim trace folder holding tensor.csv and trace.csv")
    tensors = _read_tensors(d / "tensor.csv")
    operators = _read_operators(d / "trace.csv", tensors)
    return Trace(d, tensors, operators)


# ---------------------------------------------------------------------------------------- rows


class _Row:
    """One CSV record with the column lookup and the checks every field needs."""

    __slots__ = ("path", "line", "_fields", "_index")

    def __init__(self, path: Path, line: int, fields: list[str], index: dict[str, int]) -> None:
        self.path, self.line, self._fields, self._index = path, line, fields, index

    def error(self, column: str, problem: str) -> TrioSimTraceError:
        return TrioSimTraceError(self.path, f"line {self.line}, column {column!r}", problem)

    def text(self, column: str) -> str:
        return self._fields[self._index[column]].strip()

    def _shown(self, s: str) -> str:
        return repr(s) if len(s) <= 40 else repr(s[:37] + "...")

    def int(self, column: str) -> int:
        s = self.text(column)
        if not _INT.fullmatch(s):
            raise self.error(column, f"expected a non-negative integer, found {self._shown(s)}")
        return int(s)

    def number(self, column: str) -> Fraction:
        s = self.text(column)
        if not _NUMBER.fullmatch(s):
            what = f"{self._shown(s)}, a negative number" if s.startswith("-") else self._shown(s)
            raise self.error(column, f"expected a non-negative number of microseconds, found {what}")
        return Fraction(s.lstrip("+"))

    def int_list(self, column: str, sep: str) -> tuple[int, ...]:
        s = self.text(column)
        if not (s.startswith("[") and s.endswith("]")):
            raise self.error(column, f"expected a list like [1{sep} 2], found {s!r}")
        inner = s[1:-1].strip()
        if not inner:
            return ()
        out = []
        for token in inner.split(sep):
            t = token.strip().strip("'")
            if not _INT.fullmatch(t):
                raise self.error(column, f"list item {token.strip()!r} is not a non-negative integer "
                                         f"(items are separated by {sep!r})")
            out.append(int(t))
        return tuple(out)


def _records(path: Path, columns: tuple[str, ...]) -> Iterator[_Row]:
    """Yield the data rows of a CSV after checking that every expected column is in its header."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise TrioSimTraceError(
            path, "", "file not found; a TrioSim trace folder holds tensor.csv and trace.csv") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TrioSimTraceError(path, "", f"cannot read as UTF-8 text ({e})") from None
    if not text.strip():
        raise TrioSimTraceError(path, "line 1", f"file is empty; expected the header {','.join(columns)}")
    reader = csv.reader(text.splitlines(), skipinitialspace=True)
    try:
        header = [h.strip() for h in next(reader)]
        index = {name: i for i, name in enumerate(header)}
        for name in columns:
            if name not in index:
                raise TrioSimTraceError(
                    path, f"line 1, column {name!r}",
                    f"missing column; expected the header {','.join(columns)}",
                )
        for fields in reader:
            if not fields or all(not f.strip() for f in fields):
                continue  # blank line (e.g. a trailing newline)
            if len(fields) != len(header):
                raise TrioSimTraceError(
                    path, f"line {reader.line_num}",
                    f"expected {len(header)} fields as in the header, found {len(fields)} "
                    "(an unquoted comma in a shape or a name?)",
                )
            yield _Row(path, reader.line_num, fields, index)
    except csv.Error as e:
        raise TrioSimTraceError(path, f"line {reader.line_num}", f"not valid CSV ({e})") from None


# ------------------------------------------------------------------------------------- tensors


def _read_tensors(path: Path) -> dict[int, Tensor]:
    seen: dict[int, Tensor] = {}
    types: dict[int, set[str]] = {}
    for row in _records(path, TENSOR_COLUMNS):
        row.int("Index")
        tid = row.int("TensorID")
        shape = row.int_list("TensorShape", ",")
        elements, each = row.int("TensorNumElement"), row.int("TensorEachByte")
        ttype = row.text("TensorType")
        if not ttype:
            raise row.error("TensorType", "is empty; expected an argument name such as input, weight or bias")
        storage = row.int("TensorStorgeid")
        row.int("gpuid")
        first = seen.get(tid)
        if first is None:
            seen[tid] = Tensor(tid, shape, elements, each, frozenset(), storage, row.line)
            types[tid] = {ttype}
            continue
        if (first.num_elements, first.element_bytes) != (elements, each):
            raise row.error(
                "TensorNumElement",
                f"tensor {tid} has {elements} elements of {each} bytes here but "
                f"{first.num_elements} of {first.element_bytes} on line {first.line}",
            )
        types[tid].add(ttype)
    if not seen:
        raise TrioSimTraceError(path, "line 2", "no tensor rows after the header")
    return {tid: Tensor(t.id, t.shape, t.num_elements, t.element_bytes, frozenset(types[tid]), t.storage_id, t.line)
            for tid, t in seen.items()}


# ----------------------------------------------------------------------------------- operators


def _read_operators(path: Path, tensors: dict[int, Tensor]) -> tuple[Operator, ...]:
    ops: list[Operator] = []
    lines: dict[int, int] = {}
    last_stage = 0
    for row in _records(path, TRACE_COLUMNS):
        op = _operator(row, tensors)
        if op.id in lines:
            raise row.error("OperatorID", f"operator id {op.id} already used on line {lines[op.id]}")
        lines[op.id] = row.line
        rank = STAGES.index(op.stage)
        if rank < last_stage:
            raise row.error(
                "stage", f"{op.stage!r} after a {STAGES[last_stage]!r} operator; "
                "TrioSim traces list forward, then backward, then optimizer operators",
            )
        last_stage = rank
        ops.append(op)
    if not ops:
        raise TrioSimTraceError(path, "line 2", "no operator rows after the header")
    return tuple(ops)


def _operator(row: _Row, tensors: dict[int, Tensor]) -> Operator:
    oid = row.int("OperatorID")
    name = row.text("OperatorName")
    if not name:
        raise row.error("OperatorName", "is empty")
    ids = {}
    for ids_col, size_col in (("Operator_input", "InputSize"), ("Operator_output", "OutputSize")):
        id_list, sizes = row.int_list(ids_col, ";"), row.int_list(size_col, ";")
        for tid in id_list:
            if tid not in tensors:
                raise row.error(ids_col, f"tensor id {tid} is not in tensor.csv")
        if len(sizes) != len(id_list):
            raise row.error(size_col, f"has {len(sizes)} sizes for the {len(id_list)} tensor ids of {ids_col}")
        ids[ids_col], ids[size_col] = id_list, sizes
    cuda_time, time = row.number("Operator_cudatime"), row.number("Operator_cudatimenooverlap")
    row.int("gpuid")
    stage = row.text("stage")
    if stage not in STAGES:
        raise row.error("stage", f"{stage!r} is not a stage; expected forward, backward or optimizer")
    tpflag = row.text("tpflag")
    if tpflag not in ("0", "1"):
        raise row.error("tpflag", f"expected 0 or 1, found {tpflag!r}")
    return Operator(
        oid, name, ids["Operator_input"], ids["Operator_output"], cuda_time, time,
        ids["InputSize"], ids["OutputSize"], stage, int(tpflag), row.line,
    )
