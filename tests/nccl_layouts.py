"""nccl-tests' stdout, rendered the way each release's printf calls print it, for the reader's tests.

Each layout ports the format strings of one release of NVIDIA/nccl-tests (BSD licence):
* ``v1``: tag v1.0.0 (2018), src/all_reduce.cu ``print_header``/``print_line_header`` and
  src/common.cu ``BenchTime``: ``"  %7.3f  %5.2f  %5.2f  %7.0le"`` with the time in **ms**
  (``deltaSec * 1.0E3``), header ``bytes N type op time algbw busbw res``, no unit row,
  rank lines ``#   Rank %2d on %10s device %2d [0x%02x] %s``.
* ``v2_0``: tag v2.0.0 (2019), ``"  %7s  %6.2f  %6.2f  %5.0le"``, the time in µs with 0/1/2
  decimals above 10000/100 µs, header ``size count type redop time algbw busbw error`` and the
  ``(us)`` unit row, rank lines with ``Pid``.
* ``v2_19``: master after 2.19.6 (2026), src/util.cu ``writeResultHeader``,
  ``writeBenchmarkLinePreamble`` (``"%12li  %12li  %8s  %6s  %6s"``), ``writeBenchmarkLineBody``
  (``getFloatStr`` widths 7/6/6, ``"%6g"`` #wrong or ``"    N/A"`` without ``-c``),
  ``writePerIterReport`` (``-I 1``: i_min i_max i_p99 i_cv%), ``writeTimestamp`` (``-S 1``:
  ``"%21s"`` of ``%Y-%m-%d %H:%M:%S`` after the in-place columns), ``writeBenchMarkLineNullBody``
  (in-place only: 32 blanks where out-of-place goes).
Launcher prefixes: Open MPI's ``mpirun --tag-output`` (``[1,0]<stdout>:``) and Slurm's
``srun --label`` (``0: ``).
"""
from __future__ import annotations

from typing import Sequence


def _float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: 2 decimals, then fewer, then exponent, to fit the width."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def render(sizes: Sequence[int], times_us: Sequence[float], ranks: int, layout: str = "v2_19", *,
           tool: str = "all_reduce_perf", check: bool = True, per_iter: bool = False, timestamps: bool = False,
           in_place_only: bool = False, prefix: str = "", wrong: int = 0, hosts: int = 1) -> str:
    factor = 2 * (ranks - 1) / ranks  # all-reduce: the only tool these fixtures render
    out: list[str] = []
    per_host = max(1, ranks // hosts)
    if layout == "v1":
        out.append(f"nThread 1 nGpus {ranks} minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 "
                   "iters: 20 validation: 1 ")
        out.append("# Using devices")
        out += [f"#   Rank {r:2d} on {'host' + str(r // per_host):>10} device {r % per_host:2d} [0x{r:02x}] Tesla V100-SXM2-16GB"
                for r in range(ranks)]
        out.append(f"# {'':>10}  {'':>12}  {'':>6}  {'':>6}        out-of-place                    in-place")
        out.append(f"# {'bytes':>10}  {'N':>12}  {'type':>6}  {'op':>6}  {'time':>7}  {'algbw':>5}  {'busbw':>5}  "
                   f"{'res':>7}  {'time':>7}  {'algbw':>5}  {'busbw':>5}  {'res':>7}")
        for s, t in zip(sizes, times_us):
            alg = s / t / 1e3
            body = f"  {t / 1e3:7.3f}  {alg:5.2f}  {alg * factor:5.2f}  {float(wrong):7.0e}"
            out.append(f"{s:12d}  {s // 4:12d}  {'float':>6}  {'sum':>6}" + body + body)
        out.append(" Out of bounds values : 0 OK")
    elif layout == "v2_0":
        out.append(f"# nThread 1 nGpus {ranks} minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 "
                   "iters: 20 validation: 1 ")
        out.append("#")
        out.append("# Using devices")
        out += [f"#   Rank {r:2d} Pid {1000 + r:6d} on {'host' + str(r // per_host):>10} device {r % per_host:2d} [0x{r:02x}] "
                "Tesla V100-SXM2-32GB" for r in range(ranks)]
        out.append("#")
        out.append(f"# {'':>10}  {'':>12}  {'':>6}  {'':>6}            out-of-place                       in-place          ")
        out.append(f"# {'size':>10}  {'count':>12}  {'type':>6}  {'redop':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  "
                   f"{'error':>5}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'error':>5}")
        out.append(f"# {'(B)':>10}  {'(elements)':>12}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
                   f"{'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}")
        for s, t in zip(sizes, times_us):
            ts = f"{t:7.0f}" if t > 10000 else f"{t:7.1f}" if t > 100 else f"{t:7.2f}"
            alg = s / t / 1e3
            body = f"  {ts:>7}  {alg:6.2f}  {alg * factor:6.2f}  {float(wrong):5.0e}"
            out.append(f"{s:12d}  {s // 4:12d}  {'float':>6}  {'sum':>6}" + body + body)
        out.append("# Out of bounds values : 0 OK")
    else:
        out += ["# nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22903",
                f"# Collective test starting: {tool}",
                f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 iters: 20 "
                "agg iters: 1 validation: 1 graph: 0 unalign: 0"]
        if per_iter:
            out.append("# Per-Iteration Report: CUDA event timing; i_* uses max over process rows ")
        out += ["#", "# Using devices"]
        out += [f"#  Rank {r:2d} Group {0:2d} Pid {1000 + r:6d} on {'host' + str(r // per_host):>10} device {r % per_host:2d} "
                f"[0000:{r:02x}:00] NVIDIA A100-SXM4-80GB" for r in range(ranks)]
        ts_lbl, ts_pad, ts_fmt = ("timestamp", 19, "%Y-%m-%d %H:%M:%S") if timestamps else ("", 0, "")
        out.append("#")
        lead = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
        if per_iter:
            out.append(lead + "              out-of-place (+ per-iteration)                                in-place (+ per-iteration)")
            g1 = ["time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%"]
            g2 = ["(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)"]
            widths = [7, 6, 6, 6, 7, 7, 7, 7]
        else:
            out.append(lead + "           out-of-place                       in-place          ")
            g1, g2, widths = ["time", "algbw", "busbw", "#wrong"], ["(us)", "(GB/s)", "(GB/s)", ""], [7, 6, 6, 6]
        cols = lambda names: "  ".join(f"{n:>{w}}" for n, w in zip(names, widths))  # noqa: E731
        out.append(f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {cols(g1)}  {cols(g1)} "
                   f"{ts_lbl:>{ts_pad}}")
        out.append(f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {cols(g2)}  {cols(g2)} {ts_fmt:>{ts_pad}}")
        for s, t in zip(sizes, times_us):
            alg = s / t / 1e3
            body = f"  {_float_str(t, 7)}  {_float_str(alg, 6)}  {_float_str(alg * factor, 6)}"
            body += f"  {wrong:6g}" if check else "    N/A"
            if per_iter:
                body += f"  {_float_str(t * 0.97, 7)}  {_float_str(t * 1.05, 7)}  {_float_str(t * 1.04, 7)}  {_float_str(1.3, 7)}"
            row = f"{s:12d}  {s // 4:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
            row += (" " * 32 if in_place_only else body) + body
            if timestamps:
                row += f"{'2026-07-09 12:34:56':>21}"
            out.append(row)
        out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 100.0 ", "#",
                f"# Collective test concluded: {tool}", "#"]
    return "".join(f"{prefix}{line}\n" for line in out)


def tag_output(text: str, rank: int = 0) -> str:
    """Open MPI's ``mpirun --tag-output``: ``[jobid,rank]<stdout>:`` before every line."""
    return "".join(f"[1,{rank}]<stdout>:{line}\n" for line in text.splitlines())


def srun_label(text: str, task: int = 0) -> str:
    """Slurm's ``srun --label``: the task number and ``': '`` before every line."""
    return "".join(f"{task}: {line}\n" for line in text.splitlines())
