"""PyTorch process groups → the simulator's communicator groups.

Both traces list the groups a rank knows: Kineto in ``distributedInfo.pg_config`` (``pg_name``,
``ranks``), the execution trace in its ``## process_group:init ##`` node (a JSON list with
``pg_name``, ``ranks`` (empty: every rank) and ``group_size``). A group of every rank is the world
(no group needed); any other group gets an id 1, 2, ... (ordered by name, the same on every rank)
and is written to ``PREFIX.comm_groups.json``, ASTRA-sim's ``--comm-group-configuration``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workload.collect.execution_trace import ExecutionTrace
from workload.pytorch.device_trace import DeviceTrace
from workload.pytorch.errors import PyTorchTraceError

PG_INIT = "## process_group:init ##"


class ProcessGroups:
    """Every rank's process groups, merged; ``pg_attr`` names a group the way the ET nodes carry it."""

    def __init__(self, world: int) -> None:
        self.world = world
        self.members: dict[str, list[int]] = {}
        self._seen_in: dict[str, Path] = {}
        self.ids: dict[str, int] = {}

    def add(self, name: str, ranks: list[int], path: Path) -> None:
        if not ranks:
            return
        if any(not 0 <= r < self.world for r in ranks):
            raise PyTorchTraceError(path, f"process group {name!r}", f"ranks {ranks[:8]} are not all in "
                                    f"0..{self.world - 1}; pass --ranks with the job's world size")
        known = self.members.get(name)
        if known is not None and known != ranks:
            raise PyTorchTraceError(path, f"process group {name!r}", f"has ranks {ranks[:8]} here but "
                                    f"{known[:8]} in {self._seen_in[name]}: the files are not from one job")
        self.members.setdefault(name, ranks)
        self._seen_in.setdefault(name, path)

    def read(self, host: ExecutionTrace, device: DeviceTrace) -> None:
        for cfg in device.pg_config:
            self.add(str(cfg.get("pg_name")), _ranks(cfg.get("ranks"), cfg.get("pg_size"), self.world),
                     device.path)
        for node in host.nodes.values():
            if node.name == PG_INIT and node.inputs.values:
                for cfg in _json_list(node.inputs.values[0]):
                    self.add(str(cfg.get("pg_name")), _ranks(cfg.get("ranks"), cfg.get("group_size"),
                                                             self.world), host.path)

    def number(self) -> None:
        """Give the groups that are not the world their ids (call once all ranks are read)."""
        others = sorted((n for n, r in self.members.items() if sorted(r) != list(range(self.world))),
                        key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))
        self.ids = {name: i + 1 for i, name in enumerate(others)}

    def pg_attr(self, name: str | None) -> str | None:
        """The pg_name attribute for a collective of group ``name`` (None: the world)."""
        if name is None or name not in self.ids:
            return None
        return str(self.ids[name])

    def global_rank(self, name: str | None, group_rank: int) -> int:
        ranks = self.members.get(name) if name is not None else None
        if ranks is None or name not in self.ids:
            return group_rank
        return ranks[group_rank] if 0 <= group_rank < len(ranks) else group_rank

    def non_world(self) -> list[str]:
        return list(self.ids)

    def comm_groups(self) -> dict[str, list[int]]:
        return {str(gid): self.members[name] for name, gid in self.ids.items()}


def _ranks(ranks: Any, size: Any, world: int) -> list[int]:
    if isinstance(ranks, str):
        ranks = _json_list(ranks)
    if isinstance(ranks, list) and ranks:
        try:
            return [int(r) for r in ranks]
        except (TypeError, ValueError):
            return []
    try:
        n = int(size)
    except (TypeError, ValueError):
        return []
    return list(range(world)) if n == world else []


def _json_list(text: Any) -> list:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
