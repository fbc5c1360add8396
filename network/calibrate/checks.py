"""Physical checks on a fit: warnings, not errors, because a fit may be right for a reason we do not
know (a table whose largest size still grows, a network we have not seen). They say where a fit
has likely absorbed something the table does not show: a bandwidth no size of the table reached,
a network between nodes faster than the one inside, a latency no link has.

Each check returns sentences; the command line prints each as ``warning: ...`` on stderr.
"""
from __future__ import annotations

from typing import Sequence

from network.calibrate.model import bus_factor
from network.calibrate.params import MachineParams

#: how far the fit's delivered bus bandwidth may exceed the table's largest busbw: at the largest
#: size the fixed costs still take a few percent, so the bandwidth the fit extrapolates to lies a
#: little above what any row shows; more than this is a bandwidth the table never saw
BUSBW_MARGIN = 1.10
#: per-hop latency floors (ns), as the network file counts them. Inside a node: one NVLink/NVSwitch
#: traversal (SerDes, switch port) is a few hundred ns; ASTRA-sim's HGX-H100 preset uses 936 ns.
#: Between nodes a message crosses two NICs and a switch: RDMA one-way latency is 1-2 µs on
#: InfiniBand/RoCE. The floors are well under both so that only nonsense trips them.
MIN_HOP_NS = {0: 50.0, 1: 500.0}


def max_busbw_gb_s(collective: str, npus: int, sizes: Sequence[int], times_us: Sequence[float]) -> float:
    """The largest bus bandwidth of a table's rows, GB/s of 10^9 B as nccl-tests prints it."""
    f = bus_factor(collective, npus)
    return max(f * s / t / 1e3 for s, t in zip(sizes, times_us))


def delivered_busbw_gb_s(collective: str, npus: int, sizes: Sequence[int], times_us: Sequence[float]) -> float:
    """The bus bandwidth a fitted machine delivers at large sizes: the slope between its two largest
    simulated sizes, so that fixed costs cancel (what the bandwidth knobs add up to, whatever the
    backend, topology or chunking make of them)."""
    pairs = sorted(zip(sizes, times_us))
    (s1, t1), (s2, t2) = pairs[-2], pairs[-1]
    if t2 <= t1:
        return float("inf")
    return bus_factor(collective, npus) * (s2 - s1) / (t2 - t1) / 1e3


def check_busbw(table: str, collective: str, npus: int, sizes: Sequence[int], measured_us: Sequence[float],
                simulated_us: Sequence[float]) -> list[str]:
    if len(sizes) < 2:
        return []
    top = max_busbw_gb_s(collective, npus, sizes, measured_us)
    fit = delivered_busbw_gb_s(collective, npus, sizes, simulated_us)
    if fit > BUSBW_MARGIN * top:
        return [f"{table}: the fit delivers {fit:.1f} GB/s bus bandwidth at large sizes, above the table's largest "
                f"busbw {top:.1f} GB/s by {100 * (fit / top - 1):.0f} % (more than the {100 * (BUSBW_MARGIN - 1):.0f} % "
                "the fixed costs explain): the bandwidth is extrapolated, not measured; add larger sizes to the table "
                "or check --max-bytes"]
    return []


def check_levels(params: MachineParams) -> list[str]:
    """Between nodes slower and later than inside; no hop faster than a link can be."""
    out = []
    lv = params.levels
    if len(lv) > 1:
        inner, outer = lv[0], lv[1]
        if outer.bandwidth_gb_s > inner.bandwidth_gb_s:
            out.append(f"the fitted network between nodes ({outer.bandwidth_gb_s:.1f} GB/s) is faster than inside a node "
                       f"({inner.bandwidth_gb_s:.1f} GB/s): NICs do not outrun NVLink; one multi-node table does not "
                       "separate the two levels (docs/calibration.md, 'Two levels from one table')")
        if outer.latency_ns < inner.latency_ns:
            out.append(f"the fitted latency between nodes ({outer.latency_ns:.1f} ns) is below the latency inside a node "
                       f"({inner.latency_ns:.1f} ns): a NIC and a switch cannot be closer than NVLink")
    for d, level in enumerate(lv):
        floor = MIN_HOP_NS[min(d, 1)]
        where = "inside a node" if d == 0 else "between nodes"
        # a hop of the --node files is a whole step less its endpoint delay (ring_machine): count that too
        hop = level.latency_ns + (params.endpoint_delay_ns if params.fixed_delay_ns or params.copy_bw_gb_s else 0)
        if hop < floor:
            out.append(f"dim {d} ({where}): a hop of {hop:.1f} ns is under {floor:.0f} ns, faster than any link there; "
                       "the fit has traded latency for something else (a protocol switch inside the sizes fitted?)")
    return out
