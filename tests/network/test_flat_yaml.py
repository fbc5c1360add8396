"""network/flat_yaml.py reads what it accepts exactly as ``yaml.safe_load`` does, and declines the rest.

Generated documents mix the flat shape with its near misses (YAML 1.1 booleans and nulls, octal,
exponents without a sign, tabs, nesting, comments without a space, quotes, keys given twice):
wherever the reader answers, the answer equals PyYAML's, value types and float signs included.
"""
from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import yaml

from network.flat_yaml import read_flat_yaml

ROOT = Path(__file__).resolve().parents[2]
_GOOD = ["Ring", "Switch", "FullyConnected", "congestion-aware", "a.b", "_x", "16", "0", "-0", "+7", "50.0",
         "-0.0", "1.", "1.0e+5", "2.5E-3", "'quoted'", "\"dq\"", "'a # b'", "fitted to x.txt", "y", "n"]
_NEAR_MISSES = ["010", "0x1F", "1_000", "1e5", "1.0e5", ".5", ".inf", "-.inf", ".nan", "yes", "No", "ON", "off",
                "true", "False", "null", "Null", "~", "'it''s'", "\"a\\tb\"", "1:30", "2001-12-14", "12abc", "x#y",
                "<<", "=", "!!str 5", "&a 1", "*a", "a: b", "99999999999999999999999999999999999999", "é", ""]
_KEYS = ["topology", "npus_count", "bandwidth", "latency", "backend", "topology-file", "description", "_k"]
_BAD_KEYS = ["on", "null", "Yes", "1", "a b", "topology"]


def _document(rng: random.Random) -> str:
    miss = rng.choice([0.0, 0.05, 0.3])  # how often each choice is a near miss

    def pick(good: list[str], bad: list[str]) -> str:
        return rng.choice(bad if rng.random() < miss else good)

    lines = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if r < 0.5:
            items = [pick(_GOOD[:-3], _NEAR_MISSES + ["fitted to x.txt", "a,b", "[1]"]) for _ in range(rng.randint(0, 3))]
            value = pick(["[ ", "["], ["[[", "{"]) + pick([", ", ",", " , "], [",, ", " ,,"]).join(items) + \
                pick([" ]", "]"], [", ]", "]]", "] x"])
        elif r < 0.7:  # a list an item per line, as yaml.safe_dump writes it
            indent = rng.choice(["", "  ", " "])
            items = [pick([indent], ["   ", "\t", indent + " "]) + pick(["- ", "-  "], ["-", "--", "- - "])
                     + pick(_GOOD[:-3], _NEAR_MISSES + ["fitted to x.txt", "[1]", "{a: 1}"])
                     + pick(["", "", " # c"], ["#c"]) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
            if items and rng.random() < 0.2:
                items.insert(rng.randrange(len(items) + 1), pick(["", "# between", "  # between"], ["  more", "x"]))
            value = "\n".join(["", *items])
        elif r < 0.95:
            value = pick(_GOOD, _NEAR_MISSES)
        else:
            value = rng.choice(["{a: 1}", "\n  nested: 1", "- 1", "|\n  text"])
        lines.append(pick(_KEYS, _BAD_KEYS) + ":" + pick([" ", "  "], ["", "\t"]) + value
                     + pick(["", "", "  # GB/s", " #"], ["# no space", "\t# tab"]))
        if rng.random() < 0.2:
            lines.append(pick(["", "# comment", "   ", "  # indented comment"], ["---", "\t", "..."]))
    return "\n".join(lines) + pick(["", "\n"], ["\r\n"])


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, dict):
        return isinstance(ours, dict) and list(ours) == list(theirs) and all(_same(ours[k], theirs[k]) for k in theirs)
    if isinstance(theirs, list):
        return isinstance(ours, list) and len(ours) == len(theirs) and all(map(_same, ours, theirs))
    if isinstance(theirs, float):
        return type(ours) is float and ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs)
    return type(ours) is type(theirs) and ours == theirs


def _safe_load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return yaml.YAMLError


def test_generated_documents_read_as_pyyaml_reads_them_or_are_declined() -> None:
    rng = random.Random(13)
    read = blocks = 0
    for i in range(3000):
        text = _document(rng)
        ours = read_flat_yaml(text)
        if ours is not None:
            read += 1
            blocks += any(line.lstrip(" ").startswith("-") for line in text.split("\n"))
            theirs = _safe_load(text)
            assert _same(ours, theirs), f"document {i}: {text!r}: ours {ours!r}, PyYAML {theirs!r}"
    # the property is not vacuous: about 830 of the 3,000 are read, 250 of them with an item per line
    assert read > 500 and blocks > 100, (read, blocks)


def test_the_project_yaml_files_read_as_pyyaml_reads_them() -> None:
    files = [p for p in [*ROOT.glob("examples/**/*.yml"), *ROOT.glob("examples/**/*.yaml"),
                         *ROOT.glob("tests/**/*.yml"), *ROOT.glob("tests/**/*.yaml")] if p.is_file()]
    read = 0
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        ours = read_flat_yaml(text)
        if ours is not None:
            read += 1
            assert _same(ours, _safe_load(text)), p
    assert read >= 5, "the example networks are flat YAML: they should not need PyYAML"


def test_astra_sim_network_file_is_read_without_pyyaml() -> None:
    text = "topology: [ Ring, Switch ]\nnpus_count: [ 8, 4 ]  # NPUs\nbandwidth: [ 50.0, 25.0 ]  # GB/s\nlatency: [ 500.0, 500.0 ]\n"
    assert read_flat_yaml(text) == {"topology": ["Ring", "Switch"], "npus_count": [8, 4],
                                    "bandwidth": [50.0, 25.0], "latency": [500.0, 500.0]}


_JSON_NUMBERS = ["0", "-0", "16", "-7", "50.0", "-0.0", "1.5e+10", "2.5E-3", "1e5", "1.5e10", "1E+5", "0.1",
                 "123456789012345678901234567890123", "NaN", "Infinity"]
_JSON_STRINGS = ['"Ring"', '"x y"', '"a#b"', '"a: b"', '""', '"it\'s"', '"a\\/b"', '"tab\\tin"', '"\\u00e9"',
                 '"yes"', '"1"']


def _json_value(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.2:
        return "[" + rng.choice([",", ", ", " , "]).join(_json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    if depth < 2 and r < 0.3:
        return _json_object(rng, depth + 1)
    if r < 0.6:
        return rng.choice(_JSON_NUMBERS)
    if r < 0.9:
        return rng.choice(_JSON_STRINGS)
    return rng.choice(["true", "false", "null"])


def _json_object(rng: random.Random, depth: int = 0) -> str:
    keys = [rng.choice(['"topology"', '"npus_count"', '"bandwidth"', '"a b"', '"1"', '"on"']) for _ in range(rng.randint(1, 4))]
    sep, colon = rng.choice([(",", ":"), (", ", ": "), (",\n  ", " : ")])
    return "{" + sep.join(f"{k}{colon}{_json_value(rng, depth)}" for k in keys) + rng.choice(["}", " }", ",}"])


def test_generated_json_reads_as_pyyaml_reads_it_or_is_declined() -> None:
    """A network file written as JSON: PyYAML reads it as YAML 1.1 (1.5e10 is a string to it)."""
    rng = random.Random(5)
    read = 0
    for i in range(2000):
        text = rng.choice(["", "\n", "  "]) + _json_object(rng) + rng.choice(["", "\n"])
        ours = read_flat_yaml(text)
        if ours is not None:
            read += 1
            theirs = _safe_load(text)
            assert _same(ours, theirs), f"document {i}: {text!r}: ours {ours!r}, PyYAML {theirs!r}"
    assert read > 200


def test_a_list_an_item_per_line_is_read_only_at_one_indentation() -> None:
    """A deeper item continues the one above (``['1 - 2']`` to PyYAML), a shallower one is an error."""
    assert read_flat_yaml("latency:\n- 500.0\nbandwidth:\n  - 50.0\n  - 25.0  # GB/s\n") == \
        {"latency": [500.0], "bandwidth": [50.0, 25.0]}
    for text in ["a:\n  - 1\n   - 2\n", "a:\n- 1\n - 2\n", "a:\n - 1\n- 2\n", "a:\n  - 1\n - 2\n",
                 "a:\n - 1\n  - 2\n", "a:\n- 1\n  more\n", "a:\nb: [1]\n", "a: 1\n- 2\n", "- 1\n", "a:\n-1\n"]:
        ours = read_flat_yaml(text)
        assert ours is None or _same(ours, _safe_load(text)), (text, ours, _safe_load(text))
        assert ours is None, text  # each of these is declined: PyYAML reads them otherwise or not at all


def test_the_simple_reader_reads_what_it_accepts_as_the_full_grammar_does() -> None:
    """_read_simple (no regular expressions: the common files) answers only where _read_full
    answers the same; on the generated documents it answers often enough to matter."""
    from network.flat_yaml import _read_full, _read_simple

    rng = random.Random(29)
    simple = blocks = 0
    for i in range(3000):
        text = _document(rng)
        ours = _read_simple(text)
        if ours is not None:
            simple += 1
            blocks += any(line.lstrip(" ").startswith("- ") for line in text.split("\n"))
            full = _read_full(text)
            assert full is not None and _same(ours, full), f"document {i}: {text!r}: simple {ours!r}, full {full!r}"
        elif _read_full(text) is not None:
            assert "'" in text or '"' in text, f"document {i}: {text!r}: only the full grammar reads it"
    assert simple > 300 and blocks > 100, (simple, blocks)
    project = [p for p in [*ROOT.glob("examples/**/*.yml"), *ROOT.glob("tests/**/*.yml")] if p.is_file()]
    flat = [p for p in project if _read_full(p.read_text(encoding="utf-8", errors="replace")) is not None]
    assert flat and all(_read_simple(p.read_text()) is not None for p in flat if "'" not in p.read_text()), \
        "a flat example network without quotes should not need the regular expressions"


def test_scalar_predicates_match_the_grammar_whole() -> None:
    """_is_int, _is_float and _is_name are _INT, _FLOAT, _KEY, _WORD and _TEXT's words without re."""
    import re

    from network.flat_yaml import _FLOAT, _INT, _KEY, _TEXT, _TEXT_MARKS, _WORD, _is_float, _is_int, _is_name

    alphabet = "0123456789+-.eE_aZ: #'\"é\t²x"
    rng = random.Random(3)
    strings = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(20000)}
    strings |= set(_GOOD + _NEAR_MISSES + _JSON_NUMBERS) | {"0" * 31, "1" + "0" * 30, "1" + "0" * 31, "-", "+", "_"}
    for s in strings:
        assert _is_int(s) == bool(re.fullmatch(_INT, s)), s
        assert _is_float(s) == bool(re.fullmatch(_FLOAT, s)), s
        assert _is_name(s, "_-") == bool(re.fullmatch(_KEY, s)), s
        assert _is_name(s, "_.-") == bool(re.fullmatch(_WORD, s)), s
    text_alphabet = "ab_Z09.,/()+=%- :#é'"
    for _ in range(20000):
        v = "".join(rng.choice(text_alphabet) for _ in range(rng.randint(1, 8))).strip(" ")
        if " " in v:
            words = [w for w in v.split(" ") if w]
            ours = _is_name(words[0], _TEXT_MARKS) and all(_is_name("a" + w, _TEXT_MARKS) for w in words[1:])
            assert ours == bool(re.fullmatch(_TEXT, v)), v


def test_a_plain_network_file_compiles_no_regular_expression() -> None:
    """The point of _read_simple: ASTRA-sim's network files, and those yaml.safe_dump writes, are read
    without compiling the grammar; quotes need it."""
    import subprocess
    import sys

    code = ("import network.flat_yaml as f\n"
            "assert f.read_flat_yaml('topology: [ Ring, Switch ]  # c\\n# x\\nnpus_count: [ 8, 4 ]\\n"
            "bandwidth: [ 50.0, 25.0 ]\\nlatency: [ 500.0, 500.0 ]\\nnote: fitted\\n') is not None\n"
            "assert not f._patterns, f._patterns\n"
            "assert f.read_flat_yaml('latency:\\n- 500.0\\nnpus_count:\\n  - 8  # c\\n\\n  - 4\\n') == "
            "{'latency': [500.0], 'npus_count': [8, 4]}\n"
            "assert not f._patterns, f._patterns\n"
            "assert f.read_flat_yaml(\"topology: ['Ring']\\n\") == {'topology': ['Ring']}\n"
            "assert f._patterns\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
