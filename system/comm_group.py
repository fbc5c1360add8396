"""Communicator groups: collectives among a subset of ranks (ASTRA-sim: CommunicatorGroup).

A group as large as the world uses the world's logical topology. A smaller group runs as a
1-D ring over its members in the order listed (not sorted); a multi-entry implementation list
becomes a single ring (docs/astra-sim-semantics.md §10.6). Stream ids of a group start at
id × 10^6, so that members agree on tags whatever else they run.
"""
from __future__ import annotations

import os

from network.files import load_structured, path_str
from system.config import CollectiveImpl, ImplType
from system.errors import CommGroupError
from system.logical_topology import LogicalTopology, RingTopology

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any


class CollectivePlan:
    __slots__ = ("topology", "implementation_per_dimension", "dimensions_involved")

    def __init__(self, topology: LogicalTopology, impls: tuple[CollectiveImpl, ...], involved: list[bool] | None) -> None:
        self.topology = topology
        self.implementation_per_dimension = impls
        self.dimensions_involved = involved


class CommunicatorGroup:
    __slots__ = ("id", "involved_npus", "sys", "num_streams", "pos_in_group", "_plans")

    def __init__(self, group_id: int, involved_npus: list[int], sys: Any) -> None:
        self.id = group_id
        self.involved_npus = list(involved_npus)
        self.sys = sys
        self.num_streams = group_id * 1_000_000
        self.pos_in_group = sorted(involved_npus).index(sys.id) if sys.id in involved_npus else -1
        self._plans: dict[Any, CollectivePlan] = {}

    def get_collective_plan(self, com_type: Any, impls: tuple[CollectiveImpl, ...]) -> CollectivePlan:
        plan = self._plans.get(com_type)
        if plan is not None:
            return plan
        if len(self.involved_npus) == self.sys.total_nodes:
            plan = CollectivePlan(self.sys.get_logical_topology(com_type), impls, None)
        else:
            if len(self.involved_npus) == 1:
                self.sys.divergences.note("one-rank-group", (
                    f"{com_type.config_name} on communicator group {self.id}, whose only member is rank "
                    f"{self.involved_npus[0]}: ASTRA-sim never finishes a collective of one rank (it exits 0 with the "
                    "rank unfinished: 'Hardware Resource ... has unreleased nodes'); dtsim completes it at once, as "
                    "a group of one moves no data"))
            if len(impls) == 1 and impls[0].type is ImplType.DOUBLE_BINARY_TREE:  # a longer list is a ring there too
                self.sys.divergences.note(("dbt-group", com_type), (
                    f"{com_type.config_name} on communicator group {self.id} ({len(self.involved_npus)} of "
                    f"{self.sys.total_nodes} ranks) with doubleBinaryTree: ASTRA-sim crashes on a tree over a "
                    "sub-group (segmentation fault, exit 139); dtsim runs the group's collective as a ring"))
            if len(impls) > 1 or (impls and impls[0].type is ImplType.DOUBLE_BINARY_TREE):
                impls = (CollectiveImpl(ImplType.RING),)
            ring = RingTopology(self.sys.id, self.involved_npus, local=True)
            plan = CollectivePlan(LogicalTopology([ring]), impls, [True])
        self._plans[com_type] = plan
        return plan


def load_comm_groups(path: str | os.PathLike, npus_count: int) -> dict[int, list[int]]:
    """Read ``{"<id>": [ranks...]}`` (ASTRA-sim's --comm-group-configuration)."""
    p = path_str(path)
    data = load_structured(p, CommGroupError, fmt="json")
    return parse_comm_groups(data, p, npus_count)


def parse_comm_groups(data: Any, path: Any, npus_count: int) -> dict[int, list[int]]:
    if not isinstance(data, dict):
        raise CommGroupError(path, "", 'expected an object {"<group id>": [rank, ...], ...}')
    groups: dict[int, list[int]] = {}
    for key, ranks in data.items():
        try:
            gid = int(key)
        except (TypeError, ValueError):
            raise CommGroupError(path, f"group {key!r}", "group ids must be integers > 0") from None
        if gid <= 0:
            raise CommGroupError(path, f"group {key!r}", "group ids must be integers > 0 (0 means all ranks)")
        if not isinstance(ranks, list) or not ranks:
            raise CommGroupError(path, f"group {key!r}", "expected a non-empty list of ranks")
        for r in ranks:
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < npus_count:
                raise CommGroupError(path, f"group {key!r}", f"rank {r!r} is not in 0..{npus_count - 1}")
        if len(set(ranks)) != len(ranks):
            raise CommGroupError(path, f"group {key!r}", "a rank is listed twice")
        groups[gid] = list(ranks)
    return groups
