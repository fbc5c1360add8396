"""The workload of one NPU: feeds dependency-free nodes to its Sys (ASTRA-sim: Workload).

Rules (docs/astra-sim-semantics.md §10): a node is issuable when all its parents (data and
control dependencies alike) are done; dependency-free nodes are tried in ascending id; each rank
has one GPU-compute slot, one GPU-communication slot (collectives, sends, remote memory) and
one CPU slot; receives take no slot. A node that cannot get its slot waits until some node of
the rank completes.
"""
from __future__ import annotations

import warnings
from array import array
from bisect import bisect_left, bisect_right, insort
from itertools import accumulate, chain

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from system.collective.algorithm import ComType
from system.comm_group import CommunicatorGroup
from system.errors import CommGroupError, SystemConfigError, UnsupportedFeatureError
from system.stream import DataSet
from system.sys import Sys
from system.sys_core import SYS_CORE
from workload.graph import COLL_TYPES, Graph, Node

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

# the feeder's bookkeeping in C (system/_feeder.c) where compiled; this module's methods otherwise
_FEEDER = None if SYS_CORE is None else SYS_CORE.Feeder

_COLL_TO_COMTYPE = {
    pb.ALL_REDUCE: ComType.ALL_REDUCE,
    pb.ALL_GATHER: ComType.ALL_GATHER,
    pb.REDUCE_SCATTER: ComType.REDUCE_SCATTER,
    pb.ALL_TO_ALL: ComType.ALL_TO_ALL,
}

_UNPLANNED = object()  # a collective shape not planned yet (None: planned, the general path)

# resource kinds
_CPU, _GPU_COMP, _GPU_COMM, _NONE = range(4)
_KINDS = (_CPU, _GPU_COMP, _GPU_COMM, _NONE)


def _resource(node: Node) -> int:
    if node.is_cpu_op:
        return _CPU
    if node.type == pb.COMP_NODE:
        return _GPU_COMP
    if node.type == pb.COMM_RECV_NODE:
        return _NONE
    return _GPU_COMM


def _resources(graph: Graph) -> dict[int, int]:
    """Node id → resource kind, once per graph (the feeder asks on every issue and completion)."""
    kinds = graph.memo.get("resource")
    if kinds is None:
        kinds = graph.memo["resource"] = {nid: _resource(n) for nid, n in graph.nodes.items()}
    return kinds


def _waiting_counts(graph: Graph) -> dict[int, int]:
    """Node id → number of parents, for the nodes that have any (each rank copies it)."""
    counts = graph.memo.get("waiting")
    if counts is None:
        counts = graph.memo["waiting"] = {nid: len(n.parents) for nid, n in graph.nodes.items() if n.parents}
    return counts


def _feeder_plan(graph: Graph) -> tuple:
    """What system/_feeder.c reads of a graph, once per graph: its nodes numbered by ascending id
    (nodes, ids, id → number), each one's resource kind, children (CSR) and parent count, and
    the roots."""
    plan = graph.memo.get("feeder")
    if plan is None:
        ids = tuple(graph.order)
        index = dict(zip(ids, range(len(ids))))
        nodes = list(map(graph.nodes.__getitem__, ids))
        kids = [n.children for n in nodes]
        starts = array("q", [0])
        starts.extend(accumulate(map(len, kids)))
        plan = graph.memo["feeder"] = (
            nodes, ids, index, bytes(map(_resource, nodes)), starts,
            array("q", map(index.__getitem__, chain.from_iterable(kids))),
            array("q", [len(n.parents) for n in nodes]), array("q", map(index.__getitem__, graph.roots)))
    return plan


def _replay_plan(graph: Graph, roofline: bool) -> tuple[array, bytes]:
    """For system/_feeder.c, per node in the feeder's order: the time _issue_replay gives it
    (duration_ns, or 1 for a zero-length node) where _start would replay it (a compute node, unless
    the roofline times it), else -1; and whether that time is GPU compute."""
    key = ("replay", roofline)
    plan = graph.memo.get(key)
    if plan is None:
        nodes = _feeder_plan(graph)[0]
        comp = pb.COMP_NODE
        plan = graph.memo[key] = (
            array("q", [(n.duration_ns or 1) if n.type == comp and (n.is_cpu_op or not roofline) else -1
                        for n in nodes]),
            bytes(n.type == comp and not n.is_cpu_op for n in nodes))
    return plan


class Workload:
    """Per-NPU executor of one Chakra graph."""

    def __init__(self, sys: Sys, graph: Graph, comm_groups: dict[int, CommunicatorGroup],
                 remote_memory: Any = None) -> None:
        self.sys = sys
        self.graph = graph
        self.rank = sys.id
        self.comm_groups = comm_groups
        self.remote_memory = remote_memory
        self.is_finished = False
        self.finish_time: int | None = None
        self.starts: dict[int, int] = {}
        # (node id, start ns, end ns) per finished node, in completion order
        self.records: list[tuple[int, int, int]] = []
        self._now = sys.now
        self._core: Any = None
        if _FEEDER is not None:  # the same rules in C: these methods are the core's
            self._core = core = _FEEDER(_feeder_plan(graph), self._start, self._now, self.starts, self.records,
                                        self._all_done)
            self._node_done = core.node_done
            self._finish = core.finish
            self.issue_dep_free_nodes = core.issue_dep_free_nodes
            self._check_finished = core.check_finished
        else:
            self._kind = kinds = _resources(graph)
            self._waiting = _waiting_counts(graph).copy()
            # dependency-free nodes, one ascending list per resource kind, so that a pass looks
            # only at the first node of each kind whose slot is free (wide graphs stay cheap)
            self._free_k: list[list[int]] = [[], [], [], []]
            for nid in graph.roots:
                self._free_k[kinds[nid]].append(nid)
            self._freed_in_pass: dict[int, int] = {}
            self._pass_no = 0
            self._ongoing: set[int] = set()
            self._in_flight = [0, 0, 0, 0]
            self._done_count = 0
        self._algorithm_names: dict[tuple, str] = {}
        self._groups_by_pg: dict[str, CommunicatorGroup] = {}  # pg_name → its checked group
        # (type, size, pg, involved dims) → Sys.plan_collective's recipe, None for the general path
        self._recipes: dict[tuple, tuple | None] = {}
        self._n_nodes = len(graph.nodes)
        self._replay_only, self._roofline = sys.config.replay_only, sys.config.roofline_enabled
        self._collective_ends: list[tuple[Node, int]] = []  # (node, end ns): ``collectives`` reads them
        self._collective_dicts: list[dict[str, Any]] = []
        self._datasets: dict[int, tuple[Node, DataSet]] = {}
        self._compute_ns = 0
        self._validate_rank_fields()
        fast = getattr(sys, "_fast", None)
        if self._core is not None and fast is not None and not self._replay_only:
            # compute nodes replayed for their duration start in C, without a call of _start each
            self._core.enable_replay(fast, *_replay_plan(graph, self._roofline))

    def _validate_rank_fields(self) -> None:
        from workload.errors import WorkloadError

        n_npus = self.sys.total_nodes
        if self.graph.unknown_peers:  # a graph not loaded through load_workload_graphs
            from workload.host_comms import unknown_peer_error  # here: most runs never need host_comms

            raise unknown_peer_error(self.graph.path, self.graph.nodes[self.graph.unknown_peers[0]], n_npus)
        for n in self.graph.nodes.values():
            if n.type == pb.COMM_SEND_NODE:
                if n.comm_src is not None and n.comm_src != self.rank:
                    raise WorkloadError(self.graph.path, n.describe(),
                                        f"comm_src is {n.comm_src} but this file is run by rank {self.rank}; a send must be issued by its source")
                if not 0 <= n.comm_dst < n_npus or n.comm_dst == self.rank:
                    raise WorkloadError(self.graph.path, n.describe(), f"comm_dst {n.comm_dst} is not another rank in 0..{n_npus - 1}")
            elif n.type == pb.COMM_RECV_NODE:
                if n.comm_dst is not None and n.comm_dst != self.rank:
                    raise WorkloadError(self.graph.path, n.describe(),
                                        f"comm_dst is {n.comm_dst} but this file is run by rank {self.rank}; a receive must be issued by its destination")
                if not 0 <= n.comm_src < n_npus or n.comm_src == self.rank:
                    raise WorkloadError(self.graph.path, n.describe(), f"comm_src {n.comm_src} is not another rank in 0..{n_npus - 1}")

    # -- feeding ---------------------------------------------------------------------------
    def fire(self) -> None:
        self.issue_dep_free_nodes()
        self._check_finished()

    @property
    def _free(self) -> list[int]:
        return sorted(n for lst in self._free_k for n in lst)

    def issue_dep_free_nodes(self) -> None:
        """Issue, in ascending id, every node that was dependency-free when the pass began and
        whose resource slot is free when its turn comes (ASTRA-sim: issue_dep_free_nodes)."""
        while True:
            self._pass_no += 1
            finished_at_once = self._issue_pass()
            # Children of a node that finished at once (metadata, invalid, empty roofline) wait,
            # as in ASTRA-sim, for the rank's next completion; if nothing is in flight there will
            # be none, and ASTRA-sim would stall: we issue them now instead.
            if not finished_at_once or self._ongoing:
                return

    def _issue_pass(self) -> bool:
        pass_no = self._pass_no
        free_k, in_flight, fresh = self._free_k, self._in_flight, self._freed_in_pass
        nodes = self.graph.nodes
        cur = -1
        finished_at_once = False
        while True:
            best = -1
            for kind in _KINDS:
                lst = free_k[kind]
                if not lst or (kind != _NONE and in_flight[kind]):
                    continue
                i = bisect_right(lst, cur) if cur >= 0 else 0
                n = len(lst)
                while i < n and fresh.get(lst[i]) == pass_no:  # freed during this pass: not in its snapshot
                    i += 1
                if i < n and (best < 0 or lst[i] < best):
                    best = lst[i]
            if best < 0:
                return finished_at_once
            cur = best
            if self.issue(nodes[best]):
                finished_at_once = True

    def issue(self, node: Node) -> bool:
        """Start a node; True if it finished synchronously."""
        nid = node.id
        kind = self._kind[nid]
        lst = self._free_k[kind]
        del lst[bisect_left(lst, nid)]
        self._freed_in_pass.pop(nid, None)
        self._ongoing.add(nid)
        if kind != _NONE:
            self._in_flight[kind] += 1
        return self._start(node)

    def _start(self, node: Node) -> bool:
        """What starting a node means, once the feeder took it (its slot, its place): True if it
        finished synchronously (system/_feeder.c calls this too)."""
        nid = node.id
        self.starts[nid] = self._now()
        t = node.type
        if self._replay_only:
            self._issue_replay(node)
        elif t == pb.COMP_NODE:
            if self._roofline and not node.is_cpu_op:
                return self._issue_roofline(node)
            self._issue_replay(node)
        elif t == pb.COMM_COLL_NODE:
            self._issue_coll_comm(node)
        elif t == pb.COMM_SEND_NODE:
            self.sys.native_send(node.comm_dst, node.comm_size, node.comm_tag, self._node_done, nid)
        elif t == pb.COMM_RECV_NODE:
            self.sys.native_recv(node.comm_src, node.comm_size, node.comm_tag, self._node_done, nid)
        elif t in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE):
            if self.remote_memory is None:
                raise UnsupportedFeatureError(
                    self.graph.path, node.describe(),
                    "MEM_LOAD/MEM_STORE nodes need a remote-memory model: pass --remote-memory-configuration "
                    "with memory-type PER_NPU_MEMORY_EXPANSION or MEMORY_POOL",
                )
            self.remote_memory.issue(self.rank, node.tensor_size, self._node_done, nid)
        elif t == pb.METADATA_NODE:
            self._issue_metadata(node)
            self._finish(nid)
            return True
        else:  # INVALID_NODE completes at once
            self._finish(nid)
            return True
        return False

    def _issue_replay(self, node: Node) -> None:
        runtime = node.duration_ns or 1  # ASTRA-sim: a zero-length node takes 1 ns
        if node.type == pb.COMP_NODE and not node.is_cpu_op:
            self._compute_ns += runtime
        self.sys.register_event(runtime, self._node_done, node.id)

    @property
    def compute_ns(self) -> int:
        """GPU compute time this rank has started (replayed or by the roofline)."""
        return self._compute_ns + (self._core.replayed_ns if self._core is not None else 0)

    def _issue_roofline(self, node: Node) -> bool:
        cfg = self.sys.config
        num_ops = node.num_ops or 0
        tensor_size = node.tensor_size or 0
        if tensor_size == 0:
            # ASTRA-sim finishes such a node without waking its children (a stall); we finish it properly
            self.sys.divergences.note("roofline-empty", (
                f"{self.graph.path}: {node.describe()} is a roofline COMP with tensor_size 0; ASTRA-sim finishes "
                "it without releasing the nodes that depend on it, so its rank never finishes (exit 0, no "
                "finished line); dtsim finishes it at once and runs on"))
            self._finish(node.id)
            return True
        if cfg.peak_perf_tflops <= 0 or cfg.local_mem_bw_gb_s <= 0:
            raise SystemConfigError(cfg.path, "key 'roofline-enabled'",
                                    "the roofline needs peak-perf > 0 and local-mem-bw > 0")
        intensity = float(num_ops) / float(tensor_size)
        perf = min(cfg.local_mem_bw_gb_s * 1_000_000_000 * intensity, cfg.peak_perf_tflops * 1_000_000_000_000)
        if perf <= 0:
            runtime = 0
        else:
            runtime = int(float(num_ops) / perf * 1e9)
        self._compute_ns += runtime
        if not runtime and not self.sys.now():
            self.sys.note_zero_delay(f"{node.describe()} is a roofline COMP of 0 ns")
        self.sys.register_event(runtime, self._node_done, node.id)
        return False

    def _group(self, node: Node) -> CommunicatorGroup | None:
        if node.pg_name in ("", "0"):
            return None
        g = self._groups_by_pg.get(node.pg_name)
        if g is not None:
            return g
        gid = int(node.pg_name)
        g = self.comm_groups.get(gid)
        if g is None:
            raise CommGroupError(
                self.graph.path, node.describe(),
                f"communicator group {gid} is not defined (give it in --comm-group-configuration or a METADATA node)",
            )
        if self.rank not in g.involved_npus:
            raise CommGroupError(self.graph.path, node.describe(), f"rank {self.rank} is not a member of group {gid}")
        self._groups_by_pg[node.pg_name] = g
        return g

    def _issue_coll_comm(self, node: Node) -> None:
        if node.comm_type == pb.BROADCAST:
            ds = DataSet(-1, 1, self.sys.now())
            ds.notifier = lambda d, n=node: self._collective_done(n, d)
            runtime = node.duration_ns or 1
            self.sys.register_event(runtime, ds.notify_stream_finished, self.sys.now() + runtime)
            return
        inv = node.involved_dim
        shape = (node.comm_type, node.comm_size, node.pg_name, None if inv is None else tuple(inv))
        recipe = self._recipes.get(shape, _UNPLANNED)
        if recipe is _UNPLANNED:  # the first collective of its shape: its group checked, its plan made
            recipe = self._recipes[shape] = self.sys.plan_collective(
                _COLL_TO_COMTYPE[node.comm_type], node.comm_size, inv, self._group(node))
        if recipe is not None:
            ds = self.sys.start_planned(recipe, node.comm_priority)
        else:
            ds = self.sys.generate_collective_for_node(_COLL_TO_COMTYPE[node.comm_type], node.comm_size, inv,
                                                       self._group(node), node.comm_priority, node.id)
        if ds.finished:
            self._collective_done(node, ds)
            return
        if not ds.active and node.involved_dim is not None and self.sys.total_nodes > 1:
            raise UnsupportedFeatureError(
                self.graph.path, node.describe(),
                f"involved_dim {[bool(x) for x in node.involved_dim]} leaves the collective no network dimension "
                f"of more than one NPU (network: {' x '.join(map(str, self.sys.physical_dims))} NPUs); ASTRA-sim "
                "never finishes such a collective (it exits 0 with no rank finished), so there is no answer to "
                "give. Name at least one dimension, or drop involved_dim to use them all",
            )
        if ds.total_streams == 0 or not ds.active:
            # nothing to move (no participating dimension, or zero bytes): done now, not never
            self.sys.register_event(0, self._collective_done, node, ds)
            return
        cfg = self.sys.config  # collective_overhead_ns is 0 unless the system file asks: not called then
        cost = self.sys.collective_overhead_ns(node.comm_size) \
            if cfg.collective_fixed_delay_ns or cfg.collective_copy_bw_gb_s > 0 else 0
        if cost:
            ds.notifier = lambda d, n=node: self.sys.register_event(cost, self._collective_done, n, d)
        else:
            ds.notifier = lambda d, n=node: self._collective_done(n, d)

    def _collective_done(self, node: Node, ds: DataSet) -> None:
        self._collective_ends.append((node, self._now()))
        self._node_done(node.id)

    @property
    def collectives(self) -> list[dict[str, Any]]:
        """The finished collectives in completion order: node, type, size, start, end (ns), pg and
        algorithm; made when asked (the report, the trace), not per collective during the run."""
        done, ends = self._collective_dicts, self._collective_ends
        for node, end in ends[len(done):]:
            done.append({"node": node.id, "type": COLL_TYPES[node.comm_type], "size": node.comm_size,
                         "start": self.starts[node.id], "end": end, "pg": node.pg_name,
                         "algorithm": self._algorithm_name(node)})
        return done

    def collective_timings(self) -> list[tuple[Node, int, int, str]]:
        """The finished collectives in completion order as (node, start, end, algorithm): what
        ``collectives`` holds, without a dict each (the terminal's summary reads these)."""
        starts, name = self.starts, self._algorithm_name
        return [(node, starts[node.id], end, name(node)) for node, end in self._collective_ends]

    def _algorithm_name(self, node: Node) -> str:
        """The implementation(s) the collective ran with, as the system config spells them, one
        per dimension (``ring``, ``ring,direct8``); ``replay`` for a broadcast (for the report)."""
        if node.comm_type == pb.BROADCAST:
            return "replay"
        # the same for every node of one type and group unless nodes have their own custom ones
        key = (node.comm_type, node.pg_name, node.id if self.sys.config.per_node_custom else None)
        name = self._algorithm_names.get(key)
        if name is None:
            name = self._algorithm_names[key] = self._find_algorithm_name(node)
        return name

    def _find_algorithm_name(self, node: Node) -> str:
        com_type = _COLL_TO_COMTYPE[node.comm_type]
        impls = self.sys.collective_impls(com_type, node.id)
        group = self._group(node)
        if group is not None:  # the same (cached) plan Sys.generate_collective_for_node used
            impls = group.get_collective_plan(com_type, impls).implementation_per_dimension
        names = [i.type.value + (str(i.window) if i.window > 0 else "") for i in impls]
        return names[0] if len(set(names)) == 1 else ",".join(names)

    def _issue_metadata(self, node: Node) -> None:
        """PyTorch process groups declared inside the ET (ASTRA-sim: issue_pytorch_pg_metadata)."""
        text = node.inputs_values
        if not text:
            return
        import json  # PyTorch's process-group metadata only

        try:
            items = json.loads(text[2:-2])
            for item in items:
                pg = int(item["pg_name"])
                ranks = [int(r) for r in item.get("ranks", [])] or list(range(self.sys.total_nodes))
                if len(set(ranks)) != len(ranks) or not all(0 <= r < self.sys.total_nodes for r in ranks):
                    raise CommGroupError(self.graph.path, node.describe(),
                                         f"process group {pg} lists ranks {ranks[:8]}: each must be a distinct "
                                         f"rank in 0..{self.sys.total_nodes - 1}")
                if self.rank in ranks and pg not in self.comm_groups:
                    self.comm_groups[pg] = CommunicatorGroup(pg + 1, ranks, self.sys)
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            warnings.warn(f"{self.graph.path}: {node.describe()}: process-group metadata ignored ({e})", stacklevel=2)

    # -- completion ------------------------------------------------------------------------
    def _node_done(self, nid: int) -> None:
        self._finish(nid)
        self.issue_dep_free_nodes()
        self._check_finished()

    def _finish(self, nid: int) -> None:
        kinds = self._kind
        kind = kinds[nid]
        if kind != _NONE:
            self._in_flight[kind] -= 1
        self._ongoing.discard(nid)
        self._done_count += 1
        self.records.append((nid, self.starts[nid], self._now()))
        children = self.graph.nodes[nid].children
        if not children:
            return
        waiting = self._waiting
        free_k = self._free_k
        fresh, pass_no = self._freed_in_pass, self._pass_no
        for c in children:
            left = waiting[c] - 1
            if left:
                waiting[c] = left
            else:
                del waiting[c]
                insort(free_k[kinds[c]], c)
                fresh[c] = pass_no

    def _check_finished(self) -> None:
        # every node done: the same as nothing ongoing, in flight or free in a DAG (a node that
        # waits has a parent not done, and the first of those is ongoing or free)
        if self._done_count == self._n_nodes and not self.is_finished:
            self._all_done()

    def _all_done(self) -> None:
        self.is_finished = True
        self.finish_time = self._now()
        batcher = self.sys.ring_batcher
        if batcher is not None:  # it starts no ring phase any more (ring_batch.py)
            batcher.retired(self.rank)

    def _feeder_state(self) -> tuple[set[int], list[int], dict[int, int]]:
        """(ongoing, dependency-free ascending, {waiting node: parents not done}) by node id."""
        if self._core is not None:
            ongoing, free, waiting = self._core.state()
            return set(ongoing), free, waiting
        return self._ongoing, self._free, self._waiting

    # -- stuck report ----------------------------------------------------------------------
    def stuck_lines(self, limit: int = 8) -> list[str]:
        """What never ran on this rank and what each waits for."""
        nodes = self.graph.nodes
        ongoing, free, waiting = self._feeder_state()
        lines = []
        for nid in sorted(ongoing)[:limit]:
            lines.append(f"{nodes[nid].describe()} started at {self.starts[nid]} ns and never completed"
                         + self._why_ongoing(nodes[nid]))
        for nid in free[:limit]:
            lines.append(f"{nodes[nid].describe()} is ready but its resource slot never freed")
        shown = 0
        for nid in sorted(waiting):
            if shown >= limit:
                break
            pending = [p for p in nodes[nid].parents if p in waiting or p in ongoing or p in free]
            lines.append(f"{nodes[nid].describe()} waits for node(s) {', '.join(map(str, pending[:6]))}")
            shown += 1
        total = len(ongoing) + len(free) + len(waiting)
        if total > len(lines):
            lines.append(f"... {total} node(s) not finished in all")
        return lines

    def _why_ongoing(self, node: Node) -> str:
        if node.type == pb.COMM_COLL_NODE:
            g = f" in group {node.pg_name}" if node.pg_name not in ("", "0") else ""
            return f" (collective{g}: its peers never sent the matching messages — do all ranks issue the same collectives in the same order?)"
        if node.type == pb.COMM_RECV_NODE:
            return f" (no matching send from rank {node.comm_src} with tag {node.comm_tag} and {node.comm_size} bytes)"
        if node.type == pb.COMM_SEND_NODE:
            return f" (to rank {node.comm_dst}, tag {node.comm_tag})"
        return ""

    @property
    def remaining(self) -> int:
        done = self._core.done if self._core is not None else self._done_count
        return len(self.graph.nodes) - done
