"""Opening the per-rank trace files: ``{rank}`` patterns, ``.json.gz``, and telling the two kinds apart.

A PyTorch execution trace (ExecutionTraceObserver) is an object with ``schema`` and ``nodes``; a
Kineto trace (``export_chrome_trace``) is an object with ``traceEvents``. Given the wrong one, we say
which it is and which flag takes it, instead of failing later on a missing key.
"""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from workload.pytorch.errors import PyTorchTraceError

HOST, DEVICE = "host", "device"
_FLAG = {HOST: "--host-trace", DEVICE: "--device-trace"}
_WHAT = {HOST: "a PyTorch execution trace (torch.profiler.ExecutionTraceObserver JSON)",
         DEVICE: "a Kineto trace (torch.profiler export_chrome_trace JSON)"}


def rank_paths(pattern: str, ranks: int, kind: str) -> list[Path]:
    """The file of each rank: ``{rank}`` replaced; a missing ``x.json`` is also looked for as ``x.json.gz``."""
    if ranks < 1:
        raise PyTorchTraceError(None, "--ranks", f"expected an integer from 1, got {ranks}")
    if "{rank}" not in pattern and ranks > 1:
        raise PyTorchTraceError(pattern, _FLAG[kind], f"--ranks {ranks} needs one file per rank: put "
                                "'{rank}' in the path, e.g. 'DIR/" + kind + ".{rank}.json'")
    out = []
    for r in range(ranks):
        p = Path(pattern.replace("{rank}", str(r)))
        if not p.exists() and Path(f"{p}.gz").exists():
            p = Path(f"{p}.gz")
        if not p.is_file():
            present = sorted(q.name for q in p.parent.glob(Path(pattern).name.replace("{rank}", "*")))[:8] \
                if p.parent.is_dir() else []
            raise PyTorchTraceError(p, _FLAG[kind], f"rank {r}'s {kind} trace is missing (--ranks {ranks} "
                                    f"expects one file for each rank 0..{ranks - 1}); found: "
                                    f"{', '.join(present) or 'none'}. Pass the number of ranks that were "
                                    "traced, or record the missing rank")
        out.append(p)
    return out


def load_json(path: Path, kind: str) -> dict:
    """Read a (possibly gzipped) trace and check it is of the kind its flag says."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        doc = json.loads(raw.decode("utf-8"), parse_float=Decimal)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise PyTorchTraceError(path, "", f"cannot read the file ({e})") from None
    except UnicodeDecodeError as e:
        raise PyTorchTraceError(path, "", f"not UTF-8 JSON ({e})") from None
    except json.JSONDecodeError as e:
        raise PyTorchTraceError(path, f"line {e.lineno}, column {e.colno}", f"not valid JSON ({e.msg})") from None
    except (RecursionError, ValueError) as e:
        raise PyTorchTraceError(path, "", f"not a usable JSON document ({e})") from None
    found = _kind_of(doc)
    if found != kind:
        other = DEVICE if kind == HOST else HOST
        hint = (f"this is {_WHAT[found]}: give it as {_FLAG[found]}, and {_WHAT[kind]} as {_FLAG[kind]}"
                if found == other else f"expected {_WHAT[kind]}: an object with "
                + ("'schema' and 'nodes'" if kind == HOST else "'traceEvents'"))
        raise PyTorchTraceError(path, _FLAG[kind], hint)
    return doc


def _kind_of(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("nodes"), list) and "schema" in doc:
        return HOST
    if isinstance(doc.get("traceEvents"), list):
        return DEVICE
    return None
