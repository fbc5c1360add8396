"""Output paths and formats, checked before a run: an hour of simulation must not end in "cannot write".

Each check raises InputError (exit 2) naming the flag, the path and what is accepted. The writers
still handle errors that appear later (a full disk), atomically (network/files.py). A run with
--report checks it here, so paths go through network/files.py's path functions, not pathlib.
"""
from __future__ import annotations

import os

from network.errors import InputError
from network.extras import install_hint
from network.files import exists, is_dir, is_file, path_parent, path_str, path_suffix


def check_file(flag: str, path: str | os.PathLike, suffixes: tuple[str, ...], what: str) -> None:
    """``path`` can be created or replaced, and its name ends in one of ``suffixes`` (".json")."""
    p = path_str(path)
    if is_dir(p):
        raise InputError(p, flag, f"cannot write: is a folder; {flag} takes a file name ending in {suffixes[0]}")
    suffix = path_suffix(p)
    if suffix.lower() not in suffixes:
        shown = f"'{suffix}'" if suffix else "no suffix"
        raise InputError(None, flag, f"{p} has {shown}; {flag} writes {what}: give a file name ending in "
                         + ", ".join(suffixes))
    _check_creatable(flag, p)


def check_report(flag: str, path: str) -> None:
    """Any path: ``-`` (standard output), an existing file or device we may write (``/dev/stdout``,
    a ``mktemp`` name), or a new file in a folder we may write in."""
    if path == "-":
        return
    p = path_str(path)
    if is_dir(p):
        raise InputError(p, flag, f"cannot write: is a folder; {flag} takes a file name, or - for standard output")
    if exists(p):
        if not os.access(p, os.W_OK):
            raise InputError(p, flag, "cannot write: no permission to write this file")
        if is_file(p):
            _check_creatable(flag, p)  # replaced atomically: its folder must take a new file
        return
    _check_creatable(flag, p)


def check_folder(flag: str, path: str | os.PathLike) -> None:
    """``path`` is a folder, or can be made one."""
    p = path_str(path)
    if exists(p) and not is_dir(p):
        raise InputError(p, flag, "cannot write: a file exists there; this flag takes a folder")
    if is_dir(p):
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError(p, flag, "cannot write: no permission to create files in this folder")
        return
    _check_creatable(flag, p)


def check_prefix(flag: str, path: str | os.PathLike) -> None:
    """``PREFIX`` of files ``PREFIX.<rank>.et`` and friends: its folder can be made or written in."""
    _check_creatable(flag, path_str(path))


def plot_suffixes() -> tuple[str, ...]:
    """The image formats matplotlib writes here (png, pdf, svg, ...); needs the plot extra."""
    try:
        import matplotlib  # noqa: F401 -- first: a cached submodule would hide a missing package
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise InputError(None, "--plot", "needs matplotlib, which is not installed: "
                         + install_hint("plot", "matplotlib")) from None
    return tuple(f".{k}" for k in sorted(FigureCanvasBase.get_supported_filetypes()))


def check_plot(flag: str, path: str | os.PathLike) -> None:
    check_file(flag, path, plot_suffixes(), "an image whose format is its suffix")


def _check_creatable(flag: str, p: str) -> None:
    """The nearest existing ancestor of path_str ``p`` is a folder we may write in (folders below
    it are made)."""
    anc = path_parent(p)
    while not exists(anc) and anc != path_parent(anc):
        anc = path_parent(anc)
    if not is_dir(anc):
        raise InputError(p, flag, f"cannot write: {anc} is a file, not a folder")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise InputError(p, flag, f"cannot write: no permission to create files in {anc}")
