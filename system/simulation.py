"""One simulation run: the backend, one Sys and one Workload per rank, the clock.

``run_simulation`` is the in-process entry point for tests, scripts and sweeps; the command line
around it is system/main.py. With main.py this is the composition root, the one place that imports
every layer (design.md).
"""
from __future__ import annotations

import os
import time
import warnings
from types import MappingProxyType

from network.config import NetworkConfig
from network.errors import FastPathConflict, MessageMismatchError, SimulationLimitError
from network.files import is_file, path_str
from network.records import record
from network.registry import DEFAULT_BACKEND, backend_class, canonical_name
from system.comm_group import CommunicatorGroup, load_comm_groups
from system.config import SystemConfig
from system.dimension_use import uncovered_dimensions
from system.divergence import AstraSimDiffers, Divergences, world_tag_disagreements
from system.heap import fewer_collections
from system.remote_memory import load_remote_memory
from system.shortcuts import Orbits, plan as plan_shortcuts
from system.shortcuts.rank_view import RankView
from system.shortcuts.ring_batch import RingBatcher
from system.shortcuts.verify import ShortcutMismatch, verify  # noqa: F401 -- ShortcutMismatch re-exported
from system.sys import Sys
from workload.consistency import check_collectives_agree
from workload.graph import load_graph
from workload.errors import WorkloadError
from workload.loader import find_orbit_declaration, load_workload_graphs
from workload.workload import Workload

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Mapping


class Deadlock(Exception):
    """The event queue emptied while ranks still had work: a result, not a hang (exit 3)."""

    def __init__(self, time_ns: int, per_rank: dict[int, list[str]], unmatched: list[str],
                 files: dict[int, str] | None = None) -> None:
        self.time_ns = time_ns
        self.per_rank = per_rank
        self.unmatched = unmatched
        self.files = files or {}  # rank → its ET file, named in the report
        super().__init__(self.report())

    def report(self, max_ranks: int = 16) -> str:
        if self.per_rank:
            lines = [f"stuck: the event queue emptied at {self.time_ns} ns with work left on "
                     f"{len(self.per_rank)} rank(s):"]
        else:  # every node finished, but a send found no receive: the ranks disagree on messages
            lines = [f"stuck: every rank finished by {self.time_ns} ns but {len(self.unmatched)} message(s) "
                     "never paired with a receive (a send without a matching receive: same peer, tag and size):"]
        for i, (rank, items) in enumerate(sorted(self.per_rank.items())):
            if i >= max_ranks:
                lines.append(f"  ... and {len(self.per_rank) - max_ranks} more rank(s)")
                break
            lines.append(f"  rank {rank}: {self.files[rank]}" if rank in self.files else f"  rank {rank}:")
            lines.extend(f"    {s}" for s in items)
        if self.unmatched:
            lines.append("  unmatched messages:")
            lines.extend(f"    {s}" for s in self.unmatched[:16])
            if len(self.unmatched) > 16:
                lines.append(f"    ... {len(self.unmatched) - 16} more")
        return "\n".join(lines)


class CollectiveMismatch(Deadlock):
    """A message paired with a receive of another collective: the ranks disagree on the order of
    their collectives, so no answer is right (exit 3, as a deadlock)."""

    def __init__(self, time_ns: int, error: MessageMismatchError) -> None:
        self.error = error
        super().__init__(time_ns, {}, [])

    def report(self, max_ranks: int = 16) -> str:
        return f"stuck: at {self.time_ns} ns {self.error}"


@record
class SimulationResult:  # not a dataclass: importing dataclasses is ~13 ms of start-up
    backend: str
    npus_count: int
    finish_ns: list[int]
    workloads: list[Any]
    systems: list[Sys]
    network_stats: dict[str, Any]
    wall_s: float
    events: int
    inputs: Mapping[str, Any] = MappingProxyType({})
    orbits: Any = None  # an orbit run's Orbits (system/shortcuts/orbits.py), for the report

    @property
    def end_ns(self) -> int:
        return max(self.finish_ns) if self.finish_ns else 0


@fewer_collections
def run_simulation(
    workload: str | os.PathLike,
    network: NetworkConfig | str | os.PathLike,
    system: SystemConfig | str | os.PathLike | None = None,
    *,
    backend: str | None = None,
    comm_groups: str | os.PathLike | None = None,
    remote_memory: str | os.PathLike | None = None,
    num_queues_per_dim: int = 1,
    injection_scale: float = 1.0,
    max_events: int | None = None,
    max_wall_s: float | None = None,
    progress: Any = None,
    symmetry: bool = True,
    rendezvous: bool = False,
    batching: bool = True,
    verify_shortcuts: bool = False,
) -> SimulationResult:
    """Run the workload; ``verify_shortcuts`` also runs every message as an event where a
    shortcut answered, and raises ``ShortcutMismatch`` if the two answers differ."""
    t0 = time.perf_counter()
    net = network if isinstance(network, NetworkConfig) else NetworkConfig.from_file(network)
    if system is None:
        sys_cfg = SystemConfig.default()
    elif isinstance(system, SystemConfig):
        sys_cfg = system
    else:
        sys_cfg = SystemConfig.from_file(system, injection_scale)
    if sys_cfg.track_local_mem:
        # ASTRA-sim throws inside an event callback when nodes lack inputs/outputs and then exits 0
        # without finishing (semantics §9.2); memory tracking does not change timing, so we run on.
        warnings.warn(
            f"{sys_cfg.path}: track-local-mem is set but local memory usage is not tracked by this "
            "simulator; timing is unaffected and the run continues", stacklevel=2,
        )
    name = canonical_name(backend or net.backend or DEFAULT_BACKEND)
    npus = net.topology.npus_count
    sys_cfg.check_list_lengths(len(net.topology.npus_count_per_dim))
    declared = find_orbit_declaration(workload, npus)
    if declared is not None:  # one file per orbit (workload/orbit_files.py)
        if verify_shortcuts:
            raise WorkloadError(declared.path, "", "--verify-shortcuts needs every rank's file; this workload is "
                                "written per orbit (generate it without --per-orbit to check the shortcut)")
        from workload.orbit_files import load_representatives

        graphs = load_representatives(workload, declared)
    else:
        graphs = load_workload_graphs(workload, npus)
    _check_wall(t0, max_wall_s, "reading the workload")
    groups_spec: dict[int, list[int]] = {}
    if comm_groups is None:
        auto = path_str(f"{workload}.comm_groups.json")  # written by our TrioSim converter
        stg = path_str(f"{workload}.json")  # written beside its ETs by ASTRA-sim's Symbolic Tensor Graph
        if is_file(auto):
            comm_groups = auto
        elif is_file(stg) and any(g.has_communicator_groups for g in {id(g): g for g in graphs}.values()):
            warnings.warn(f"using {stg} as the communicator-group configuration (pass "
                          "--comm-group-configuration to choose another)", stacklevel=2)
            comm_groups = stg
    # ASTRA-sim's "no groups" value is the word "empty"; any file that exists is read, whatever its name
    no_groups = comm_groups is not None and os.path.basename(path_str(comm_groups)) in ("empty", "empty.json") \
        and not is_file(comm_groups)
    if comm_groups is not None and not no_groups:
        groups_spec = load_comm_groups(comm_groups, npus)
    families = None
    if declared is not None:
        # the declaration makes every member of a group an image of a representative; a
        # representative that disagrees with another one shows as a mismatch in the run
        from workload.orbit_files import families as declared_families

        families = declared_families(declared, groups_spec)
    elif not (sys_cfg.custom_implementations or sys_cfg.per_node_custom):  # custom ones replay their own ETs
        check_collectives_agree(graphs, groups_spec)
    unused = uncovered_dimensions(graphs, sys_cfg, net.topology, groups_spec)
    if unused is not None:
        warnings.warn(unused, stacklevel=3)
    # a remote-memory file (ASTRA-sim's run scripts always pass one) does not matter to the
    # shortcuts: the graphs they take have no MEM_LOAD/MEM_STORE nodes
    static_notes = _network_notes(net, name) + _workload_notes(graphs)  # said before the run: a stuck run too
    for message in static_notes:
        warnings.warn(message, AstraSimDiffers, stacklevel=3)
    attempts, declined = plan_shortcuts(graphs, groups_spec, sys_cfg, net, name, symmetry=symmetry,
                                        batching=batching, rendezvous=rendezvous, declared=families,
                                        queues_per_dim=num_queues_per_dim)
    if declared is not None and attempts and attempts[0].symmetry.reps != declared.representatives:
        got = attempts[0].symmetry.reps
        raise WorkloadError(declared.path, "key 'representatives'", (
            f"the rotations make {len(got)} orbits, whose first ranks are {_few(got)}, but the declaration names "
            f"{_few(declared.representatives)}: each orbit needs the file of its first rank"))
    if declared is not None and not attempts:
        raise WorkloadError(declared.path, "", "the workload is written per orbit, but one rank per orbit cannot "
                            f"stand for the others here ({'; '.join(declined)}); there is no per-rank file to run "
                            "every rank on (generate it without --per-orbit)")
    run = _RankRun(net, sys_cfg, name, graphs, groups_spec, remote_memory, num_queues_per_dim,
                   max_events, max_wall_s, progress, rendezvous, t0)
    for i, attempt in enumerate(attempts):
        try:
            net_backend, systems, workloads = run.simulate(attempt.symmetry, batching=attempt.batching)
            break
        except (FastPathConflict, Deadlock, OverflowError) as e:  # CollectiveMismatch is a Deadlock
            # OverflowError: a shortcut's int64 arrays or C fields met a time past 2^63 ns, where
            # the event path ends the run by its clock (exit 2); from the event path, a bug of ours
            if isinstance(e, OverflowError) and (i == len(attempts) - 1 or attempt.name == "none"):
                raise
            if declared is not None and isinstance(e, FastPathConflict):
                raise WorkloadError(declared.path, "", "the workload is written per orbit, and the run found that "
                                    f"one rank per orbit cannot stand for the others ({str(e).splitlines()[0]}); "
                                    "there is no per-rank file to run every rank on (generate it without "
                                    "--per-orbit)") from None
            if i == len(attempts) - 1:
                raise
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            declined.append(f"{attempt.name}: abandoned at run time ({first})")
            _check_wall(t0, max_wall_s, "trying a shortcut")
    sym = attempt.symmetry
    representative = sym is not None and not isinstance(sym, Orbits)
    shortcut = attempt.name if attempt.name != "batched" or run.batched_messages else "none"
    stats = net_backend.stats()
    backend_notes = getattr(net_backend, "astra_sim_notes", None)
    run_notes = (backend_notes() if backend_notes else []) + run.divergences.messages
    differs = static_notes + run_notes
    batched_messages = run.batched_messages
    for message in run_notes:
        warnings.warn(message, AstraSimDiffers, stacklevel=3)
    if representative:
        workloads = [workloads[0]] + [RankView(workloads[0], r) for r in range(1, npus)]
    elif sym is not None:
        own = {w.rank: w for w in workloads}
        workloads = [own[x] if x in own else RankView(own[sym.rep_of[x]], x, sym) for x in range(npus)]
    if verify_shortcuts and shortcut != "none":
        _, _, plain = run.simulate(None, batching=False)
        verify(shortcut, workloads, plain)
    return SimulationResult(
        backend=name,
        npus_count=npus,
        finish_ns=[w.finish_time for w in workloads],
        workloads=workloads,
        systems=systems,
        network_stats=stats,
        wall_s=time.perf_counter() - t0,
        events=int(stats.get("events", 0)),
        inputs={
            "workload": str(workload),
            "network": net.path,
            "system": sys_cfg.path,
            "backend": name,
            "topology": net.topology.describe(),
            "comm_groups": None if comm_groups is None else str(comm_groups),
            "symmetric_fast_path": representative,
            "simulated_ranks": 1 if representative else len(sym.reps) if sym is not None else npus,
            "batched_ring_messages": batched_messages,
            "shortcut": shortcut,
            "shortcuts_verified": verify_shortcuts and shortcut != "none",
            "shortcuts_declined": declined,
            "astra_sim_differs": differs,
            "per_orbit_files": declared is not None,
            # whether the system layer's per-message steps ran in C (system/_sys_core.c) or Python
            "system_core": "c" if any(hasattr(s, "_fast") for s in systems) else "python",
        },
        orbits=sym if isinstance(sym, Orbits) else None,
    )


class _RankRun:
    """Everything one attempt at the run needs; ``simulate`` builds fresh state each time."""

    def __init__(self, net: NetworkConfig, sys_cfg: SystemConfig, name: str, graphs: list, groups_spec: dict,
                 remote_memory: Any, num_queues_per_dim: int, max_events: int | None, max_wall_s: float | None,
                 progress: Any, rendezvous: bool, t0: float) -> None:
        self.net, self.sys_cfg, self.name, self.graphs = net, sys_cfg, name, graphs
        self.groups_spec, self.remote_memory, self.queues = groups_spec, remote_memory, num_queues_per_dim
        self.max_events, self.max_wall_s, self.progress = max_events, max_wall_s, progress
        self.rendezvous, self.t0 = rendezvous, t0
        self.batched_messages = 0  # messages the last attempt advanced in batched ring phases
        self.backend_factory: Any = None  # instead of the registry's class (a dry run's PairRecorder)
        self.divergences = Divergences()  # the last attempt's (system/divergence.py)

    def _pairs_used(self) -> "set[tuple[int, int]] | None":
        """The pairs of ranks the run sends between, from a run on the congestion-unaware backend
        (network/analytical/pair_recorder.py); None where that run cannot say (it ended stuck, or
        mismatched: the real run reports that)."""
        from network.analytical.pair_recorder import PairRecorder

        dry = _RankRun(self.net, self.sys_cfg, "congestion-unaware", self.graphs, self.groups_spec,
                       self.remote_memory, self.queues, None, self.max_wall_s, None, self.rendezvous, self.t0)
        dry.backend_factory = PairRecorder
        try:
            backend, _, _ = dry.simulate(None, batching=True)
        except (FastPathConflict, Deadlock):
            try:
                backend, _, _ = dry.simulate(None, batching=False)
            except (FastPathConflict, Deadlock):
                return None
        return backend.pairs

    def simulate(self, group: Any, batching: bool) -> tuple[Any, list[Sys], list[Workload]]:
        """One attempt: with ``group`` (system/shortcuts/representative.py) one representative rank stands for all;
        with ``Orbits`` (system/shortcuts/orbits.py) one rank per orbit."""
        net, sys_cfg, graphs, t0, max_wall_s = self.net, self.sys_cfg, self.graphs, self.t0, self.max_wall_s
        self.batched_messages = 0
        divergences = self.divergences = Divergences()
        npus = net.topology.npus_count
        remote = load_remote_memory(self.remote_memory, npus) if self.remote_memory is not None else None
        budget = max_wall_s
        if group is None and self.backend_factory is not None:
            net_backend = self.backend_factory(net, max_events=self.max_events, wall_limit_s=budget)
            ranks = list(range(npus))
        elif group is None:
            extra = {}
            if self.name == "ns3":
                if self.progress is not None:  # seconds of import and set-up, in silence
                    topo = net.topology
                    what = (f"{topo.graph.describe()}" if getattr(topo, "graph", None) is not None
                            else f"{npus} NPUs")
                    self.progress.note(f"ns-3: loading the ns3 package and building {what}")
                if (net.extra.get("ns3") or {}).get("preconnect", True):
                    backend_class(self.name).check_config(net)  # before the dry run meets the file
                    extra["pairs"] = self._pairs_used()
            try:
                net_backend = backend_class(self.name)(net, max_events=self.max_events, wall_limit_s=budget,
                                                       **extra)
            except BaseException:
                if self.progress is not None:
                    self.progress.stop()  # the error's message starts on a clean line
                raise
            ranks = list(range(npus))
        elif isinstance(group, Orbits):
            from system.shortcuts.orbit_network import OrbitNetwork  # where orbits run (start-up)

            inner = backend_class(self.name)(net, max_events=self.max_events, wall_limit_s=budget)
            if group.group.has_links:  # a topology file: its links folded by the orbits' symmetry
                inner.fold(group.group)
            net_backend = OrbitNetwork(inner, group)
            ranks = group.reps
        elif self.name == "congestion-aware":
            # imported where a representative runs: the runs that have none need not (start-up)
            from network.analytical.symmetric_aware import SymmetricAwareBackend

            net_backend = SymmetricAwareBackend(net, group, max_events=self.max_events, wall_limit_s=budget)
            ranks = [0]
        else:
            from network.analytical.symmetric import SymmetricUnawareBackend

            net_backend = SymmetricUnawareBackend(net, max_events=self.max_events, wall_limit_s=budget)
            ranks = [0]
        batcher = RingBatcher.for_backend(net_backend) if batching else None
        if max_wall_s is not None and getattr(net_backend, "queue", None) is not None:
            # one budget for the whole run, however many attempts it takes
            net_backend.queue.wall_origin = time.monotonic() - (time.perf_counter() - t0)
        queues = [self.queues] * net.topology.dims_count
        systems: list[Sys] = []
        workloads: list[Workload] = []
        custom_loader = _custom_loader_factory()
        labels: dict = {}  # Sys.labels: one object per collective, for every rank of this attempt
        for r in ranks:
            s = Sys(r, net_backend, sys_cfg, queues, custom_loader, rendezvous=self.rendezvous)
            s.ring_batcher = batcher
            s.divergences = divergences
            s.labels = labels
            groups = {gid: CommunicatorGroup(gid, members, s)
                      for gid, members in self.groups_spec.items() if r in members}
            if remote is not None:
                remote.attach(s)
            w = Workload(s, graphs[r], groups, remote)
            systems.append(s)
            workloads.append(w)
            _check_wall(t0, max_wall_s, f"setting up rank {r} of {len(ranks)}")
        phases = None
        if batcher is not None and group is None and len(ranks) == npus:
            from system.shortcuts.phase_batch import attach  # ring and halving-doubling phases, joined in C

            phases = attach(net_backend, systems)
        for w in workloads:
            w.fire()
            _check_wall(t0, max_wall_s, f"issuing the first nodes of rank {w.rank}")
        progress = self.progress
        if progress is not None:
            progress.start(net_backend)
        try:
            net_backend.run()
        except MessageMismatchError as e:
            if group is not None:  # the representative pairs its own messages: the general path judges
                raise FastPathConflict(str(e)) from None
            raise CollectiveMismatch(net_backend.now(), e) from None
        finally:
            if progress is not None:
                progress.stop()
        stuck = {w.rank: w.stuck_lines() for w in workloads if not w.is_finished}
        unmatched = net_backend.unmatched()
        if batcher is not None:
            unmatched += batcher.open_phases()
            self.batched_messages = batcher.messages
        if phases is not None:
            phases.flush()
            unmatched += phases.open_phases()
            self.batched_messages += phases.messages
        if stuck or unmatched:  # a send nobody received is no success either
            raise Deadlock(net_backend.now(), stuck, unmatched, {r: graphs[r].path for r in stuck})
        if len(systems) == npus and self.groups_spec:  # group streams advance ASTRA-sim's world counter
            note = world_tag_disagreements((s.id, s.world_first_tags) for s in systems)
            if note is not None:
                divergences.note("world-tags", note)
        return net_backend, systems, workloads


def _network_notes(net: NetworkConfig, backend: str) -> list[str]:
    """What the network file asks of ASTRA-sim that it does not run (system/divergence.py)."""
    if backend not in ("congestion-unaware", "congestion-aware") or getattr(net.topology, "graph", None) is not None:
        return []
    notes = []
    ones = [d for d, dim in enumerate(net.topology.dims) if dim.npus_count == 1]
    if ones:
        notes.append(f"{net.path or 'the network'}: dimension(s) {', '.join(map(str, ones))} of 1 NPU; ASTRA-sim's "
                     "analytical network refuses any (it prints 'npus_count (1) should be larger than 1' and runs "
                     "nothing, exit 0); dtsim runs it: a dimension of one NPU carries no traffic")
    rings = [d for d, dim in enumerate(net.topology.dims) if dim.kind.value == "Ring" and dim.npus_count == 2]
    if rings and backend == "congestion-aware":
        notes.append(f"{net.path or 'the network'}: dimension(s) {', '.join(map(str, rings))} is a Ring of 2 NPUs; "
                     "ASTRA-sim's congestion-aware backend aborts on it (Device.cpp: 'Assertion !connected(id)', exit "
                     "134: its two directions are one pair of links), dtsim builds one link each way, as "
                     "FullyConnected(2)")
    return notes


def _few(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:6])) + (", ..." if len(ranks) > 6 else "")


def _workload_notes(graphs: list) -> list[str]:
    """What the workload asks of ASTRA-sim that it does not read (system/divergence.py)."""
    unique = {id(g): g for g in graphs}.values()
    finer = [(g, g.finer_than_microseconds) for g in unique]
    finer = [(g, k) for g, k in finer if k]
    if not finer:
        return []
    total = sum(k for _, k in finer)
    return [f"{total} compute node(s) of {len(finer)} workload file(s) (e.g. {finer[0][0].path}) last a time that is "
            "not whole microseconds (attribute duration_ns); dtsim runs that time, ASTRA-sim reads only "
            "duration_micros, so its cycles differ (workload.convert's and workload.generate's "
            "--astra-sim-compatible write whole microseconds)"]


def _check_wall(t0: float, max_wall_s: float | None, doing: str) -> None:
    """The wall-time budget also bounds the setup (the event loop checks it on its own)."""
    if max_wall_s is not None and time.perf_counter() - t0 > max_wall_s:
        raise SimulationLimitError(f"wall-time budget of {max_wall_s:g} s exhausted while {doing} "
                                   "(raise --max-wall-seconds)")


def _custom_loader_factory():
    cache: dict[tuple[str, int], Any] = {}

    def load(prefix: str, rank: int):
        key = (prefix, rank)
        if key not in cache:
            cache[key] = load_graph(f"{prefix}.{rank}.et")
        return cache[key]

    return load
