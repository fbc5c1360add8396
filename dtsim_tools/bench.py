"""Benchmark suite: fixed cases, one table (case, NPUs, events, wall s, events/s, peak RSS).

Each case runs the command line (``system.main.main``) in a fresh subprocess, so peak RSS is the
case's own. Workloads are generated with the project's own writer into a temporary folder; the
TrioSim cases read the traces of a checkout's examples/triosim (``--examples DIR`` elsewhere).

    dtsim-bench                 # the full suite (python scripts/bench.py in a checkout)
    dtsim-bench --quick         # the small cases only
    dtsim-bench --cases ring1024 ring4096
    dtsim-bench --json out.json # also write the rows as JSON
    dtsim-bench --astra-sim-bin DIR                       # issue 13's four cases, side by side
    dtsim-bench --astra-sim-bin DIR --cases ring64-general --repeat 3
    dtsim-bench --astra-sim-bin DIR --draw 30 --seed 7    # 30 layouts drawn at random, side by side

With ``--astra-sim-bin DIR`` (the folder holding ASTRA-sim's AstraSim_Analytical_Congestion_{Unaware,
Aware} binaries) each case also runs ASTRA-sim on the very same files, alternating with ours, and
the row shows both whole-process walls and peak RSS (medians), the wall ratio (the median of each pair's ratio)
and whether every rank's cycles are equal.
Without ``--cases`` it runs the four cases of issue 13 (ISSUE13 below). ``--draw N`` runs N layouts
drawn from ``--seed`` instead (``_drawn_case``: 64, 128 or 256 NPUs, or ``--draw-npus``; a built-in
topology; either backend; the irregular layout with ring, direct, halving-doubling or double-binary-
tree collectives, or a mixed one) and ends with a summary line; each row's name says its whole
case, so ``--cases``-style reruns need only the name (``dtsim-bench --cases draw-7-3-64.128.256``).
ASTRA-sim replays COMP nodes from ``duration_micros`` only, so the TrioSim cases drop the
converter's exact ``duration_ns`` attribute: both simulators then read the same durations.

ASTRA-sim 2.0 (C++) on the same kind of 2-core machine, from the REFERENCE.md of its anchors: Ring 1 GB all-reduce 512 NPUs 1.85 s / 102 MB,
1024 NPUs 8.65 s / 356 MB, 4096 NPUs 310 s / 5458 MB.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from network.errors import InputError
from system.outputs import check_file

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  #: the checkout, or site-packages after pip install

GB = 1 << 30
RING_4CHUNKS = {
    "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600,
}
ASTRA_SIM = {  # case → (cycles, wall s, RSS MB) measured by ASTRA-sim where available
    "ring512": (44009404, 1.85, 101.9),
    "ring1024": (46129156, 8.65, 356.1),
    "ring4096": (58640440, 310.33, 5458.3),
    "ring64": (41613556, 0.05, 14.0),
}
ASTRA_BINARIES = {"congestion-unaware": "AstraSim_Analytical_Congestion_Unaware",
                  "congestion-aware": "AstraSim_Analytical_Congestion_Aware"}
_FINISHED = re.compile(rb"sys\[(\d+)\] finished, (\d+) cycles")


def _collective_case(dims: list[tuple[str, int]], extra: tuple[str, ...] = (), backend: str | None = None,
                     collective: str = "ALL_REDUCE", impl: str = "ring", size: int = 1 << 30) -> dict:
    return {"kind": "collective", "dims": dims, "extra": list(extra), "backend": backend,
            "collective": collective, "impl": impl, "size": size}


def _topology_case(generator: dict, npus: int, size: int = 1 << 20, collective: str = "ALL_REDUCE") -> dict:
    """A collective on a physical topology (network/topology_gen.py), congestion-aware: ASTRA-sim's
    analytical binaries read no topology file, so these cases have no ASTRA-sim column."""
    return {"kind": "topology", "generator": generator, "dims": [("Graph", npus)], "backend": "congestion-aware",
            "collective": collective, "size": size, "extra": []}


def _direct_cases() -> dict[str, dict]:
    cases = {}
    for short, collective in (("ar", "ALL_REDUCE"), ("a2a", "ALL_TO_ALL")):
        for kind, label in (("Switch", "switch"), ("FullyConnected", "fc")):
            for npus in (256, 512, 1024):
                for tail, extra in (("", ()), ("-general", ("--no-symmetry",))):
                    cases[f"direct-{short}-{label}{npus}-aware{tail}"] = _collective_case(
                        [(kind, npus)], extra, backend="congestion-aware", impl="direct", collective=collective,
                        size=1 << 20)
    return cases


def _irregular_case(npus: int, kind: str = "Switch", backend: str = "congestion-aware", impl: str = "ring",
                    dims: list[tuple[str, int]] | None = None) -> dict:
    """Issue 26's irregular layout: tp groups of 4 (ring all-reduce), each rank sending to its
    neighbour in the next tp group and receiving from the previous one, dp-group all-gathers,
    6 iterations, compute that differs per rank (whole µs, which ASTRA-sim reads): no shortcut
    applies, every rank runs every message. ``dims`` instead of ``(kind, npus)``: a network of
    several dimensions (congestion-unaware only: ASTRA-sim's aware binary takes one)."""
    return {"kind": "irregular", "dims": dims or [(kind, npus)], "backend": backend, "impl": impl}


def _tp_dp_groups(npus: int, tp: int) -> tuple[int, dict[int, list[int]]]:
    """dp, and the communicator groups: tp group g is 1 + g (ranks g·tp ... g·tp + tp - 1), the
    dp group of tp position t is 1 + dp + t."""
    dp = npus // tp
    groups = {1 + g: [g * tp + t for t in range(tp)] for g in range(dp)}
    groups.update({1 + dp + t: [g * tp + t for g in range(dp)] for t in range(tp)})
    return dp, groups


def _write_irregular(d: Path, npus: int, tp: int = 4, iterations: int = 6) -> Path:
    import random

    from workload.builder import GraphBuilder

    dp, groups = _tp_dp_groups(npus, tp)
    for r in range(npus):
        g, t = divmod(r, tp)
        nxt, prv = ((g + 1) % dp) * tp + t, ((g - 1) % dp) * tp + t
        rng = random.Random(r)
        b = GraphBuilder()
        prev: list[int] = []
        for it in range(iterations):
            c = b.comp(f"compute {it}", 20_000 + 1_000 * rng.randint(0, 5_000), deps=prev)
            a = b.collective(f"tp all-reduce {it}", "ALL_REDUCE", 1 << 20, deps=[c], pg_name=str(1 + g))
            snd = b.send(f"send {it}", r, nxt, 1 << 18, 100 + it, deps=[a])
            rcv = b.recv(f"recv {it}", prv, r, 1 << 18, 100 + it, deps=[a])
            prev = [b.collective(f"dp all-gather {it}", "ALL_GATHER", 1 << 16, deps=[snd, rcv],
                                 pg_name=str(1 + dp + t))]
        b.write(d / "irregular", r)
    (d / "groups.json").write_text(json.dumps({str(k): v for k, v in groups.items()}))
    return d / "irregular"


def _mixed_case(npus: int, kind: str, backend: str, seed: int) -> dict:
    """A layout drawn from ``seed``: tp groups of 2, 4 or 8 and their dp groups, 3-7 iterations of
    compute that differs per rank and 1-3 operations each, drawn from tp all-reduce and
    all-to-all, dp all-gather and reduce-scatter, world all-reduce, neighbour sends and more
    compute (every rank runs the same sequence, so the groups agree), ring algorithms. Unlike
    the irregular cases these may have no point-to-point traffic, where the batcher tries its
    ring phases and, congestion-aware, gives them up at run time."""
    return {"kind": "mixed", "dims": [(kind, npus)], "backend": backend, "seed": seed}


def _write_mixed(d: Path, npus: int, seed: int) -> Path:
    import random

    from workload.builder import GraphBuilder

    rng = random.Random(seed)
    tp = rng.choice([2, 4, 8])
    dp, groups = _tp_dp_groups(npus, tp)
    ops: list[tuple] = []
    for _ in range(rng.randint(3, 7)):
        ops.append(("comp", 0))
        for _ in range(rng.randint(1, 3)):
            ops.append((rng.choice(["ar_tp", "ag_dp", "rs_dp", "a2a_tp", "p2p", "ar_world", "comp"]),
                        rng.choice([1 << 12, 1 << 16, 1 << 18, 1 << 20, 3 << 19])))
    colls = {"ar_tp": ("ALL_REDUCE", "tp"), "a2a_tp": ("ALL_TO_ALL", "tp"), "ag_dp": ("ALL_GATHER", "dp"),
             "rs_dp": ("REDUCE_SCATTER", "dp"), "ar_world": ("ALL_REDUCE", None)}
    for r in range(npus):
        g, t = divmod(r, tp)
        nxt, prv = ((g + 1) % dp) * tp + t, ((g - 1) % dp) * tp + t
        own = random.Random(seed * 100_003 + r)
        b = GraphBuilder()
        prev: list[int] = []
        for k, (op, size) in enumerate(ops):
            if op == "comp":
                prev = [b.comp(f"compute {k}", 1000 * own.randint(1, 40), deps=prev)]
            elif op == "p2p":
                if dp > 1:
                    prev = [b.send(f"send {k}", r, nxt, size, 1000 + k, deps=prev),
                            b.recv(f"recv {k}", prv, r, size, 1000 + k, deps=prev)]
            else:
                ctype, over = colls[op]
                pg = None if over is None else str(1 + g if over == "tp" else 1 + dp + t)
                prev = [b.collective(f"{op} {k}", ctype, size, deps=prev, pg_name=pg)]
        b.write(d / "mixed", r)
    (d / "groups.json").write_text(json.dumps({str(k): v for k, v in groups.items()}))
    return d / "mixed"


#: --draw's rank counts (the issue's 64-1,024: 512 and 1,024 cost ASTRA-sim minutes per layout)
DRAW_NPUS = (64, 128, 256)
_DRAW_IMPLS = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")


def _drawn_case(seed: int, index: int, npus_choices: tuple[int, ...] = DRAW_NPUS) -> dict:
    """Layout ``index`` of ``--draw`` from ``seed``: its rank count from ``npus_choices``, a
    built-in topology, a backend, and either a mixed layout (``_mixed_case``) or the irregular one
    (``_irregular_case``) with every collective ring, direct, halvingDoubling or doubleBinaryTree,
    all from one ``random.Random`` of (seed, index)."""
    import random

    rng = random.Random(seed * 1_000_003 + index)
    npus = rng.choice(npus_choices)
    kind = rng.choice(["Switch", "Ring", "FullyConnected"])
    backend = rng.choice(["congestion-aware", "congestion-unaware"])
    if rng.random() < 0.5:
        case = _mixed_case(npus, kind, backend, rng.randrange(1 << 30))
    else:
        case = _irregular_case(npus, kind, backend, impl=rng.choice(_DRAW_IMPLS))
    case["drawn"] = f"{case['kind']}, {case.get('impl', 'ring')}, {kind}, {backend}"
    return case


def _drawn_name(seed: int, index: int, npus_choices: tuple[int, ...]) -> str:
    return f"draw-{seed}-{index}-{'.'.join(map(str, npus_choices))}"


def case_by_name(name: str) -> dict:
    """A named case (CASES), or a drawn one by its name (``draw-SEED-INDEX-NPUS.NPUS...``)."""
    if name in CASES:
        return CASES[name]
    parts = name.split("-")
    if len(parts) == 4 and parts[0] == "draw" and parts[1].isdigit() and parts[2].isdigit():
        choices = tuple(int(x) for x in parts[3].split(".") if x.isdigit())
        if choices and len(choices) == len(parts[3].split(".")) and all(n >= 8 and n % 8 == 0 for n in choices):
            return _drawn_case(int(parts[1]), int(parts[2]), choices)
    raise KeyError(name)


def _megatron_case(args: str) -> dict:
    """A layout from the Megatron generator (workload/megatron/) with the cluster files it writes:
    the wall is the simulation's, the generation is not counted."""
    return {"kind": "megatron", "args": args.split(), "dims": []}


GPT3_175B = ("--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --micro-batch-size 1 "
             "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 --sequence-parallel "
             "--use-distributed-optimizer --recompute-granularity full --gpu h100")


def _triosim_case(trace: str, layout: dict[str, int], dims: list[tuple[str, int]], micros: bool = False,
                  jitter: float = 0.0, backend: str | None = None) -> dict:
    """A layout of our TrioSim converter; ``jitter``: every rank's compute nodes last up to that
    fraction more or less than the trace says, drawn per rank and node (whole microseconds, as
    ASTRA-sim reads them), so that no rank does what another does and no shortcut applies."""
    return {"kind": "triosim", "trace": trace, "layout": layout, "dims": dims, "micros_only": micros or jitter > 0,
            "jitter": jitter, "backend": backend}


CASES: dict[str, dict] = {
    "ring64": _collective_case([("Ring", 64)]),
    "switch64": _collective_case([("Switch", 64)]),
    "ring64-general": _collective_case([("Ring", 64)], ("--no-symmetry",)),
    "ring64-aware": _collective_case([("Ring", 64)], backend="congestion-aware"),
    "ring3d-64": _collective_case([("Ring", 4), ("Ring", 4), ("Ring", 4)]),
    "switch3d-64": _collective_case([("Switch", 4), ("Switch", 4), ("Switch", 4)]),
    "ring512": _collective_case([("Ring", 512)]),
    "switch512": _collective_case([("Switch", 512)]),
    "ring512-general": _collective_case([("Ring", 512)], ("--no-symmetry",)),
    "ring3d-512": _collective_case([("Ring", 8), ("Ring", 8), ("Ring", 8)]),
    "switch3d-512": _collective_case([("Switch", 8), ("Switch", 8), ("Switch", 8)]),
    "ring1024": _collective_case([("Ring", 1024)]),
    "switch1024": _collective_case([("Switch", 1024)]),
    "ring1024-general": _collective_case([("Ring", 1024)], ("--no-symmetry",)),
    "ring1024-aware": _collective_case([("Ring", 1024)], backend="congestion-aware"),
    "switch1024-aware": _collective_case([("Switch", 1024)], backend="congestion-aware"),
    # every rank simulated on the congestion-aware network (batched ring phases, link pipes)
    "ring1024-aware-general": _collective_case([("Ring", 1024)], ("--no-symmetry",), backend="congestion-aware"),
    "switch1024-aware-general": _collective_case([("Switch", 1024)], ("--no-symmetry",), backend="congestion-aware"),
    "ring3d-1024": _collective_case([("Ring", 8), ("Ring", 8), ("Ring", 16)]),
    "switch3d-1024": _collective_case([("Switch", 8), ("Switch", 8), ("Switch", 16)]),
    "ring4096": _collective_case([("Ring", 4096)]),
    "switch4096": _collective_case([("Switch", 4096)]),
    "ring4096-general": _collective_case([("Ring", 4096)], ("--no-symmetry",)),
    "ring3d-4096": _collective_case([("Ring", 16), ("Ring", 16), ("Ring", 16)]),
    "switch3d-4096": _collective_case([("Switch", 16), ("Switch", 16), ("Switch", 16)]),
    # issue 26: direct all-reduce and all-to-all, aware, 1 MiB, at 256-1,024 NPUs; the -general
    # rows simulate every rank (--no-symmetry), the others let a shortcut take what it can prove
    **_direct_cases(),
    "dbt-ar-switch256": _collective_case([("Switch", 256)], ("--no-symmetry",), impl="doubleBinaryTree",
                                         size=1 << 20),
    # halving-doubling on an aware Ring: its partner pattern has no rotation symmetry, so every rank
    # runs, and each message crosses up to 128 links as store-and-forward hops
    "hd-ar-ring256-aware": _collective_case([("Ring", 256)], backend="congestion-aware", impl="halvingDoubling",
                                            size=1 << 20),
    # issue 23: ring all-reduce on a 1,024-GPU rail-optimized cluster (128 servers of 8 behind their
    # NVSwitch, a switch per rail, 16 spines; per-pair ECMP makes some cross-server flows share links),
    # every rank simulated on the congestion-aware backend (network/analytical/ring_flows.py)
    "rail1024-ring-aware": _topology_case({"shape": "rail-optimized", "servers": 128, "gpus-per-server": 8,
                                           "spines": 16}, 1024),
    "rail1024-ring-aware-1g": _topology_case({"shape": "rail-optimized", "servers": 128, "gpus-per-server": 8,
                                              "spines": 16}, 1024, size=1 << 30),
    # issue 25: GPT-3 175B, tp 8 x pp 16 x dp 8 on a rail-optimized fat-tree, congestion-aware: one rank per
    # pipeline stage (the dp x tp rotations fold the ranks and the links, system/shortcuts/orbits.py)
    "gpt3-1024-fat-tree-aware": _megatron_case(GPT3_175B + " --data-parallel-size 8 --global-batch-size 128 "
                                               "--topology fat-tree"),
    # ... and a Llama-3-405B-style layout, tp 8 x pp 16 x dp 1,024 = 131,072 GPUs, written per orbit
    "llama405b-131072-per-orbit": _megatron_case(
        "--num-layers 128 --hidden-size 16384 --num-attention-heads 128 --num-query-groups 8 --ffn-hidden-size 53248 "
        "--seq-length 8192 --vocab-size 128256 --swiglu --untie-embeddings-and-output-weights --use-flash-attn "
        "--global-batch-size 16384 --micro-batch-size 1 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 "
        "--data-parallel-size 1024 --sequence-parallel --use-distributed-optimizer --recompute-granularity full "
        "--gpu h100 --topology fat-tree --per-orbit"),
    # issue 26: irregular layouts, every rank simulated (congestion-aware Switch)
    "irregular-switch64-aware": _irregular_case(64),
    "irregular-switch256-aware": _irregular_case(256),
    "irregular-switch512-aware": _irregular_case(512),
    "irregular-switch1024-aware": _irregular_case(1024),
    "irregular-switch256-unaware": _irregular_case(256, backend="congestion-unaware"),
    # a tp group per Ring of 4, the dp groups across a Switch of 32: localBWAware runs each
    # all-reduce as reduce-scatter, all-reduce and all-gather phases on the two dimensions
    "irregular-ring4xswitch32-unaware": _irregular_case(128, backend="congestion-unaware",
                                                        dims=[("Ring", 4), ("Switch", 32)]),
    "irregular-switch128-aware": _irregular_case(128),
    # the same layout where a tp ring's messages cross several links (Ring) or one direct link each
    "irregular-ring128-aware": _irregular_case(128, "Ring"),
    "irregular-ring256-aware": _irregular_case(256, "Ring"),
    "irregular-fc256-aware": _irregular_case(256, "FullyConnected"),
    # ... and with the system file's other implementations for every collective
    "irregular-switch256-aware-direct": _irregular_case(256, impl="direct"),
    "irregular-switch512-aware-direct": _irregular_case(512, impl="direct"),
    "irregular-switch256-aware-hd": _irregular_case(256, impl="halvingDoubling"),
    # drawn layouts (_mixed_case): the first two without point-to-point traffic, so their ring
    # phases are batched (unaware) or tried and given up (aware)
    "mixed-switch64-aware": _mixed_case(64, "Switch", "congestion-aware", 15),
    "mixed-ring64-unaware": _mixed_case(64, "Ring", "congestion-unaware", 20),
    "mixed-fc128-aware": _mixed_case(128, "FullyConnected", "congestion-aware", 24),
    # some 350,000 batched rank-steps: past what the ring batcher ran in Python before numpy
    "mixed-fc128-unaware": _mixed_case(128, "FullyConnected", "congestion-unaware", 116),
    "mixed-ring256-aware": _mixed_case(256, "Ring", "congestion-aware", 17),
    # ns-3's start-up: the README example on the ns3 backend, whole process (no ASTRA-sim column);
    # the row says whether our C++ came precompiled (network/ns3/precompiled.py) or was JIT-compiled
    "ns3-readme8": {"kind": "ns3-readme", "dims": [("Ring", 8)], "backend": "ns3"},
    "vgg13-dp64": _triosim_case("vgg13", {"dp": 64}, [("Ring", 64)]),
    "resnet50-8x8x4": _triosim_case("resnet50", {"dp": 8, "tp": 8, "pp": 4, "micro_batches": 4}, [("Ring", 256)]),
    # issue 13's layout: groups of tp 4, dp 8 and pp 4 ranks, 131,328 nodes, 27,776 collectives
    "resnet50-8x4x4": _triosim_case("resnet50", {"dp": 8, "tp": 4, "pp": 4, "micro_batches": 8},
                                    [("Ring", 8), ("Switch", 16)], micros=True),
    # issue 26: the same layout with every rank's compute jittered by up to 5 %, so that every rank
    # runs every message (no symmetry, no orbits), on both backends and the issue's networks
    "resnet50-8x4x4-jitter": _triosim_case("resnet50", {"dp": 8, "tp": 4, "pp": 4, "micro_batches": 8},
                                           [("Ring", 8), ("Switch", 16)], jitter=0.05),
    "resnet50-8x4x4-jitter-switch-aware": _triosim_case("resnet50", {"dp": 8, "tp": 4, "pp": 4, "micro_batches": 8},
                                                        [("Switch", 128)], jitter=0.05, backend="congestion-aware"),
    "resnet50-8x4x4-jitter-ring-aware": _triosim_case("resnet50", {"dp": 8, "tp": 4, "pp": 4, "micro_batches": 8},
                                                      [("Ring", 128)], jitter=0.05, backend="congestion-aware"),
}
QUICK = ["ring64", "ring64-general", "ring512", "ring1024", "ring4096", "vgg13-dp64"]
ISSUE13 = ["ring1024-general", "ring1024-aware", "switch1024-aware", "resnet50-8x4x4"]


class Prepared:
    """One case's files: our CLI arguments and ASTRA-sim's flags for the same inputs."""

    def __init__(self, ours: list[str], astra: list[str], backend: str, npus: int) -> None:
        self.ours, self.astra, self.backend, self.npus = ours, astra, backend, npus


def _child_env() -> dict[str, str]:
    path = [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))


def _prepare_in_child(name: str, work: Path, examples: Path) -> Prepared:
    """Prepare in a child process: a child's peak RSS counts the parent's memory at fork, so the
    parent must stay small (converting a TrioSim trace takes some 200 MB)."""
    import subprocess

    p = subprocess.run([sys.executable, "-m", "dtsim_tools.bench", "--prepare", name, str(work), str(examples)],
                       capture_output=True, text=True, env=_child_env(), check=False)
    if p.returncode != 0:
        raise SystemExit(f"preparing {name} failed: {p.stderr.strip()[-600:]}")
    return Prepared(**json.loads(p.stdout.strip().splitlines()[-1]))


def _write_configs(d: Path, dims: list[tuple[str, int]], impl: str = "ring") -> tuple[Path, Path, Path]:
    import yaml

    net = {"topology": [k for k, _ in dims], "npus_count": [n for _, n in dims],
           "bandwidth": [50.0] * len(dims), "latency": [500.0] * len(dims)}
    (d / "net.yml").write_text(yaml.safe_dump(net))
    cfg = dict(RING_4CHUNKS)
    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        cfg[f"{c}-implementation"] = [impl] * len(dims)
    (d / "sys.json").write_text(json.dumps(cfg))
    (d / "mem.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    return d / "net.yml", d / "sys.json", d / "mem.json"


def _micros_only(prefix: Path, ranks: int) -> None:
    """Drop ``duration_ns`` so that we replay ``duration_micros`` as ASTRA-sim does."""
    from chakra_proto.io import read_et, write_et

    for r in range(ranks):
        path = Path(f"{prefix}.{r}.et")
        meta, nodes = read_et(path)
        for n in nodes:
            keep = [a for a in n.attr if a.name != "duration_ns"]
            if len(keep) != len(n.attr):
                del n.attr[:]
                n.attr.extend(keep)
        write_et(path, meta, nodes)


def _jitter(prefix: Path, ranks: int, fraction: float) -> None:
    """Each compute node of each rank lasts up to ``fraction`` more or less (random.Random(rank)),
    in whole microseconds and at least 1 (after _micros_only, so that we replay these too)."""
    import random

    from chakra_proto import enums as pb
    from chakra_proto.io import read_et, write_et

    for r in range(ranks):
        rng = random.Random(r)
        path = Path(f"{prefix}.{r}.et")
        meta, nodes = read_et(path)
        for n in nodes:
            if n.type == pb.COMP_NODE and n.duration_micros:
                n.duration_micros = max(1, round(n.duration_micros * (1 + fraction * rng.uniform(-1, 1))))
        write_et(path, meta, nodes)


def _prepare(name: str, case: dict, work: Path, examples: Path) -> Prepared:
    """Write the inputs of one case."""
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    if case["kind"] == "megatron":
        from workload.generate import main as generate

        if generate(["megatron", *case["args"], "-o", str(d / "gpt")]) != 0:
            raise RuntimeError(f"{name}: the generator refused {' '.join(case['args'])}")
        prefix = d / "gpt"
        declared = d / "gpt.orbits.json"  # --per-orbit: one file per stage (workload/orbit_files.py)
        npus = json.loads(declared.read_text())["ranks"] if declared.is_file() else len(list(d.glob("gpt.*.et")))
        ours = ["--workload", str(prefix), "--network", f"{prefix}.network.yml", "--system", f"{prefix}.system.json"]
        return Prepared(ours, [], "congestion-aware", npus)
    dims = case["dims"]
    npus = 1
    for _, n in dims:
        npus *= n
    net, cfg, mem = _write_configs(d, dims, case.get("impl", "ring"))
    common = ["--network", str(net), "--system", str(cfg), "--remote-memory-configuration", str(mem)]
    astra = [f"--network-configuration={net}", f"--system-configuration={cfg}",
             f"--remote-memory-configuration={mem}"]
    backend = case.get("backend") or "congestion-unaware"
    if case["kind"] == "topology":
        from workload.builder import write_collective_microbenchmark

        (d / "net.yml").write_text(json.dumps({"topology-generator": case["generator"], "npus_count": [npus]}))
        spec = write_collective_microbenchmark(d / "all_reduce", npus, case["collective"], case["size"], shared=True)
        ours = ["--workload", spec, "--network", str(d / "net.yml"), "--system", str(cfg),
                "--remote-memory-configuration", str(mem), "--backend", backend]
        return Prepared(ours, [], backend, npus)
    if case["kind"] == "ns3-readme":
        ours = ["--workload", str(examples / "workload" / "all_reduce_8npus_1MB" / "all_reduce"),
                "--network", str(examples / "network" / "Ring_8npus.yml"),
                "--system", str(examples / "system" / "Ring_4chunks.json"), "--backend", "ns3"]
        return Prepared(ours, [], "ns3", 8)
    if case["kind"] in ("irregular", "mixed"):
        prefix = _write_irregular(d, npus) if case["kind"] == "irregular" else _write_mixed(d, npus, case["seed"])
        groups = d / "groups.json"
        ours = ["--workload", str(prefix), *common, "--comm-group-configuration", str(groups), "--backend", backend]
        return Prepared(ours, [f"--workload-configuration={prefix}", *astra, f"--comm-group-configuration={groups}"],
                        backend, npus)
    if case["kind"] == "collective":
        from workload.builder import write_collective_microbenchmark

        # one shared file for all ranks (ASTRA-sim's 4096 case does the same, through links)
        spec = write_collective_microbenchmark(d / "all_reduce", npus, case.get("collective", "ALL_REDUCE"),
                                               case.get("size", GB), shared=True)
        for r in range(npus):
            os.symlink(spec, d / f"all_reduce.{r}.et")
        ours = ["--workload", spec, *common, *case["extra"]]
        if case.get("backend"):
            ours += ["--backend", backend]
        return Prepared(ours, [f"--workload-configuration={d / 'all_reduce'}", *astra], backend, npus)
    from workload.triosim import convert_triosim

    res = convert_triosim(examples / "triosim" / case["trace"], batch_size=128,
                          out_prefix=d / case["trace"], **case["layout"])
    if case.get("micros_only"):
        _micros_only(res.prefix, res.ranks)
    if case.get("jitter"):
        _jitter(res.prefix, res.ranks, case["jitter"])
    groups = ["--comm-group-configuration", str(res.comm_groups_path)] if res.comm_groups_path else []
    ours = ["--workload", str(res.prefix), *common, *groups] + (["--backend", backend] if case.get("backend") else [])
    astra += [f"--workload-configuration={res.prefix}"] + ([f"--comm-group-configuration={res.comm_groups_path}"]
                                                          if res.comm_groups_path else [])
    return Prepared(ours, astra, backend, npus)


# a simulator's wall and peak RSS (ours and ASTRA-sim's alike), taken by a small Python started for
# the purpose: ru_maxrss of a child holds its parent's RSS at fork, so the parent must be small, and
# posix_spawn then wait4 time the whole process and nothing else. It is started with the parent's
# descriptors left open, as a shell starts a command (SPAWN): started with close_fds=True instead,
# ASTRA-sim's binary (two threads) ran 10-30% slower here than from a shell or farm-bench, which
# flattered every ratio of a small case
_SPAWN = {"close_fds": False}
_SPAWNER = """\
import json, os, sys, time
t = time.perf_counter()
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t
with open(sys.argv[1], "w") as f:
    json.dump({"wall": wall, "rss_mb": usage.ru_maxrss / 1024, "code": os.waitstatus_to_exitcode(status)}, f)
"""


def _run_ours(prep: Prepared) -> dict:
    """Our CLI as a user runs it (``python -m system.main ...``, its default output: each rank's
    finish line, the breakdown table, the total line) in its own process, started and timed by
    _SPAWNER exactly as ASTRA-sim is, whose default output is its ranks' finish lines too: the
    whole process's wall and peak RSS; the cycles are read from the finish lines, as ASTRA-sim's
    are. An ns-3 row also writes the report, which names how its C++ was loaded."""
    import subprocess

    with tempfile.TemporaryDirectory() as t:
        rep, measured = Path(t) / "r.json", Path(t) / "measured.json"
        extra = ["--report", str(rep)] if prep.backend == "ns3" else []
        with tempfile.TemporaryFile() as out:
            p = subprocess.run([sys.executable, "-S", "-c", _SPAWNER, str(measured), sys.executable, "-m",
                                "system.main", *prep.ours, *extra],
                               stdout=out, stderr=subprocess.PIPE, text=False, env=_child_env(), **_SPAWN)
            out.seek(0)
            text = out.read()
        m = json.loads(measured.read_text()) if measured.exists() else {"code": p.returncode}
        parsed = _our_output(text)
        if m["code"] != 0 or parsed is None:
            err = p.stderr.decode(errors="replace").strip() or text.decode(errors="replace").strip()
            return {"failed": True, "error": (err or f"exit {m['code']}")[-400:]}
        cxx = json.loads(rep.read_text()).get("network", {}).get("cxx") if extra and rep.exists() else None
    return {"code": 0, "rss_mb": m["rss_mb"], "process_wall": m["wall"], "cxx": cxx, **parsed}


_OUR_RANKS = re.compile(rb"^sys\[(\d+)(?:\.\.(\d+))?\] finished, (\d+) cycles", re.M)
_OUR_TOTAL = re.compile(rb"^total: (\d+) ranks .*; end (\d+) cycles .*; (\d+) events in ([0-9.]+) s wall$", re.M)


def _our_output(text: bytes) -> dict | None:
    """Cycles per rank, end, events and the run's own wall from our default output (system/report.py
    format_summary: ``sys[r] finished, ...`` per rank, or ``sys[a..b]`` for equal neighbours of a
    large run, then the total line); None if a rank or the total line is missing."""
    total = _OUR_TOTAL.search(text)
    if total is None:
        return None
    npus = int(total.group(1))
    cycles: list[int | None] = [None] * npus
    for a, b, c in _OUR_RANKS.findall(text):
        lo = int(a)
        for r in range(lo, (int(b) if b else lo) + 1):
            if r < npus:
                cycles[r] = int(c)
    if any(c is None for c in cycles):
        return None
    return {"npus": npus, "cycles": cycles, "end_cycles": int(total.group(2)), "events": int(total.group(3)),
            "wall": float(total.group(4))}


def _run_astra(bin_dir: Path, prep: Prepared, work: Path) -> dict:
    """ASTRA-sim in its own process, started by _SPAWNER: its wall and peak RSS, cycles per rank."""
    import subprocess

    exe = bin_dir / ASTRA_BINARIES[prep.backend]
    if not exe.is_file():
        return {"failed": True, "error": f"{exe} not found"}
    logs = work / "astra-logs"
    logs.mkdir(exist_ok=True)
    measured = work / "astra-measured.json"
    measured.unlink(missing_ok=True)
    with tempfile.TemporaryFile() as out:
        proc = subprocess.run([sys.executable, "-S", "-c", _SPAWNER, str(measured), str(exe), *prep.astra,
                               f"--logging-folder={logs}"], cwd=work, stdout=out, stderr=subprocess.STDOUT, **_SPAWN)
        out.seek(0)
        text = out.read()
    m = json.loads(measured.read_text()) if measured.exists() else {"code": proc.returncode}
    cycles = {int(r): int(c) for r, c in _FINISHED.findall(text)}
    if len(cycles) != prep.npus or m["code"] != 0 and "wall" not in m:
        return {"failed": True, "error": f"exit {m['code']}, {len(cycles)} of {prep.npus} ranks finished: "
                                         + text.decode(errors="replace").strip()[-300:]}
    # every rank finished: a crash in its teardown (the congestion-aware binary aborts in free() after
    # some 128-rank runs) changes no cycle, and the row says so
    return {"wall": m["wall"], "rss_mb": m["rss_mb"], "cycles": [cycles[r] for r in range(prep.npus)],
            "exit": m["code"]}


def _interpreter_floor(repeat: int) -> dict:
    """What any Python process costs here before our first import, started as our runs are:
    ``python -c pass``'s median wall and peak RSS, and the site-packages .pth files that run code
    at every start (an environment's certificate hook or an import finder can cost tens of ms
    and several MB, which every row with our wall includes and ASTRA-sim's does not). With it,
    ``startup``: the median wall of ``python -m system.main --version``, the interpreter started as
    our runs are and every module a run imports before it reads its input, the least any row of
    ours can take (against ASTRA-sim's runs of a few hundredths of a second it is most of ours)."""
    import site
    import subprocess

    runs, startups = [], []
    with tempfile.TemporaryDirectory() as t:
        measured = Path(t) / "m.json"
        for _ in range(max(5, repeat)):
            subprocess.run([sys.executable, "-S", "-c", _SPAWNER, str(measured), sys.executable, "-c", "pass"],
                           env=_child_env(), check=True, **_SPAWN)
            runs.append(json.loads(measured.read_text()))
            subprocess.run([sys.executable, "-S", "-c", _SPAWNER, str(measured), sys.executable, "-m", "system.main",
                            "--version"], env=_child_env(), check=True, stdout=subprocess.DEVNULL, **_SPAWN)
            startups.append(json.loads(measured.read_text()))
    hooks = []
    for folder in site.getsitepackages() + [site.getusersitepackages()]:
        for pth in sorted(Path(folder).glob("*.pth")) if Path(folder).is_dir() else ():
            try:
                lines = pth.read_text(errors="replace").splitlines()
            except OSError:
                continue
            if any(line.startswith(("import ", "import\t")) for line in lines):  # site exec()s these lines
                hooks.append(pth.name)
    if any(r["code"] != 0 for r in startups):
        raise RuntimeError(f"{sys.executable} -m system.main --version exited {[r['code'] for r in startups]}")
    return {"wall": sorted(r["wall"] for r in runs)[len(runs) // 2], "rss_mb": max(r["rss_mb"] for r in runs),
            "pth_hooks": hooks, "venv": sys.prefix != sys.base_prefix,
            "startup": sorted(r["wall"] for r in startups)[len(startups) // 2]}


def _median_run(runs: list[dict]) -> dict:
    import statistics

    ok = [r for r in runs if not r.get("failed")]
    if len(ok) < len(runs):
        return next(r for r in runs if r.get("failed"))
    best = dict(ok[0])
    for key in ("wall", "process_wall"):
        if key in best:
            best[key] = statistics.median(r[key] for r in ok)
    best["walls"] = [r["wall"] for r in ok]
    best["rss_mb"] = max(r["rss_mb"] for r in ok)
    return best


#: the packages a run imports, byte-compiled before the timings (_byte_compile)
RUN_PACKAGES = ("chakra_proto", "network", "system", "workload", "dtsim_tools")


def _rejected_pycs(folder: Path) -> list[Path]:
    """Sources whose .pyc compileall keeps but the importer rejects: compileall compares a
    source's mtime with the one the .pyc records, the importer its size too, so a file rewritten
    within the second it was compiled in (a checkout, a stash) would be compiled by every run."""
    import importlib.util

    out = []
    for source in folder.rglob("*.py"):
        pyc = Path(importlib.util.cache_from_source(str(source)))
        try:
            with open(pyc, "rb") as f:
                header = f.read(16)
            st = source.stat()
        except OSError:
            continue
        flags = int.from_bytes(header[4:8], "little")
        if len(header) == 16 and flags == 0 and (  # a timestamp .pyc: (mtime, size) of its source
                int.from_bytes(header[8:12], "little") != int(st.st_mtime) & 0xFFFFFFFF
                or int.from_bytes(header[12:16], "little") != st.st_size & 0xFFFFFFFF):
            out.append(source)
    return out


def _byte_compile() -> None:
    """Write the run's .pyc files before timing it, as ``pip install`` does. Where
    PYTHONDONTWRITEBYTECODE is set (this development machine sets it), an editable install never
    writes them and every run compiles its ~70 modules again: 0.1 s, most of a small case's wall."""
    import compileall

    for name in RUN_PACKAGES:
        folder = PACKAGE_ROOT / name
        if folder.is_dir():
            compileall.compile_dir(str(folder), quiet=2)  # up-to-date files are skipped
            for source in _rejected_pycs(folder):
                compileall.compile_file(str(source), quiet=2, force=True)
    if sys.flags.dont_write_bytecode:
        print("note: PYTHONDONTWRITEBYTECODE is set; the simulator's modules were byte-compiled first, as "
              "pip install does", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dtsim-bench", description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", type=_case_name, metavar="CASE",
                    help=f"run only these cases: {', '.join(CASES)}, or a drawn case by the name its row shows")
    ap.add_argument("--quick", action="store_true", help=f"run {', '.join(QUICK)}")
    ap.add_argument("--astra-sim-bin", metavar="DIR", type=Path,
                    help="also run ASTRA-sim's binaries from DIR on each case (default cases: "
                         f"{', '.join(ISSUE13)})")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run each case N times (ours and ASTRA-sim alternating); report the median wall")
    ap.add_argument("--draw", type=int, default=0, metavar="N",
                    help="also run N layouts drawn at random (64-256 ranks, both backends, built-in topologies, "
                         "ring, direct, halving-doubling and double-binary-tree) and end with a summary")
    ap.add_argument("--seed", type=int, default=0, help="--draw's seed (default 0)")
    ap.add_argument("--draw-npus", default=",".join(map(str, DRAW_NPUS)), metavar="N,N,...",
                    help=f"--draw's rank counts, one drawn per layout (default {','.join(map(str, DRAW_NPUS))})")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--examples", type=Path, default=None, metavar="DIR",
                    help="a checkout's examples/ folder, for the TrioSim cases (default: the checkout's)")
    ap.add_argument("--prepare", nargs=3, metavar=("CASE", "DIR", "EXAMPLES"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.prepare:
        print(json.dumps(vars(_prepare(a.prepare[0], case_by_name(a.prepare[0]), Path(a.prepare[1]),
                                       Path(a.prepare[2])))))
        return 0
    examples = (a.examples or PACKAGE_ROOT / "examples").resolve()
    try:
        drawn = []
        if a.draw:
            try:
                choices = tuple(int(x) for x in a.draw_npus.split(","))
            except ValueError:
                choices = ()
            if a.draw < 0 or not choices or min(choices) < 8 or any(n % 8 for n in choices):
                raise InputError(None, "--draw/--draw-npus", "expected --draw N >= 0 and rank counts of at least 8, "
                                 f"each a multiple of 8 (the layouts' tp groups), got {a.draw} and {a.draw_npus!r}")
            drawn = [_drawn_name(a.seed, i, choices) for i in range(a.draw)]
        names = (a.cases or []) + drawn if (a.cases or drawn) else \
            (QUICK if a.quick else ISSUE13 if a.astra_sim_bin else list(CASES))
        if a.json:
            check_file("--json", a.json, (".json",), "the rows as JSON")
        if any(case_by_name(n)["kind"] == "triosim" for n in names) and not (examples / "triosim").is_dir():
            raise InputError(examples / "triosim", "--examples", "no TrioSim traces here; the TrioSim cases "
                             "need a dtsim checkout's examples/ folder (--examples DIR), or choose --cases")
        if a.astra_sim_bin and not a.astra_sim_bin.is_dir():
            raise InputError(a.astra_sim_bin, "--astra-sim-bin", "not a folder (the one holding "
                             f"{' and '.join(ASTRA_BINARIES.values())})")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    _byte_compile()
    rows = []
    floor = None
    if a.astra_sim_bin:
        floor = _interpreter_floor(a.repeat)
        print(f"note: this interpreter's own start ('python -c pass') takes {floor['wall']:.3f} s and "
              f"{floor['rss_mb']:.1f} MB here, in every wall and RSS of ours below; .pth files that run code at "
              f"start: {', '.join(floor['pth_hooks']) or 'none'}"
              + ("" if floor["venv"] else " (not a virtual environment: one made by 'python -m venv' holds only "
                                          "what is installed in it, as users usually run)"))
        print(f"note: our start-up before reading any input ('python -m system.main --version': that start and "
              f"every module a run imports first) takes {floor['startup']:.3f} s, the least any row of ours can take")
        # whole-process walls on both sides: our start-up and imports count, as ASTRA-sim's do
        hdr = (f"{'case':<24} {'NPUs':>5} {'events':>10} {'wall s':>8} {'RSS MB':>7} {'ASTRA s':>8} "
               f"{'ASTRA MB':>8} {'wall ratio':>10}  cycles")
    else:
        hdr = (f"{'case':<24} {'NPUs':>5} {'events':>10} {'wall s':>8} {'events/s':>10} {'RSS MB':>7} "
               f"{'cycles':>10}  vs ASTRA-sim (cycles, wall, RSS)")
    print(hdr)
    print("-" * len(hdr))
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            case_dir = Path(work) / name
            prep = _prepare_in_child(name, Path(work), examples)
            ours_runs, astra_runs = [], []
            for _ in range(max(1, a.repeat)):
                ours_runs.append(_run_ours(prep))
                if a.astra_sim_bin and prep.astra:
                    astra_runs.append(_run_astra(a.astra_sim_bin.resolve(), prep, case_dir))
            r = _median_run(ours_runs)
            r["case"] = name
            rows.append(r)
            if r.get("failed"):
                print(f"{name:<24} FAILED: {r['error']}")
                continue
            if prep.backend == "ns3":  # start-up is the point: the whole process's wall
                note = f"our C++ {r['cxx']}, whole process"
                if a.astra_sim_bin:
                    print(f"{name:<24} {r['npus']:>5} {r['events']:>10} {r['process_wall']:>8.3f} {r['rss_mb']:>7.1f} "
                          f"{'n/a':>8} {'n/a':>8} {'n/a':>10}  end {r['end_cycles']} ({note})")
                else:
                    print(f"{name:<24} {r['npus']:>5} {r['events']:>10} {r['process_wall']:>8.3f} "
                          f"{r['events'] / r['process_wall']:>10.0f} {r['rss_mb']:>7.1f} {r['end_cycles']:>10}  ({note})")
                continue
            if a.astra_sim_bin and not prep.astra:
                print(f"{name:<24} {r['npus']:>5} {r['events']:>10} {r['process_wall']:>8.3f} {r['rss_mb']:>7.1f} "
                      f"{'n/a':>8} {'n/a':>8} {'n/a':>10}  end {r['end_cycles']} (ASTRA-sim reads no topology file)")
                continue
            if a.astra_sim_bin:
                x = _median_run(astra_runs)
                r["astra_sim"] = x
                if x.get("failed"):
                    what = f" ({case_by_name(name)['drawn']})" if name.startswith("draw-") else ""
                    print(f"{name:<24} {r['npus']:>5} {r['events']:>10} {r['process_wall']:>8.3f} {r['rss_mb']:>7.1f}  "
                          f"ASTRA-sim FAILED{what}: {x['error']}")
                    continue
                same = x["cycles"] == r["cycles"]
                r["cycles_equal"] = same
                diff = sum(1 for p, q in zip(x["cycles"], r["cycles"]) if p != q)
                verdict = (f"cycles equal on all {prep.npus} ranks (end {r['end_cycles']})" if same
                           else f"cycles DIFFER on {diff} of {prep.npus} ranks (ours end {r['end_cycles']}, "
                                f"ASTRA-sim end {max(x['cycles'])})")
                if name.startswith("draw-"):
                    verdict += f" ({case_by_name(name)['drawn']})"
                crashed = sorted({t["exit"] for t in astra_runs if t.get("exit")})
                if crashed:
                    verdict += f" (ASTRA-sim exit {', '.join(map(str, crashed))} after every rank finished)"
                ours = r["process_wall"]
                # the median of each pair's ratio (ours and ASTRA-sim run in turn): a machine whose
                # speed drifts during the case moves both of a pair, not the ratio
                import statistics  # here, in the parent only: its import is nothing our timed runs pay for

                pairs = [o["process_wall"] / t["wall"] for o, t in zip(ours_runs, astra_runs)
                         if not o.get("failed") and not t.get("failed") and t["wall"] > 0]
                r["wall_ratio"] = statistics.median(pairs) if pairs else ours / x["wall"]
                print(f"{name:<24} {r['npus']:>5} {r['events']:>10} {ours:>8.3f} {r['rss_mb']:>7.1f} "
                      f"{x['wall']:>8.3f} {x['rss_mb']:>8.1f} {r['wall_ratio']:>9.2f}x  {verdict}")
                continue
            eps = r["events"] / r["wall"] if r["wall"] > 0 else 0
            ref = ASTRA_SIM.get(name.replace("-general", ""))
            vs = ""
            if ref:
                same = "same cycles" if ref[0] == r["end_cycles"] else f"DIFFERENT cycles ({ref[0]})"
                vs = f"{same}; {ref[1]:.2f} s; {ref[2]:.0f} MB"
            print(f"{name:<24} {r['npus']:>5} {r['events']:>10} {r['wall']:>8.3f} {eps:>10.0f} {r['rss_mb']:>7.1f} "
                  f"{r['end_cycles']:>10}  {vs}")
    if any(n.startswith("draw-") for n in names):
        print(_draw_summary([r for r in rows if r["case"].startswith("draw-")], bool(a.astra_sim_bin),
                            floor["startup"] if floor else None))
    if a.json:
        for r in rows:  # per-rank lists make the file long without saying more than the verdict
            r.pop("cycles", None)
            r.get("astra_sim", {}).pop("cycles", None)
        Path(a.json).write_text(json.dumps(rows, indent=1))
    # ASTRA-sim's own crash on a drawn layout (it aborts on double-binary-tree over groups) is a row
    # that says so, not a failure of the bench; on a named case it is
    return 1 if any(r.get("failed") or (r.get("astra_sim", {}).get("failed") and not r["case"].startswith("draw-"))
                    or r.get("cycles_equal") is False for r in rows) else 0


def _case_name(value: str) -> str:
    try:
        case_by_name(value)
    except KeyError:
        raise argparse.ArgumentTypeError(f"no case {value!r}") from None
    return value


def _draw_summary(rows: list[dict], with_astra: bool, startup: float | None = None) -> str:
    """One line over the drawn layouts: how many ran, how many ASTRA-sim finished, how many of
    those agree on every rank, and the wall ratio's median and range and the peak RSS against
    ASTRA-sim's. With ``startup`` (_interpreter_floor's): how long ASTRA-sim takes for the whole of
    each layout we are slower on, against that start-up of ours."""
    import statistics

    ours_failed = [r for r in rows if r.get("failed")]
    text = f"drawn: {len(rows)} layouts, {len(ours_failed)} failed here"
    if not with_astra:
        return text
    compared = [r for r in rows if not r.get("failed") and not r.get("astra_sim", {}).get("failed")]
    equal = sum(1 for r in compared if r.get("cycles_equal"))
    text += (f"; ASTRA-sim finished {len(compared)} of {len(rows) - len(ours_failed)}, cycles equal on every "
             f"rank in {equal} of them")
    ratios = sorted(r["wall_ratio"] for r in compared if "wall_ratio" in r)
    if ratios:
        leaner = sum(1 for r in compared if r["rss_mb"] <= r["astra_sim"]["rss_mb"])
        slower = [r["case"] for r in compared if r.get("wall_ratio", 0) > 1.0]
        text += (f"; wall ratio median {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x), "
                 f"above 1.0x in {len(slower)} of {len(ratios)}" + (f" ({', '.join(slower)})" if slower else "")
                 + f"; peak RSS at most ASTRA-sim's in {leaner} of {len(compared)}")
        if slower and startup is not None:
            walls = sorted(r["astra_sim"]["wall"] for r in compared if r.get("wall_ratio", 0) > 1.0)
            text += (f"; ASTRA-sim's whole run on those {walls[0]:.3f}-{walls[-1]:.3f} s, our start-up alone "
                     f"{startup:.3f} s")
    return text


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
