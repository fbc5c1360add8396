"""system/generation.py's per-stream loop in C (system/_sys_core.c: generate_streams) against the
Python loop it replaces: on the collectives of random workloads of the differential generator
(several dimensions, queues that rotate, windowed direct, halving-doubling, trees, whose algorithms
are not copied) and with several queues per dimension, both give every rank's finish, every node's
start and end, and the event count alike."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import system.generation as gen
from dtsim_tools.differential import case_paths, generate_spec, materialize
from network.errors import InputError
from system.simulation import Deadlock, run_simulation

pytestmark = pytest.mark.skipif(gen._generate_streams is None,
                                reason="system._sys_core is not built (or DTSIM_PURE_PYTHON=1)")


def _outcome(args: tuple, kw: dict) -> Any:
    try:
        r = run_simulation(*args, **kw)
    except Deadlock as e:
        return ("stuck", e.report())
    except InputError as e:
        return ("refused", str(e))
    return r.events, [(w.finish_time, list(w.records)) for w in r.workloads]


def test_generated_streams_are_the_python_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = runs = 0
    for seed in range(20261303, 20261303 + 12):
        d = materialize(generate_spec(seed), tmp_path / f"case{seed}")
        p = case_paths(d)
        args = (str(p["workload"]), str(p["network"]), str(p["system"]))
        for backend in ("congestion-unaware", "congestion-aware"):
            for queues in (1, 3):
                kw = dict(backend=backend, comm_groups=None if p["groups"] is None else str(p["groups"]),
                          symmetry=False, num_queues_per_dim=queues)
                c = _outcome(args, kw)
                with monkeypatch.context() as m:
                    m.setattr(gen, "_generate_streams", None)
                    python = _outcome(args, kw)
                assert c == python, f"seed {seed} {backend} queues {queues}"
                runs += 1
                ran += not isinstance(c[0], str)
    assert ran >= runs * 2 // 3  # most cases run (a few are refused alike)


def test_streams_made_in_c_are_the_classes_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """generate_streams makes each StreamBaseline without its Python __init__ (and sets each
    algorithm's stream and sys as Algorithm.init does) only while those are the configured ones:
    a subclass's or a patched __init__ or init runs, and the run's answer stays the same."""
    from system.collective.algorithm import Algorithm
    from system.stream import StreamBaseline

    d = materialize(generate_spec(20261303), tmp_path / "case")
    p = case_paths(d)
    args = (str(p["workload"]), str(p["network"]), str(p["system"]))
    kw = dict(comm_groups=None if p["groups"] is None else str(p["groups"]), symmetry=False)
    made, inits = [], []
    real_new, real_init = StreamBaseline.__init__, Algorithm.init
    plain = _outcome(args, kw)
    with monkeypatch.context() as m:
        m.setattr(StreamBaseline, "__init__", lambda self, *a: (made.append(self), real_new(self, *a))[1])
        m.setattr(Algorithm, "init", lambda self, stream: (inits.append(stream), real_init(self, stream))[1])
        patched = _outcome(args, kw)
    assert patched == plain and made and len(inits) >= len(made)
    assert all(isinstance(s, StreamBaseline) for s in made)
