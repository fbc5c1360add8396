"""The ns-3 backend's C++ compiled ahead of time, cached on disk, so that a run need not JIT it.

Without it, a run has cling parse 37 ns-3 headers (0.9 s) and our C++ (fabric_cpp.py,
flow_routing_cpp.py) and JIT-compile it (1.8 s in all): 4.1 s for the README's 8-NPU example.
With a shared library built from the very same source by the system's C++ compiler, the loader
(loader.py) loads it and gives cling only fabric_cpp.API, declarations without a single ns-3
type: 1.2 s for the same run, the same report (tests/network/test_ns3_precompiled.py), 200 MiB
instead of 285.

The library is keyed by a hash of everything that goes into it (our source, the headers, the ns3
package's libraries, the compiler and its flags), so a changed source, package or compiler never
meets an old library; it lives in ``$DTSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/dtsim``, else
``~/.cache/dtsim``. The first ns-3 run that finds none starts ``python -m network.ns3.precompiled``
in the background (about 5 s of one core, at the lowest priority) and says so on stderr;
``DTSIM_NS3_PRECOMPILE=0`` turns both the building and the loading off. Where there is no compiler, or the build or the load fails,
the run JIT-compiles as before: the cache can only make a run start sooner. A failed build leaves
``<name>.failed`` with the compiler's messages, and runs do not start it again; the command does.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

#: Python reaches the library only through fabric_cpp.API, whose functions are defined out of line
#: (API_SOURCE): they are exported as they are, and nothing inline needs keeping
FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared", "-w")
#: a lock older than this belongs to a build that died
_STALE_LOCK_S = 600


def enabled() -> bool:
    return os.environ.get("DTSIM_NS3_PRECOMPILE", "1") != "0"


def cache_dir() -> Path:
    explicit = os.environ.get("DTSIM_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home directory to be found
            return Path(tempfile.gettempdir()) / f"dtsim-cache-{os.getuid()}"
    return Path(base) / "dtsim"


def compiler() -> str | None:
    """The C++ compiler to build with ($CXX, else g++ or c++ on the PATH), or None."""
    for name in (os.environ.get("CXX"), "g++", "c++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def translation_unit(headers: Sequence[str]) -> str:
    """What the library is compiled from: the headers and our C++ (fabric_cpp.API, flow routing,
    the fabric, API's definitions, a graph's too), in the order the loader gives them to cling when
    it JITs."""
    from network.ns3.fabric_cpp import API, API_SOURCE, FLOW_API_SOURCE, SOURCE
    from network.ns3.flow_routing_cpp import SOURCE as FLOW_ROUTING_SOURCE

    return ("".join(f'#include "ns3/{h}"\n' for h in headers) + API + FLOW_ROUTING_SOURCE + SOURCE + API_SOURCE
            + FLOW_API_SOURCE)


def _libraries(libdir: Path) -> list[Path] | None:
    from network.ns3.loader import module_libraries  # the loader imports this module

    return module_libraries(libdir)


def library_path(root: Path, libdir: Path, headers: Sequence[str], cxx: str | None = None) -> Path | None:
    """Where the library for this source, package and compiler lives (built or not); None where
    there is no compiler or the package's libraries are not where we expect them."""
    cxx = cxx or compiler()
    libs = _libraries(libdir)
    if cxx is None or libs is None:
        return None
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    h = hashlib.sha256()
    for part in (translation_unit(headers), str(root), *map(str, libs), cxx, version, *FLAGS):
        h.update(part.encode())
        h.update(b"\0")
    for lib in libs:
        st = lib.stat()
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return cache_dir() / f"ns3-backend-{h.hexdigest()[:20]}.so"


def build(root: Path, libdir: Path, headers: Sequence[str], out: Path, cxx: str) -> None:
    """Compile the library into ``out`` (written beside it, then renamed: a reader sees the whole
    file or none). Raises CalledProcessError with the compiler's messages."""
    libs = _libraries(libdir)
    if libs is None:
        raise FileNotFoundError(f"the ns3 package's libraries in {libdir}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        src = Path(tmp) / "ns3_backend.cc"
        src.write_text(translation_unit(headers))
        part = Path(tmp) / out.name
        cmd = [cxx, *FLAGS, f"-I{root / 'include'}", str(src), *map(str, libs), f"-Wl,-rpath,{libdir}",
               "-o", str(part)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        os.replace(part, out)


def load(cppyy: Any, root: Path, libdir: Path, headers: Sequence[str]) -> Path | None:
    """Load the cached library into cppyy and return its path (the caller then gives cling only
    fabric_cpp.API); start building it in the background where there is none (None)."""
    if not enabled():
        return None
    path = library_path(root, libdir, headers)
    if path is None:
        return None
    if path.is_file():
        try:
            cppyy.load_library(str(path))
            return path
        except Exception as exc:  # noqa: BLE001 (a library that will not load: JIT, and no rebuild)
            path.unlink(missing_ok=True)
            try:
                path.with_suffix(".failed").write_text(f"loading {path.name} failed: {exc}\n")
            except OSError:
                pass
            return None
    _start_background_build(path)
    return None


def _start_background_build(path: Path) -> None:
    lock = path.with_suffix(".lock")
    if path.with_suffix(".failed").exists():
        return  # it failed once (the file holds why); `python -m network.ns3.precompiled` tries again
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not _take_lock(lock):
            return  # another run is building it
        subprocess.Popen([sys.executable, "-m", "network.ns3.precompiled", "--lock", str(lock)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, env=_child_env())
    except OSError:
        return  # an unwritable cache: nothing to do
    sys.stderr.write(f"note: ns-3: compiling the backend's C++ once, in the background, into {path}; later ns-3 "
                     "runs start about 3 s sooner (DTSIM_NS3_PRECOMPILE=0 turns this off)\n")


def _take_lock(lock: Path) -> bool:
    """Create ``lock`` unless another run holds it (one younger than _STALE_LOCK_S)."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                if time.time() - lock.stat().st_mtime < _STALE_LOCK_S:
                    return False
                lock.unlink()  # its build died: take over
            except FileNotFoundError:
                pass  # released meanwhile: try again
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    return False


def _child_env() -> dict[str, str]:
    here = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (here, path) if p))


def _lower_priority() -> None:
    """Lowest CPU priority for this process and the compiler it starts: the run that started it
    JIT-compiles the same C++ meanwhile, and with a core busy elsewhere an equal share would slow
    that run by seconds (the background build is 5 s of one core). This build is a session of its
    own, so where Linux groups the scheduling by session (autogroup) it is that group's nice that
    counts."""
    try:
        os.nice(19)
    except (AttributeError, OSError):  # no nice() here: build at normal priority
        pass
    try:
        Path("/proc/self/autogroup").write_text("19")
    except OSError:  # no autogroup (another OS, or a kernel without it)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m network.ns3.precompiled``: build the library now (the background build runs
    this too). Exit 0 built or already there, 2 nothing to build with, 1 the compiler failed."""
    import argparse

    from network.ns3.loader import HEADERS, _package

    ap = argparse.ArgumentParser(prog="python -m network.ns3.precompiled", description=main.__doc__)
    ap.add_argument("--lock", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.lock:  # started by a run (_start_background_build): on a busy machine, yield it the CPU
        _lower_priority()
    try:
        pkg = _package()
        cxx = compiler()
        if pkg is None or cxx is None:
            print("ns-3 precompile: " + ("the ns3 package is not installed" if pkg is None else
                                         "no C++ compiler ($CXX, g++ or c++) on the PATH"), file=sys.stderr)
            return 2
        root, libdir = pkg
        path = library_path(root, libdir, HEADERS, cxx)
        if path is None:
            print(f"ns-3 precompile: the ns3 package's libraries are not in {libdir} as expected", file=sys.stderr)
            return 2
        failed = path.with_suffix(".failed")
        if not path.is_file():
            try:
                build(root, libdir, HEADERS, path, cxx)
            except (subprocess.CalledProcessError, OSError) as exc:
                why = f"{cxx} failed:\n{(getattr(exc, 'stderr', None) or str(exc))[-4000:]}"
                failed.write_text(why)  # later runs do not start this build again
                print(f"ns-3 precompile: {why}", file=sys.stderr)
                return 1
        failed.unlink(missing_ok=True)
        print(path)
        return 0
    finally:
        if args.lock:
            Path(args.lock).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
