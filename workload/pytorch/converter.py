"""Per-rank PyTorch traces → one Chakra ET per rank + ``PREFIX.comm_groups.json``.

    python -m workload.convert pytorch --host-trace 'DIR/host.{rank}.json' \\
        --device-trace 'DIR/device.{rank}.json' --ranks N -o PREFIX

The host trace (ExecutionTraceObserver) gives the operators, their nesting, launch order and
tensors; the device trace (Kineto) of the same step gives their measured times, the kernels, the
streams and the process groups. Needs neither Chakra, nor HTA, nor torch. See docs/pytorch.md.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from network.files import write_atomic
from workload.collect.execution_trace import execution_trace_from_doc
from workload.consistency import check_collectives_agree
from chakra_proto import et_def_pb2 as pb
from workload.errors import WorkloadError
from workload.graph import Graph, Node
from workload.pytorch.device_trace import DeviceTrace, device_trace_from_doc
from workload.pytorch.errors import PyTorchTraceError
from workload.pytorch.files import DEVICE, HOST, load_json, rank_paths
from workload.pytorch.gloo_groups import assign_gloo_groups
from workload.pytorch.groups import ProcessGroups
from workload.pytorch.kineto_check import check_against_kineto
from workload.pytorch.measured import (align_instances, harmonise_sparse, p2p_measurements, replay_broadcasts,
                                       world_measurements)
from workload.pytorch.nesting import renest
from workload.pytorch.network_fit import NetworkFit, fit_network
from workload.pytorch.rank_graph import RankGraph, RankStats


@dataclass(frozen=True)
class PyTorchConversion:
    prefix: Path
    ranks: int
    et_paths: list[Path]
    comm_groups_path: Path
    stats: list[RankStats]
    step_ns: list[int | None]          # the measured ProfilerStep of each rank, when the trace has one
    warnings: list[str]
    network_path: Path | None = None   # PREFIX.network.yml, fitted from the collectives' measured times
    network_fit: NetworkFit | None = None


def convert_pytorch(host_pattern: str, device_pattern: str, ranks: int,
                    out_prefix: str | os.PathLike, *, astra_sim_compatible: bool = False,
                    fit_net: bool = True) -> PyTorchConversion:
    hosts = rank_paths(host_pattern, ranks, HOST)
    devices = rank_paths(device_pattern, ranks, DEVICE)
    pairs = []
    groups = ProcessGroups(ranks)
    for r, (hp, dp) in enumerate(zip(hosts, devices)):
        host_doc = load_json(hp, HOST)
        host = execution_trace_from_doc(hp, host_doc)
        host.pid = host_doc.get("pid")
        dev = device_trace_from_doc(dp, load_json(dp, DEVICE))
        _check_pair(r, ranks, host, dev)
        host, _ = renest(host, dev)
        groups.read(host, dev)
        pairs.append((host, dev))
    groups.number()
    prefix = Path(out_prefix)
    if prefix.parent != Path(""):
        prefix.parent.mkdir(parents=True, exist_ok=True)
    built, stats, warnings, rank_graphs = [], [], [], []
    for r, (host, dev) in enumerate(pairs):
        rg = RankGraph(r, host, dev, groups)
        built.append(rg.build())
        check_against_kineto(rg)
        rank_graphs.append(rg)
        stats.append(rg.stats)
        warnings += _warnings(r, dev, rg.stats)
    hosts_seen = {dev.host_name for _, dev in pairs}
    one_clock = len(hosts_seen) == 1 and None not in hosts_seen
    assign_gloo_groups(rank_graphs, groups, one_clock)
    warnings += [w for r, rg in enumerate(rank_graphs) for w in _group_warning(r, rg.stats)]
    instances = align_instances(rank_graphs)
    harmonise_sparse(rank_graphs, instances)
    replay_broadcasts(rank_graphs, instances, one_clock)
    try:
        _check_agree(built, groups, hosts)
    except WorkloadError as exc:
        if not any(st.no_group for st in stats):
            raise
        raise PyTorchTraceError(exc.path, exc.where, f"{exc.problem}. The backend recorded no process group "
                                "for some collectives (gloo does not), and the job has groups other than the "
                                "world, so those collectives were taken as the world's; to simulate such a "
                                "job, trace it with a backend that records them (NCCL)") from None
    et_paths = [b.write(prefix, r, astra_sim_compatible=astra_sim_compatible) for r, b in enumerate(built)]
    groups_path = prefix.parent / f"{prefix.name}.comm_groups.json"
    write_atomic(groups_path, json.dumps(groups.comm_groups(), indent=1) + "\n")
    steps = [max((s.dur_ns for s in dev.steps), default=None) for _, dev in pairs]
    fit = fit_network(world_measurements(rank_graphs, instances, groups, one_clock)
                      + p2p_measurements(rank_graphs, one_clock), ranks) if fit_net else None
    net_path = None
    if fit is not None:
        net_path = prefix.parent / f"{prefix.name}.network.yml"
        write_atomic(net_path, yaml.safe_dump(fit.network_dict(), sort_keys=False, width=1000))
    elif fit_net and ranks > 1:
        warnings.append("no collective was measured on every rank of its group, and no send with its receive on "
                        "one clock: no PREFIX.network.yml written")
    return PyTorchConversion(prefix, ranks, et_paths, groups_path, stats, steps, warnings, net_path, fit)


def _check_pair(r: int, ranks: int, host, dev: DeviceTrace) -> None:
    if dev.rank is not None and dev.rank != r:
        raise PyTorchTraceError(dev.path, "distributedInfo.rank", f"this is rank {dev.rank}'s trace, given as "
                                f"rank {r}'s: the '{{rank}}' in --device-trace must be the rank number")
    if dev.world_size is not None and dev.world_size != ranks:
        raise PyTorchTraceError(dev.path, "distributedInfo.world_size", f"the job had {dev.world_size} ranks "
                                f"but --ranks is {ranks}; pass --ranks {dev.world_size}")
    host_pid = getattr(host, "pid", None)
    if host_pid is not None and dev.pid is not None and str(host_pid) != str(dev.pid):
        raise PyTorchTraceError(host.path, "pid", f"process {host_pid}, but {dev.path} is from process "
                                f"{dev.pid}: give each rank's host and device trace of the same run")
    matched = sum(1 for n in host.nodes.values() if n.rf_id in dev.by_rf)
    if matched == 0:
        raise PyTorchTraceError(dev.path, "Record function id", f"no event matches an operator of {host.path}: "
                                "the two files are not from the same profiled step")


def _warnings(r: int, dev: DeviceTrace, s: RankStats) -> list[str]:
    out = []
    if s.unmatched_ops:
        out.append(f"rank {r}: {s.unmatched_ops} host operator(s) have no event in {dev.path}; given 0 ns")
    if s.unlaunched_kernels:
        out.append(f"rank {r}: {s.unlaunched_kernels} GPU event(s) have no launch inside a host operator; "
                   "left out")
    for kind, n in sorted(s.skipped_comms.items()):
        out.append(f"rank {r}: {n} {kind} operation(s) are kept as host time only (the simulator has no {kind})")
    return out


def _group_warning(r: int, s: RankStats) -> list[str]:
    if not s.no_group:
        return []
    return [f"rank {r}: {s.no_group} communication operation(s) name no process group (the backend records none) "
            "and their threads and peers do not tell which (workload/pytorch/gloo_groups.py); simulated over the world"]


def _check_agree(built: list, groups: ProcessGroups, hosts: list[Path]) -> None:
    """Every rank's collectives must pair with its peers' before we write anything (the error
    names the rank's host trace, where the collective is missing or differs)."""
    graphs = [Graph(str(hosts[r]), _collectives(b), None) for r, b in enumerate(built)]
    check_collectives_agree(graphs, {int(k): v for k, v in groups.comm_groups().items()})


def _collectives(b) -> dict[int, Node]:
    """The collective nodes of a built graph, as the cross-rank check reads them."""
    out = {}
    for raw in b.nodes:
        if raw.type != pb.COMM_COLL_NODE:
            continue
        attrs = {a.name: a for a in raw.attr}
        n = Node()
        n.id, n.name, n.type, n.parents, n.host_launcher = raw.id, raw.name, raw.type, [], None
        n.comm_type, n.comm_size = attrs["comm_type"].int64_val, attrs["comm_size"].int64_val
        n.pg_name = attrs["pg_name"].string_val if "pg_name" in attrs else ""
        out[n.id] = n
    return out


def summary_lines(c: PyTorchConversion) -> list[str]:
    lines = [f"wrote {c.ranks} rank(s): {c.prefix}.{{0..{c.ranks - 1}}}.et and {c.comm_groups_path.name}"]
    for r, s in enumerate(c.stats):
        colls = ", ".join(f"{n} {k}" for k, n in sorted(s.collectives.items())) or "no communication"
        step = f"; measured ProfilerStep {c.step_ns[r] / 1e3:.1f} us" if c.step_ns[r] else ""
        lines.append(f"rank {r}: {s.cpu_nodes} CPU nodes ({s.cpu_ns / 1e3:.1f} us), {s.gpu_nodes} GPU nodes, "
                     f"{colls}{step}")
    if c.network_fit is not None:
        lines.append(f"network: {c.network_path.name}, {c.network_fit.describe()}")
    return lines

