"""A collective replayed from a Chakra ET (ASTRA-sim: custom_collectives/CustomAlgorithm.cc).

ASTRA-sim's ``*-implementation-custom`` keys name an ET prefix; position ``p`` in the collective
replays ``<prefix>.<p>.et`` for the whole collective, as one stream with no chunking. The ET holds
only COMM_SEND, COMM_RECV and COMP nodes (docs/formats.md A.4 has the quirks of the shipped
files: no ``comm_src`` on SEND, no ``comm_dst`` on RECV, reductions as 7 µs COMP nodes):

* SEND: a point-to-point message of ``comm_size`` bytes with ``comm_tag`` (a "native" tag, as
  for workload SEND nodes), done when it arrives;
* RECV: the matching receive, done when its message has arrived and it is posted;
* COMP: a delay of ``duration_micros`` µs (1 ns when 0).

A node starts when all its parents are done (data and control dependencies alike); the stream
ends when nothing is running and nothing is left. Ranks in the ET are positions in the
collective; in a communicator group position k is the group's k-th smallest NPU.

Where ASTRA-sim issues several free nodes at once it walks an unordered set; we issue them in
ascending node id, which is ASTRA-sim's order wherever only one node is free at a time (the
shipped examples).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chakra_proto import et_def_pb2 as pb
from system.collective.algorithm import Algorithm, ComType
from system.errors import SystemConfigError, UnsupportedFeatureError

_REPLAYED = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.COMP_NODE)


class CustomAlgorithm(Algorithm):
    """One rank's replay of a custom collective's ET (ASTRA-sim: CustomAlgorithm).

    ``graph`` is the rank's decoded ET (any object with ``path``, ``nodes`` {id: node} and
    ``roots``; nodes carry ``type``, ``parents``, ``children``, ``comm_*`` and ``duration_ns``).
    """

    __slots__ = ("graph", "group", "position", "_members", "_missing_parents", "_free", "_ongoing")

    def __init__(self, com_type: ComType, npu_id: int, data_size: int, graph: Any, group: Any = None) -> None:
        super().__init__(com_type, npu_id, data_size)
        self.graph = graph
        self.group = group
        self.position = npu_id  # set by Sys: position in the collective (the ET's rank)
        self._members = None if group is None else sorted(group.involved_npus)
        for node in graph.nodes.values():
            if node.type not in _REPLAYED:
                raise UnsupportedFeatureError(
                    graph.path, node.describe(),
                    "a custom collective replays only COMM_SEND, COMM_RECV and COMP nodes "
                    "(ASTRA-sim would never finish it)",
                )
        self._missing_parents = {nid: len(node.parents) for nid, node in graph.nodes.items()}
        self._free: set[int] = set(graph.roots)
        self._ongoing: set[int] = set()

    def real_rank(self, algo_rank: int, node: Any) -> int:
        """The NPU at a position of the collective (CustomAlgorithm::convert_algo_rank_to_real_rank).

        In a communicator group, position k is the k-th smallest member. ASTRA-sim picks the ET
        file by that sorted position but maps the ET's ranks through the group's listed order,
        which disagree when the list is not sorted (a rank can end up sending to itself); we use
        the sorted order for both, which is ASTRA-sim's result wherever the list is sorted.
        """
        members = self._members
        size = self.sys.total_nodes if members is None else len(members)
        if not 0 <= algo_rank < size:
            raise UnsupportedFeatureError(
                self.graph.path, node.describe(),
                f"names rank {algo_rank}, but the collective runs on {size} NPUs (positions 0..{size - 1})",
            )
        real = algo_rank if members is None else members[algo_rank]
        if real == self.id:
            raise UnsupportedFeatureError(self.graph.path, node.describe(), f"NPU {real} would message itself")
        return real

    # -- events ---------------------------------------------------------------------------
    def run_stream_init(self) -> None:
        self.issue_dep_free_nodes()

    def issue_dep_free_nodes(self) -> None:
        free = sorted(self._free)
        self._free.clear()
        for nid in free:
            self._ongoing.add(nid)
            self.issue(self.graph.nodes[nid])

    def issue(self, node: Any) -> None:
        sys, nid, t = self.sys, node.id, node.type
        if t == pb.COMM_SEND_NODE:
            sys.native_send(self.real_rank(node.comm_dst, node), node.comm_size, node.comm_tag, self._node_done, nid)
        elif t == pb.COMM_RECV_NODE:
            sys.native_recv(self.real_rank(node.comm_src, node), node.comm_size, node.comm_tag, self._node_done, nid)
        else:  # a reduction step; its time is the node's duration
            sys.register_event(node.duration_ns or 1, self._node_done, nid)

    def _node_done(self, nid: int) -> None:
        """A SEND, RECV or COMP finished: free its children, issue them, or end the stream
        (CustomAlgorithm::call)."""
        self._ongoing.discard(nid)
        missing = self._missing_parents
        for child in self.graph.nodes[nid].children:
            missing[child] -= 1
            if missing[child] == 0:
                self._free.add(child)
        self.issue_dep_free_nodes()
        if not self._ongoing and not self._free:
            self.exit()


def resolve_custom_prefix(prefix: str, config_path: str | os.PathLike | None, position: int) -> str:
    """Where the ET files ``<prefix>.<position>.et`` of a custom collective are.

    ASTRA-sim opens the prefix relative to its working directory, and its shipped configs name
    paths from the ASTRA-sim repository root (``examples/system/custom_collectives/…``). So we try:

    1. the prefix as given (absolute, or relative to the current directory: ASTRA-sim's rule);
    2. relative to the system config's folder, then to each folder above it;
    3. documented fallback for configs copied out of the ASTRA-sim tree: the prefix with its
       leading folders dropped one at a time (``examples/system/custom_collectives/x`` →
       ``system/custom_collectives/x`` → ``custom_collectives/x`` …), longest first, each
       against the config's folder and the folders above it, nearest first. A config at
       ``…/system/examples/custom_collectives/custom_collective.json`` thus finds
       ``…/system/examples/custom_collectives/x`` when it names ``examples/system/custom_collectives/x``.

    Raises SystemConfigError naming the prefix and the places tried when none holds the file.
    """
    name = f".{position}.et"
    given = Path(prefix)
    if Path(prefix + name).is_file() or given.is_absolute():
        return prefix
    roots: list[Path] = []
    if config_path is not None:
        folder = Path(config_path).resolve().parent
        roots = [folder, *folder.parents]
    parts = given.parts
    for k in range(len(parts)):
        tail = Path(*parts[k:])
        for root in roots:
            candidate = root / tail
            if Path(str(candidate) + name).is_file():
                return str(candidate)
    raise SystemConfigError(
        config_path, "custom collective implementation",
        f"cannot find {prefix}{name}: looked in the current directory ({Path.cwd()})"
        + (f", under {roots[0]} and the folders above it, also with leading folders of the path dropped"
           if roots else ""),
    )
