"""Reading the small structured files every layer takes as input (YAML or JSON), and writing
output files atomically.

One place turns "file missing", "not UTF-8", "not valid YAML/JSON" into the caller's
InputError subclass with the file and the line, so every reader reports them the same way.

A run names and tests its files with the path functions below, not pathlib: pathlib and what it
imports (urllib.parse, ipaddress, fnmatch, ntpath) cost every process ~4 ms of start-up and 0.6 MB
of peak RSS, and a 64-rank run is compared with a C++ simulator on both. They answer as pathlib
does (names normalised as str(Path(x)) writes them; a stat error other than "nothing there"
raised), so messages and reports, which show paths, read as before.
"""
from __future__ import annotations

import errno
import os
import stat

from network.errors import InputError
from network.flat_yaml import read_flat_yaml

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import IO, Any
    from pathlib import Path


def path_str(path: str | os.PathLike) -> str:
    """``str(Path(path))``: repeated slashes, "." parts and a trailing slash dropped, "" read as ".".
    Unlike os.path.normpath it keeps ".." ("a/../b" is not "b" where a is a symlink)."""
    s = os.fspath(path)
    root = "//" if s.startswith("//") and not s.startswith("///") else "/" if s.startswith("/") else ""
    return root + "/".join(part for part in s.split("/") if part not in ("", ".")) or "."


def path_join(folder: str | os.PathLike, name: str) -> str:
    """``str(Path(folder) / name)``."""
    return path_str(os.path.join(folder, name))


def path_parent(path: str) -> str:
    """``str(Path(path).parent)`` of a path_str."""
    return os.path.dirname(path) or "."


def path_suffix(path: str) -> str:
    """``Path(path).suffix`` of a path_str (os.path.splitext differs on "a." and "..json")."""
    name = os.path.basename(path)
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


# Path's exists, is_file and is_dir answer False only where nothing is there (or a symlink loops);
# os.path's also where the path cannot be looked at (a name too long, a folder we may not search),
# which Path raises and a run reports as such.
_NOTHING_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def _mode(path: str | os.PathLike) -> int | None:
    try:
        return os.stat(path_str(path)).st_mode
    except OSError as e:
        if e.errno not in _NOTHING_THERE:
            raise
    except ValueError:  # a name with a NUL character
        pass
    return None


def exists(path: str | os.PathLike) -> bool:
    """``Path(path).exists()``."""
    return _mode(path) is not None


def is_file(path: str | os.PathLike) -> bool:
    """``Path(path).is_file()``."""
    mode = _mode(path)
    return mode is not None and stat.S_ISREG(mode)


def is_dir(path: str | os.PathLike) -> bool:
    """``Path(path).is_dir()``."""
    mode = _mode(path)
    return mode is not None and stat.S_ISDIR(mode)


def make_folders(path: str | os.PathLike, parents: bool = True) -> None:
    """``Path(path).mkdir(parents=parents, exist_ok=True)``: an error names the folder that could
    not be made, where os.makedirs names the first missing one above it."""
    path = path_str(path)
    try:
        os.mkdir(path)
    except FileNotFoundError:
        if not parents or path_parent(path) == path:
            raise
        make_folders(path_parent(path))
        make_folders(path, parents=False)
    except OSError:
        if not is_dir(path):
            raise


def read_text(path: str | os.PathLike, error: type[InputError]) -> str:
    p = path_str(path)
    try:
        with open(p, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise error(p, "", "file not found") from None
    except IsADirectoryError:
        raise error(p, "", "is a folder, not a file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(p, "", f"cannot read as UTF-8 text ({e})") from None


_JSON_SPACE = " \t\n\r"
_JSON_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _JsonContext:
    """What json's C scanner reads of a JSONDecoder (json/decoder.py), with its defaults."""

    __slots__ = ("strict", "object_hook", "object_pairs_hook", "parse_float", "parse_int", "parse_constant", "memo")

    def __init__(self, object_hook: Any = None, parse_float: Any = None, parse_int: Any = None,
                 parse_constant: Any = None, strict: bool = True, object_pairs_hook: Any = None) -> None:
        self.strict = strict
        self.object_hook = object_hook
        self.object_pairs_hook = object_pairs_hook
        self.parse_float = parse_float or float
        self.parse_int = parse_int or int
        self.parse_constant = parse_constant or _JSON_CONSTANTS.__getitem__
        self.memo: dict = {}


def loads_json(text: str, **options: Any) -> Any:
    """``json.loads(text, **options)`` of a str, without importing json where the text is valid:
    json's package compiles its regular expressions when imported (1% of a 64-rank run), while
    the scanner that parses is C (``_json``). The same scanner as json.loads, given the same
    options; the same leading and trailing white space; on anything else (a BOM, extra data, an
    error) json.loads itself runs, and raises as it does."""
    try:
        from _json import make_scanner
    except ImportError:  # an interpreter without json's C module
        make_scanner = None
    if make_scanner is not None and not text.startswith("\ufeff"):
        start = len(text) - len(text.lstrip(_JSON_SPACE))
        try:
            value, end = make_scanner(_JsonContext(**options))(text, start)
        except Exception:  # noqa: BLE001 (json.loads below raises what it raises)
            pass
        else:
            if not text[end:].strip(_JSON_SPACE):
                return value
    import json

    return json.loads(text, **options)


def parse_json(text: str, path: str | os.PathLike, error: type[InputError], **json_options: Any) -> Any:
    try:
        return loads_json(text, **json_options)
    except (RecursionError, ValueError) as e:  # [[[[... thousands deep, or a 5,000-digit integer
        lineno = getattr(e, "lineno", None)  # a json.JSONDecodeError (json imported by then)
        if lineno is not None:
            raise error(path, f"line {lineno}, column {e.colno}", f"not valid JSON ({e.msg})") from None
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
    p = path_str(path)
    text = read_text(p, error)
    if fmt == "json" or (fmt == "auto" and path_suffix(p).lower() == ".json"):
        return parse_json(text, p, error)
    return parse_yaml(text, p, error)


class atomic_open:  # noqa: N801 -- used as the function it was (a class: no contextlib import at start-up)
    """``with atomic_open(path, mode) as f``: a temporary file beside ``path`` for writing, renamed
    over ``path`` when the block ends without error: an interrupted run leaves the old file or
    none, never half a file that looks complete."""

    def __init__(self, path: str | os.PathLike, mode: str = "wb") -> None:
        self._path = path_str(path)
        self._mode = mode

    def __enter__(self) -> IO:
        folder = path_parent(self._path)
        make_folders(folder)
        fd, self._tmp = _create_beside(folder, os.path.basename(self._path))
        try:
            self._file = os.fdopen(fd, self._mode) if "b" in self._mode else \
                os.fdopen(fd, self._mode, encoding="utf-8")
        except BaseException:
            try:
                os.close(fd)  # unless open() closed it already
            except OSError:
                pass
            _remove_quietly(self._tmp)
            raise
        return self._file

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        try:
            self._file.close()
            if kind is None:
                os.replace(self._tmp, self._path)
                return
        except BaseException:
            _remove_quietly(self._tmp)
            raise
        _remove_quietly(self._tmp)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _create_beside(folder: str, name: str) -> tuple[int, str]:
    """A new file ``.name.<pid>.<n>.tmp`` in ``folder``, created exclusively (never an existing
    file or link) with an output's mode, 0666 less the umask. (tempfile.mkstemp's import and
    random names cost a run more than its report's writing, and its file is 0600.)"""
    pid = os.getpid()
    for n in range(10_000):
        tmp = path_join(folder, f".{name}.{pid}.{n}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {name} in {folder}")


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see atomic_open)."""
    from pathlib import Path  # for its callers, the converters and tools: no run writes through here

    with atomic_open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)
