"""Megatron's rank order and process groups for tp x dp x pp (x ep inside dp).

Megatron's default order ``tp-cp-ep-dp-pp`` numbers ranks tensor-parallel fastest:

    rank = t + tp x (d + dp x p)

so a tensor-parallel group is a run of neighbouring ranks (one NVSwitch node when tp <= 8), the
fastest dimension of the network. Expert parallelism is carved out of data parallelism: the
expert-parallel group of (d, t, p) holds the ep data-parallel indices of d's block of ep, the
expert-data-parallel group the dp / ep ranks at the same place in every block. The embedding
group joins the first and last pipeline stage (tied input and output embeddings).
Group ids, decimal strings in ``PREFIX.comm_groups.json``, follow kinds in a fixed order
(tp, dp, ep, edp, emb); a group that is every rank gets no id (its collectives are world ones).
"""
from __future__ import annotations

from workload.megatron.config import MegatronConfig

KINDS = ("tp", "dp", "ep", "edp", "emb")


class Layout:
    def __init__(self, cfg: MegatronConfig) -> None:
        self.tp, self.dp, self.pp = cfg.tensor_model_parallel_size, cfg.data_parallel_size, cfg.pipeline_model_parallel_size
        self.ep = cfg.expert_model_parallel_size if cfg.num_experts else 1
        self.ranks = self.tp * self.dp * self.pp
        self.members: dict[int, list[int]] = {}
        self.kind_of: dict[int, str] = {}
        self._id: dict[tuple[str, tuple[int, int, int]], int] = {}  # (kind, key of the group) -> id
        wanted = {"tp": self.tp > 1, "dp": self.dp > 1, "ep": self.ep > 1, "edp": self.ep > 1 and self.dp // self.ep > 1,
                  "emb": self.pp > 1 and cfg.tied_embeddings}
        for kind in KINDS:
            if wanted[kind]:
                for key, members in self._all(kind):
                    gid = 0
                    if len(members) < self.ranks:
                        gid = len(self.members) + 1
                        self.members[gid], self.kind_of[gid] = members, kind
                    self._id[(kind, key)] = gid

    def rank(self, d: int, t: int, p: int) -> int:
        return t + self.tp * (d + self.dp * p)

    def coordinates(self, rank: int) -> tuple[int, int, int]:
        """(d, t, p) of a rank."""
        t, rest = rank % self.tp, rank // self.tp
        return rest % self.dp, t, rest // self.dp

    def _all(self, kind: str):
        """(key, members) of every group of a kind, in rank order of their first members."""
        tp, dp, pp, ep = self.tp, self.dp, self.pp, self.ep
        if kind == "tp":
            return [((d, 0, p), [self.rank(d, x, p) for x in range(tp)]) for p in range(pp) for d in range(dp)]
        if kind == "dp":
            return [((0, t, p), [self.rank(x, t, p) for x in range(dp)]) for p in range(pp) for t in range(tp)]
        if kind == "ep":
            return [((b, t, p), [self.rank(b * ep + x, t, p) for x in range(ep)])
                    for p in range(pp) for b in range(dp // ep) for t in range(tp)]
        if kind == "edp":
            return [((j, t, p), [self.rank(x, t, p) for x in range(j, dp, ep)])
                    for p in range(pp) for j in range(ep) for t in range(tp)]
        return [((d, t, 0), [self.rank(d, t, 0), self.rank(d, t, pp - 1)]) for d in range(dp) for t in range(tp)]

    @staticmethod
    def _key(kind: str, d: int, t: int, p: int, ep: int, pp: int) -> tuple[int, int, int] | None:
        if kind == "tp":
            return (d, 0, p)
        if kind == "dp":
            return (0, t, p)
        if kind == "ep":
            return (d // ep, t, p)
        if kind == "edp":
            return (d % ep, t, p)
        return (d, t, 0) if p in (0, pp - 1) else None

    def group(self, kind: str, rank: int) -> int | None:
        """The group id of ``kind`` holding ``rank``: 0 for the whole world, None if the rank has
        no such group (a group of one: its collectives are left out)."""
        d, t, p = self.coordinates(rank)
        key = self._key(kind, d, t, p, self.ep, self.pp)
        return None if key is None else self._id.get((kind, key))

    def stage_offset(self, delta: int) -> int:
        """Rank distance between the same (d, t) on stages p and p + delta."""
        return delta * self.tp * self.dp

    def orbits_json(self, reps: list[int]) -> dict:
        """``PREFIX.orbits.json`` of a per-orbit set (workload/orbit_files.py): every other rank is
        the image of its stage's representative under the rotations of the dp and tp groups."""
        families = [[g for g, k in self.kind_of.items() if k == kind] for kind in ("dp", "tp")]
        return {"format": "dtsim-orbits/1", "ranks": self.ranks, "representatives": reps,
                "rotate": [f for f in families if f],
                "note": "rank t + tp*(d + dp*p) runs stage p's file with its groups and peers rotated by d and t"}

    def to_json(self) -> dict[str, list[int]]:
        return {str(g): m for g, m in self.members.items()}
