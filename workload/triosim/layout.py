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

import argparse
from dataclasses import asdict, dataclass

from workload.builder import add_astra_sim_compatible_argument
from workload.triosim.errors import LayoutError

DP_MODES = ("sync", "ddp")
PP_SCHEDULES = ("gpipe", "1f1b")
PP_BALANCES = ("time", "count")
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


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags that choose a TrioSim trace's batch scaling and parallel layout."""
    g = parser.add_argument_group("TrioSim trace layout")
    g.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="batch size the trace was recorded at (needed with --batch-size-sim)")
    g.add_argument("--batch-size-sim", type=int, default=None, metavar="N",
                   help="batch size each data-parallel replica simulates; sizes and times are "
                        "divided by bsRatio = batch-size / batch-size-sim (default: no scaling)")
    g.add_argument("--dp", type=int, default=1, metavar="N", help="data-parallel ranks (default 1)")
    g.add_argument("--tp", type=int, default=1, metavar="N", help="tensor-parallel ranks (default 1)")
    g.add_argument("--pp", type=int, default=1, metavar="N", help="pipeline stages (default 1)")
    g.add_argument("--micro-batches", type=int, default=1, metavar="N",
                   help="micro-batches per iteration (pipeline parallel; default 1)")
    g.add_argument("--dp-mode", choices=DP_MODES, default="sync",
                   help="sync: one all-reduce of all gradients after the backward pass; "
                        "ddp: bucketed all-reduces overlapping the backward pass (default sync)")
    g.add_argument("--bucket-mb", type=float, default=25.0, metavar="MiB",
                   help="DDP gradient bucket cap in MiB (default 25, as PyTorch)")
    g.add_argument("--pp-schedule", choices=PP_SCHEDULES, default="gpipe",
                   help="pipeline schedule (default gpipe: all forwards, then all backwards)")
    g.add_argument("--pp-balance", choices=PP_BALANCES, default="time",
                   help="cut stages by operator time, or by operator count as TrioSim does (default time)")
    g.add_argument("--no-scale-weights", dest="scale_weights", action="store_false",
                   help="keep parameter and gradient sizes unscaled by bsRatio (TrioSim scales them)")
    add_astra_sim_compatible_argument(g)


def layout_from_args(args: argparse.Namespace) -> dict:
    """The keyword arguments of ``convert_triosim`` taken from parsed ``add_layout_arguments`` flags."""
    return {k: getattr(args, k) for k in (
        "batch_size", "batch_size_sim", "dp", "tp", "pp", "micro_batches", "dp_mode",
        "bucket_mb", "pp_schedule", "pp_balance", "scale_weights", "astra_sim_compatible",
    )}
