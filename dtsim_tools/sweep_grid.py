"""A sweep grid: one base configuration and the values to vary, expanded to one point per combination.

The grid file is YAML (docs/sweeps.md has the long form)::

    base:                                   # what every point starts from
      workload: {collective: ALL_REDUCE, size: 1MiB}   # or {et: PREFIX} or {triosim: DIR, dp: 8, ...}
      network: ../network/Ring_8npus.yml    # ASTRA-sim's network YAML: a file or the keys inline
      system: ../system/Ring_4chunks.json   # ASTRA-sim's system JSON: a file or the keys inline (optional)
      run: {max_wall_s: 60}                 # run_simulation's options (optional)
    vary:                                   # the cartesian product of these lists; first key slowest
      network.bandwidth: [25, 50, 100]      # SECTION.KEY[.SUBKEY or .INDEX]: the values to try
      system.preferred-dataset-splits: [1, 4]
      shape:                                # any other name: each value is a set of keys changed together
        - {label: ring64, network.topology: Ring, network.npus_count: 64}
        - {label: 8x8, network.topology: [Ring, Switch], network.npus_count: [8, 8]}
    plot: {x: network.bandwidth, y: end_cycles}        # optional: what --plot draws

Network and system files are read here, on the machine that expands the grid, so a point carries its
configs inline; only workload paths (an ``et`` prefix, a TrioSim trace folder) must be readable where
the point runs. Relative paths are relative to the grid file. A scalar given for a per-dimension
network key (``topology``, ``npus_count``, ``bandwidth``, ``latency``) or for a system
``*-implementation`` key applies to every dimension; ``npus_count: auto`` takes the rank count of a
TrioSim layout (dp × tp × pp). Mistakes in the grid's shape or key names are ``GridError`` (exit 2);
a bad *value* fails only the points that use it (``sweep_point``).
"""
from __future__ import annotations

import copy
import inspect
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from network.config import LIST_KEYS as NETWORK_LIST_KEYS, OPTIONAL_KEYS as NETWORK_OPTIONAL_KEYS
from network.files import load_structured
from network.errors import InputError
from system.config import KNOWN_KEYS as SYSTEM_KEYS
from workload.triosim import convert_triosim

SECTIONS = ("workload", "network", "system", "run")
NETWORK_KEYS = NETWORK_LIST_KEYS + NETWORK_OPTIONAL_KEYS
RUN_KEYS = ("symmetry", "num_queues_per_dim", "injection_scale", "max_events", "max_wall_s", "remote_memory")
TRIOSIM_KEYS = tuple(k for k in inspect.signature(convert_triosim).parameters if k not in ("trace_dir", "out_prefix"))
WORKLOAD_KINDS = {  # kind key -> the other keys it takes
    "collective": ("size",),
    "et": ("comm_groups",),
    "triosim": TRIOSIM_KEYS,
}
PATH_KEYS = {("workload", "et"), ("workload", "comm_groups"), ("workload", "triosim"), ("run", "remote_memory")}
_TOP_KEYS = ("base", "vary", "plot", "description")
_PLOT_KEYS = ("x", "y", "facet", "logx", "logy", "title")


class GridError(InputError):
    """The sweep grid file is invalid: names the file, the key, and what was expected."""


@dataclass(frozen=True)
class Point:
    """One configuration of the sweep: the varied values (``params``, column → value as written in
    the grid) and the full inputs, inline, so that the point runs on any machine."""

    index: int
    grid: str  # the grid file, named by errors about this point's values
    params: dict[str, Any]
    workload: dict[str, Any]
    network: dict[str, Any]
    system: dict[str, Any] | None
    run: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Grid:
    path: str
    axes: list[str]  # the varied columns, in the grid's order
    points: list[Point]
    plot: dict[str, Any]


def load_grid(path: str | os.PathLike) -> Grid:
    """Read and check a grid file and expand it to its points (first ``vary`` key slowest)."""
    p = Path(path)
    data = _read_mapping(p)
    _known(p, "", data, _TOP_KEYS)
    base = data.get("base")
    if not isinstance(base, dict):
        raise GridError(p, "key 'base'", "required: a mapping with workload, network and optional system, run")
    _known(p, "base", base, SECTIONS)
    for s in ("workload", "network"):
        if s not in base:
            raise GridError(p, f"key 'base.{s}'", "required")
    sections = {s: _section(p, f"base.{s}", s, base.get(s)) for s in SECTIONS}
    axes = _axes(p, data.get("vary"))
    points = []
    for i, combo in enumerate(itertools.product(*(values for _, values in axes))):
        cfg = copy.deepcopy(sections)
        params = {column: label for (column, _), (label, _) in zip(axes, combo)}
        changes = [c for _, cs in combo for c in cs]
        for key, value in sorted(changes, key=lambda c: c[0] not in SECTIONS):  # whole sections first
            _apply(p, cfg, key, value)
        where = f"point {i} ({_describe(params)})" if params else "base"
        _check_workload(p, where, cfg["workload"])
        points.append(Point(i, str(p), params, cfg["workload"], cfg["network"], cfg["system"], cfg["run"]))
    return Grid(str(p), [c for c, _ in axes], points, _plot(p, data.get("plot"), [c for c, _ in axes]))


# -- reading -------------------------------------------------------------------------------------

def _read_mapping(p: Path) -> dict:
    data = load_structured(p, GridError)
    if not isinstance(data, dict):
        raise GridError(p, "", f"expected a mapping of keys, got {type(data).__name__}")
    return data


def _known(p: Path, where: str, data: dict, allowed: tuple[str, ...]) -> None:
    for k in data:
        if k not in allowed:
            key = f"{where}.{k}" if where else str(k)
            raise GridError(p, f"key {key!r}", f"unknown key; expected one of {', '.join(allowed)}")


def _section(p: Path, where: str, section: str, value: Any) -> dict | None:
    """A base section (or a whole-section value in ``vary``) as a fresh dict; files are read."""
    if value is None and section in ("system", "run"):
        return None if section == "system" else {}
    if section == "workload" and isinstance(value, str):
        value = {"et": value}
    if section in ("network", "system") and isinstance(value, str):
        f = _resolve(p, value)
        data = _read_mapping(Path(f))
        _check_section_keys(Path(f), "", section, data)
        return data
    if not isinstance(value, dict):
        raise GridError(p, f"key {where!r}", f"expected a mapping{' or a file path' if section != 'run' else ''}, "
                                             f"got {value!r}")
    _check_section_keys(p, where, section, value)
    out = copy.deepcopy(value)
    for k in out:
        if (section, k) in PATH_KEYS and isinstance(out[k], str):
            out[k] = _resolve(p, out[k])
    return out


def _check_section_keys(p: Path, where: str, section: str, data: dict) -> None:
    for k in data:
        _check_key(p, f"{where}.{k}" if where else str(k), section, [str(k)])


def _check_key(p: Path, where: str, section: str, parts: list[str]) -> None:
    """A key's name must exist in its section (a typo would make every point the same)."""
    head, rest = parts[0], parts[1:]
    allowed = {"network": NETWORK_KEYS, "system": tuple(sorted(SYSTEM_KEYS)), "run": RUN_KEYS,
               "workload": tuple(WORKLOAD_KINDS) + tuple(k for ks in WORKLOAD_KINDS.values() for k in ks)}[section]
    if head not in allowed:
        raise GridError(p, f"key {where!r}", f"unknown {section} key {head!r}; expected one of {', '.join(allowed)}")
    nested = section == "network" and head in ("ns3", "congestion_aware")
    if rest and not nested and not (len(rest) == 1 and rest[0].isdigit()):
        raise GridError(p, f"key {where!r}", f"{head!r} has no sub-keys; only a dimension index (e.g. {head}.0)")


def _resolve(p: Path, value: str) -> str:
    return str((p.parent / value).resolve()) if not os.path.isabs(value) else value


# -- vary ----------------------------------------------------------------------------------------

def _axes(p: Path, vary: Any) -> list[tuple[str, list[tuple[Any, list[tuple[str, Any]]]]]]:
    """Each axis: (column, [(label, [(dotted key, value), ...]), ...])."""
    if vary is None:
        return []
    if not isinstance(vary, dict):
        raise GridError(p, "key 'vary'", "expected a mapping of KEY: [values]")
    axes = []
    for column, values in vary.items():
        where = f"vary.{column}"
        if not isinstance(values, list) or not values:
            raise GridError(p, f"key {where!r}", f"expected a non-empty list of values, got {values!r}")
        if column in SECTIONS:  # a whole section per value
            entries = [(v, [(column, _section(p, where, column, v))]) for v in values]
        elif "." in str(column):
            _check_dotted(p, where, column)
            entries = [(v, [(column, v)]) for v in values]
        else:  # a linked axis
            entries = [_linked(p, f"{where}[{j}]", v) for j, v in enumerate(values)]
        axes.append((str(column), entries))
    return axes


def _check_dotted(p: Path, where: str, key: str) -> None:
    section, *parts = key.split(".")
    if section not in SECTIONS:
        raise GridError(p, f"key {where!r}", f"{section!r} is not a section; expected one of {', '.join(SECTIONS)}")
    if not parts or not parts[0]:
        raise GridError(p, f"key {where!r}", "expected SECTION.KEY")
    _check_key(p, where, section, parts)


def _linked(p: Path, where: str, value: Any) -> tuple[Any, list[tuple[str, Any]]]:
    if not isinstance(value, dict) or not value:
        raise GridError(p, f"key {where!r}", "expected a mapping of SECTION.KEY: value (and an optional label)")
    changes = []
    for k, v in value.items():
        if k in SECTIONS:
            changes.append((k, _section(p, f"{where}.{k}", k, v)))
        elif k != "label":
            _check_dotted(p, f"{where}.{k}", str(k))
            changes.append((str(k), v))
    return value.get("label", _describe({k: value[k] for k in value if k != "label"})), changes


def _apply(p: Path, cfg: dict, key: str, value: Any) -> None:
    if key in SECTIONS:
        cfg[key] = copy.deepcopy(value)
        return
    section, *parts = key.split(".")
    if cfg[section] is None:
        raise GridError(p, f"key 'vary.{key}'", f"base has no {section} config to change; give base.{section}")
    if (section, parts[0]) in PATH_KEYS and isinstance(value, str):
        value = _resolve(p, value)
    index = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else None
    walk, last = (parts[:-2], parts[-2]) if index is not None else (parts[:-1], parts[-1])
    node = cfg[section]
    for part in walk:  # nested mappings (ns3 knobs)
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if index is None:
        node[last] = copy.deepcopy(value)
        return
    lst = node.get(last)  # one dimension of a per-dimension list
    lst = list(lst) if isinstance(lst, list) else [lst]
    if index >= len(lst):
        raise GridError(p, f"key 'vary.{key}'", f"{last!r} has {len(lst)} dimension(s); no index {index}")
    lst[index] = value
    node[last] = lst


def _check_workload(p: Path, where: str, wl: dict) -> None:
    kinds = [k for k in WORKLOAD_KINDS if k in wl]
    if len(kinds) != 1:
        raise GridError(p, f"workload of {where}",
                        f"expected exactly one of {', '.join(WORKLOAD_KINDS)}, got {sorted(wl) or 'none'}")
    extra = [k for k in wl if k != kinds[0] and k not in WORKLOAD_KINDS[kinds[0]]]
    if extra:
        raise GridError(p, f"workload of {where}, key {extra[0]!r}",
                        f"not a key of a {kinds[0]} workload; expected {', '.join(WORKLOAD_KINDS[kinds[0]])}")


def _plot(p: Path, plot: Any, axes: list[str]) -> dict[str, Any]:
    if plot is None:
        return {}
    if not isinstance(plot, dict):
        raise GridError(p, "key 'plot'", f"expected a mapping with keys {', '.join(_PLOT_KEYS)}")
    _known(p, "plot", plot, _PLOT_KEYS)
    for k in ("x", "facet"):
        if k in plot and plot[k] not in axes:
            raise GridError(p, f"key 'plot.{k}'", f"{plot[k]!r} is not a vary key; expected one of {', '.join(axes)}")
    return dict(plot)


def _describe(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in params.items())


def format_value(v: Any) -> str:
    """A parameter as one CSV cell: scalars as written, lists and mappings as compact JSON."""
    if isinstance(v, (list, dict)):
        return json.dumps(v, separators=(",", ":"))
    return "" if v is None else str(v)
