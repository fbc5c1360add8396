"""Find and load a workload's ET files: ``PREFIX`` (``PREFIX.{rank}.et``), a folder of such
files, or one ``.et``/``.pb`` file that every rank runs."""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from workload.errors import WorkloadError
from workload.graph import Graph, Node, load_graph

_RANK_FILE = re.compile(r"^(?P<prefix>.+)\.(?P<rank>\d+)\.et$")


def resolve_workload(spec: str | os.PathLike, npus_count: int) -> list[Path]:
    """One path per rank (the same path repeated when one file is shared)."""
    p = Path(spec)
    if p.is_dir():
        groups: dict[str, dict[int, Path]] = {}
        for f in sorted(p.iterdir()):
            m = _RANK_FILE.match(f.name)
            if m and f.is_file():
                groups.setdefault(m["prefix"], {})[int(m["rank"])] = f
        if not groups:
            raise WorkloadError(p, "", "folder holds no '<prefix>.<rank>.et' files")
        if len(groups) > 1:
            raise WorkloadError(p, "", f"folder holds several workloads ({', '.join(sorted(groups))}); pass one prefix")
        (prefix, files), = groups.items()
        return _check_ranks(p / prefix, files, npus_count)
    if p.is_file():
        m = _RANK_FILE.match(p.name)
        if m and all((p.parent / f"{m['prefix']}.{r}.et").exists() for r in range(npus_count)):
            warnings.warn(
                f"{p}: every rank runs this one file, although {p.parent / m['prefix']}.<rank>.et exists for "
                f"all {npus_count} ranks; pass the prefix {p.parent / m['prefix']} to give each rank its own",
                stacklevel=2,
            )
        return [p] * npus_count
    files: dict[int, Path] = {}
    parent = p.parent if str(p.parent) else Path(".")
    if parent.is_dir():
        pat = re.compile(re.escape(p.name) + r"\.(\d+)\.et$")
        for f in parent.iterdir():
            m2 = pat.match(f.name)
            if m2:
                files[int(m2[1])] = f
    if not files:
        raise WorkloadError(p, "", f"workload not found: no file {p}, no folder {p}, and no files {p}.<rank>.et")
    return _check_ranks(p, files, npus_count)


def _check_ranks(prefix: Path, files: dict[int, Path], npus_count: int) -> list[Path]:
    missing = [r for r in range(npus_count) if r not in files]
    extra = sorted(r for r in files if r >= npus_count)
    if missing or extra:
        have = len(files)
        detail = []
        if missing:
            detail.append(f"missing {prefix}.{missing[0]}.et" + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""))
        if extra:
            detail.append(f"extra ranks {extra[:5]}{'...' if len(extra) > 5 else ''}")
        raise WorkloadError(
            prefix, "",
            f"the network has {npus_count} NPUs (product of npus_count) but the workload has {have} rank file(s): "
            + "; ".join(detail),
        )
    return [files[r] for r in range(npus_count)]


def load_workload_graphs(spec: str | os.PathLike, npus_count: int) -> list[Graph]:
    """Per-rank graphs; ranks that share a file share one Graph object."""
    paths = resolve_workload(spec, npus_count)
    cache: dict[Path, Graph] = {}
    nodes: dict[bytes, Node] = {}  # one parse per distinct node message across all files
    out = []
    for path in paths:
        g = cache.get(path)
        if g is None:
            g = cache[path] = load_graph(path, nodes)
        out.append(g)
    return out
