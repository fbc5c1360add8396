"""Communication that a Chakra file holds only as CPU operators, and send/recv peers it omits.

Chakra's PyTorch converter recognises communication only in NCCL GPU kernel names. A trace of
a CPU-only run (gloo) converts to a file whose collectives are ordinary CPU COMP nodes:
``c10d::allreduce_`` (the dispatcher op) and, as its data-dependent child, ``gloo:all_reduce``
(the backend's record of the transfer). Replayed as CPU time, the ranks never meet. We read
them for what they are: each pair is one collective, carried by the backend record (the
dispatcher op keeps its CPU time, as the launcher); a dispatcher op without such a record, or a
record without a dispatcher op, carries it alone. Only files with no communication node of
their own are read this way, so NCCL files (kernel node + host ops) count each collective once.

Its NCCL send/recv kernel nodes lack ``comm_dst``/``comm_src``/``comm_tag``; the launching
``c10d::send``/``c10d::recv_`` op names the peer and tag in its arguments.

The size is the bytes of the operator's input tensors (as for every converter here, see
comm_names.py); the group is the world unless the operator names a numeric group.
"""
from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from chakra_proto import enums as pb  # the enum numbers, without the protobuf runtime
from chakra_proto.attrs import int_value
from workload.comm_names import (PEER_ARGS, RECV, SEND, SIMULATED, backend_kind, data_argument, dispatch_kind,
                                 int_or_none, named_args, shape_bytes, tensor_bytes)
from workload.errors import WorkloadError

_COMM_NODES = (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
_P2P = {SEND: pb.COMM_SEND_NODE, RECV: pb.COMM_RECV_NODE}
_PEER_ATTRS = ("comm_peer", "peer")


def recognise_host_comms(path: Path, nodes: dict[int, Any], raw: dict[int, Any]) -> list[int]:
    """Turn the CPU operators that are communication into communication nodes (in place), and
    fill in the peers of send/recv nodes that lack them; one warning per file. Returns the ids
    of send/recv nodes whose peer the file does not say (the rank running it may tell)."""
    unknown = _infer_p2p_peers(path, nodes, raw)
    if any(n.type in _COMM_NODES and n.host_launcher is None for n in nodes.values()):
        return unknown  # the converter saw the communication: its host ops are launchers
    made: Counter = Counter()
    kept: Counter = Counter()
    for nid in sorted(nodes):
        n = nodes[nid]
        if n.type != pb.COMP_NODE or not n.is_cpu_op or n.host_launcher is not None:
            continue
        kind = backend_kind(n.name)
        launcher = None
        if kind is not None:
            launcher = next((nodes[p] for p in n.parents if dispatch_kind(nodes[p].name) == kind), None)
        else:
            kind = dispatch_kind(n.name)
            if kind is None or any(backend_kind(nodes[c].name) == kind for c in n.children):
                continue  # not communication, or its backend record carries it
        if kind in SIMULATED or kind in _P2P:
            _make_comm(path, n, kind, raw[nid], raw[launcher.id] if launcher else None)
            made[kind] += 1
        else:
            kept[kind] += 1
    if made:
        _warn(path, made, kept)
    return unknown


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


def _make_comm(path: Path, n: Any, kind: str, rn: Any, launcher: Any | None) -> None:
    args = _args(rn)
    size = _size(args)
    if size == 0 and launcher is not None:
        size = _size(_args(launcher))
    both = {**(_args(launcher) if launcher is not None else {}), **args}
    n.is_cpu_op = False
    n.comm_size = size
    n.comm_priority = 0
    n.num_ops = n.tensor_size = None
    n.involved_dim = None
    group = both.get("group_name")
    n.pg_name = str(group[0]) if group and isinstance(group[0], str) and group[0].isdigit() else ""
    if kind in SIMULATED:
        n.type = pb.COMM_COLL_NODE
        n.comm_type = SIMULATED[kind]
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


def _infer_p2p_peers(path: Path, nodes: dict[int, Any], raw: dict[int, Any]) -> list[int]:
    """Send/recv nodes that name neither peer nor tag (as Chakra's converter writes them) take
    both from a peer attribute or from the launching op's arguments (up to 3 levels up).
    Returns the ids of those whose peer the file does not say."""
    unknown = []
    for n in nodes.values():
        field = peer_field(n)
        if field is None or getattr(n, field) is not None:
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


def _size(args: dict[str, tuple]) -> int:
    data = data_argument({k: v[:2] for k, v in args.items()})
    if data is None:
        return 0
    size = tensor_bytes(data)
    if size:
        return size
    entry = next(v for v in args.values() if v[0] is data)
    return shape_bytes(entry[2], entry[1])


def _literal(text: str) -> list:
    import ast  # here: only workloads with host-side communication read operator arguments

    try:
        v = ast.literal_eval(text) if text else []
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return v if isinstance(v, list) else []


def _warn(path: Path, made: Counter, kept: Counter) -> None:
    total = sum(made.values())
    what = ", ".join(f"{k} {made[k]}" for k in sorted(made))
    msg = (f"{path}: recognised {total} communication operator(s) among the CPU operators ({what}), as Chakra's "
           "PyTorch converter writes them for gloo/CPU runs; each is simulated on the network, its "
           "launching op keeps its CPU time")
    if kept:
        msg += "; kept as CPU time (not simulated): " + ", ".join(f"{k} {kept[k]}" for k in sorted(kept))
    warnings.warn(msg, stacklevel=4)
