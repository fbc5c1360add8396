"""A picture of a run: per-rank stacked bars (compute / exposed communication / exposed CPU /
idle) and a timeline of the first ranks. Needs matplotlib (the ``plot`` extra); draws off-screen (Agg).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chakra_proto import et_def_pb2 as pb
from network.errors import InputError
from network.extras import install_hint

INSTALL_HINT = install_hint("plot", "matplotlib")
COLORS = {"compute": "#4C72B0", "exposed comm": "#DD8452", "exposed CPU": "#55A868", "idle": "#C8C8C8",
          "comm": "#DD8452", "cpu": "#55A868"}
_COMM = {pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE}


def require_matplotlib() -> None:
    """Raise the CLI's bad-input error (exit 2) with the install hint when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(None, "--plot", f"needs matplotlib, which is not installed: {INSTALL_HINT}") from None


def _timeline_rows(workload: Any) -> dict[str, list[tuple[float, float]]]:
    rows: dict[str, list[tuple[float, float]]] = {"compute": [], "comm": [], "cpu": []}
    nodes = workload.graph.nodes
    for nid, s, e in workload.records:
        n = nodes[nid]
        if n.type == pb.COMP_NODE:
            rows["cpu" if n.is_cpu_op else "compute"].append((s / 1000, (e - s) / 1000))
        elif n.type in _COMM:
            rows["comm"].append((s / 1000, (e - s) / 1000))
    return rows


def write_plot(result: Any, report: dict[str, Any], path: str | os.PathLike, timeline_ranks: int = 8) -> Path:
    """Write the figure to ``path`` (format from its suffix, e.g. .png, .svg, .pdf)."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    ranks = report["ranks"]
    shown = result.workloads[:timeline_ranks]
    fig, (bars, tl) = plt.subplots(2, 1, figsize=(11, 4 + 0.45 * len(shown)),
                                   gridspec_kw={"height_ratios": [3, max(2, 0.6 * len(shown))]})
    x = [r["rank"] for r in ranks]
    bottom = [0.0] * len(ranks)
    for key, label in (("compute_cycles", "compute"), ("exposed_comm_cycles", "exposed comm"),
                       ("exposed_cpu_cycles", "exposed CPU"), ("idle_cycles", "idle")):
        v = [r[key] / 1000 for r in ranks]
        bars.bar(x, v, bottom=bottom, label=label, color=COLORS[label], width=0.8 if len(x) < 512 else 1.0)
        bottom = [b + y for b, y in zip(bottom, v)]
    bars.set_xlabel("rank")
    bars.set_ylabel("time (µs)")
    bars.set_title(f"{result.npus_count} ranks on {result.inputs.get('topology')} ({result.backend}): "
                   "compute + exposed communication + exposed CPU + idle = finish")
    bars.xaxis.set_major_locator(MaxNLocator(integer=True))
    bars.set_xlim(-0.6, len(x) - 0.4)
    bars.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    labelled: set[str] = set()
    for i, w in enumerate(shown):
        rows = _timeline_rows(w)
        for j, kind in enumerate(("compute", "comm", "cpu")):
            if rows[kind]:
                tl.broken_barh(rows[kind], (i + j * 0.3 - 0.45, 0.28), facecolors=COLORS[kind],
                               edgecolor="white", linewidth=0.4, label=None if kind in labelled else kind)
                labelled.add(kind)
    tl.set_yticks(range(len(shown)), [f"rank {w.rank}" for w in shown])
    tl.invert_yaxis()
    tl.set_xlabel("simulated time (µs)")
    tl.set_title(f"timeline of the first {len(shown)} rank(s)")
    if labelled:
        tl.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{out.suffix}")
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, out)
    finally:
        plt.close(fig)
        if tmp.exists():
            tmp.unlink()
    return out
