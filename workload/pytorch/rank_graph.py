"""One rank's Chakra graph from its host units (units.py) and device events.

* every unit is a CPU COMP node (``is_cpu_op``) with its measured time; the units form one chain,
  in start order;
* GPU kernels, memcpys and memsets are COMP nodes with their measured durations; each depends on
  the CPU node that launched it and on the previous event of its stream;
* an NCCL kernel is the collective (or send/recv) of the communication operator that launched it,
  on the communication slot: it also waits for the last compute kernel launched before it (NCCL's
  stream waits on the current stream) and overlaps the compute that follows, as it did;
* a communication operator that launched no kernel (gloo, MPI: the backend's own threads do the
  work) is a collective node after its CPU node; the launching operator keeps its own CPU time;
* the wait lands where the data is used (data flow by tensor storage): the first later unit that
  touches a tensor of a host-side collective waits for it on the CPU; for an NCCL collective the
  first kernel of such a unit waits for it on the device;
* a host wait for the device (``cudaStreamSynchronize``, ...) splits its unit: the part after the
  wait depends on the last event of every stream, and the wait itself is not CPU time;
* a backend's record on the calling thread (gloo's ``send`` and ``recv``: open from the transfer's
  start until ``wait()`` returned) is the thread blocked on that transfer, not CPU time: the next
  CPU node waits for the transfer's node instead.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from workload.builder import GraphBuilder
from workload.comm_names import data_argument, is_sparse_record, named_args, tensor_records
from workload.pytorch.backend_records import link_backend_records
from workload.pytorch.comm_ops import (RECV, SEND, SIMULATED, CommOp, comm_op, has_dispatch_ops, kind_of_name,
                                       record_bytes)
from workload.pytorch.device_trace import DeviceTrace, GpuEvent
from workload.pytorch.errors import PyTorchTraceError
from workload.pytorch.groups import ProcessGroups
from workload.pytorch.units import Unit, host_units
from workload.sparse_tensors import SAYS_PARTS, SparseParts
from workload.collect.execution_trace import ExecutionTrace

_NAME_MAX = 160


@dataclass
class RankStats:
    cpu_nodes: int = 0
    gpu_nodes: int = 0
    collectives: Counter = field(default_factory=Counter)
    unmatched_ops: int = 0
    unlaunched_kernels: int = 0
    skipped_comms: Counter = field(default_factory=Counter)
    no_group: int = 0
    cpu_ns: int = 0


@dataclass(slots=True)
class CommRecord:
    """One communication node as written, with what the trace measured of it."""

    node_id: int
    op: str                    # the operator's name
    kind: str
    size: int
    group: str | None          # the process group's name, when the trace says it
    measured_ns: int | None    # the transfer's span on this rank (backend record or NCCL kernel)
    sparse: bool = False
    thread: tuple | None = None    # the backend thread that ran it (gloo: one pool per process group)
    span: tuple[int, int] | None = None    # its start and end (ns, the trace's clock)


@dataclass(slots=True)
class P2PRecord:
    """One send or receive as written, with its backend record's span (the trace's clock)."""

    node_id: int
    kind: str                  # SEND or RECV
    src: int
    dst: int
    tag: int
    size: int
    span: tuple[int, int] | None = None


class RankGraph:
    def __init__(self, rank: int, host: ExecutionTrace, dev: DeviceTrace, groups: ProcessGroups) -> None:
        self.rank, self.host, self.dev, self.groups = rank, host, dev, groups
        self.b = GraphBuilder()
        self.stats = RankStats()
        self.last_cpu: int | None = None
        self.last_on_stream: dict = {}
        self.last_compute: int | None = None
        self.host_pending: dict[int, int] = {}      # storage -> collective node the host must wait for
        self.device_pending: dict[int, int] = {}    # storage -> NCCL collective node
        self.comms: list[CommRecord] = []
        self.p2p: list[P2PRecord] = []
        self.units: list[Unit] = []
        self._backend: dict = {}
        self._record_comm: dict[int, int] = {}      # id of a backend record's Span -> its transfer's node
        self._blocked: list[int] = []               # transfers the next CPU node waits for (the thread was blocked)
        self._carried_gap_ns = 0                    # host time before a record that is no CPU node
        self._comm_end: dict[int, int] = {}         # transfer node -> its backend record's end (ns)
        self._sparse: SparseParts | None = None

    def build(self) -> GraphBuilder:
        units = host_units(self.host, self.dev)
        self.units = units
        if has_dispatch_ops(self.host.nodes.values()):
            self._backend = link_backend_records(self.host, self.dev, [u.node for u in units if u.is_comm])
        self.stats.unmatched_ops = sum(u.span is None for u in units)
        kernels: dict = {}
        for ev in self.dev.gpu:
            kernels.setdefault(ev.correlation, []).append(ev)
        launched = 0
        for u in units:
            mine = [(t, ev) for t, c in u.launches for ev in kernels.get(c, ())]
            launched += len(mine)
            self._unit(u, mine)
        self.stats.unlaunched_kernels = len(self.dev.gpu) - launched
        return self.b

    # -- one unit --------------------------------------------------------------------------------
    def _unit(self, u: Unit, kernels: list[tuple[int, GpuEvent]]) -> None:
        if self._blocking_record(u, kernels):
            return
        wait_ns = sum(s.dur_ns for s in u.syncs)
        split_at = u.syncs[-1].start_ns if u.syncs else None
        pre_ns = u.cpu_ns
        if split_at is not None and u.span is not None:
            pre_ns = min(u.cpu_ns, max(0, split_at - u.span.start_ns - (wait_ns - u.syncs[-1].dur_ns)))
        deps = self._host_waits(u)
        comm = self._comm_op(u) if u.is_comm else None
        nccl = [ev for _, ev in kernels if ev.is_nccl()]
        host_comm = comm is not None and not nccl
        head_ns = self._until_backend_starts(u, pre_ns) if host_comm else pre_ns
        gap_ns, self._carried_gap_ns = u.gap_ns + self._carried_gap_ns, 0
        # a gap before a wait for a transfer was the wait until the transfer's record ended; what
        # follows its end is the host's (waking the thread, the script's Python), and so is all of
        # it where the thread's blocking record was the wait (the gap then runs from its end)
        waited = [d for d in deps if d not in self._blocked]
        if waited:
            ends = [self._comm_end.get(d) for d in waited]
            gap_ns = 0 if u.span is None or None in ends else min(gap_ns, max(0, u.span.start_ns - max(ends)))
        pre_ns += gap_ns
        head_ns += gap_ns
        cpu = self._cpu(u.name, head_ns, deps)
        if host_comm:
            self._host_collective(u, comm, cpu)
            if head_ns < pre_ns:
                cpu = self._cpu(f"{u.name} (after its backend started)", pre_ns - head_ns, [])
        launcher, post_done = cpu, split_at is None
        for t, ev in kernels:
            if not post_done and t >= split_at:
                launcher, post_done = self._after_wait(u, pre_ns, wait_ns), True
            self._gpu(u, ev, launcher, comm, len(nccl))
        if not post_done:
            self._after_wait(u, pre_ns, wait_ns)
    def _until_backend_starts(self, u: Unit, pre_ns: int) -> int:
        """How much of a launcher's host time passes before its backend starts the transfer: gloo's
        worker thread starts while the c10d op still runs on the main thread (up to 5.8 ms of it on
        a busy host), so the collective is issued from that moment, not from the op's end."""
        rec = self._backend.get(u.node.id)
        if rec is None or u.span is None:
            return pre_ns
        return min(pre_ns, max(0, rec.start_ns - u.span.start_ns))

    def _blocking_record(self, u: Unit, kernels: list) -> bool:
        """Whether ``u`` is a backend's record of a transfer on the thread that waited for it (gloo's
        ``send`` and ``recv`` on the main thread: 2.6 ms of a pipeline stage's receive, counted as host
        time after the simulated transfer, made a 2-stage pipeline +24 %): then it is no CPU node,
        and the next one waits for the transfer."""
        node = self._record_comm.get(id(u.span)) if u.span is not None and not u.is_comm else None
        if node is None or kernels or u.syncs:
            return False
        for s in u.storages:  # the wait covers the data: the next use needs no wait of its own
            if self.host_pending.get(s) == node:
                del self.host_pending[s]
        self._blocked.append(node)
        self._carried_gap_ns += u.gap_ns
        return True

    def _cpu(self, name: str, dur_ns: int, deps: list[int]) -> int:
        if self._blocked:
            deps = sorted({*deps, *self._blocked})
            self._blocked = []
        if self.last_cpu is not None:
            deps = [self.last_cpu, *deps]
        self.last_cpu = self.b.comp(name[:_NAME_MAX], dur_ns, deps, is_cpu_op=True)
        self.stats.cpu_nodes += 1
        self.stats.cpu_ns += dur_ns
        return self.last_cpu

    def _after_wait(self, u: Unit, pre_ns: int, wait_ns: int) -> int:
        """The part of a unit after its host wait for the device: after every stream's last event."""
        waits = sorted(set(self.last_on_stream.values()))
        return self._cpu(f"{u.name} (after device sync)", max(0, u.cpu_ns - pre_ns - wait_ns), waits)

    def _host_waits(self, u: Unit) -> list[int]:
        found = {self.host_pending.pop(s) for s in u.storages if s in self.host_pending}
        return sorted(found)

    # -- communication ---------------------------------------------------------------------------
    def _comm_op(self, u: Unit) -> CommOp | None:
        rec = self._record_args(u)
        op = comm_op(u.node, rec)
        if op.kind == "ALL_REDUCE":
            op = self._sparse_all_reduce(u, op)
        return op if op.kind else None

    def _sparse_all_reduce(self, u: Unit, op: CommOp) -> CommOp:
        """An all-reduce of sparse tensors: an all-gather of their indices and values
        (workload/sparse_tensors.py)."""
        args = named_args(u.node.inputs.values, u.node.inputs.types, u.node.op_schema)
        records = tensor_records(data_argument(args))
        if not records or not all(is_sparse_record(r) for r in records):
            return op
        if self._sparse is None:
            self._sparse = SparseParts((n.rf_id, n.name, n.inputs.values, n.outputs.values)
                                       for n in self.host.nodes.values())
        size = 0
        for r in records:
            b = self._sparse.bytes_at(r[0], u.node.rf_id)
            if b is None:
                raise PyTorchTraceError(self.host.path, f"node {u.node.id} ({u.node.name}, rf_id {u.node.rf_id})",
                                        f"all-reduces tensor {r[0]}, which has no storage (a sparse tensor), but "
                                        f"no operator of the trace shows both its indices and its values ({SAYS_PARTS}), "
                                        "so the bytes it sends are unknown; record the step that makes the gradient")
            size += b
        return replace(op, kind="ALL_GATHER", size_bytes=size, sparse=True)

    def _record_args(self, u: Unit) -> dict | None:
        """Kineto args of the record_param_comms inside a communication operator (NCCL writes one)."""
        stack = [u.node]
        while stack:
            n = stack.pop()
            if n.name == "record_param_comms":
                span = self.dev.by_rf.get(n.rf_id)
                if span is not None and span.args:
                    return span.args
            stack.extend(self.host.kids(n))
        return None

    def _host_collective(self, u: Unit, comm: CommOp, cpu: int) -> None:
        node = self._comm_node(u.name, comm, comm.kind, comm.size_bytes, [cpu])
        if node is not None:
            rec = self._backend.get(u.node.id)
            if rec is None and u.span is not None and not has_dispatch_ops((u.node,)):
                rec = u.span      # a backend record that is the operator itself (traces before torch 2.0)
            if self.comms and self.comms[-1].node_id == node:
                self.comms[-1].measured_ns = rec.dur_ns if rec is not None else None
                self.comms[-1].span = (rec.start_ns, rec.end_ns) if rec is not None else None
                self.comms[-1].thread = rec.thread if rec is not None and rec is not u.span else None
            if self.p2p and self.p2p[-1].node_id == node and rec is not None and rec is not u.span:
                self.p2p[-1].span = (rec.start_ns, rec.end_ns)
            if rec is not None and rec is not u.span:
                self._record_comm[id(rec)] = node
                self._comm_end[node] = rec.end_ns
            for s in u.storages:
                self.host_pending[s] = node

    def _comm_node(self, name: str, comm: CommOp, kind: str, size: int, deps: list[int]) -> int | None:
        pg = self.groups.pg_attr(comm.group_name)
        if comm.group_name is None and self.groups.non_world():
            self.stats.no_group += 1
        if kind in (SEND, RECV):
            if comm.peer is None:
                self.stats.skipped_comms[f"{kind} without a peer"] += 1
                return None
            peer = self.groups.global_rank(comm.group_name, comm.peer)
            self.stats.collectives[kind] += 1
            src, dst = (self.rank, peer) if kind == SEND else (peer, self.rank)
            make = self.b.send if kind == SEND else self.b.recv
            node = make(name[:_NAME_MAX], src, dst, max(1, size), comm.tag, deps)
            self.p2p.append(P2PRecord(node, kind, src, dst, comm.tag, max(1, size)))
            return node
        if kind not in SIMULATED:
            self.stats.skipped_comms[kind] += 1
            return None
        self.stats.collectives[kind] += 1
        nid = self.b.collective(name[:_NAME_MAX], SIMULATED[kind], max(1, size), deps, pg_name=pg)
        self.comms.append(CommRecord(nid, name, kind, max(1, size), comm.group_name, None, comm.sparse))
        return nid

    # -- the device ------------------------------------------------------------------------------
    def _gpu(self, u: Unit, ev: GpuEvent, launcher: int, comm: CommOp | None, nccl_count: int) -> None:
        deps = [launcher]
        prev = self.last_on_stream.get(ev.stream)
        if prev is not None:
            deps.append(prev)
        if ev.is_nccl():
            node = self._nccl(u, ev, comm, nccl_count, deps)
        else:
            found = {self.device_pending.pop(s) for s in u.storages if s in self.device_pending}
            node = self.b.comp(ev.name[:_NAME_MAX], ev.dur_ns, deps + sorted(found))
            self.last_compute = node
            self.stats.gpu_nodes += 1
        if node is not None:
            self.last_on_stream[ev.stream] = node

    def _nccl(self, u: Unit, ev: GpuEvent, comm: CommOp | None, count: int, deps: list[int]) -> int | None:
        from_kernel = kind_of_name(str(ev.args.get("Collective name", ""))) or kind_of_name(ev.name)
        if comm is None:        # a kernel no recognised operator launched: its own args say what it is
            comm = CommOp(from_kernel or "", record_bytes(ev.args), None, 0,
                          None if ev.args.get("Process Group Name") is None else str(ev.args["Process Group Name"]))
        kind = comm.kind if comm.kind in SIMULATED or comm.kind in (SEND, RECV) else (from_kernel or comm.kind)
        if self.last_compute is not None:
            deps = [*deps, self.last_compute]
        size = comm.size_bytes // max(1, count) or record_bytes(ev.args)
        node = self._comm_node(ev.name, comm, kind, size, sorted(set(deps)))
        if node is not None:
            if self.comms and self.comms[-1].node_id == node:
                self.comms[-1].measured_ns = ev.dur_ns
                self.comms[-1].span = (ev.start_ns, ev.end_ns)
            for s in u.storages:
                self.device_pending[s] = node
        return node
