"""Run one workload on every installed network backend and put the answers side by side.

    dtsim-compare --workload W --network N.yaml [--system S.json] [--backends A B] [--plot out.png]
    dtsim-compare --workload W --topology-file T.txt [--logical-dims 8,4] ...

(``python scripts/compare_backends.py`` in a checkout is the same.) Per backend: end time, mean and
max rank finish, mean exposed communication, wall time, and the relative difference of the end time
against the congestion-unaware result; on a topology file, also the busiest link's utilisation per
link class. By default every installed backend runs (a missing optional
one is listed as "not installed"); a backend named in ``--backends`` must run.

Exit codes: 0 every backend asked for gave an answer, 2 bad input (an unknown backend, an output
that cannot be written), 4 the table is complete but a backend failed or is not installed.
"""
from __future__ import annotations

import argparse
import enum
import importlib.util
import json
import sys
import time
from pathlib import Path

from network.errors import InputError
from network.extras import install_hint
from network.registry import canonical_name, known_backends
from network.files import write_atomic
from system.outputs import check_file, check_plot
from system.simulation import Deadlock, run_simulation
from system.report import build_report

_OPTIONAL = {"ns3": "ns"}  #: backend → the module its extra provides
_PACKAGES = {"ns3": "'ns3==3.44.post0'"}  #: backend → what pip installs for it


class ExitCode(enum.IntEnum):
    OK = 0
    BAD_INPUT = 2  #: unknown backend, unwritable output: nothing ran
    BACKENDS_FAILED = 4  #: the table is printed, but some backend gave no answer


def installed(name: str) -> bool:
    mod = _OPTIONAL.get(name)
    return mod is None or importlib.util.find_spec(mod) is not None


def compare(workload: str, network: str, system: str | None, backends: list[str], **kw) -> list[dict]:
    rows = []
    for b in backends:
        row: dict = {"backend": b}
        if not installed(b):
            row["status"] = f"not installed ({install_hint(b, _PACKAGES[b])})"
            rows.append(row)
            continue
        t0 = time.perf_counter()
        try:
            r = run_simulation(workload, network, system, backend=b, symmetry=False, **kw)
        except (InputError, Deadlock) as e:
            row["status"] = f"error: {str(e).splitlines()[0]}"
            rows.append(row)
            continue
        except Exception as e:  # noqa: BLE001 -- one backend's bug must not hide the others' answers
            row["status"] = f"internal error: {type(e).__name__}: {e}"
            rows.append(row)
            continue
        rep = build_report(r, records=False)
        fin = [x["finish_cycles"] for x in rep["ranks"]]
        exposed = [x["exposed_comm_cycles"] for x in rep["ranks"]]
        row.update(status="ok", end_cycles=max(fin), mean_cycles=sum(fin) / len(fin), max_cycles=max(fin),
                   exposed_comm_cycles=sum(exposed) / len(exposed), wall_s=time.perf_counter() - t0,
                   events=r.events, link_classes=rep["network"].get("link_classes"))
        rows.append(row)
    base = next((x for x in rows if x["backend"] == "congestion-unaware" and x["status"] == "ok"), None)
    for x in rows:
        if base and x["status"] == "ok":
            x["vs_unaware_pct"] = 100.0 * (x["end_cycles"] - base["end_cycles"]) / base["end_cycles"]
    return rows


def format_table(rows: list[dict]) -> str:
    hdr = f"{'backend':<20} {'end cycles':>12} {'mean rank':>12} {'max rank':>12} {'exposed comm':>13} {'wall s':>8} {'vs unaware':>11}"
    out = [hdr, "-" * len(hdr)]
    for x in rows:
        if x["status"] != "ok":
            out.append(f"{x['backend']:<20} {x['status']}")
            continue
        out.append(f"{x['backend']:<20} {x['end_cycles']:>12} {x['mean_cycles']:>12.0f} {x['max_cycles']:>12} "
                   f"{x['exposed_comm_cycles']:>13.0f} {x['wall_s']:>8.2f} {x.get('vs_unaware_pct', 0):>+10.1f}%")
    for x in rows:
        if x.get("link_classes"):
            out.append(f"{x['backend']:<20} peak link utilisation: " + ", ".join(
                f"{k} {100 * v['peak_utilisation']:.1f}%" for k, v in x["link_classes"].items()))
    return "\n".join(out)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [x for x in rows if x["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([x["backend"] for x in ok], [x["end_cycles"] / 1000 for x in ok], color="#4c72b0")
    for i, x in enumerate(ok):
        ax.text(i, x["end_cycles"] / 1000, f"{x.get('vs_unaware_pct', 0):+.1f}%", ha="center", va="bottom")
    ax.set_ylabel("end time (µs)")
    ax.set_title("Same workload, three network models")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dtsim-compare", description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True)
    net = ap.add_mutually_exclusive_group(required=True)
    net.add_argument("--network")
    net.add_argument("--topology-file", help="an ASTRA-sim / SimAI topology file instead of a network YAML")
    ap.add_argument("--logical-dims", help="with --topology-file: logical dimensions, e.g. 8,4 (default: one)")
    ap.add_argument("--system")
    ap.add_argument("--backends", nargs="*", default=None,
                    help=f"default: every installed one of {', '.join(known_backends())}")
    ap.add_argument("--num-queues-per-dim", type=int, default=1)
    ap.add_argument("--comm-group-configuration", dest="comm_groups")
    ap.add_argument("--json", help="write the rows as JSON")
    ap.add_argument("--plot", help="draw the end times (png, svg, pdf, ...; needs matplotlib)")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:  # argparse printed usage or help
        return int(e.code or 0) and ExitCode.BAD_INPUT
    try:
        backends = ([canonical_name(b) for b in a.backends] if a.backends
                    else [b for b in known_backends() if installed(b)])
        if a.json:
            check_file("--json", a.json, (".json",), "the rows as JSON")
        if a.plot:
            check_plot("--plot", a.plot)
        rows = compare(a.workload, _network(a), a.system, backends, num_queues_per_dim=a.num_queues_per_dim,
                       comm_groups=a.comm_groups)
        print(format_table(rows))
        if a.json:
            write_atomic(a.json, json.dumps(rows, indent=1))
        if a.plot:
            plot(rows, a.plot)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except OSError as e:
        print(f"error: cannot write: {e.strerror or e}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    failed = [r["backend"] for r in rows if r["status"] != "ok"]
    if failed:
        print(f"error: no answer from {', '.join(failed)} (see the table)", file=sys.stderr)
        return ExitCode.BACKENDS_FAILED
    return ExitCode.OK


def _network(a: argparse.Namespace):  # noqa: ANN202 -- a path or a NetworkConfig
    if not a.topology_file:
        return a.network
    from network.config import NetworkConfig

    spec: dict = {"topology-file": str(Path(a.topology_file).resolve())}
    if a.logical_dims:
        if not all(x.strip().isdigit() for x in a.logical_dims.split(",")):
            raise InputError(None, "--logical-dims", f"expected sizes such as 8,4, got {a.logical_dims!r}")
        spec["npus_count"] = [int(x) for x in a.logical_dims.split(",")]
    return NetworkConfig.from_dict(spec, None)


def console_main() -> None:
    sys.exit(int(main()))


if __name__ == "__main__":
    console_main()
