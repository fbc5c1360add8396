"""Every nccl-tests layout we know of reads to the same times, and a table whose columns tell
different stories is refused with the row named (see nccl_layouts.py for the sources)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_layouts import render, srun_label, tag_output
from network.calibrate.nccl_tests import NcclTestsError, parse_nccl_tests

SIZES = [1 << k for k in range(20, 31, 2)]
TIMES = [10 + 1.75 * s / 230e3 for s in SIZES]  # an 8-GPU all-reduce at 230 GB/s busbw

LAYOUTS = [("v1", {}), ("v2_0", {}), ("v2_19", {}), ("v2_19", {"per_iter": True}), ("v2_19", {"timestamps": True}),
           ("v2_19", {"per_iter": True, "timestamps": True}), ("v2_19", {"in_place_only": True}),
           ("v2_19", {"check": False})]


@pytest.mark.parametrize("wrap", [lambda x: x, tag_output, srun_label], ids=["plain", "mpirun-tag", "srun-label"])
@pytest.mark.parametrize("layout, options", LAYOUTS, ids=[f"{a}-{'-'.join(b) or 'default'}" for a, b in LAYOUTS])
def test_every_layout_reads_the_same_times(layout: str, options: dict, wrap) -> None:
    (t,) = parse_nccl_tests(wrap(render(SIZES, TIMES, 8, layout, **options)), "out.txt")
    assert t.collective == "ALL_REDUCE" and t.ranks == 8 and [r.size_bytes for r in t.rows] == SIZES
    # 1.x prints ms with 3 decimals: 0.5 % at the smallest time here; the others 2 decimals of µs
    tol = 6e-3 if layout == "v1" else 1e-3
    assert all(abs(r.time_us / m - 1) < tol for r, m in zip(t.rows, TIMES))
    if options.get("in_place_only"):
        assert all(r.out_of_place_us is None and r.in_place_us is not None for r in t.rows)


def test_milliseconds_read_as_microseconds_are_refused() -> None:
    # a 1.x table (ms) pasted under a 2.x unit row: the algbw column gives it away
    text = render(SIZES, TIMES, 8, "v1").replace("#      bytes", "#       size").replace(
        " Out of bounds", "#        (B)    (elements)                  (us)  (GB/s) (GB/s)\n Out")
    lines = text.splitlines()
    hdr = next(i for i, x in enumerate(lines) if "time" in x and "algbw" in x)
    lines.insert(hdr + 1, "#        (B)    (elements)                (us)  (GB/s)  (GB/s)")
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests("\n".join(lines), "v1.txt")
    assert f"line {hdr + 3}" in str(e.value) and "look like ms, not us" in str(e.value)


def test_swapped_time_and_algbw_columns_are_refused() -> None:
    text = render(SIZES, TIMES, 8, "v2_19")
    lines = text.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip().startswith(str(SIZES[2])))
    f = lines[i].split()
    f[5], f[6] = f[6], f[5]
    lines[i] = "  ".join(f)
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests("\n".join(lines), "swapped.txt")
    msg = str(e.value)
    # time x algbw = size either way round: the busbw column is what catches the swap
    assert f"line {i + 1}" in msg and "busbw" in msg and "swapped" in msg and str(SIZES[2]) in msg
    bare = "\n".join(x for x in lines if "Rank" not in x)  # no GPU count: busbw / algbw must still be one
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests(bare, "swapped.txt")
    assert f"line {i + 1 - 8}" in str(e.value) and "swapped" in str(e.value)


def test_a_table_of_other_gpu_counts_is_caught_by_busbw() -> None:
    text = "\n".join(x for x in render(SIZES, TIMES, 8, "v2_19").splitlines() if "Rank" not in x)
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests(text, "ar.txt", npus=4)  # FILE:4, but the busbw column says 8 GPUs
    assert "busbw" in str(e.value) and "4 GPUs" in str(e.value)


def test_wrong_results_are_refused() -> None:
    for layout in ("v1", "v2_0", "v2_19"):
        with pytest.raises(NcclTestsError) as e:
            parse_nccl_tests(render(SIZES, TIMES, 8, layout, wrong=3), f"{layout}.txt")
        assert "wrong results" in str(e.value)


def test_an_absurd_size_is_bad_input_and_long_rows_are_quoted_whole_or_cut_in_the_middle() -> None:
    text = render(SIZES, TIMES, 8, "v2_19", per_iter=True, timestamps=True)
    big = str(1 << 70)
    lines = text.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip().startswith(str(SIZES[-1])))
    lines[i] = lines[i].replace(str(SIZES[-1]), big, 1)
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests("\n".join(lines), "big.txt")
    assert f"line {i + 1}" in str(e.value) and "more than any GPU holds" in str(e.value)
    lines[i] = lines[i].replace(big, str(SIZES[-1])).replace(" 0 ", " zero ", 1)
    bad = lines[i].replace("sum", "sum extra", 1)
    lines[i] = bad
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests("\n".join(lines), "extra.txt")
    msg = str(e.value)
    assert "fields" in msg and (" ... " in msg or " ".join(bad.split()) in msg)
    assert "2026-07-09 12:34:56'" in msg  # the row's end is quoted, not cut off at 80 characters


def test_several_collectives_in_one_file_keep_their_own_names_and_ranks() -> None:
    text = render(SIZES, TIMES, 8, "v2_19") + render(SIZES, [2 * t for t in TIMES], 4, "v2_19",
                                                     tool="all_reduce_perf")
    text = text.replace("Collective test starting: all_reduce_perf", "Collective test starting: all_reduce_perf", 1)
    a, b = parse_nccl_tests(text, "two.txt")
    assert (a.ranks, b.ranks) == (8, 4)
    assert b.rows[0].time_us == pytest.approx(2 * TIMES[0], rel=1e-3)


def test_json_report_reads_like_stdout(tmp_path: Path) -> None:
    # nccl-tests -J (src/util.cu: jsonOutputInit, writeDeviceReport, writeBenchmarkLineBody)
    doc = {"version": 1, "args": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "1M"],
           "config": {"nthreads": 1, "ngpus": 1,
                      "devices": [{"rank": r, "group": 0, "pid": 1, "hostname": "h0", "device": r} for r in range(8)]},
           "results": [{"size": s, "count": s // 4, "type": "float", "redop": "sum", "root": "    -1",
                        "out_of_place": {"time": t, "alg_bw": s / t / 1e3, "bus_bw": 1.75 * s / t / 1e3, "nwrong": 0},
                        "in_place": None, "actual_iterations": 20, "experiment_name": ""}
                       for s, t in zip(SIZES, TIMES)]}
    (t,) = parse_nccl_tests(json.dumps(doc), "ar.json")
    assert t.collective == "ALL_REDUCE" and t.ranks == 8 and [r.time_us for r in t.rows] == pytest.approx(TIMES)
    doc["results"][1]["out_of_place"]["alg_bw"] *= 1000
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests(json.dumps(doc), "ar.json")
    assert "results[1]" in str(e.value) and "disagree" in str(e.value)
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests('{"results": [', "cut.json")
    assert "line 1" in str(e.value) and "not valid JSON" in str(e.value)


def test_csv_of_the_columns_in_ns() -> None:
    # vTrain's trace/*/AR_GPU8_1M_1024M_LUT layout
    rows = [f"{s},{s // 4},float,{round(t * 1e3)},{1.75 * s / t / 1e3:.2f},{round(t * 1e3)},{1.75 * s / t / 1e3:.2f}"
            for s, t in zip(SIZES, TIMES)]
    text = "size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)\n" + "\n".join(rows) + "\n"
    (t,) = parse_nccl_tests(text, "AR_GPU8_LUT", npus=8)
    assert [r.time_us for r in t.rows] == pytest.approx(TIMES, rel=1e-4)
    with pytest.raises(NcclTestsError) as e:
        parse_nccl_tests(text, "AR_GPU8_LUT", npus=2)
    assert "line 2" in str(e.value) and "busbw" in str(e.value)
