"""A parallel layout: dp × tp × pp ranks, how ranks are numbered, and their communication groups.

Rank numbering puts tensor parallelism fastest, then data, then pipeline:

    rank = tp_index + tp · (dp_index + dp · pp_index)

so a tensor-parallel group is a run of neighbouring ranks, which on an ASTRA-sim multi-dimensional
network (dimension 0 fastest, docs/astra-sim-semantics.md §6.2) lands on the fastest dimension.
Groups that span a subset of ranks get ids for ``--comm-group-configuration`` (tensor-parallel
groups first, then data-parallel ones), members listed in ring order (ascending rank). A group
that is all ranks needs no id: its collectives leave ``pg_name`` unset, as ASTRA-sim expects.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from workload.triosim.errors import LayoutError
from workload.triosim.layout_flags import DP_MODES, PP_BALANCES, PP_SCHEDULES, add_layout_arguments, layout_from_args  # noqa: F401
_MIB = 1 << 20


@dataclass(frozen=True)
class Layout:
    """The flags of one conversion, checked. Batch sizes are per data-parallel replica."""

    batch_size: int | None = None  #: the trace's batch (None: unknown, no scaling)
    batch_size_sim: int | None = None  #: the batch one replica simulates (default: the trace's)
    dp: int = 1
    tp: int = 1
    pp: int = 1
    micro_batches: int = 1
    dp_mode: str = "sync"
    bucket_mb: float = 25.0  #: DDP bucket cap in MiB (PyTorch's bucket_cap_mb)
    pp_schedule: str = "gpipe"
    pp_balance: str = "time"
    scale_weights: bool = True
    astra_sim_compatible: bool = False  #: whole-µs durations, no private attributes (builder.py)

    def __post_init__(self) -> None:
        for flag, v in (("--dp", self.dp), ("--tp", self.tp), ("--pp", self.pp),
                        ("--micro-batches", self.micro_batches)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LayoutError(flag, f"expected an integer >= 1, got {v!r}")
        for flag, v in (("--batch-size", self.batch_size), ("--batch-size-sim", self.batch_size_sim)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise LayoutError(flag, f"expected an integer >= 1, got {v!r}")
        if self.batch_size_sim is not None and self.batch_size is None:
            raise LayoutError("--batch-size-sim", "needs --batch-size, the batch size the trace was recorded at")
        for flag, v, allowed in (("--dp-mode", self.dp_mode, DP_MODES),
                                 ("--pp-schedule", self.pp_schedule, PP_SCHEDULES),
                                 ("--pp-balance", self.pp_balance, PP_BALANCES)):
            if v not in allowed:
                raise LayoutError(flag, f"{v!r} is not one of {', '.join(allowed)}")
        if not isinstance(self.bucket_mb, (int, float)) or not self.bucket_mb > 0:
            raise LayoutError("--bucket-mb", f"expected a size in MiB > 0, got {self.bucket_mb!r}")

    @property
    def ranks(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def bucket_bytes(self) -> int:
        return int(self.bucket_mb * _MIB)

    def rank(self, dp_index: int, tp_index: int, pp_index: int) -> int:
        return tp_index + self.tp * (dp_index + self.dp * pp_index)

    def coordinates(self, rank: int) -> tuple[int, int, int]:
        """(dp_index, tp_index, pp_index) of a rank."""
        tp_index, rest = rank % self.tp, rank // self.tp
        return rest % self.dp, tp_index, rest // self.dp

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CommGroups:
    """Group ids (decimal strings in files) of every tp and dp group; 0 means all ranks."""

    members: dict[int, list[int]]  #: group id → ranks in ring order (subset groups only)
    kinds: dict[int, str]  #: group id → "tp" | "dp"
    _tp: dict[tuple[int, int], int]  #: (dp_index, pp_index) → id
    _dp: dict[tuple[int, int], int]  #: (tp_index, pp_index) → id

    @classmethod
    def of(cls, layout: Layout) -> "CommGroups":
        members: dict[int, list[int]] = {}
        kinds: dict[int, str] = {}
        tp_ids: dict[tuple[int, int], int] = {}
        dp_ids: dict[tuple[int, int], int] = {}
        world = layout.ranks

        def add(kind: str, ranks: list[int]) -> int:
            if len(ranks) == world:
                return 0
            gid = len(members) + 1
            members[gid], kinds[gid] = ranks, kind
            return gid

        if layout.tp > 1:
            for p in range(layout.pp):
                for d in range(layout.dp):
                    tp_ids[(d, p)] = add("tp", [layout.rank(d, t, p) for t in range(layout.tp)])
        if layout.dp > 1:
            for p in range(layout.pp):
                for t in range(layout.tp):
                    dp_ids[(t, p)] = add("dp", [layout.rank(d, t, p) for d in range(layout.dp)])
        return cls(members, kinds, tp_ids, dp_ids)

    def tp_group(self, dp_index: int, pp_index: int) -> int:
        return self._tp[(dp_index, pp_index)]

    def dp_group(self, tp_index: int, pp_index: int) -> int:
        return self._dp[(tp_index, pp_index)]

    def to_json(self) -> dict[str, list[int]]:
        """ASTRA-sim's ``--comm-group-configuration`` format."""
        return {str(g): list(r) for g, r in self.members.items()}
