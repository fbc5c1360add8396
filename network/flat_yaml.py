"""A reader for the flat YAML that network and system files are written in, without PyYAML.

Importing PyYAML costs a plain run about a fifth of its start-up, and ASTRA-sim's network files
are one flat mapping of scalars and one-line lists::

    topology: [ Ring, Switch ]   # comment
    npus_count: [ 8, 4 ]
    bandwidth: [ 50.0, 25.0 ]

A list may also be written a scalar per line, as ``yaml.safe_dump`` writes it (all its items at one
indentation)::

    latency:
    - 500.0

``read_flat_yaml`` reads exactly that shape, or a JSON object (YAML to PyYAML too), and returns
``None`` for anything else, so the caller hands the text to PyYAML; whatever it does accept, it reads as ``yaml.safe_load`` does (a test
compares the two on generated documents). Safety comes from declining: a scalar is accepted only
in a form whose YAML 1.1 type has no doubt (decimal integers, floats with a dot, names that are
not booleans or null, quotes without escapes), and the text must be printable ASCII.
"""
from __future__ import annotations

import re
from typing import Any

_KEY = r"[A-Za-z_][A-Za-z0-9_-]*"
_INT = r"[-+]?(?:0|[1-9][0-9]{0,30})"  # no leading zero: 010 is octal to YAML 1.1
# PyYAML's float needs a dot; its exponent needs a sign (1e5 and 1.0e5 are strings to it)
_FLOAT = r"[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?"
_WORD = r"[A-Za-z_][A-Za-z0-9_.-]*"
_QUOTED = r"'[ !#-&(-~]*'|\"[ !#-\[\]-~]*\""  # no quote of either kind inside, no backslash in "..."
_SCALAR = rf"(?:{_FLOAT}|{_INT}|{_WORD}|{_QUOTED})"
# outside a list a plain scalar may hold spaces ("description: fitted to x.txt"); no ':' or '#'
_TEXT = r"[A-Za-z_][A-Za-z0-9_.,/()+=%-]*(?: +[A-Za-z0-9_.,/()+=%-]+)+"
_END = r"[ ]*(?:[ ]#.*)?"  # a comment needs a space before its '#'
_LINE = re.compile(rf"(?P<key>{_KEY}):[ ]+(?:(?P<scalar>{_SCALAR}|{_TEXT})|\[[ ]*(?P<items>[^\]]*)\]){_END}")
_ITEM = re.compile(rf"({_SCALAR})[ ]*(,[ ]*)?")
_BLANK = re.compile(r"[ ]*(?:#.*)?")
_OPEN = re.compile(rf"(?P<key>{_KEY}):{_END}")  # a key whose list follows, an item per line
_DASH = re.compile(rf"(?P<indent>[ ]*)-[ ]+(?P<scalar>{_SCALAR}){_END}")
_NOT_ASCII_LINES = re.compile(r"[^\n -~]")  # tabs, CR, control and non-ASCII characters
# YAML 1.1 reads these words as booleans or null (PyYAML's resolver), in any case we decline them
_NOT_STRINGS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})
_DECLINED = object()


def read_flat_yaml(text: str) -> dict[str, Any] | None:
    """The mapping ``yaml.safe_load(text)`` gives, or None when the text is not flat YAML."""
    if _NOT_ASCII_LINES.search(text):
        return None
    if text.lstrip(" \n").startswith("{"):
        return _json(text)
    out: dict[str, Any] = {}
    block: list[Any] | None = None  # the list of the last "key:" line, while its items are read
    indent: str | None = None
    for line in text.split("\n"):
        m = _LINE.fullmatch(line) or _OPEN.fullmatch(line)
        if m is None:
            if _BLANK.fullmatch(line):
                continue
            d = _DASH.fullmatch(line)
            if d is None or block is None or (indent is not None and d["indent"] != indent):
                return None  # not flat, an item with no "key:" above it, or a ragged list
            indent = d["indent"]
            value = _scalar(d["scalar"])
            if value is _DECLINED:
                return None
            block.append(value)
            continue
        if block is not None and not block:
            return None  # "key:" and no item: null to PyYAML
        key = m["key"]
        if key in out or key.lower() in _NOT_STRINGS:
            return None  # a repeated key, or one PyYAML would read as True/False/None
        if m.re is _OPEN:
            block, indent = [], None
            out[key] = block
            continue
        block = None
        value = _scalar(m["scalar"]) if m["items"] is None else _items(m["items"])
        if value is _DECLINED:
            return None
        out[key] = value
    if block is not None and not block:
        return None
    return out or None  # an empty document is None to PyYAML: let it say so


def _items(text: str) -> Any:
    """The scalars of a one-line ``[a, b]``: a comma after each but the last."""
    out: list[Any] = []
    pos, n = 0, len(text.rstrip(" "))
    while pos < n:
        m = _ITEM.match(text, pos)
        if m is None or (m[2] is None) != (m.end() >= n):
            return _DECLINED  # not a scalar, a missing comma, or a trailing one
        v = _scalar(m[1])
        if v is _DECLINED:
            return _DECLINED
        out.append(v)
        pos = m.end()
    return out


_IS_INT = re.compile(_INT)
_IS_FLOAT = re.compile(_FLOAT)


def _scalar(s: str) -> Any:
    """One scalar that matched _SCALAR whole, typed as PyYAML's resolver types it."""
    if s[0] in "'\"":
        return s[1:-1]
    if _IS_INT.fullmatch(s):
        return int(s)
    if _IS_FLOAT.fullmatch(s):
        return float(s)
    return _DECLINED if s.lower() in _NOT_STRINGS else s  # a _WORD or a _TEXT


class _NotAsYaml(Exception):
    """A JSON value that PyYAML would read otherwise."""


def _json(text: str) -> dict[str, Any] | None:
    """A JSON object as PyYAML reads it: json.loads, declining where YAML 1.1 differs (a float
    whose exponent has no sign is a string to it, so is 1e+5; escapes; NaN; a key given twice)."""
    if "\\" in text:
        return None
    import json  # the system file's reader imports it anyway

    try:
        data = json.loads(text, parse_float=_json_float, parse_int=_json_int, parse_constant=_json_constant,
                          object_pairs_hook=_json_object)
    except (ValueError, _NotAsYaml):  # not JSON (PyYAML may still read it), or not read as PyYAML would
        return None
    return data if isinstance(data, dict) and data else None


def _json_float(s: str) -> float:
    if not _IS_FLOAT.fullmatch(s):
        raise _NotAsYaml
    return float(s)


def _json_int(s: str) -> int:
    if not _IS_INT.fullmatch(s):  # JSON's integers are YAML's, up to the 31 digits _INT allows
        raise _NotAsYaml
    return int(s)


def _json_constant(s: str) -> Any:
    raise _NotAsYaml  # NaN, Infinity: not JSON, and strings to PyYAML


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _NotAsYaml
    return out

