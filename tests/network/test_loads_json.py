"""network.files.loads_json is json.loads without importing json where the text is valid: the same
values, and where json.loads raises, the same exception and message."""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from network.files import loads_json

DOCS = [
    '{"a": 1, "b": [1, 2.5, -3e-2, true, false, null], "c": {"d": "\\u00e9\\n\\ud83d\\ude00"}}',
    "  \n\t[1, 2]\r\n ", "0", "-0.0", '"x"', "1e400", "123456789012345678901234567890", "NaN", "[Infinity, -Infinity]",
    '{"k": 1, "k": 2}', "[]", "{}", '"\\/"', '{"a":[{"b":[{"c":[]}]}]}',
    # errors: json.loads's own exception and message
    "", "   ", "[1, 2", "[1, 2] x", "{'a': 1}", '{"a" 1}', "[1,]", "01", '"\\x"', '"a\tb"', "\ufeff{}", "nul",
    "[" * 50 + "]" * 49, "tru", '{"a": 1}}', "1 2",
]
OPTIONS = [
    {}, {"parse_float": Decimal}, {"parse_int": str}, {"object_pairs_hook": list}, {"object_hook": sorted},
    {"strict": False}, {"parse_constant": lambda s: s.lower()},
]


def _outcome(f, text: str, options: dict):
    try:
        return "ok", repr(f(text, **options))
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_the_same_answer_as_json_loads(options: dict) -> None:
    for text in DOCS:
        assert _outcome(loads_json, text, options) == _outcome(json.loads, text, options), text


def test_a_hook_that_raises_raises_through_it() -> None:
    class Declined(Exception):
        pass

    def refuse(s: str) -> float:
        raise Declined(s)

    with pytest.raises(Declined):
        loads_json("[1.5]", parse_float=refuse)


def test_valid_text_does_not_import_json() -> None:
    code = ("import sys\nfrom network.files import loads_json\n"
            "v = loads_json(' {\"a\": [1, 2.5, \"x\"]} ')\n"
            "print(v == {'a': [1, 2.5, 'x']}, 'json' in sys.modules)\n"
            "try:\n    loads_json('[1,')\nexcept ValueError as e:\n    print(type(e).__name__, 'json' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["True", "False", "JSONDecodeError", "True"]
