"""Before writing: every communication operator Kineto saw in the step is in the rank's graph.

Kineto times every operator of the step; the graph is built from the execution trace's operators
joined to those times. An operator the join loses (a record the execution trace lacks, one filed
where no unit reaches it) would silently drop a collective on one rank, and the ranks could still
pair up if their peers lost the same one. So the communication operators of the step are counted
on both sides, by name, and any difference is bad input naming the first operator that is
missing (or extra).
"""
from __future__ import annotations

from collections import Counter

from workload.pytorch.comm_ops import has_dispatch_ops, is_comm_op
from workload.pytorch.errors import PyTorchTraceError
from workload.pytorch.rank_graph import RankGraph


def check_against_kineto(rg: RankGraph) -> None:
    dev, host = rg.dev, rg.host
    backend_records = not has_dispatch_ops(host.nodes.values())
    comm_names = {n.name for n in host.nodes.values() if is_comm_op(n, backend_records)}
    if not comm_names:
        return
    start = min((s.start_ns for s in dev.steps), default=None)
    end = max((s.end_ns for s in dev.steps), default=None)
    seen = [s for s in dev.by_rf.values() if s.name in comm_names
            and (start is None or (s.start_ns >= start and s.end_ns <= end))]
    seen = _outermost(seen)
    kineto = Counter(s.name for s in seen)
    graph = Counter(u.node.name for u in rg.units if u.is_comm and u.span is not None)
    if kineto == graph:
        return
    name = next(n for n in sorted(kineto.keys() | graph.keys()) if kineto[n] != graph[n])
    if kineto[name] > graph[name]:
        first = sorted((s for s in seen if s.name == name), key=lambda s: s.start_ns)[graph[name]]
        raise PyTorchTraceError(dev.path, f"'{name}' at ts {first.start_ns / 1e3:.3f} us "
                                f"(Record function id {first.args.get('Record function id')})",
                                f"Kineto shows {kineto[name]} '{name}' in the step on rank {rg.rank}, but the "
                                f"execution trace ({host.path}) gives {graph[name]}: a collective would be lost on "
                                "this rank; the two traces must come from the same profiled step of one run")
    raise PyTorchTraceError(host.path, f"'{name}'", f"the execution trace gives {graph[name]} '{name}' in the step "
                            f"on rank {rg.rank}, but Kineto ({dev.path}) shows {kineto[name]}: the traces do not "
                            "agree on the rank's communication; give both traces of the same profiled step")


def _outermost(spans: list) -> list:
    """Communication operators not inside another one on their thread (a c10d op calling another)."""
    out, open_until = [], {}
    for s in sorted(spans, key=lambda s: (s.thread, s.start_ns, -s.end_ns)):
        if open_until.get(s.thread, -1) >= s.end_ns and s.start_ns < open_until.get(s.thread, -1):
            continue
        out.append(s)
        open_until[s.thread] = max(open_until.get(s.thread, -1), s.end_ns)
    return out
