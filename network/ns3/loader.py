"""Import ns-3 (the ``ns3`` wheel) once per process, and compile our C++ into it.

``from ns import ns`` parses the headers of all 42 ns-3 modules (8 s of its 10 s here) and loads
every library. The backend uses five modules (core, network, internet, point-to-point,
traffic-control), so ``load_ns`` asks cppyy for just the headers that declare what it uses
(HEADERS, 0.6 s) and those modules' libraries, which pull in what they link (bridge, stats) by
their own run paths. The wheel's layout
(``ns3/include``, ``ns3/lib64`` or ``ns3/lib``, ``libns3.<version>-<module>.so``) is read from
the installed package; where it is not what we expect, or ``DTSIM_NS3_FULL_IMPORT=1`` is set,
the package's own ``from ns import ns`` is used. Every way gives the backend the same namespace of
our C++, ``cppyy.gbl.dtsim_ns3`` (fabric_cpp.API: ``Net``, ``Configure``, ``SimulatorRun``, ...),
with ``.cppyy`` the cppyy module.

First, though, the loader looks for our C++ compiled ahead of time (precompiled.py): where that
library is in the cache, it is loaded and cling is given only fabric_cpp.API, declarations without
any ns-3 type, so no ns-3 header is parsed and nothing is JIT-compiled (1.2 s instead of 4.1 s for
the README's 8-NPU example). Where it is not, the narrow import below runs and a background build
starts.

Cling writes harmless ``[runStaticInitializersOnce]: Failed to materialize symbols …`` lines to
the C-level stderr (docs: shared/docs/formats.md §C.1). We capture file descriptor 2 while
importing and compiling and pass every other line through.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from network.ns3 import precompiled
from network.ns3.fabric_cpp import API, API_SOURCE, FLOW_API_SOURCE, SOURCE
from network.ns3.flow_routing_cpp import SOURCE as FLOW_ROUTING_SOURCE

_NOISE = "runStaticInitializersOnce"
_ns: Any = None
#: the library of our C++ that this process loaded (precompiled.py), or None: cling JIT-compiled it
precompiled_library: Path | None = None
#: whether cling has FLOW_API_SOURCE (load_flow_routing)
_flow_routing = False


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


#: the ns-3 modules the backend's C++ and Python use, in link order
MODULES = ("core", "network", "traffic-control", "internet", "point-to-point")
#: the headers of those modules that declare what fabric_cpp.py and flow_routing_cpp.py use
#: (0.6 s to parse, against 1.7 s for the five module headers; a test compiles
#: our C++ against them, and a header missing here is a RuntimeError naming DTSIM_NS3_FULL_IMPORT)
HEADERS = (
    "simulator.h", "config.h", "uinteger.h", "boolean.h", "nstime.h", "type-id.h", "callback.h", "object.h",
    "node-container.h", "net-device-container.h", "node-list.h", "packet.h", "socket.h", "inet-socket-address.h",
    "data-rate.h", "drop-tail-queue.h", "queue-size.h", "ipv4-address.h",
    "internet-stack-helper.h", "ipv4-address-helper.h", "ipv4-global-routing-helper.h", "ipv4-list-routing.h",
    "ipv4-routing-protocol.h", "ipv4-route.h", "ipv4-header.h", "ipv4-interface-container.h", "ipv4.h",
    "tcp-socket-factory.h", "udp-socket-factory.h", "tcp-socket.h", "tcp-congestion-ops.h", "tcp-l4-protocol.h",
    "traffic-control-helper.h", "traffic-control-layer.h", "point-to-point-helper.h", "point-to-point-net-device.h",
    "ipv4-address-generator.h",
)


def load_ns() -> Any:
    """The backend's C++ namespace (cppyy's ``dtsim_ns3``: ``Net``, ``Configure``, ``SimulatorRun``,
    ...), loaded once per process, with ``.cppyy`` the cppyy module."""
    global _ns, precompiled_library
    if _ns is None:
        with quiet_cling():
            api = None
            if os.environ.get("DTSIM_NS3_FULL_IMPORT") != "1":
                lean = _lean_import()
                if lean is not None:
                    api, precompiled_library = lean
                else:
                    api = _narrow_import()
            if api is None:
                try:
                    from ns import ns  # noqa: PLC0415 (lazy on purpose: 10 s)
                except SystemExit as exc:  # the `ns` stub calls exit(-1) when ns3.ns is missing
                    raise ImportError("the ns3 package is incomplete (import ns3.ns failed)") from exc
                api = _compile(ns.cppyy, narrow=False)
        _ns = api
    return _ns


def load_flow_routing() -> None:
    """Make Net::UseFlowRoutes and Net::SetHop callable (a physical graph's run calls them): where
    cling JIT-compiles our C++, give it their definitions (fabric_cpp.FLOW_API_SOURCE) now; a
    precompiled library has them already. After load_ns."""
    global _flow_routing
    if _flow_routing or precompiled_library is not None:
        return
    with quiet_cling():
        _ns.cppyy.cppdef(FLOW_API_SOURCE)
    _flow_routing = True


def _compile(cppyy: Any, narrow: bool) -> Any:
    """Our C++ given to cling (it JIT-compiles it on first use), but for a graph's definitions
    (load_flow_routing); the dtsim_ns3 namespace."""
    try:
        cppyy.cppdef(API)
        cppyy.cppdef(FLOW_ROUTING_SOURCE)
        cppyy.cppdef(SOURCE)
        cppyy.cppdef(API_SOURCE)
    except SyntaxError as exc:  # cppyy's compile error; after a narrow import: a header HEADERS lacks
        if not narrow:
            raise
        raise RuntimeError(f"the ns-3 backend's C++ does not compile against HEADERS ({exc}); this "
                           "installed ns3 package declares something elsewhere: run with "
                           "DTSIM_NS3_FULL_IMPORT=1 (the package's own import) and report it") from None
    return _namespace(cppyy)


def _namespace(cppyy: Any) -> Any:
    api = cppyy.gbl.dtsim_ns3
    setattr(api, "cppyy", cppyy)
    return api


def _lean_import() -> tuple[Any, Path] | None:
    """Our C++ from the precompiled library (precompiled.py), cling given only API: no ns-3
    header parsed; the namespace and the library. None where there is no library yet (then it
    starts building one)."""
    pkg = _package()
    if pkg is None or not precompiled.enabled():
        return None
    root, libdir = pkg
    try:
        import cppyy
    except ImportError:
        return None
    library = precompiled.load(cppyy, root, libdir, HEADERS)
    if library is None:
        return None
    cppyy.cppdef(API)
    return _namespace(cppyy), library


def _package() -> tuple[Path, Path] | None:
    """The ns3 wheel's root and library folder, where laid out as expected (include/ns3 beside)."""
    import importlib.util

    spec = importlib.util.find_spec("ns3")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    libdir = next((root / d for d in ("lib64", "lib") if (root / d).is_dir()), None)
    if libdir is None or not (root / "include" / "ns3").is_dir():
        return None
    return root, libdir


def module_libraries(libdir: Path) -> list[Path] | None:
    """The library of each of MODULES in ``libdir``, in link order; None where one has none or
    several (several builds)."""
    out = []
    for module in MODULES:
        found = sorted(libdir.glob(f"libns3*-{module}.so"))
        if len(found) != 1:
            return None
        out.append(found[0])
    return out


def _narrow_import() -> Any | None:
    """ns-3 with only MODULES loaded and HEADERS parsed, our C++ JIT-compiled; None where the
    installed wheel is not laid out as expected."""
    pkg = _package()
    if pkg is None:
        return None
    root, libdir = pkg
    libraries = module_libraries(libdir)
    if libraries is None or not all((root / "include" / "ns3" / f"{m}-module.h").is_file() for m in MODULES):
        return None  # several builds, or none: the package's own loader sorts that out
    try:
        import cppyy
        import libcppyy
    except ImportError:
        return None
    libcppyy.AddSmartPtrType("Ptr")  # ns-3's Ptr<T> behaves as the object it points to
    cppyy.add_library_path(str(libdir))
    cppyy.add_include_path(str(root / "include"))
    for header in HEADERS:
        if not (root / "include" / "ns3" / header).is_file():
            return None
        cppyy.include(f"ns3/{header}")
    for lib in libraries:
        cppyy.load_library(str(lib))
    return _compile(cppyy, narrow=True)
