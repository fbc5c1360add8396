"""The C sources of ``network._event_core`` (setup.py compiles them into one extension) and their
checksum, which the build writes into the binary: a binary compiled from other sources than the
ones beside it (a checkout edited or updated after ``pip install -e .``) is then not used, so a
stale binary can never run with semantics its sources no longer have."""
from __future__ import annotations

import importlib
import os
import zlib
from types import ModuleType

SOURCES = ("_event_core.c", "_aware_links.c", "_pairing.c", "_event_core.h", "_long_map.h")
#: system/_sys_core.c, compiled into ``system._sys_core`` under the same rule, with the header of the
#: queue's C interface it uses
SYSTEM_SOURCES = ("_sys_core.c", "_feeder.c", "_feeder.h", "_ring_recurrence.c", "_ring_recurrence.h",
                  "../network/_event_core.h", "../network/_long_map.h")
#: chakra_proto/_wire_core.c, ``chakra_proto._wire_core``; chakra_proto imports nothing of ours, so
#: chakra_proto/wire.py checks this checksum itself, by the same rule
WIRE_SOURCES = ("_wire_core.c",)
#: workload/_graph_core.c, ``workload._graph_core``: the common case of _parse_node (workload/graph.py) and of
#: link_shared (workload/shared_nodes.py)
GRAPH_SOURCES = ("_graph_core.c",)


def source_checksum(folder: str | os.PathLike, sources: tuple[str, ...] = SOURCES) -> str | None:
    """The sources' CRC-32 as 8 hex digits; None where they are not all there (an installed wheel
    carries the binary only)."""
    crc = 0
    try:
        for name in sources:
            with open(os.path.join(folder, name), "rb") as f:
                crc = zlib.crc32(f.read(), crc)
    except OSError:
        return None
    return f"{crc:08x}"


def load_checked(module: str, folder: str | os.PathLike, sources: tuple[str, ...] = SOURCES) -> ModuleType | None:
    """The compiled ``module``, or None where the Python classes run: ``DTSIM_PURE_PYTHON=1``, not
    compiled (no compiler at install, or a checkout used without pip install), or compiled from
    other sources than those in ``folder`` now (with a warning that says how to rebuild)."""
    if os.environ.get("DTSIM_PURE_PYTHON") == "1":
        return None
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    here = source_checksum(folder, sources)
    if here is not None and here != mod.SOURCE_CHECKSUM:
        import warnings

        warnings.warn(f"{mod.__file__} was compiled from other sources than {', '.join(sources)} in "
                      f"{os.path.basename(folder)}/ as they are now; running the Python classes (the same results, "
                      "slower) until `python -m pip install -e .` compiles them again", RuntimeWarning, stacklevel=3)
        return None
    return mod
