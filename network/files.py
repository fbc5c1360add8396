"""Reading the small structured files every layer takes as input (YAML or JSON), and writing
output files atomically.

One place turns "file missing", "not UTF-8", "not valid YAML/JSON" into the caller's
InputError subclass with the file and the line, so every reader reports them the same way.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import IO, Any, Iterator

from network.errors import InputError
from network.flat_yaml import read_flat_yaml


def read_text(path: str | os.PathLike, error: type[InputError]) -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(p, "", "file not found") from None
    except IsADirectoryError:
        raise error(p, "", "is a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(p, "", f"cannot read as UTF-8 text ({e})") from None


def parse_json(text: str, path: str | os.PathLike, error: type[InputError], **json_options: Any) -> Any:
    try:
        return json.loads(text, **json_options)
    except json.JSONDecodeError as e:
        raise error(path, f"line {e.lineno}, column {e.colno}", f"not valid JSON ({e.msg})") from None
    except (RecursionError, ValueError) as e:  # [[[[... thousands deep, or a 5,000-digit integer
        raise error(path, "", f"not a usable JSON document ({_short(e)})") from None


_MAX_FLOW_DEPTH = 100


def parse_yaml(text: str, path: str | os.PathLike, error: type[InputError]) -> Any:
    # PyYAML takes seconds to reach its RecursionError on a few KB of [[[[...: refuse at once
    if text.count("[") + text.count("{") > _MAX_FLOW_DEPTH and _flow_depth(text) > _MAX_FLOW_DEPTH:
        raise error(path, "", f"not a usable YAML document (nested too deeply: more than {_MAX_FLOW_DEPTH} "
                              "levels of [ or {)")
    flat = read_flat_yaml(text)
    if flat is not None:  # the usual network file: PyYAML's import is a fifth of a small run's start-up
        return flat
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise error(path, where, f"not valid YAML ({getattr(e, 'problem', None) or e})") from None
    except (RecursionError, ValueError) as e:  # [[[[... thousands deep, or a 5,000-digit integer
        raise error(path, "", f"not a usable YAML document ({_short(e)})") from None


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow collections, outside quotes and comments."""
    depth = deepest = 0
    quote = None
    comment = False
    for ch in text:
        if comment:
            comment = ch != "\n"
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            comment = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _short(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "nested too deeply"
    return str(e).split(";")[0]


def load_structured(path: str | os.PathLike, error: type[InputError], fmt: str = "auto") -> Any:
    """Parse a file as JSON (``.json``) or YAML (anything else), or as ``fmt`` says."""
    p = Path(path)
    text = read_text(p, error)
    if fmt == "json" or (fmt == "auto" and p.suffix.lower() == ".json"):
        return parse_json(text, p, error)
    return parse_yaml(text, p, error)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing and rename it over ``path`` when the
    block ends without error: an interrupted run leaves the old file or none, never half a
    file that looks complete."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # only writers need it, not every run's start-up

    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with (os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")) as f:
            yield f
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600; an output is an ordinary file
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see atomic_open)."""
    with atomic_open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)
