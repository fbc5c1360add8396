"""Another rank's results seen through its representative's (a shortcut simulated fewer ranks)."""
from __future__ import annotations

from system.shortcuts.orbits import Orbits

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any


class RankView:
    """Another rank's view of its representative's workload: in a symmetric run, or with
    ``orbits`` (system/shortcuts/orbits.py) through the symmetry that maps the representative onto it."""

    __slots__ = ("_w", "rank", "_perm", "_groups")

    def __init__(self, workload: Any, rank: int, orbits: Orbits | None = None) -> None:
        self._w = workload
        self.rank = rank
        self._perm = self._groups = None
        if orbits is not None:
            j = orbits.power[rank]
            self._perm, self._groups = orbits.perm(j), orbits.group_perm(j)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._w, name)

    @property
    def viewed(self) -> Any:
        """The representative's workload."""
        return self._w

    def peer(self, rank: int) -> int:
        """The rank that plays, for this one, the part ``rank`` plays for the representative."""
        return rank if self._perm is None else self._perm[rank]

    def group(self, gid: int) -> int:
        """The communicator group that plays, for this rank, the part ``gid`` plays for the representative."""
        return gid if self._groups is None else self._groups.get(gid, gid)

    def group_name(self, pg: str | None) -> str | None:
        """A representative's collective's ``pg`` (its communicator group's name) as this rank's."""
        if self._groups is None or pg in (None, "", "0"):
            return pg
        return str(self.group(int(pg)))

    @property
    def collectives(self) -> list[dict[str, Any]]:
        own = self._w.collectives
        if self._groups is None:
            return own
        names = {pg: self.group_name(pg) for pg in {c.get("pg") for c in own}}  # a few groups per rank
        return [c if c.get("pg") in (None, "", "0") else dict(c, pg=names[c["pg"]]) for c in own]
