"""Find and load a workload's ET files: ``PREFIX`` (``PREFIX.{rank}.et``), a folder of such
files, or one ``.et``/``.pb`` file that every rank runs.

Paths are strings named as pathlib would name them (network/files.py: a run does not import
pathlib), as messages and the report show them."""
from __future__ import annotations

import os
import warnings

from network.files import is_dir, is_file, path_join, path_parent, path_str
from workload.errors import WorkloadError
from workload.graph import Graph, Node, load_graph

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from workload.orbit_files import OrbitDeclaration


def orbit_declaration_path(spec: str | os.PathLike) -> str:
    """Where a workload written per orbit declares its orbits: ``PREFIX.orbits.json``."""
    return path_str(f"{spec}.orbits.json")


def find_orbit_declaration(spec: str | os.PathLike, npus_count: int) -> "OrbitDeclaration | None":
    """workload/orbit_files.py's find_declaration; that module is imported only where the file is
    there (a run of per-rank files need not import it: start-up)."""
    if not is_file(orbit_declaration_path(spec)):
        return None
    from workload.orbit_files import find_declaration

    return find_declaration(spec, npus_count)


def split_rank_file(name: str) -> tuple[str, int] | None:
    r"""``(prefix, rank)`` of a file named ``<prefix>.<rank>.et``, else None: what the regular
    expression ``(.+)\.(\d+)\.et$`` matches, read without the re module (a run does not import it;
    tests/workload/test_rank_files.py holds the two together)."""
    if name.endswith("\n"):
        name = name[:-1]  # as $ matches before a final newline
    if not name.endswith(".et") or "\n" in name:
        return None
    prefix, dot, rank = name[:-3].rpartition(".")
    if not dot or not prefix or not rank.isdecimal():
        return None
    return prefix, int(rank)


def rank_of(name: str, prefix: str) -> int | None:
    r"""The rank of a file named ``<prefix>.<rank>.et`` with this prefix, else None: what
    ``re.escape(prefix) + r"\.(\d+)\.et$"`` matches at the start of ``name``."""
    if name.endswith("\n"):
        name = name[:-1]
    if not name.startswith(prefix + ".") or not name.endswith(".et"):
        return None
    rank = name[len(prefix) + 1:-3]
    return int(rank) if rank.isdecimal() else None


def resolve_workload(spec: str | os.PathLike, npus_count: int) -> list[str]:
    """One path per rank (the same path repeated when one file is shared)."""
    p = path_str(spec)
    if is_dir(p):
        groups: dict[str, dict[int, str]] = {}
        for name in sorted(os.listdir(p)):
            m = split_rank_file(name)
            if m and is_file(f := path_join(p, name)):
                groups.setdefault(m[0], {})[m[1]] = f
        if not groups:
            from workload.input_kind import describe_folder  # what the folder is instead: errors only

            raise WorkloadError(p, "", describe_folder(p) or "folder holds no '<prefix>.<rank>.et' files")
        if len(groups) > 1:
            raise WorkloadError(p, "", f"folder holds several workloads ({', '.join(sorted(groups))}); pass one prefix")
        (prefix, files), = groups.items()
        return _check_ranks(path_join(p, prefix), files, npus_count)
    if is_file(p):
        _warn_if_siblings(p, npus_count)
        return [p] * npus_count
    files: dict[int, str] = {}
    parent = path_parent(p)
    if is_dir(parent):
        base = os.path.basename(p)
        for name in os.listdir(parent):
            rank = rank_of(name, base)
            if rank is not None:
                files[rank] = path_join(parent, name)
    if not files:
        raise WorkloadError(p, "", f"workload not found: no file {p}, no folder {p}, and no files {p}.<rank>.et")
    return _check_ranks(p, files, npus_count)


def _warn_if_siblings(path: str, npus_count: int) -> None:
    """One file of a per-rank set run by every rank is almost always a mistake: say so."""
    m = split_rank_file(os.path.basename(path))
    if m is None:
        return
    ranks = sorted(r for name in os.listdir(path_parent(path)) if (r := rank_of(name, m[0])) is not None)
    if ranks == [m[1]]:
        return
    prefix = path_join(path_parent(path), m[0])
    if ranks == list(range(npus_count)):
        advice = f"pass the prefix {prefix} to give each rank its own"
    else:
        advice = (f"{prefix}.<rank>.et exists for {len(ranks)} rank(s) ({_ranks_text(ranks)}) but the network "
                  f"has {npus_count} NPU{'s' if npus_count != 1 else ''}, so the prefix would not fit either; pass a network with "
                  f"{len(ranks)} NPUs and the prefix {prefix}")
    who = "the network's one NPU runs" if npus_count == 1 else f"every one of the {npus_count} ranks runs"
    warnings.warn(f"{path}: {who} this one file, although it is one of a per-rank set; {advice}", stacklevel=3)


def _ranks_text(ranks: list[int]) -> str:
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}..{ranks[-1]}"
    return ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")


def _check_ranks(prefix: str, files: dict[int, str], npus_count: int) -> list[str]:
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
    cache: dict[str, Graph] = {}
    nodes: dict[bytes, Node] = {}  # one parse per distinct node message across all files
    shared: dict[bytes, list[Node]] = {}  # linked Nodes per node message (shared_nodes.py)
    previous: list = [None]  # the node messages of the file read last (graph.load_graph)
    out = []
    for path in paths:
        g = cache.get(path)
        if g is None:
            g = cache[path] = _load(path, nodes, shared, previous)
        out.append(g)
    for g in cache.values():
        if g.unknown_peers:
            from workload.host_comms import settle_unknown_peers  # sends/receives without a peer only

            settle_unknown_peers(g.path, g.nodes, g.unknown_peers, [r for r, x in enumerate(out) if x is g], npus_count)
            g.unknown_peers = []
    return out


def _load(path: str, nodes: dict[bytes, Node], shared: dict[bytes, list[Node]], previous: list) -> Graph:
    try:
        return load_graph(path, nodes, shared, previous)
    except WorkloadError:
        from workload.input_kind import describe_file  # errors only: not at start-up

        kind = describe_file(path) if is_file(path) else None  # only now: success costs no extra read
        if kind is None:
            raise
        raise WorkloadError(path, "", kind) from None
