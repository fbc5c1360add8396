"""One point of a sweep: write its inputs into a folder, simulate it, and summarise it as one CSV row.

``run_point`` never raises for a bad point: a point that fails is a row whose ``status`` and
``exit_code`` are what ``python -m system.main`` would have given (bad_input 2, stuck 3, error 1)
and whose ``message`` says why, so one bad configuration never ends a sweep. It is what the local
processes and the Dask workers call: a point travels as plain data, this module is uploaded to the
cluster (``Client.upload_file``), and besides it a worker needs only dtsim installed.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import yaml

from chakra_proto import et_def_pb2 as pb
from network.config import LIST_KEYS as NETWORK_LIST_KEYS
from network.errors import InputError, SimulationLimitError
from system.main import Deadlock, ExitCode, SimulationResult, run_simulation
from system.report import build_report
from workload.builder import write_collective_microbenchmark
from workload.triosim import convert_triosim

STATUS = {ExitCode.OK: "ok", ExitCode.INTERNAL_ERROR: "error", ExitCode.BAD_INPUT: "bad_input",
          ExitCode.STUCK: "stuck"}
RESULT_COLUMNS = (
    "status", "exit_code", "npus", "backend", "end_cycles", "mean_rank_cycles", "max_rank_cycles",
    "min_rank_cycles", "compute_cycles_mean", "exposed_comm_cycles_mean", "exposed_comm_cycles_max",
    "events", "fast_path", "sim_wall_s", "wall_s", "message",
)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_FLAGS = {"num_queues_per_dim": "--num-queues-per-dim", "injection_scale": "--injection-scale",
          "max_events": "--max-events", "max_wall_s": "--max-wall-seconds",
          "remote_memory": "--remote-memory-configuration"}


def run_point(point: dict[str, Any], work_dir: str | None = None) -> dict[str, Any]:
    """Simulate one point (``sweep_grid.Point`` as a dict: plain data travels to any worker);
    return its CSV row. With ``work_dir`` the point's inputs stay in ``work_dir/point-NNNN/`` with
    the equivalent ``system.main`` command line."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"point": point["index"], **point["params"], "message": ""}
    with _point_folder(point["index"], work_dir) as folder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            row.update(summarise(_simulate(point, folder, keep=work_dir is not None)), status="ok", exit_code=0)
            row["message"] = "; ".join(dict.fromkeys(str(w.message) for w in caught))
        except (InputError, SimulationLimitError) as e:
            _failed(row, ExitCode.BAD_INPUT, str(e))
        except Deadlock as e:
            _failed(row, ExitCode.STUCK, " ".join(line.strip() for line in e.report(max_ranks=1).splitlines()[:3]))
        except Exception as e:  # noqa: BLE001 -- the edge of one point: recorded as exit 1, never hidden
            _failed(row, ExitCode.INTERNAL_ERROR, f"internal error: {type(e).__name__}: {e}")
        base = folder.parent if work_dir is not None else folder
        row["message"] = row["message"].replace(str(base) + os.sep, "")
    row["wall_s"] = round(time.perf_counter() - t0, 4)
    return row


def _failed(row: dict[str, Any], code: ExitCode, message: str) -> None:
    row.update(status=STATUS[code], exit_code=int(code), message=message)


@contextlib.contextmanager
def _point_folder(index: int, work_dir: str | None) -> Iterator[Path]:
    if work_dir is not None:
        folder = Path(work_dir) / f"point-{index:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
    else:
        with tempfile.TemporaryDirectory(prefix=f"dtsim-sweep-{index}-") as t:
            yield Path(t)


def summarise(result: SimulationResult) -> dict[str, Any]:
    """The CSV columns of one finished run, from the per-rank report (system.report)."""
    ranks = build_report(result, records=False)["ranks"]
    fin = [r["finish_cycles"] for r in ranks]
    exposed = [r["exposed_comm_cycles"] for r in ranks]
    n = len(ranks)
    return {
        "npus": result.npus_count, "backend": result.backend,
        "end_cycles": result.end_ns, "mean_rank_cycles": round(sum(fin) / n, 3),
        "max_rank_cycles": max(fin), "min_rank_cycles": min(fin),
        "compute_cycles_mean": round(sum(r["compute_cycles"] for r in ranks) / n, 3),
        "exposed_comm_cycles_mean": round(sum(exposed) / n, 3), "exposed_comm_cycles_max": max(exposed),
        "events": result.events, "fast_path": bool(result.inputs.get("symmetric_fast_path")),
        "sim_wall_s": round(result.wall_s, 4),
    }


# -- the inputs of one point ---------------------------------------------------------------------

def _simulate(point: dict[str, Any], folder: Path, keep: bool) -> SimulationResult:
    grid = point["grid"]
    workload, comm_groups, ranks = write_workload(point["workload"], folder, grid)
    net = network_dict(point["network"], ranks, grid)
    net_path = folder / "network.yml"
    net_path.write_text(yaml.safe_dump(net, sort_keys=False), encoding="utf-8")
    sys_path = None
    if point["system"] is not None:
        sys_path = folder / "system.json"
        sys_path.write_text(json.dumps(system_dict(point["system"], net), indent=1) + "\n", encoding="utf-8")
    run = run_options(point["run"], grid)
    if keep:
        _write_command(folder, workload, net_path, sys_path, comm_groups, run)
    return run_simulation(workload, net_path, sys_path, comm_groups=comm_groups, **run)


def write_workload(spec: dict[str, Any], folder: Path, grid: str) -> tuple[str, str | None, int | None]:
    """Write (or point at) the Chakra workload; return (workload spec, comm groups, TrioSim ranks)."""
    if "collective" in spec:
        kind = spec["collective"]
        if kind not in pb.CollectiveCommType.keys():
            raise InputError(grid, "workload.collective",
                             f"{kind!r} is not a collective; expected one of {', '.join(pb.CollectiveCommType.keys())}")
        size = parse_size(spec.get("size"), grid, "workload.size")
        # one shared file serves every rank, whatever npus_count the point has
        return write_collective_microbenchmark(folder / "workload", 0, kind, size, shared=True), None, None
    if "triosim" in spec:
        layout = {"batch_size": None, **{k: v for k, v in spec.items() if k != "triosim"}}
        conv = convert_triosim(spec["triosim"], out_prefix=folder / "workload", **layout)
        # one rank: every NPU of the network replays the single-GPU trace (as system.main does)
        workload = str(conv.prefix) if conv.ranks > 1 else str(conv.et_path(0))
        return workload, str(conv.comm_groups_path) if conv.comm_groups_path else None, conv.ranks
    return str(spec["et"]), spec.get("comm_groups"), None


def parse_size(value: Any, grid: str | None, where: str) -> int:
    """Bytes from an integer or a text such as ``64KiB``, ``1 MiB``, ``1.5GB`` (KiB = 2^10, KB = 10^3)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", value) if isinstance(value, str) else None
    if m:
        size = float(m.group(1)) * _UNITS[m.group(2) or "B"]
        if size.is_integer():
            return int(size)
    raise InputError(grid, where, f"expected a size in bytes (an integer, or e.g. 64KiB, 1MiB, 1GB), got {value!r}")


def network_dict(network: dict[str, Any], ranks: int | None, grid: str | None = None) -> dict[str, Any]:
    """ASTRA-sim's network keys with scalars spread over the dimensions and ``npus_count: auto`` resolved."""
    net = dict(network)
    dims = max((len(net[k]) for k in NETWORK_LIST_KEYS if isinstance(net.get(k), list)), default=1)
    for k in NETWORK_LIST_KEYS:
        if k in net and not isinstance(net[k], list):
            net[k] = [net[k]] * dims
    npus = net.get("npus_count")
    if isinstance(npus, list) and "auto" in npus:
        net["npus_count"] = _auto_npus(npus, ranks, grid)
    return net


def _auto_npus(npus: list[Any], ranks: int | None, grid: str | None) -> list[Any]:
    where = "network.npus_count"
    if ranks is None:
        raise InputError(grid, where,
                         "'auto' takes the rank count (dp×tp×pp) of a TrioSim workload; this one has none")
    if npus.count("auto") > 1:
        raise InputError(grid, where, "'auto' may stand for one dimension only")
    known = [n for n in npus if n != "auto"]
    if not all(isinstance(n, int) and n > 0 for n in known):
        raise InputError(grid, where, f"expected integers beside 'auto', got {known}")
    rest = math.prod(known)
    if ranks % rest or ranks // rest < 2:
        raise InputError(grid, where, f"the layout's {ranks} ranks do not fill the other dimensions {known}")
    return [ranks // rest if n == "auto" else n for n in npus]


def system_dict(system: dict[str, Any], net: dict[str, Any]) -> dict[str, Any]:
    """ASTRA-sim's system keys with a scalar ``*-implementation`` spread over the network's dimensions."""
    dims = len(net["topology"]) if isinstance(net.get("topology"), list) else 1
    return {k: [v] * dims if k.endswith("-implementation") and isinstance(v, str) else v for k, v in system.items()}


def run_options(run: dict[str, Any], grid: str | None = None) -> dict[str, Any]:
    """``run_simulation``'s keyword arguments, type-checked (a wrong type fails the point, exit 2)."""
    checks = {
        "symmetry": (lambda v: isinstance(v, bool), "true or false"),
        "num_queues_per_dim": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
        "max_events": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
        "injection_scale": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
        "max_wall_s": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0"),
        "remote_memory": (lambda v: isinstance(v, str), "the path of a remote-memory JSON"),
    }
    for k, v in run.items():
        ok, expected = checks[k]
        if not ok(v):
            raise InputError(grid, f"run.{k}", f"expected {expected}, got {v!r}")
    return dict(run)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _write_command(folder: Path, workload: str, net: Path, system: Path | None, comm_groups: str | None,
                   run: dict[str, Any]) -> None:
    """The same point as one ``python -m system.main`` command, for rerunning it alone."""
    argv = ["python", "-m", "system.main", "--workload", workload, "--network", str(net)]
    if system is not None:
        argv += ["--system", str(system)]
    if comm_groups is not None:
        argv += ["--comm-group-configuration", comm_groups]
    if run.get("symmetry") is False:
        argv.append("--no-symmetry")
    argv += [x for k, flag in _FLAGS.items() if k in run for x in (flag, str(run[k]))]
    (folder / "command.sh").write_text(shlex.join(argv) + "\n", encoding="utf-8")
