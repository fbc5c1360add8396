"""System configuration: ASTRA-sim's system JSON keys, parsed once into a frozen object.

Files load unchanged from ASTRA-sim (JSON), or as YAML with the same keys. Defaults follow
ASTRA-sim's Sys constructor (docs/astra-sim-semantics.md §8); where ASTRA-sim leaves a value
uninitialised we pick its observed default and say so in the field's comment.
"""
from __future__ import annotations

import os
import warnings
from types import MappingProxyType

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from network.choices import Choice
from network.files import load_structured, path_str
from network.records import record
from system.errors import SystemConfigError

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Mapping

#: the collectives that run on the network, by the names the system config gives their implementations
CONFIG_NAMES = {pb.ALL_REDUCE: "all-reduce", pb.ALL_GATHER: "all-gather",
                pb.REDUCE_SCATTER: "reduce-scatter", pb.ALL_TO_ALL: "all-to-all"}


class SchedulingPolicy(Choice):
    LIFO = "LIFO"
    FIFO = "FIFO"
    EXPLICIT = "EXPLICIT"


class CollectiveOptimization(Choice):
    BASELINE = "baseline"
    LOCAL_BW_AWARE = "localBWAware"


class ImplType(Choice):
    RING = "ring"
    ONE_RING = "oneRing"
    DIRECT = "direct"
    ONE_DIRECT = "oneDirect"
    HALVING_DOUBLING = "halvingDoubling"
    ONE_HALVING_DOUBLING = "oneHalvingDoubling"
    DOUBLE_BINARY_TREE = "doubleBinaryTree"
    CUSTOM = "custom"

    @property
    def is_one(self) -> bool:
        return self in (ImplType.ONE_RING, ImplType.ONE_DIRECT, ImplType.ONE_HALVING_DOUBLING)


@record
class CollectiveImpl:
    """One entry of an ``*-implementation`` list (ASTRA-sim: CollectiveImpl)."""

    type: ImplType
    window: int = -1  # direct[N]: peers at once; -1 = all (N-1)
    filename: str | None = None  # custom: Chakra ET prefix replayed for the whole collective

    @classmethod
    def parse(cls, text: Any, path: Any, key: str) -> "CollectiveImpl":
        if not isinstance(text, str):
            raise SystemConfigError(path, f"key {key!r}", f"expected implementation names (strings), got {text!r}")
        for kind in (ImplType.ONE_DIRECT, ImplType.DIRECT):
            if text.startswith(kind.value):
                rest = text[len(kind.value):]
                if rest == "":
                    return cls(kind)
                if 1 <= len(rest) <= 5 and rest.isdecimal() and int(rest) > 0:  # re.fullmatch(r"\d{1,5}", rest)
                    return cls(kind, int(rest))
                raise SystemConfigError(path, f"key {key!r}", f"{text!r}: expected {kind.value} or {kind.value}N with N > 0")
        try:
            return cls(ImplType(text))
        except ValueError:
            names = "ring, oneRing, direct[N], oneDirect[N], halvingDoubling, oneHalvingDoubling, doubleBinaryTree"
            raise SystemConfigError(path, f"key {key!r}", f"unknown implementation {text!r}; expected one of {names}") from None


COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")

KNOWN_KEYS = {
    "scheduling-policy", "endpoint-delay", "active-chunks-per-dimension", "preferred-dataset-splits",
    "collective-optimization", "local-mem-bw", "boost-mode", "roofline-enabled", "peak-perf",
    "local-reduction-delay", "model-shared-bus", "L", "o", "g", "G", "trace-enabled", "replay-only",
    "track-local-mem", "local-mem-trace-filename", "per-node-custom-implementation",
    "intra-dimension-scheduling", "inter-dimension-scheduling",
    "collective-fixed-delay", "collective-copy-bw",
    *(f"{c}-implementation" for c in COLLECTIVES),
    *(f"{c}-implementation-custom" for c in COLLECTIVES),
}
_KNOWN_KEYS = KNOWN_KEYS
MAX_DATASET_SPLITS = 4096  # ASTRA-sim's examples use 1 to 64
_MAX_VALUE = 2 ** 63

# Keys ASTRA-sim 2.0 accepts but never reads in its timing paths (semantics §8).
IGNORED_KEYS = {"boost-mode", "trace-enabled", "local-reduction-delay", "intra-dimension-scheduling",
                "inter-dimension-scheduling"}


_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@record
class SystemConfig:
    """A parsed system file. (Named tuples, network/records.py, not dataclasses: importing
    dataclasses is ~13 ms of a small run's start-up.)"""

    scheduling_policy: SchedulingPolicy = SchedulingPolicy.LIFO
    preferred_dataset_splits: int = 1
    active_chunks_per_dimension: int = 1
    endpoint_delay_ns: int = 10
    collective_optimization: CollectiveOptimization = CollectiveOptimization.LOCAL_BW_AWARE
    local_mem_bw_gb_s: float = 0.0  # GB here is 10^9 bytes (unlike the network's 2^30)
    peak_perf_tflops: float = 0.0
    roofline_enabled: bool = False
    replay_only: bool = False
    track_local_mem: bool = False
    model_shared_bus: bool = False
    implementations: Mapping[str, tuple[CollectiveImpl, ...]] = _EMPTY
    custom_implementations: Mapping[str, CollectiveImpl] = _EMPTY
    per_node_custom: Mapping[int, CollectiveImpl] = _EMPTY
    # dtsim's own keys (ASTRA-sim has neither; 0 = off = ASTRA-sim's cycles): a cost paid once per
    # collective, whatever the GPU count: NCCL's base latency and kernel launch, and one pass of the
    # buffer over memory (GB = 10^9 B). A ring's costs are all per step, so without these a fit at
    # one GPU count gives other counts the wrong latency (docs/calibration.md)
    collective_fixed_delay_ns: int = 0
    collective_copy_bw_gb_s: float = 0.0
    path: str | None = None
    unknown_keys: tuple[str, ...] = ()

    def impls_for(self, collective: str) -> tuple[CollectiveImpl, ...]:
        return self.implementations.get(collective, ())

    def check_list_lengths(self, dims: int) -> None:
        """ASTRA-sim builds a logical topology for each of the four lists when it starts, whichever
        the workload runs, and asserts that none is longer than the network's dimensions."""
        for collective, impls in self.implementations.items():
            if len(impls) > dims:
                raise SystemConfigError(
                    self.path, f"key '{collective}-implementation'",
                    f"lists {len(impls)} implementations but the network has {dims} dimension(s); ASTRA-sim "
                    "aborts on such a list when it starts (GeneralComplexTopology.cc: 'collective_impl.size() <= "
                    "dimension_size.size()'), whether or not the workload runs that collective")

    @classmethod
    def default(cls) -> "SystemConfig":
        """ASTRA-sim's Ring_4chunks.json example: the config users start from."""
        ring = (CollectiveImpl(ImplType.RING),)
        return cls(
            preferred_dataset_splits=4,
            local_mem_bw_gb_s=1600.0,
            peak_perf_tflops=900.0,
            implementations={c: ring for c in COLLECTIVES},
            path="<built-in default: ASTRA-sim Ring_4chunks.json>",
        )

    @classmethod
    def from_file(cls, path: str | os.PathLike, injection_scale: float = 1.0) -> "SystemConfig":
        p = path_str(path)
        data = load_structured(p, SystemConfigError)
        return cls.from_dict(data, p, injection_scale)

    @classmethod
    def from_dict(cls, data: Any, path: Any = None, injection_scale: float = 1.0) -> "SystemConfig":
        if not isinstance(data, dict):
            raise SystemConfigError(path, "", f"expected a JSON object of system keys, got {type(data).__name__}")
        unknown = tuple(sorted(k for k in data if k not in KNOWN_KEYS))
        if unknown:
            warnings.warn(
                f"{path}: unknown system-config keys ignored: {', '.join(unknown)}", stacklevel=2
            )
        r = _Reader(data, path)
        kw: dict[str, Any] = {"path": None if path is None else str(path), "unknown_keys": unknown}
        if "scheduling-policy" in data:
            kw["scheduling_policy"] = r.enum("scheduling-policy", SchedulingPolicy)
        if "collective-optimization" in data:
            kw["collective_optimization"] = r.enum("collective-optimization", CollectiveOptimization)
        if "preferred-dataset-splits" not in data:
            raise SystemConfigError(
                path, "key 'preferred-dataset-splits'",
                "required (ASTRA-sim divides by it); give the number of chunks per collective, e.g. 4",
            )
        # every chunk is a stream the scheduler keeps in order: many thousands take hours to set up
        kw["preferred_dataset_splits"] = r.integer("preferred-dataset-splits", minimum=1, maximum=MAX_DATASET_SPLITS)
        if "active-chunks-per-dimension" in data:
            kw["active_chunks_per_dimension"] = r.integer("active-chunks-per-dimension", minimum=1)
        if "endpoint-delay" in data:
            ed = r.number("endpoint-delay", minimum=0)
            kw["endpoint_delay_ns"] = int(int(ed) * injection_scale)  # ASTRA-sim stores it in an int
        if "local-mem-bw" in data:
            kw["local_mem_bw_gb_s"] = float(r.number("local-mem-bw", minimum=0, tiny=1e-9))
        if "collective-fixed-delay" in data:
            kw["collective_fixed_delay_ns"] = r.integer("collective-fixed-delay", minimum=0)
        if "collective-copy-bw" in data:
            kw["collective_copy_bw_gb_s"] = float(r.number("collective-copy-bw", minimum=0, tiny=1e-9))
        if "peak-perf" in data:
            kw["peak_perf_tflops"] = float(r.number("peak-perf", minimum=0, tiny=1e-9))
        for key, attr in (("roofline-enabled", "roofline_enabled"), ("replay-only", "replay_only"),
                          ("track-local-mem", "track_local_mem"), ("model-shared-bus", "model_shared_bus")):
            if key in data:
                kw[attr] = r.flag(key)
        for key in ("boost-mode", "trace-enabled", "local-reduction-delay", "L", "o", "g", "G"):
            if key in data:
                r.number(key, minimum=0)
        impls: dict[str, tuple[CollectiveImpl, ...]] = {}
        customs: dict[str, CollectiveImpl] = {}
        for c in COLLECTIVES:
            key = f"{c}-implementation"
            if key in data:
                v = data[key]
                if isinstance(v, str):
                    v = [v]
                if not isinstance(v, list) or not v:
                    raise SystemConfigError(path, f"key {key!r}", "expected a non-empty list of implementation names, one per dimension")
                impls[c] = tuple(CollectiveImpl.parse(x, path, key) for x in v)
            ckey = f"{c}-implementation-custom"
            if ckey in data:
                v = data[ckey]
                if isinstance(v, str):
                    v = [v]
                if not isinstance(v, list) or len(v) != 1 or not isinstance(v[0], str):
                    raise SystemConfigError(path, f"key {ckey!r}", "expected a list holding exactly one Chakra ET prefix (it covers all dimensions)")
                customs[c] = CollectiveImpl(ImplType.CUSTOM, filename=v[0])
        kw["implementations"] = impls
        kw["custom_implementations"] = customs
        if "per-node-custom-implementation" in data:
            kw["per_node_custom"] = _per_node_custom(data["per-node-custom-implementation"], path)
        cfg = cls(**kw)
        if cfg.model_shared_bus:
            raise SystemConfigError(
                path, "key 'model-shared-bus'",
                "the LogGP shared-bus model is not supported; set it to 0",
            )
        return cfg


def _per_node_custom(v: Any, path: Any) -> dict[int, CollectiveImpl]:
    if not isinstance(v, str):
        raise SystemConfigError(path, "key 'per-node-custom-implementation'", "expected the path of a YAML file")
    p = path_str(v)
    import yaml  # here: a plain run reads no per-node file and need not import PyYAML

    try:
        with open(p, encoding="utf-8") as f:
            data = yaml.safe_load(f.read())
    except (OSError, ValueError, RecursionError, yaml.YAMLError) as e:  # ValueError: not UTF-8 text
        raise SystemConfigError(path, "key 'per-node-custom-implementation'", f"cannot read {v!r}: {e}") from None
    if not isinstance(data, dict):
        raise SystemConfigError(p, "", "expected a mapping of workload node id → Chakra ET prefix")
    out = {}
    for k, f in data.items():
        if isinstance(k, bool) or not isinstance(k, int) or not isinstance(f, str):
            raise SystemConfigError(p, f"entry {k!r}", "expected integer node id → string path")
        out[k] = CollectiveImpl(ImplType.CUSTOM, filename=f)
    return out


class _Reader:
    def __init__(self, data: dict, path: Any) -> None:
        self.data, self.path = data, path

    def _fail(self, key: str, expected: str) -> SystemConfigError:
        got = repr(self.data[key])
        return SystemConfigError(self.path, f"key {key!r}", f"expected {expected}, got {got if len(got) <= 40 else got[:37] + '...'}")

    def number(self, key: str, minimum: float | None = None, tiny: float = 0.0) -> float:
        """A finite number up to 2^63 (ASTRA-sim's 64-bit fields; a 400-digit integer would
        overflow a float later); with ``tiny``, 0 or at least ``tiny``, so that dividing by it
        gives a finite time."""
        v = self.data[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
            raise self._fail(key, "a number")
        if minimum is not None and v < minimum:
            raise self._fail(key, f"a number >= {minimum:g}")
        if v > _MAX_VALUE or 0 < v < tiny:
            raise self._fail(key, f"a number from {tiny:g} to 2^63" + (" (or 0)" if tiny else ""))
        return v

    def integer(self, key: str, minimum: int | None = None, maximum: int = 2 ** 63) -> int:
        v = self.data[key]
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._fail(key, "an integer")
        if minimum is not None and v < minimum:
            raise self._fail(key, f"an integer >= {minimum}")
        if v > maximum:
            raise self._fail(key, f"an integer <= {'2^63' if maximum == _MAX_VALUE else maximum}")
        return v

    def flag(self, key: str) -> bool:
        v = self.data[key]
        if isinstance(v, bool):
            return v
        if isinstance(v, (int, float)):
            return v != 0
        raise self._fail(key, "0 or 1")

    def enum(self, key: str, kind: type[Choice]) -> Any:
        v = self.data[key]
        try:
            return kind(v)
        except ValueError:
            raise self._fail(key, "one of " + ", ".join(repr(m.value) for m in kind)) from None
