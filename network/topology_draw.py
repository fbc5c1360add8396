"""Draw a physical graph as a PNG (matplotlib, the ``plot`` extra): one row per tier, NPUs at
the bottom, each link a line whose width grows with its bandwidth and whose colour is its class.

    python -m network.topology_gen fat-tree --leaves 4 --npus-per-leaf 8 --oversubscription 4 -o ft.txt --png ft.png
    python -m network.topology_draw ft.txt ft.png          # any topology file
"""
from __future__ import annotations

import os
import sys
from collections import defaultdict

from network.errors import InputError
from network.graph import PhysicalGraph


def layout(graph: PhysicalGraph) -> dict[int, tuple[float, float]]:
    """x, y per node: tiers as rows (NVSwitches just above the NPUs), nodes spread evenly."""
    rows: dict[float, list[int]] = defaultdict(list)
    for n in range(graph.nodes_count):
        t = float(graph.tiers[n])
        rows[0.6 if n in graph.nvswitches else t].append(n)
    pos = {}
    for y, nodes in rows.items():
        for i, n in enumerate(nodes):
            pos[n] = ((i + 0.5) / len(nodes), y)
    return pos


def draw(graph: PhysicalGraph, path: str | os.PathLike, title: str | None = None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(None, "--png", "drawing needs matplotlib: pip install -e '.[plot]'") from None
    pos = layout(graph)
    classes = sorted(set(graph.link_classes))
    colours = {c: plt.get_cmap("tab10")(i % 10) for i, c in enumerate(classes)}
    top = max(link.bandwidth_gb_s for link in graph.links) if graph.links else 1.0
    fig, ax = plt.subplots(figsize=(min(4 + graph.nodes_count / 8, 24), 4 + max(graph.tiers)))
    for link, cls in zip(graph.links, graph.link_classes):
        (x0, y0), (x1, y1) = pos[link.a], pos[link.b]
        ax.plot([x0, x1], [y0, y1], color=colours[cls], lw=0.4 + 2.0 * link.bandwidth_gb_s / top, alpha=0.6)
    for n, (x, y) in pos.items():
        npu = n not in graph.switches
        ax.scatter([x], [y], s=30 if npu else 80, marker="o" if npu else "s",
                   color="black" if npu else "tab:gray", zorder=3)
    for c in classes:
        ax.plot([], [], color=colours[c], label=c)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_yticks(sorted({y for _, y in pos.values()}))
    ax.set_yticklabels([graph.node_kind(next(n for n, p in pos.items() if p[1] == y))
                        for y in sorted({y for _, y in pos.values()})])
    ax.set_xticks([])
    ax.set_title(title or graph.describe(), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m network.topology_draw TOPOLOGY.txt OUT.png", file=sys.stderr)
        return 2
    from network.topology_file import read_topology_file

    try:
        draw(read_topology_file(args[0]), args[1])
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
