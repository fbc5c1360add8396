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

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
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
_TEXT_MARKS = "_.,/()+=%-"  # what _TEXT allows besides letters and digits
_END = r"[ ]*(?:[ ]#.*)?"  # a comment needs a space before its '#'
# YAML 1.1 reads these words as booleans or null (PyYAML's resolver), in any case we decline them
_NOT_STRINGS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})
_DECLINED = object()
_patterns: dict[str, re.Pattern[str]] = {}


def _compiled() -> dict[str, re.Pattern[str]]:
    """The full grammar's patterns, compiled on first use: compiling them is ~3 ms, a tenth of a
    plain run's imports, and the common files (``key: [a, b]`` or ``key: scalar`` a line, or lists an
    item per line as ``yaml.safe_dump`` writes them) are read by _read_simple without them."""
    if not _patterns:
        import re  # only here: a run that reads the common shapes does not import it

        _patterns.update(
            line=re.compile(rf"(?P<key>{_KEY}):[ ]+(?:(?P<scalar>{_SCALAR}|{_TEXT})|\[[ ]*(?P<items>[^\]]*)\]){_END}"),
            item=re.compile(rf"({_SCALAR})[ ]*(,[ ]*)?"),
            blank=re.compile(r"[ ]*(?:#.*)?"),
            open=re.compile(rf"(?P<key>{_KEY}):{_END}"),  # a key whose list follows, an item per line
            dash=re.compile(rf"(?P<indent>[ ]*)-[ ]+(?P<scalar>{_SCALAR}){_END}"),
        )
    return _patterns


def read_flat_yaml(text: str) -> dict[str, Any] | None:
    """The mapping ``yaml.safe_load(text)`` gives, or None when the text is not flat YAML."""
    # printable ASCII lines only: no tabs, CR, control or non-ASCII characters
    if not text.isascii() or not text.replace("\n", "").isprintable():
        return None
    if text.lstrip(" \n").startswith("{"):
        return _json(text)
    simple = _read_simple(text)
    return simple if simple is not None else _read_full(text)


def _read_simple(text: str) -> dict[str, Any] | None:
    """The common shapes without regular expressions: each line blank, a comment, ``key: scalar``,
    ``key: words with spaces``, ``key: [a, b]`` (with an optional comment), or ``key:`` and its
    list an item per line (``- scalar``, all at one indentation, as ``yaml.safe_dump`` writes it),
    the scalars numbers or words. None where any line is anything else: _read_full then reads (or
    declines) the whole text. What this accepts, _read_full reads the same (a test holds the two
    together)."""
    out: dict[str, Any] = {}
    block: list[Any] | None = None  # the list of the last "key:" line, while its items are read
    indent = -1  # the items' indentation, once the first is read
    for line in text.split("\n"):
        at = line.find("#")
        if at >= 0:
            if not line[:at].strip(" "):
                continue  # a comment line
            if line[at - 1] != " ":
                return None  # '#' without a space before it is not a comment
            line = line[:at]
        line = line.rstrip(" ")
        if not line:
            continue
        item = line.lstrip(" ")
        if item[:2] == "- ":  # an item of the open list
            if block is None or (indent >= 0 and len(line) - len(item) != indent):
                return None  # an item with no "key:" above it, or a ragged list
            indent = len(line) - len(item)
            v = _simple_scalar(item[2:].lstrip(" "))
            if v is _DECLINED:
                return None
            block.append(v)
            continue
        if block is not None and not block:
            return None  # "key:" and no item: null to PyYAML
        block = None
        if line[-1] == ":":
            key = line[:-1]
            if not _new_key(key, out):
                return None
            block, indent = [], -1
            out[key] = block
            continue
        key, sep, value = line.partition(": ")
        if not sep or not _new_key(key, out):
            return None
        value = value.lstrip(" ")
        if value.startswith("["):
            if not value.endswith("]") or "]" in value[:-1]:
                return None
            inner = value[1:-1].strip(" ")
            items: list[Any] = []
            for part in inner.split(",") if inner else ():
                v = _simple_scalar(part.strip(" "))
                if v is _DECLINED:
                    return None
                items.append(v)
            out[key] = items
        elif " " in value:  # words with spaces between: _TEXT
            words = [w for w in value.split(" ") if w]
            if not _is_name(words[0], _TEXT_MARKS) or not all(_is_name("a" + w, _TEXT_MARKS) for w in words[1:]):
                return None
            out[key] = value
        else:
            v = _simple_scalar(value)
            if v is _DECLINED:
                return None
            out[key] = v
    if block is not None and not block:
        return None
    return out or None


def _new_key(key: str, out: dict[str, Any]) -> bool:
    """A _KEY not read yet that PyYAML would not read as True/False/None."""
    return _is_name(key, "_-") and key not in out and key.lower() not in _NOT_STRINGS


def _simple_scalar(s: str) -> Any:
    """A number or a word as _scalar types it; _DECLINED for anything else (quotes, spaces)."""
    if _is_int(s):
        return int(s)
    if _is_float(s):
        return float(s)
    if _is_name(s, "_.-") and s.lower() not in _NOT_STRINGS:
        return s
    return _DECLINED


def _read_full(text: str) -> dict[str, Any] | None:
    p = _compiled()
    line_re, open_re, blank_re, dash_re = p["line"], p["open"], p["blank"], p["dash"]
    out: dict[str, Any] = {}
    block: list[Any] | None = None  # the list of the last "key:" line, while its items are read
    indent: str | None = None
    for line in text.split("\n"):
        m = line_re.fullmatch(line) or open_re.fullmatch(line)
        if m is None:
            if blank_re.fullmatch(line):
                continue
            d = dash_re.fullmatch(line)
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
        if m.re is open_re:
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
    item_re = _compiled()["item"]
    pos, n = 0, len(text.rstrip(" "))
    while pos < n:
        m = item_re.match(text, pos)
        if m is None or (m[2] is None) != (m.end() >= n):
            return _DECLINED  # not a scalar, a missing comma, or a trailing one
        v = _scalar(m[1])
        if v is _DECLINED:
            return _DECLINED
        out.append(v)
        pos = m.end()
    return out


def _is_int(s: str) -> bool:
    """s matches _INT whole."""
    body = s[1:] if s[:1] in ("-", "+") else s
    return body.isascii() and body.isdigit() and (body == "0" or (body[0] != "0" and len(body) <= 31))


def _is_float(s: str) -> bool:
    """s matches _FLOAT whole."""
    body = s[1:] if s[:1] in ("-", "+") else s
    e = max(body.find("e"), body.find("E"))
    if e >= 0:
        exp = body[e + 1:]
        if exp[:1] not in ("-", "+") or not _digits(exp[1:]):
            return False
        body = body[:e]
    whole, dot, frac = body.partition(".")
    return bool(dot) and _digits(whole) and (not frac or _digits(frac))


def _digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _is_name(s: str, extra: str) -> bool:
    """s is a letter or '_', then letters, digits and the characters of ``extra`` (_KEY: "_-",
    _WORD: "_.-")."""
    if not s or not s.isascii() or not (s[0].isalpha() or s[0] == "_"):
        return False
    for c in extra:
        s = s.replace(c, "")
    return not s or s.isalnum()


def _scalar(s: str) -> Any:
    """One scalar that matched _SCALAR whole, typed as PyYAML's resolver types it."""
    if s[0] in "'\"":
        return s[1:-1]
    if _is_int(s):
        return int(s)
    if _is_float(s):
        return float(s)
    return _DECLINED if s.lower() in _NOT_STRINGS else s  # a _WORD or a _TEXT


class _NotAsYaml(Exception):
    """A JSON value that PyYAML would read otherwise."""


def _json(text: str) -> dict[str, Any] | None:
    """A JSON object as PyYAML reads it: json.loads, declining where YAML 1.1 differs (a float
    whose exponent has no sign is a string to it, so is 1e+5; escapes; NaN; a key given twice)."""
    if "\\" in text:
        return None
    from network.files import loads_json  # files.py imports this module: not at the top

    try:
        data = loads_json(text, parse_float=_json_float, parse_int=_json_int, parse_constant=_json_constant,
                          object_pairs_hook=_json_object)
    except (ValueError, _NotAsYaml):  # not JSON (PyYAML may still read it), or not read as PyYAML would
        return None
    return data if isinstance(data, dict) and data else None


def _json_float(s: str) -> float:
    if not _is_float(s):
        raise _NotAsYaml
    return float(s)


def _json_int(s: str) -> int:
    if not _is_int(s):  # JSON's integers are YAML's, up to the 31 digits _INT allows
        raise _NotAsYaml
    return int(s)


def _json_constant(s: str) -> Any:
    raise _NotAsYaml  # NaN, Infinity: not JSON, and strings to PyYAML


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _NotAsYaml
    return out

