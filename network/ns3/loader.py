"""Import ns-3 (the ``ns3`` wheel, seen as ``ns``) once per process, and compile our C++ into it.

``from ns import ns`` takes 5–10 s (cling parses every ns-3 header) and writes harmless
``[runStaticInitializersOnce]: Failed to materialize symbols …`` lines to the C-level stderr
(docs: shared/docs/formats.md §C.1). We capture file descriptor 2 while importing and compiling
and pass every other line through.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import Any, Iterator

from network.ns3.fabric_cpp import SOURCE
from network.ns3.flow_routing_cpp import SOURCE as FLOW_ROUTING_SOURCE

_NOISE = "runStaticInitializersOnce"
_ns: Any = None


@contextlib.contextmanager
def quiet_cling() -> Iterator[None]:
    """Drop cling's runStaticInitializersOnce lines from fd 2; keep everything else."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [ln for ln in tmp.read().decode(errors="replace").splitlines(True) if _NOISE not in ln]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def load_ns() -> Any:
    """The ``ns`` namespace (cppyy's ``ns3``), with ``ns.cppyy.gbl.dtsim_ns3`` compiled in."""
    global _ns
    if _ns is None:
        with quiet_cling():
            try:
                from ns import ns  # noqa: PLC0415 (lazy on purpose: 5–10 s)
            except SystemExit as exc:  # the `ns` stub calls exit(-1) when ns3.ns is missing
                raise ImportError("the ns3 package is incomplete (import ns3.ns failed)") from exc
            ns.cppyy.cppdef(FLOW_ROUTING_SOURCE)
            ns.cppyy.cppdef(SOURCE)
        _ns = ns
    return _ns
