"""Every implementation ASTRA-sim's system file names, for the property tests to draw from.

``direct[N]`` and ``oneDirect[N]`` with a window, the ``one*`` rings over the whole network,
halving-doubling and the double binary tree included. ``valid`` leaves out only what dtsim and
ASTRA-sim both refuse, so that a drawn configuration mostly runs (a refused one is still checked
by the tests: the shortcut must refuse it the same way).
"""
from __future__ import annotations

from hypothesis import strategies as st

NAMES = ["ring", "direct", "direct1", "direct2", "direct3", "halvingDoubling", "doubleBinaryTree",
         "oneRing", "oneDirect", "oneDirect1", "oneHalvingDoubling"]
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")


def _power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


def valid(name: str, collective: str, n: int, total: int) -> bool:
    """Whether ``name`` can run ``collective`` on a dimension of ``n`` NPUs (``total``: the whole
    network, which a one* ring spans)."""
    if "alvingDoubling" in name:
        size = total if name.startswith("one") else n
        return collective != "all-to-all" and _power_of_two(size)
    if name == "doubleBinaryTree":
        return collective == "all-reduce" and _power_of_two(n) and n >= 2
    return True


@st.composite
def implementation_lists(draw, dims: list[int], names: list[str] = NAMES, mixed: bool = True) -> dict[str, list[str]]:
    """A system file's four ``*-implementation`` keys for a network of ``dims`` NPUs per dimension:
    one name per dimension, different per dimension and collective when ``mixed``."""
    total = 1
    for n in dims:
        total *= n
    out: dict[str, list[str]] = {}
    shared = None
    for c in COLLECTIVES:
        per_dim = []
        for d, n in enumerate(dims):
            if not mixed and shared is not None and d < len(shared) and valid(shared[d], c, n, total):
                per_dim.append(shared[d])
                continue
            choices = [x for x in names if valid(x, c, n, total)] or ["ring"]
            per_dim.append(draw(st.sampled_from(choices)))
        if not mixed and shared is None:
            shared = per_dim
        out[f"{c}-implementation"] = per_dim
    return out
