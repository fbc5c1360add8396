"""Communication that a Chakra file holds only as CPU operators, and send/recv peers it omits.

Chakra's PyTorch converter recognises communication only in NCCL GPU kernel names. A trace of
a CPU-only run (gloo) converts to a file whose collectives are ordinary CPU COMP nodes:
``c10d::allreduce_`` (the dispatcher op) and ``gloo:all_reduce`` (the backend's record of the
transfer, which gloo ends on a worker thread). Replayed as CPU time, the ranks never meet. We
read them for what they are: each pair is one collective, carried by the backend record (the
dispatcher op keeps its CPU time, as the launcher); a dispatcher op without such a record, or a
record without a dispatcher op, carries it alone. Only files with no communication node of
their own are read this way, so NCCL files (kernel node + host ops) count each collective once.

A record is paired with its dispatcher op by identity, never by Chakra's dependency edges: the
execution trace files the record under whatever op was open when gloo ended it, so its parent
may be a later op, or another collective's. A record belongs to the last dispatcher op that
the rank started before it on its thread (the trace's record-function ids, Chakra's ``rf_id``,
count up as operators start; node ids where a file has no distinct rf_ids) when its kind can be
that op's (``gloo:all_reduce`` also runs ``c10d::_reduce_scatter_base_``, and NCCL's barrier)
and no other process group is named; otherwise it is a collective of its own. Two records that
could be one op's are refused (WorkloadError: how many collectives the file holds is unknown).
A paired record is made to depend on its dispatcher op instead of the parent the trace gave it,
so every rank issues its collectives in the order its program did.

Its NCCL send/recv kernel nodes lack ``comm_dst``/``comm_src``/``comm_tag``; the launching
``c10d::send``/``c10d::recv_`` op (the kernel node's parent, as Chakra links a GPU kernel to
the CPU op that launched it) names the peer and tag in its arguments.

The size is the bytes of the operator's input tensors (as for every converter here, see
comm_names.py): the record's, else the dispatcher op's. A sparse all-reduce
(``gloo:sparse_all_reduce``), whose tensor the trace records with 0 elements, sends its indices
and values: their bytes, from the operators of the file that say them (the sparse tensor's
constructor, ``aten::_indices``, ``aten::_values``); a file that says neither is refused. gloo
runs it as an all-gather of every rank's indices and values followed by a local sum, so it is an
ALL_GATHER of those bytes (as workload/pytorch writes it; ranks whose parts differ in size are
refused by the cross-rank check, which compares sizes). The group is the world unless the
operator names a numeric group.
"""
from __future__ import annotations

import bisect
import warnings
from collections import Counter

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from chakra_proto.attrs import int_value
from workload.comm_names import (PEER_ARGS, RECV, SEND, SIMULATED, backend_kind, backend_runs, data_argument,
                                 dispatch_kind, int_or_none, is_sparse_record, named_args, shape_bytes, tensor_bytes,
                                 tensor_records)
from workload.errors import WorkloadError
from workload.sparse_tensors import MAKERS, PARTS, SAYS_PARTS, SparseParts

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any, Callable
    from pathlib import Path

_COMM_NODES = (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
_P2P = {SEND: pb.COMM_SEND_NODE, RECV: pb.COMM_RECV_NODE}
_PEER_ATTRS = ("comm_peer", "peer")


def recognise_host_comms(path: str | Path, nodes: dict[int, Any], raw: dict[int, Any]) -> list[int]:
    """Turn the CPU operators that are communication into communication nodes (in place), and
    fill in the peers of send/recv nodes that lack them; one warning per file. Returns the ids
    of send/recv nodes whose peer the file does not say (the rank running it may tell)."""
    unknown = _infer_p2p_peers(path, nodes, raw)
    if any(n.type in _COMM_NODES and n.host_launcher is None for n in nodes.values()):
        return unknown  # the converter saw the communication: its host ops are launchers
    ops = [n for _, n in sorted(nodes.items()) if n.type == pb.COMP_NODE and n.is_cpu_op and n.host_launcher is None
           and (dispatch_kind(n.name) is not None or backend_kind(n.name) is not None)]
    if not ops:
        return unknown
    made: Counter = Counter()
    kept: Counter = Counter()
    order = _Order(nodes, raw, ops)
    pairs = _pair(path, ops, raw, order)
    topo: dict[int, int] = {}
    for launcher, record in pairs:
        if launcher is not None and record is not None:
            _place_under(path, record, launcher, nodes, topo)
    parts: list[SparseParts] = []          # built at the first sparse collective, if any

    def sparse_bytes(carrier: Any, at: Any, ids: list[int]) -> int:
        if not parts:
            parts.append(_sparse_parts(nodes, raw, order))
        return _sparse_bytes(path, carrier, ids, parts[0], order.key(at.id))

    for launcher, record in pairs:
        kind = dispatch_kind(launcher.name) if launcher is not None else backend_kind(record.name)
        carrier = record if record is not None else launcher
        if kind in SIMULATED or kind in _P2P:
            paired = launcher if launcher is not None and record is not None else None
            _make_comm(path, carrier, kind, raw[carrier.id], raw[paired.id] if paired is not None else None,
                       lambda ids, c=carrier, at=launcher or carrier: sparse_bytes(c, at, ids))
            made[kind] += 1
        else:
            kept[kind] += 1
    if made:
        _warn(path, made, kept)
    return unknown


class _Order:
    """The order in which a rank started its operators, and on which thread. The execution trace's
    record-function ids (Chakra's ``rf_id`` attribute) count up as operators start, on every
    thread of the process, and a backend's record (``gloo:all_reduce``) is started inside its
    dispatcher op, on its thread, before the next op there: its rf_id follows the dispatcher op's.
    Node ids do not (the trace numbers a record that gloo ends on its worker thread later), so
    they order only files without distinct rf_ids on their communication ops."""

    def __init__(self, nodes: dict[int, Any], raw: dict[int, Any], ops: list[Any]) -> None:
        self._nodes, self._raw = nodes, raw
        self._attrs: dict[int, dict[str, int | None]] = {}
        rf = [self.attr(n.id, "rf_id") for n in ops]
        self.by_rf = None not in rf and len(set(rf)) == len(rf)

    def attr(self, nid: int, name: str) -> int | None:
        a = self._attrs.get(nid)
        if a is None:
            a = self._attrs[nid] = {x.name: int_value(x) for x in self._raw[nid].attr if x.name in ("rf_id", "tid")}
        return a.get(name)

    def key(self, nid: int) -> int:
        if self.by_rf:
            rf = self.attr(nid, "rf_id")
            if rf is not None:
                return rf
        return nid

    def thread(self, nid: int) -> int | None:
        return self.attr(nid, "tid")


def _pair(path: str | Path, ops: list[Any], raw: dict[int, Any], order: _Order) -> list[tuple[Any | None, Any | None]]:
    """(launcher, backend record) per collective: a dispatcher op (``c10d::allreduce_``) and the
    backend record it started (``gloo:all_reduce``), either of them None where the file holds only
    the other. Pairs by identity, never by Chakra's dependency edges (the execution trace files a
    record that gloo ends on its worker thread under whatever op was open then): a record belongs
    to the last dispatcher op started before it on its thread (rf_id order, see _Order) if it can
    be that op's transfer (its kind, its process group), else it is a collective of its own. A
    second record that can be one op's is refused: which of them is a collective of its own
    cannot be told without guessing, nor therefore how many collectives the file holds."""
    launcher_threads = {order.thread(n.id) for n in ops if dispatch_kind(n.name) is not None}
    last: dict[int | None, Any] = {}
    last_any = None
    records: dict[int, list[Any]] = {}
    pairs: list[tuple[Any | None, Any | None]] = []
    for n in sorted(ops, key=lambda n: (order.key(n.id), n.id)):
        tid = order.thread(n.id)
        if dispatch_kind(n.name) is not None:
            last[tid] = last_any = n
            records[n.id] = []
            pairs.append((n, None))
            continue
        launcher = last.get(tid) if tid in launcher_threads else last_any
        if launcher is None or not _may_be_of(launcher, n, raw):
            pairs.append((None, n))  # no dispatcher op of its kind before it: it carries a collective alone
            continue
        records[launcher.id].append(n)
    for launcher, _ in pairs:
        if launcher is None:
            continue
        found = records[launcher.id]
        if len(found) > 1:
            raise WorkloadError(
                path, launcher.describe(),
                f"{len(found)} backend records follow this dispatcher op on its thread before the next one "
                f"(nodes {', '.join(str(r.id) for r in found)}; {_ids(order, launcher, *found)}): a dispatcher op "
                "starts one, so the number of collectives in the file is unknown")
    return [(ln, records[ln.id][0] if ln is not None and records[ln.id] else r) for ln, r in pairs]


def _may_be_of(launcher: Any, record: Any, raw: dict[int, Any]) -> bool:
    """Whether the backend record can be the transfer of the dispatcher op: a kind the op runs
    as, and no other process group where both name one."""
    if not backend_runs(dispatch_kind(launcher.name), backend_kind(record.name)):
        return False
    lg, bg = _group(raw[launcher.id]), _group(raw[record.id])
    return lg is None or bg is None or lg == bg


def _place_under(path: str | Path, record: Any, launcher: Any, nodes: dict[int, Any], topo: dict[int, int]) -> None:
    """Make the backend record depend on its dispatcher op alone, so that the collective starts
    where the rank started it: the execution trace files a record that gloo ends on its worker
    thread under whatever op was open then, and Chakra's converter keeps that parent, which can put
    a rank's collectives out of the order its program issued them (and stall every rank). The
    record keeps its children; a parent that graphs may share (graph._may_share) stays."""
    mine = tuple(q for q in record.parents if nodes[q].is_cpu_op or nodes[q].type in _P2P.values())
    if record.parents == (launcher.id,) or not mine and launcher.id in record.parents:
        return
    if not topo:
        topo.update(_topological_positions(nodes))
    if topo[launcher.id] > topo[record.id]:
        if _reaches(nodes, record.id, launcher.id):
            raise WorkloadError(path, record.describe(), f"this backend record belongs to {launcher.describe()}, "
                                "which the file makes depend on the record: the file orders them backwards")
        topo.clear()  # still a DAG, but no longer in that order: computed again when next needed
    for q in mine:
        if q != launcher.id:
            nodes[q].children.remove(record.id)
    if record.id not in launcher.children:
        bisect.insort(launcher.children, record.id)
    record.parents = (launcher.id, *(q for q in record.parents if q not in mine and q != launcher.id))


def _topological_positions(nodes: dict[int, Any]) -> dict[int, int]:
    indeg = {nid: len(n.parents) for nid, n in nodes.items()}
    stack = sorted((nid for nid, d in indeg.items() if d == 0), reverse=True)
    pos: dict[int, int] = {}
    while stack:
        nid = stack.pop()
        pos[nid] = len(pos)
        for c in nodes[nid].children:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    return pos


def _reaches(nodes: dict[int, Any], start: int, goal: int) -> bool:
    seen, stack = {start}, [start]
    while stack:
        for c in nodes[stack.pop()].children:
            if c == goal:
                return True
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return False


def _ids(order: _Order, *ns: Any) -> str:
    what = "rf_id" if order.by_rf else "node id"
    return ", ".join(f"{what} {order.key(n.id)}" for n in ns)


def _group(rn: Any) -> str | None:
    group = _args(rn).get("group_name")
    return str(group[0]) if group and isinstance(group[0], str) else None


def settle_unknown_peers(path: str | Path, nodes: dict[int, Any], unknown: list[int], ranks: list[int],
                         world: int) -> None:
    """In a world of 2 ranks, the peer of a send/recv is the rank not running the file; anything
    else is bad input naming the first node."""
    if not unknown:
        return
    if world != 2 or len(ranks) != 1:
        raise unknown_peer_error(path, nodes[unknown[0]], world)
    for nid in unknown:
        n = nodes[nid]
        setattr(n, peer_field(n), 1 - ranks[0])
        if n.comm_tag is None:
            n.comm_tag = 0
    warnings.warn(f"{path}: {len(unknown)} send/recv node(s) do not name the other rank (node {unknown[0]} first): "
                  "the world has 2 ranks, so it is the other one", stacklevel=3)


def _make_comm(path: str | Path, n: Any, kind: str, rn: Any, launcher: Any | None,
               sparse_bytes: Callable[[list[int]], int]) -> None:
    args = _args(rn)
    largs = _args(launcher) if launcher is not None else {}
    sparse = [r[0] for r in tensor_records(_data(largs) or _data(args)) if is_sparse_record(r)]
    if sparse:
        size = sparse_bytes(sparse)  # the record shows 0 elements: the data are its indices and values
    elif "sparse" in n.name:
        raise WorkloadError(path, n.describe(), "a sparse collective whose tensor the file does not record (no "
                            "tensor id): the bytes of its indices and values are unknown; add comm_size to a "
                            "COMM_COLL_NODE")
    else:
        size = _size(args)
        if size == 0 and launcher is not None:
            size = _size(largs)
    both = {**largs, **args}
    n.is_cpu_op = False
    n.comm_size = size
    n.comm_priority = 0
    n.num_ops = n.tensor_size = None
    n.involved_dim = None
    group = both.get("group_name")
    n.pg_name = str(group[0]) if group and isinstance(group[0], str) and group[0].isdigit() else ""
    if kind in SIMULATED:
        n.type = pb.COMM_COLL_NODE
        # gloo's sparse all-reduce all-gathers every rank's indices and values, then sums locally
        n.comm_type = SIMULATED["ALL_GATHER" if sparse and kind == "ALL_REDUCE" else kind]
        if kind != "BROADCAST":
            n.duration_ns = 0  # the network decides how long it takes
        return
    n.type = _P2P[kind]
    peer = _peer(both)
    if peer is None:
        raise WorkloadError(path, n.describe(), f"{n.name!r} is a {kind.lower()} but neither it nor its launcher "
                            "names the other rank (no dst/src argument); add comm_dst/comm_src to a COMM_SEND/RECV node")
    n.comm_tag = int_or_none(both.get("tag", (None,))[0]) or 0
    n.comm_dst, n.comm_src = (peer, None) if kind == SEND else (None, peer)
    n.duration_ns = 0


def _infer_p2p_peers(path: str | Path, nodes: dict[int, Any], raw: dict[int, Any]) -> list[int]:
    """Send/recv nodes that name neither peer nor tag (as Chakra's converter writes them) take
    both from a peer attribute or from the launching op's arguments (up to 3 levels up).
    Returns the ids of those whose peer the file does not say."""
    unknown = []
    p2p = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
    for n in nodes.values():
        if n.type not in p2p:  # before any call: this loop sees every node of every file with p2p nodes
            continue
        field = peer_field(n)
        if getattr(n, field) is not None:
            continue
        peer, tag = _peer_attr(raw[n.id]), None
        seen, frontier = {n.id}, list(n.parents)
        for _ in range(3):
            if peer is not None:
                break
            nxt = []
            for p in frontier:
                if p in seen:
                    continue
                seen.add(p)
                a = _args(raw[p]) if (dispatch_kind(nodes[p].name) or backend_kind(nodes[p].name)) else {}
                if _peer(a) is not None:
                    peer, tag = _peer(a), int_or_none(a.get("tag", (None,))[0])
                    break
                nxt.extend(nodes[p].parents)
            frontier = nxt
        if peer is None:
            unknown.append(n.id)
            continue
        setattr(n, field, peer)
        if n.comm_tag is None:
            n.comm_tag = tag or 0
    return unknown


def peer_field(n: Any) -> str | None:
    """The field that names the other rank of a send ('comm_dst') or receive ('comm_src')."""
    return "comm_dst" if n.type == pb.COMM_SEND_NODE else "comm_src" if n.type == pb.COMM_RECV_NODE else None


def unknown_peer_error(path: str | Path, n: Any, world: int | None = None) -> WorkloadError:
    field = peer_field(n)
    where = f"; the world has {world} ranks, so it cannot be the other one" if world and world != 2 else ""
    return WorkloadError(
        path, n.describe(),
        f"{pb.NODE_TYPE_NAMES[n.type]} needs attribute {field!r} (the other rank); Chakra's PyTorch converter does "
        "not write it, and this file does not say it elsewhere (no comm_peer attribute, no c10d send/recv op "
        f"with a dst/src argument among its parents){where}; add {field} and comm_tag to the node",
    )


def _peer_attr(rn: Any) -> int | None:
    for a in rn.attr:
        if a.name in _PEER_ATTRS:
            return int_value(a)
    return None


def _peer(args: dict[str, tuple[Any, str]]) -> int | None:
    for name in PEER_ARGS:
        if name in args:
            v = int_or_none(args[name][0])
            if v is not None:
                return v
    return None


def _args(rn: Any | None) -> dict[str, tuple[Any, str]]:
    """The node's inputs by argument name: (value, type, shape); Chakra files hold each of the
    three lists as a Python literal."""
    if rn is None or not rn.HasField("inputs"):
        return {}
    values, types, shapes = (_literal(rn.inputs.values), _literal(rn.inputs.types), _literal(rn.inputs.shapes))
    schema = next((a.string_val for a in rn.attr if a.name == "op_schema"), "")
    args = named_args(values, types, schema)
    for i, key in enumerate(list(args)):
        args[key] = (*args[key], shapes[i] if i < len(shapes) else None)
    return args


def _data(args: dict[str, tuple]) -> Any:
    return data_argument({k: v[:2] for k, v in args.items()})


def _size(args: dict[str, tuple]) -> int:
    data = _data(args)
    if data is None:
        return 0
    size = tensor_bytes(data)
    if size:
        return size
    entry = next(v for v in args.values() if v[0] is data)
    return shape_bytes(entry[2], entry[1])


def _sparse_bytes(path: str | Path, n: Any, tensor_ids: list[int], parts: "SparseParts", at: int) -> int:
    """Bytes of the indices and values of the sparse tensors ``tensor_ids`` that a sparse
    all-reduce sends (workload/sparse_tensors.py), as seen nearest its dispatcher op's start."""
    total = 0
    for t in tensor_ids:
        size = parts.bytes_at(t, at)
        if size is None:
            raise WorkloadError(
                path, n.describe(),
                f"a sparse collective of tensor {t}, which the trace records with 0 elements, and no operator "
                f"of the file says both its indices and its values ({SAYS_PARTS}): its size is unknown; add "
                "comm_size to a COMM_COLL_NODE")
        total += size
    return total


def _sparse_parts(nodes: dict[int, Any], raw: dict[int, Any], order: "_Order") -> SparseParts:
    """The file's sparse-tensor parts, indexed once (only the operators that say them are read)."""
    def ops():
        for nid, m in nodes.items():
            if m.name in MAKERS or m.name in PARTS:
                rm = raw[nid]
                yield (order.key(nid), m.name, _literal(rm.inputs.values) if rm.HasField("inputs") else [],
                       _literal(rm.outputs.values) if rm.HasField("outputs") else [])
    return SparseParts(ops())


def _literal(text: str) -> list:
    import ast  # here: only workloads with host-side communication read operator arguments

    try:
        v = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return v if isinstance(v, list) else []


def _warn(path: str | Path, made: Counter, kept: Counter) -> None:
    total = sum(made.values())
    what = ", ".join(f"{k} {made[k]}" for k in sorted(made))
    msg = (f"{path}: recognised {total} communication operator(s) among the CPU operators ({what}), as Chakra's "
           "PyTorch converter writes them for gloo/CPU runs; each is simulated on the network, its "
           "launching op keeps its CPU time")
    if kept:
        msg += "; kept as CPU time (not simulated): " + ", ".join(f"{k} {kept[k]}" for k in sorted(kept))
    warnings.warn(msg, stacklevel=4)
