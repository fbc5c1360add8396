"""Count the collectives each rank ran, from its Kineto trace (device.R.json[.gz]), independently
of the loader under test: python kineto_counts.py NAME=DIR ... > expected.json

A collective is one c10d dispatcher op (``cat`` ``cpu_op``, ``c10d::allreduce_``, ...) inside the
rank's ``ProfilerStep#K``: torch.distributed issues every collective through exactly one. The
backend's records (``gloo:all_reduce``, ``nccl:all_gather``, on gloo's worker threads) are counted
beside them as a cross-check. Kinds are what the dispatcher op names; waits are not collectives.
"""
from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

# dispatcher op (without the "c10d::" prefix and trailing underscores) -> kind
LAUNCHERS = {"allreduce": "ALL_REDUCE", "allreduce_coalesced": "ALL_REDUCE", "allgather": "ALL_GATHER",
             "_allgather_base": "ALL_GATHER", "allgather_coalesced": "ALL_GATHER",
             "allgather_into_tensor_coalesced": "ALL_GATHER", "reduce_scatter": "REDUCE_SCATTER",
             "_reduce_scatter_base": "REDUCE_SCATTER", "reduce_scatter_tensor_coalesced": "REDUCE_SCATTER",
             "alltoall": "ALL_TO_ALL", "alltoall_base": "ALL_TO_ALL", "broadcast": "BROADCAST", "barrier": "BARRIER",
             "send": "SEND", "recv": "RECV", "recv_any_source": "RECV", "reduce": "REDUCE", "gather": "GATHER",
             "scatter": "SCATTER"}


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def rank_counts(trace: dict) -> dict:
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))]
    if len(steps) != 1:
        raise SystemExit(f"expected one ProfilerStep, found {len(steps)}")
    t0, t1 = steps[0]["ts"], steps[0]["ts"] + steps[0]["dur"]
    inside = [e for e in events if t0 <= e["ts"] <= t1]
    launchers, records = Counter(), Counter()
    for e in inside:
        name = e["name"]
        if e.get("cat") == "cpu_op" and name.startswith("c10d::"):
            op = name.split("::", 1)[1].rstrip("_")
            if op in LAUNCHERS:
                launchers[LAUNCHERS[op]] += 1
        elif name.startswith(("gloo:", "nccl:")):
            records[name] += 1
    return {"step": steps[0]["name"], "collectives": dict(sorted(launchers.items())),
            "backend_records": dict(sorted(records.items()))}


def main(argv: list[str]) -> None:
    out = {}
    for spec in argv:
        name, folder = spec.split("=", 1)
        ranks = {}
        for p in sorted(Path(folder).glob("device.*.json*")):
            r = int(p.name.split(".")[1])
            ranks[str(r)] = rank_counts(_load(p))
        out[name] = dict(sorted(ranks.items(), key=lambda kv: int(kv[0])))
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
