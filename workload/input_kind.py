"""Name the kind of a ``--workload`` input that is not a Chakra ET, and the command that converts it.

Users pass what they have: a PyTorch execution trace, a Kineto profiler trace, TrioSim's CSVs, or
a folder of them. Reading those as protobuf says "wire format corrupt", which helps no one; these
checks look at the file's name and first bytes only, so they cost nothing on the success path
(the loader asks only after a file failed to parse, or a folder held no ET files).
"""
from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

TRIOSIM_FILES = ("tensor.csv", "trace.csv")
_TRIOSIM_HEADERS = {"trace.csv": "OperatorID,OperatorName,", "tensor.csv": "Index,TensorID,"}
_HEAD_BYTES = 1 << 16  # Kineto and PyTorch ET JSON name their top-level keys within the first few KiB


def triosim_command(folder: Path | str) -> str:
    return (f"pass the folder as --workload with a layout whose dp × tp × pp is the network's NPUs "
            f"(e.g. --workload {folder} --dp N), or convert it once: python -m workload.convert triosim "
            f"--trace-dir {folder} --batch-size N --dp N -o OUT/PREFIX")


def pytorch_command(host: str, device: str) -> str:
    return (f"convert the pair (execution trace + Kineto trace of the same step) into Chakra ETs: "
            f"python -m workload.convert pytorch --host-trace {host} --device-trace {device} -o OUT/PREFIX")


def describe_file(path: str | os.PathLike) -> str | None:
    """What ``path`` is and how to convert it, when it is a kind we know; None otherwise."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
        if head.startswith(b"\x1f\x8b"):  # profilers often write trace.json.gz
            import gzip  # here: only a file that failed to load gets this far

            with gzip.open(path, "rb") as f:
                head = f.read(_HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    text = head.decode("utf-8", errors="replace")
    csv_kind = _triosim_csv_kind(path, text)
    if csv_kind is not None:
        other = "trace.csv" if csv_kind == "tensor.csv" else "tensor.csv"
        lacking = "" if (path.parent / other).is_file() else f" (its folder has no {other}: TrioSim writes both)"
        return f"this is TrioSim's {csv_kind}, not a Chakra ET{lacking}; {triosim_command(path.parent)}"
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    if '"traceEvents"' in text:
        return ("this is a Kineto (PyTorch profiler) trace in JSON, not a Chakra ET; "
                + pytorch_command("ET.json", str(path)))
    if '"nodes"' in text and ('"schema"' in text or '"ctrl_deps"' in text):
        return ("this is a PyTorch execution trace in JSON (ExecutionTraceObserver), not a Chakra ET; "
                + pytorch_command(str(path), "KINETO.json"))
    return ("this is a JSON document" + _top_keys(path, stripped) + ", not a Chakra ET (a binary protobuf file, "
            "PREFIX.<rank>.et); a PyTorch execution trace + Kineto trace converts with python -m "
            "workload.convert pytorch --host-trace ET.json --device-trace KINETO.json -o OUT/PREFIX, a TrioSim "
            "folder with python -m workload.convert triosim --trace-dir DIR ...")


def describe_folder(folder: str | os.PathLike) -> str | None:
    """A folder without ET files: is it (half of) a TrioSim trace, or a folder of traces to convert?"""
    folder = Path(folder)
    present = [n for n in TRIOSIM_FILES if (folder / n).is_file()]
    if len(present) == 1:
        missing = TRIOSIM_FILES[1 - TRIOSIM_FILES.index(present[0])]
        return (f"folder holds TrioSim's {present[0]} but no {missing}: a TrioSim trace folder needs both "
                f"tensor.csv and trace.csv (TrioSim's tracer writes them together)")
    found, host, device = [], "ET.json", "KINETO.json"
    for f in sorted(folder.glob("*.json"))[:20]:
        kind = describe_file(f)
        if kind is None or kind.startswith("this is a JSON document"):
            continue
        found.append(f"{f.name}: {kind.split(',', 1)[0].split(';', 1)[0].removeprefix('this is ')}")
        if kind.startswith("this is a Kineto"):
            device = str(f)
        else:
            host = str(f)
    if found:
        return ("folder holds no '<prefix>.<rank>.et' files but traces to convert (" + "; ".join(found[:4])
                + "); " + pytorch_command(host, device))
    return None


def _triosim_csv_kind(path: Path, text: str) -> str | None:
    first = text.split("\n", 1)[0].lstrip("\ufeff").replace(" ", "")
    for name, header in _TRIOSIM_HEADERS.items():
        if first.startswith(header):
            return name
    return path.name if path.name in TRIOSIM_FILES else None


def _top_keys(path: Path, stripped: str) -> str:
    """' with keys a, b, c' for a small JSON object, to help tell a config from a trace."""
    if not stripped.startswith("{") or path.suffix == ".gz":
        return ""
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.stat().st_size <= _HEAD_BYTES else None
    except (OSError, ValueError):
        return ""
    if not isinstance(data, dict) or not data:
        return ""
    keys = list(data)[:5]
    return " with keys " + ", ".join(repr(k) for k in keys) + (", ..." if len(data) > 5 else "")
