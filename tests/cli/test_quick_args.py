"""system/quick_args.py parses the command line's common case without argparse: wherever it
answers, its namespace is argparse's, and whatever it is not sure of goes to argparse."""
from __future__ import annotations

import argparse
import contextlib
import io
import random

import pytest

from system import main as cli
from system.quick_args import SUPPRESS, defaults, quick_parse

SPECS = cli.OPTIONS + cli.LAYOUT_OPTIONS


def _argparse(argv: list[str]) -> dict | None:
    """argparse's namespace as a dict, or None where it exits (an error, --help, --version)."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            return vars(cli.build_parser().parse_args(argv))
    except SystemExit:
        return None


def _value(rng: random.Random, kw: dict) -> str:
    if kw.get("choices"):
        return rng.choice(list(kw["choices"]))
    if kw.get("type") is int:
        return str(rng.randint(0, 10 ** rng.randint(1, 6)))
    if kw.get("type") is float:
        return rng.choice(["0.5", "2", "1e3", "25.0", " 3.25", "inf"])
    return rng.choice(["a/b.yml", "x", "true", "false", "0", "dir/", "=x", "a=b", "with space", "é.et"])


def _valid_argv(rng: random.Random) -> list[str]:
    argv = []
    picked = [s for s in SPECS if s[1].get("required") or rng.random() < 0.3]
    rng.shuffle(picked)
    for flags, kw in picked:
        if kw.get("action") in ("version", "help"):
            continue
        flag = rng.choice(flags)
        for _ in range(2 if rng.random() < 0.1 else 1):  # given twice: the last one counts
            if kw.get("action") in ("store_true", "store_false"):
                argv.append(flag)
            elif kw.get("nargs") == "?" and rng.random() < 0.4:
                argv.append(flag)
            elif flag.startswith("--") and rng.random() < 0.5:
                argv.append(f"{flag}={_value(rng, kw)}")
            else:
                argv += [flag, _value(rng, kw)]
    return argv


def test_the_table_is_what_argparse_is_given() -> None:
    assert SUPPRESS == argparse.SUPPRESS
    parsed = _argparse(["--workload", "w", "--network", "n"])
    assert parsed == {**defaults(SPECS), "workload": "w", "network": "n"}
    parser = cli.build_parser()
    for dest, value in defaults(cli.LAYOUT_OPTIONS).items():
        assert parser.get_default(dest) == value


def test_every_common_command_line_is_parsed_as_argparse_parses_it() -> None:
    rng = random.Random(5)
    for _ in range(400):
        argv = _valid_argv(rng)
        quick = quick_parse(argv, SPECS)
        assert quick is not None, argv
        assert vars(quick) == _argparse(argv), argv


@pytest.mark.parametrize("argv", [
    ["--help"], ["-h"], ["--version"],
    ["--workload", "w"],  # --network is required
    ["--work", "w", "--network", "n"],  # an abbreviation: argparse's to allow or call ambiguous
    ["--workload", "w", "--network", "n", "--netw", "m"],
    ["--workload", "w", "--network", "n", "extra"],  # a positional
    ["--workload", "w", "--network", "n", "--"],
    ["--workload", "-w", "--network", "n"],  # a value that looks like a flag
    ["--workload", "w", "--network", "n", "--injection-scale", "-1"],  # a negative number: argparse's call
    ["--workload", "w", "--network", "n", "--rendezvous-protocol", "-1"],
    ["--workload", "w", "--network", "n", "--dp", "two"],
    ["--workload", "w", "--network", "n", "--dp-mode", "async"],
    ["--workload", "w", "--network", "n", "--quiet=yes"],
    ["--workload", "w", "--network", "n", "-qq"],
    ["--workload", "w", "--network", "n", "--max-events"],  # no value
    ["--workload", "", "--network", "n"],
    ["--workload", "w", "--network", "n", "--bogus"],
])
def test_what_it_is_not_sure_of_goes_to_argparse(argv: list[str]) -> None:
    assert quick_parse(argv, SPECS) is None


def test_mutated_command_lines_never_get_an_answer_that_argparse_would_not_give() -> None:
    rng = random.Random(11)
    pieces = ["-", "--", "-q", "--q", "=", "-1", "1", "", "--dp", "--pp=0", "--workload", "--no-symmetry=1",
              "--rendezvous-protocol", "--backend", "x y", "-x"]
    for _ in range(400):
        argv = _valid_argv(rng)
        for _ in range(rng.randint(1, 3)):
            argv.insert(rng.randint(0, len(argv)), rng.choice(pieces))
        quick = quick_parse(argv, SPECS)
        if quick is not None:
            assert vars(quick) == _argparse(argv), argv


def test_main_reads_a_plain_command_line_without_argparse() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom system.main import parse_args\n"
            "a = parse_args(['--workload', 'w', '--network', 'n', '-q', '--dp=2'])\n"
            "print(a.workload, a.network, a.quiet, a.dp, 'argparse' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         cwd=cli.__file__.rsplit("/system/", 1)[0])
    assert out.stdout.split() == ["w", "n", "True", "2", "False"]
