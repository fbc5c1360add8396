"""The command line's common case without argparse: exact long flags, each value in its own token
or after ``=``. Importing argparse (and with it gettext and locale) and building the parser is
4% of a 64-rank run's instructions, a run that ASTRA-sim finishes in 0.05 s.

The flags are declared once, as ``(option strings, add_argument keywords)`` pairs, from which
system/main.py builds the argparse parser too. ``quick_parse`` answers only where argparse would
give the same namespace; everything else (``--help``, ``--version``, abbreviations, a value that
starts with ``-``, a bad number or choice, a missing required flag, ``--``) returns None and
argparse parses the line, with its messages. tests/cli/test_quick_args.py holds the two to the
same namespaces.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

    Spec = tuple[tuple[str, ...], dict[str, Any]]

SUPPRESS = "==SUPPRESS=="  # argparse.SUPPRESS (a test checks they are the same string)


class Namespace:
    """argparse.Namespace's part that the command line reads: attributes, ``vars()``, equality."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __eq__(self, other: object) -> bool:
        return vars(self) == vars(other) if hasattr(other, "__dict__") else NotImplemented

    def __contains__(self, key: str) -> bool:
        return key in self.__dict__

    def __repr__(self) -> str:
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


def dest_of(flags: Sequence[str], kwargs: dict[str, Any]) -> str:
    """argparse's dest: the keyword, else the first long flag without its dashes, '-' as '_'."""
    dest = kwargs.get("dest")
    if dest is not None:
        return dest
    name = next((f for f in flags if f.startswith("--")), flags[0])
    return name.lstrip("-").replace("-", "_")


def defaults(specs: Iterable[Spec]) -> dict[str, Any]:
    """Every dest with the value argparse gives it when its flag is absent."""
    out: dict[str, Any] = {}
    for flags, kw in specs:
        action = kw.get("action")
        if action in ("version", "help"):
            continue
        default = kw.get("default")
        if default is None and action in ("store_true", "store_false"):
            default = action == "store_false"
        out[dest_of(flags, kw)] = default
    return out


def quick_parse(argv: Sequence[str], specs: Sequence[Spec]) -> Namespace | None:
    """The namespace argparse's ``parse_args(argv)`` gives, or None where this cannot be sure."""
    by_flag = {}
    for spec in specs:
        for f in spec[0]:
            by_flag[f] = spec
    values = defaults(specs)
    seen = set()
    i, n = 0, len(argv)
    while i < n:
        token = argv[i]
        i += 1
        name, eq, explicit = token.partition("=") if token.startswith("--") else (token, "", "")
        spec = by_flag.get(name)
        if spec is None:  # a positional, an abbreviation, --, a short flag we do not know: argparse
            return None
        flags, kw = spec
        action = kw.get("action", "store")
        dest = dest_of(flags, kw)
        if action in ("store_true", "store_false"):
            if eq:
                return None
            value: Any = action == "store_true"
        elif action != "store":
            return None  # --help, --version
        else:
            if eq:
                raw = explicit
            elif kw.get("nargs") == "?":
                if i < n and argv[i] and not argv[i].startswith("-"):
                    raw = argv[i]
                    i += 1
                else:
                    values[dest] = kw.get("const")
                    seen.add(dest)
                    continue
            elif kw.get("nargs") is None and i < n and argv[i] and not argv[i].startswith("-"):
                raw = argv[i]
                i += 1
            else:
                return None
            convert = kw.get("type")
            try:
                value = convert(raw) if convert is not None else raw
            except (TypeError, ValueError):
                return None
            choices = kw.get("choices")
            if choices is not None and value not in choices:
                return None
        values[dest] = value
        seen.add(dest)
    for flags, kw in specs:
        if kw.get("required") and dest_of(flags, kw) not in seen:
            return None
    return Namespace(**values)
