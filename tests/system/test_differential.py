"""dtsim against ASTRA-sim's own answers on the differential corpus (tests/data/differential/).

Each corpus case holds a generated workload, network and system config, and what ASTRA-sim's two
analytical binaries answered on it (provenance and the regenerating command: the README there).
Where ASTRA-sim finished, dtsim must give every rank the same cycles in every mode (the symmetric
shortcuts, the ring batcher, and every rank with every message an event). Where ASTRA-sim did not
finish (no finished line for some rank, a timeout, a crash), dtsim must not answer silently: it
refuses (InputError), reports a deadlock, or warns with a message that names ASTRA-sim.

A deterministic sample of CI_CASES cases runs always; the rest are marked slow. To reproduce one:
``python scripts/differential.py materialize --case ID --out /tmp/ID`` (prints both commands).
"""
from __future__ import annotations

import math

import pytest

from dtsim_tools.differential import (BACKENDS, DEFAULT_CORPUS, MODES, case_seed, check_record, check_runs,
                                      ci_sample, generate_spec, load_corpus, materialize)

CI_CASES = 300
STATUSES = ("ok", "no-finish", "timeout", "unsupported")

RECORDS = load_corpus(DEFAULT_CORPUS)
_SAMPLE = {r["id"] for r in ci_sample(RECORDS, CI_CASES)}
#: (mode, verify_shortcuts): every mode, and the default one once more with verify_shortcuts=True
#: where run_simulation has it (the shortcut checked against the every-event path)
RUNS = check_runs(MODES, verify=True)


def _params(sample: bool) -> list:
    out = []
    for rec in RECORDS:
        if (rec["id"] in _SAMPLE) != sample:
            continue
        marks = () if sample else (pytest.mark.slow, pytest.mark.corpus)  # conftest.py: opt-in
        out.append(pytest.param(rec, id=rec["id"], marks=marks))
    return out


def _check(rec: dict, tmp_path) -> None:
    """Every backend with an ASTRA-sim answer (the congestion-aware binary is 1-D only), every run."""
    spec = rec["spec"]
    rows = check_record(rec, RUNS, workdir=tmp_path)
    problems = [f"{r['backend']} {r['mode']}: {r['mismatch']}" for r in rows if r["mismatch"]]
    assert not problems, (
        f"case {rec['id']} ({spec['kind']}{', ' + spec['edge'] if spec.get('edge') else ''}): dtsim differs from "
        f"ASTRA-sim:\n  " + "\n  ".join(problems)
        + f"\nreproduce: python scripts/differential.py materialize --case {rec['id']} --out /tmp/{rec['id']}")


@pytest.mark.parametrize("rec", _params(sample=True))
def test_differential_sample(rec: dict, tmp_path) -> None:
    _check(rec, tmp_path)


@pytest.mark.parametrize("rec", _params(sample=False))
def test_differential_rest(rec: dict, tmp_path) -> None:
    _check(rec, tmp_path)


def test_corpus_is_complete() -> None:
    """At least 2,000 cases, unique ids, a recorded status per backend, and under 2 MB on disk."""
    assert len(RECORDS) >= 2000
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    assert DEFAULT_CORPUS.stat().st_size < 2_000_000
    for rec in RECORDS:
        for b in BACKENDS:
            st = rec["astra"][b]["status"]
            assert st in STATUSES or st.startswith("crash rc="), (rec["id"], b, st)
            if st == "ok":
                assert "cycles" in rec["astra"][b], rec["id"]
    ok = sum(r["astra"]["congestion-unaware"]["status"] == "ok" for r in RECORDS)
    assert ok >= 0.75 * len(RECORDS)  # most cases are answers to compare with, not refusals


def test_materialize_writes_the_spec(tmp_path) -> None:
    rec = RECORDS[0]
    d = materialize(rec["spec"], tmp_path)
    npus = math.prod(rec["spec"]["network"]["npus_count"])
    assert sorted(p.name for p in d.glob("w.*.et")) == sorted(f"w.{r}.et" for r in range(npus))
    for name in ("net.yml", "sys.json", "mem.json", "case.json"):
        assert (d / name).is_file()


def test_generator_is_deterministic() -> None:
    """The same seed gives the same spec (the corpus stores specs, so it never depends on this)."""
    for i in range(20):
        assert generate_spec(case_seed(99, i)) == generate_spec(case_seed(99, i))


def test_large_cases_span_65_to_512_npus_within_their_budget() -> None:
    """``check --large``: deterministic, 65-512 NPUs, every kind of case, each under the large
    message budget (the small generator's cases stay at most 64 NPUs and its own budget)."""
    from dtsim_tools.differential import LARGE_MESSAGE_BUDGET, MESSAGE_BUDGET, estimate_messages

    kinds, dims = set(), set()
    for i in range(40):
        spec = generate_spec(case_seed(5, i), large=True)
        assert spec == generate_spec(case_seed(5, i), large=True)
        npus = math.prod(spec["network"]["npus_count"])
        assert 64 < npus <= 512
        assert estimate_messages(spec) <= LARGE_MESSAGE_BUDGET
        kinds.add(spec["kind"])
        dims.add(len(spec["network"]["npus_count"]))
        small = generate_spec(case_seed(5, i))
        assert math.prod(small["network"]["npus_count"]) <= 64 and estimate_messages(small) <= MESSAGE_BUDGET
    assert kinds == {"uniform", "layout", "layout-perturbed", "irregular", "edge"}
    assert dims == {1, 2, 3}
