"""The report as JSON, written at the speed of json's C encoder (system/report.py builds it): only a
run with --report or --plot imports json for it."""
from __future__ import annotations

import json
import os
from itertools import chain, repeat

from network.files import atomic_open, exists, is_file, path_str

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any


def write_json(path: str | os.PathLike, data: Any, indent: int | None = 1) -> None:
    """``write_json_atomic``, except onto something that is not a regular file (``/dev/stdout``, a
    pipe), which cannot be renamed over and is written directly."""
    p = path_str(path)
    if not exists(p) or is_file(p):
        write_json_atomic(p, data, indent)
        return
    with open(p, "w") as f:
        dump_json(data, f, indent=indent)
        f.write("\n")


def write_json_atomic(path: str | os.PathLike, data: Any, indent: int | None = 1) -> None:
    """Write JSON atomically (temporary file, then rename): an interrupted run never leaves half
    a report. ``indent=None`` writes one line with json's default separators (``"rank": 0``).
    With an indent, a long list of records (the collectives: one per rank and collective) is
    written one record per line, which json's C encoder writes; its indenting encoder is pure
    Python, and took 0.6 s on the 11 MB report of a 128-rank ResNet-50 layout."""
    with atomic_open(path, "w") as f:
        dump_json(data, f, indent=indent)
        f.write("\n")


def dump_json(data: Any, fp: Any, indent: int | None = None) -> None:
    """``json.dump`` at the speed of json's C encoder (json.dump itself never uses it). With an
    indent, each list of at least 256 objects (the collectives: one per rank and collective) has
    one object per line; only the white space differs from ``json.dump(data, fp, indent=indent)``."""
    if indent is None:
        fp.write(json.dumps(data))
        return
    _Indented(fp, indent).dump(data)


_MIN_ROWS = 256  # a shorter list of records keeps the indented layout
_SCALARS = {str, int, float, bool, type(None)}  # exact types: a subclass (a namedtuple) takes the long way
_BLOCK = 1 << 16  # characters written at a time: the whole text would double the peak memory
_ROWS_AT_ONCE = 512  # records laid out by one call


class _Indented:
    """json's indented layout, written with its C encoder (json's indenting encoder is pure
    Python, a generator per container and a yield per value): a container whose values are all
    scalars is one C call whose item separator carries the line break and indent, a list of
    records one line per record; the other containers are laid out here."""

    def __init__(self, fp: Any, indent: int) -> None:
        self.fp = fp
        self.indent = indent
        self.parts: list[str] = []
        self.size = 0
        self.encoders: dict[str, Any] = {}
        self.compact = self.encoder(", ")  # json.dumps's own separators: a record's line

    def encoder(self, item_separator: str) -> Any:
        e = self.encoders.get(item_separator)
        if e is None:
            e = self.encoders[item_separator] = _c_make_encoder(
                {}, _default, json.encoder.encode_basestring_ascii, None, ": ", item_separator, False, False, True)
        return e

    def dump(self, data: Any) -> None:
        self.value(data, 0)
        self.fp.write("".join(self.parts))

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > _BLOCK:
            self.fp.write("".join(self.parts))
            self.parts.clear()
            self.size = 0

    def value(self, obj: Any, level: int) -> None:
        if isinstance(obj, dict):
            if not obj:
                self.put("{}")
            elif set(map(type, obj.values())) <= _SCALARS:
                self.flat(obj, level, "{", "}")
            else:
                self.nested_dict(obj, level)
        elif isinstance(obj, (list, tuple)):
            if not obj:
                self.put("[]")
            elif len(obj) >= _MIN_ROWS and all(map(isinstance, obj, repeat(dict))):
                self.rows(obj, level)
            elif set(map(type, obj)) <= _SCALARS:
                self.flat(obj, level, "[", "]")
            elif not self.indented_table(obj, level):
                self.nested_list(obj, level)
        else:
            self.put("".join(self.compact(obj, 0)))

    def flat(self, obj: Any, level: int, opening: str, closing: str) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        text = "".join(self.encoder("," + inner)(obj, 0))
        self.put(opening + inner + text[1:-1] + "\n" + " " * (self.indent * level) + closing)

    def nested_dict(self, obj: dict, level: int) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        sep = "{" + inner
        for k, v in obj.items():
            self.put(sep + self.key(k) + ": ")
            self.value(v, level + 1)
            sep = "," + inner
        self.put("\n" + " " * (self.indent * level) + "}")

    def nested_list(self, obj: Any, level: int) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        sep = "[" + inner
        for v in obj:
            self.put(sep)
            self.value(v, level + 1)
            sep = "," + inner
        self.put("\n" + " " * (self.indent * level) + "]")

    def key(self, k: Any) -> str:
        if isinstance(k, str):
            return json.encoder.encode_basestring_ascii(k)
        text = "".join(self.compact({k: None}, 0))  # json's spelling of a number, true, null as a key
        return text[1:-len(": null}")]

    def encoded(self, column: Any, kinds: set[type]) -> list[str]:
        """The values' JSON, by one call: a NUL between them, which json writes in a string as
        \\u0000. A column of floats (the bandwidths) has each distinct value encoded once: repr
        is slow, and ranks that ran a collective alike repeat its figures. Not where a zero is
        (0.0 == -0.0), nor where other kinds could compare equal (1 == 1.0 == True)."""
        values = dict.fromkeys(column) if kinds <= {float, type(None)} else None
        if values is None or 2 * len(values) > len(column) or 0.0 in values:
            return "".join(self.encoder("\0")(column, 0))[1:-1].split("\0")
        text = dict(zip(values, "".join(self.encoder("\0")(list(values), 0))[1:-1].split("\0")))
        return list(map(text.__getitem__, column))

    def indented_table(self, records: Any, level: int) -> bool:
        """A short list of records of one shape (the ranks), each laid out indented, by one
        %-format; False, having written nothing, for another list."""
        outer, inner, deeper = ("\n" + " " * (self.indent * (level + i)) for i in range(3))
        text = self.table(records, "," + inner, "{" + deeper, "," + deeper, inner + "}")
        if text is None:
            return False
        self.put("[" + inner + text + outer + "]")
        return True

    def rows(self, records: Any, level: int) -> None:
        inner = "\n" + " " * (self.indent * (level + 1))
        compact, sep = self.compact, "," + inner
        self.put("[" + inner)
        for i in range(0, len(records), _ROWS_AT_ONCE):
            block = records[i:i + _ROWS_AT_ONCE]
            text = self.table(block, sep, "{", ", ", "}")
            if text is None:
                text = sep.join(["".join(compact(r, 0)) for r in block])
            self.put(sep + text if i else text)
        self.put("\n" + " " * (self.indent * level) + "]")

    def table(self, records: Any, sep: str, opening: str, item_sep: str, closing: str) -> str | None:
        """Records of one shape (plain dicts, the same keys in the same order, scalar values),
        ``sep``-joined, as one %-format of a row template (``opening``, the items ``item_sep``-
        joined, ``closing``): integers by %d, each other column encoded by one call, none of the
        keys encoded again (as a C encoder call per record does); None for records of another shape."""
        if set(map(type, records)) != {dict}:
            return None
        keys = list(records[0])
        if not keys or set(map(type, keys)) != {str}:  # 1 == 1.0 == True: equal keys, other spellings
            return None
        # all the keys in a row are the first record's, repeated: then each record has n of them in
        # that order (distinct keys: none has more, so none fewer), and column j of the values in a
        # row is every n-th from j, read and replaced in place rather than transposed and back
        if list(chain.from_iterable(records)) != keys * len(records):
            return None
        n = len(keys)
        values = list(chain.from_iterable(map(dict.values, records)))
        formats = []
        for j in range(n):
            column = values[j::n]
            kinds = set(map(type, column))
            if kinds == {int}:
                formats.append("%d")
            elif kinds == {str}:
                formats.append("%s")
                values[j::n] = map(json.encoder.encode_basestring_ascii, column)
            elif kinds <= _SCALARS:
                formats.append("%s")
                values[j::n] = self.encoded(column, kinds)
            else:
                return None
        row = opening + item_sep.join(self.key(k).replace("%", "%%") + ": " + f for k, f in zip(keys, formats)) + closing
        return sep.join([row] * len(records)) % tuple(values)


def _default(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def _python_encoder(markers: Any, default: Any, encoder: Any, indent: Any, key_separator: str,
                    item_separator: str, *flags: Any) -> Any:
    """An interpreter without json's C module: the same text, from json's Python encoder."""
    e = json.JSONEncoder(separators=(item_separator, key_separator), default=default)
    return lambda o, level: (e.encode(o),)


_c_make_encoder = json.encoder.c_make_encoder or _python_encoder
