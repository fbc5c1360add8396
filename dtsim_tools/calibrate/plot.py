"""``--plot OUT.png``: measured and simulated times over sizes, and the error per size (matplotlib)."""
from __future__ import annotations

import io
from typing import Sequence

from network.calibrate.report import Comparison
from network.errors import InputError


def check_matplotlib() -> None:
    """Before any work: a missing matplotlib must not surface after the fit has written its files."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(None, "--plot", "needs matplotlib: pip install -e '.[plot]'") from None


def render_plot(comparisons: Sequence[Comparison]) -> bytes:
    """The PNG, in memory: the command writes it with the other outputs once everything succeeded."""
    check_matplotlib()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1.3]})
    for i, c in enumerate(comparisons):
        color = f"C{i % 10}"
        label = f"{c.name} ({c.npus} NPUs{'' if c.fitted else ', held out'})"
        top.plot(c.sizes, c.measured_us, "o", color=color, label=f"{label}: measured")
        top.plot(c.sizes, c.simulated_us, "-", color=color, label=f"{label}: simulated")
        bottom.plot(c.sizes, [100 * e for e in c.errors], "o-", color=color, ms=3)
    top.set_xscale("log", base=2)
    top.set_yscale("log")
    top.set_ylabel("time (us)")
    top.legend(fontsize=7)
    top.grid(True, which="both", alpha=0.3)
    bottom.axhline(0, color="k", lw=0.8)
    bottom.set_ylabel("simulated / measured - 1 (%)")
    bottom.set_xlabel("message size (bytes)")
    bottom.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
