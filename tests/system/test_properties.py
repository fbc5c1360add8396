"""Property tests over random small workloads (issue 3): every run ends, no rank finishes before
its compute allows, and every byte sent is received."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from network.config import NetworkConfig
from system.config import SystemConfig
from system.main import run_simulation
from workload.builder import GraphBuilder

COLLS = ["ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"]


@st.composite
def workloads(draw):
    npus = draw(st.sampled_from([2, 3, 4, 6, 8]))
    n_coll = draw(st.integers(0, 3))
    colls = [(draw(st.sampled_from(COLLS)), draw(st.integers(1, 1 << 20))) for _ in range(n_coll)]
    n_p2p = draw(st.integers(0, 3))
    p2p = []
    for k in range(n_p2p):
        a = draw(st.integers(0, npus - 1))
        b = draw(st.integers(0, npus - 2))
        b = b if b < a else b + 1
        p2p.append((a, b, draw(st.integers(1, 1 << 16)), k))
    per_rank = []
    for _ in range(npus):
        comps = draw(st.lists(st.tuples(st.integers(1, 50_000), st.booleans()), min_size=1, max_size=5))
        per_rank.append(comps)
    return npus, colls, p2p, per_rank, draw(st.data())


def _build(tmp, npus, colls, p2p, per_rank, data):
    crit = []
    for r in range(npus):
        b = GraphBuilder()
        ids: list[int] = []
        dur: dict[int, int] = {}
        longest: dict[int, int] = {}
        prev_coll = None
        items = [("comp", c) for c in per_rank[r]] + [("coll", c) for c in colls] + \
                [("p2p", x) for x in p2p if r in x[:2]]
        order = data.draw(st.permutations(range(len(items))))
        coll_seen = 0
        tainted: set[int] = set()  # point-to-point nodes and what waits on them
        for i in order:
            kind, x = items[i]
            # collectives and sends never wait on a receive: that would make the graph itself
            # deadlock (a blocked send holds no slot, but a collective holds the comm slot)
            pool = ids if kind == "comp" or (kind == "p2p" and x[1] == r) else [d for d in ids if d not in tainted]
            deps = [d for d in pool if data.draw(st.booleans())] if pool else []
            if kind == "comp":
                nid = b.comp(f"c{len(ids)}", x[0], deps=deps, is_cpu_op=x[1])
                dur[nid] = x[0]
            elif kind == "coll":
                c = colls[coll_seen]  # collectives keep one order on every rank
                coll_seen += 1
                if prev_coll is not None:
                    deps = sorted(set(deps) | {prev_coll})
                nid = b.collective(f"k{coll_seen}", c[0], c[1], deps=deps)
                prev_coll = nid
                dur[nid] = 0
            else:
                a, bb, size, tag = x
                nid = (b.send if r == a else b.recv)(f"p{tag}", a, bb, size, tag, deps=deps)
                dur[nid] = 0
            if kind == "p2p" or tainted.intersection(deps):
                tainted.add(nid)
            longest[nid] = dur[nid] + max((longest[d] for d in deps), default=0)
            ids.append(nid)
        b.write(tmp / "w", r)
        gpu = sum(c[0] for c in per_rank[r] if not c[1])
        crit.append(max([gpu] + list(longest.values())))
    return crit


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(w=workloads(), backend=st.sampled_from(["congestion-unaware", "congestion-aware"]),
       splits=st.sampled_from([1, 2, 4]), active=st.sampled_from([1, 2]))
def test_random_workloads_end_and_conserve_bytes(tmp_path_factory, w, backend, splits, active) -> None:
    npus, colls, p2p, per_rank, data = w
    tmp = tmp_path_factory.mktemp("prop")
    crit = _build(tmp, npus, colls, p2p, per_rank, data)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [npus], "bandwidth": [50], "latency": [500]})
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": splits, "active-chunks-per-dimension": active,
                                  "local-mem-bw": 1600, **{f"{c}-implementation": ["ring"] for c in
                                                           ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")}})
    r = run_simulation(tmp / "w", net, cfg, backend=backend, symmetry=False)  # a Deadlock would raise
    for rank, (fin, c) in enumerate(zip(r.finish_ns, crit)):
        assert fin >= c, (rank, fin, c)
    s = r.network_stats
    assert s["bytes_sent"] == s["bytes_received"]
    assert s["bytes_sent"] == sum(s["bytes_per_dim"])
