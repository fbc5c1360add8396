"""One Chakra ET file, decoded and validated into an immutable execution graph.

A graph is shared by every rank that reads the same file (one ``.et`` for all ranks), so it
holds no per-rank state. Validation names the file, the node and the field (design.md).
"""
from __future__ import annotations

import os
import warnings

from chakra_proto import EtFormatError, enums as pb, read_et_split, read_node_fields, wire
from chakra_proto.attrs import INTEGER_MEMBERS
from chakra_proto.enums import COLLECTIVE_NAMES, NODE_TYPE_NAMES
from network.files import exists, path_str
from workload.dependencies import link_dependencies
from workload.errors import WorkloadError
from workload.shared_nodes import GRAPH_CORE, link_shared

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any

NODE_TYPES = NODE_TYPE_NAMES
COLL_TYPES = COLLECTIVE_NAMES
_P2P_TYPES = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
SUPPORTED_COLLECTIVES = {pb.ALL_REDUCE, pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL, pb.BROADCAST}
_new = object.__new__


class Node:
    """The fields of a Chakra node that simulation reads, parsed once."""

    __slots__ = ("id", "name", "type", "parents", "children", "is_cpu_op", "duration_ns",
                 "comm_type", "comm_size", "comm_priority", "comm_src", "comm_dst", "comm_tag",
                 "pg_name", "involved_dim", "num_ops", "tensor_size", "inputs_values", "index", "data_deps",
                 "host_launcher")

    def __init__(self) -> None:
        self.children: list[int] = []

    def clone(self, index: int) -> Node:
        """The same parsed fields for another file's graph: own children, own entry index.
        (Written out: 118k clones load a 128-rank layout, and generating it from __slots__ with
        the built-in compile() made the interpreter's AST classes at import, ~10 M instructions of
        every run; tests/workload/test_graph_load.py fails where a slot added later is not copied.)"""
        n = _new(Node)
        n.children = []
        n.index = index
        n.id = self.id
        n.name = self.name
        n.type = self.type
        n.parents = self.parents
        n.is_cpu_op = self.is_cpu_op
        n.duration_ns = self.duration_ns
        n.comm_type = self.comm_type
        n.comm_size = self.comm_size
        n.comm_priority = self.comm_priority
        n.comm_src = self.comm_src
        n.comm_dst = self.comm_dst
        n.comm_tag = self.comm_tag
        n.pg_name = self.pg_name
        n.involved_dim = self.involved_dim
        n.num_ops = self.num_ops
        n.tensor_size = self.tensor_size
        n.inputs_values = self.inputs_values
        n.data_deps = self.data_deps
        n.host_launcher = self.host_launcher
        return n

    @property
    def type_name(self) -> str:
        if self.host_launcher is not None:
            return NODE_TYPES[self.host_launcher] + " launcher"
        return NODE_TYPES.get(self.type, str(self.type))

    def describe(self) -> str:
        s = f"node {self.id} ({self.type_name}"
        if self.name:
            s += f" {self.name!r}"
        if self.type == pb.COMM_COLL_NODE and self.comm_type is not None:
            s += f", {COLL_TYPES.get(self.comm_type, self.comm_type)} {self.comm_size} B"
        return s + ")"


class Graph:
    """An execution graph: nodes by id, roots, validated to be a DAG."""

    __slots__ = ("path", "nodes", "roots", "order", "metadata", "memo", "unknown_peers")

    def __init__(self, path: str, nodes: dict[int, Node], metadata: Any, unknown_peers: list[int] = ()) -> None:
        self.path = path
        #: send/recv nodes whose other rank the file does not say (see host_comms.py)
        self.unknown_peers = list(unknown_peers)
        self.nodes = nodes
        self.roots = sorted(nid for nid, n in nodes.items() if not n.parents)
        self.order = sorted(nodes)
        self.metadata = metadata
        # what readers derive from the (immutable) graph, computed once for all ranks sharing it
        self.memo: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def finer_than_microseconds(self) -> int:
        """Compute nodes whose duration_ns is not whole microseconds: ASTRA-sim reads only
        duration_micros, so it runs them for another time (the writers' duration_micros)."""
        found = self.memo.get("finer_than_us")
        if found is None:
            found = self.memo["finer_than_us"] = sum(
                1 for n in self.nodes.values() if n.duration_ns % 1000 and n.type == pb.COMP_NODE)
        return found

    @property
    def has_communicator_groups(self) -> bool:
        """Does any communication node name a group other than the world (pg_name)?"""
        return any(n.pg_name not in ("", "0") for n in self.nodes.values() if n.pg_name is not None)


def load_graph(path: str | os.PathLike, cache: dict[bytes, Node] | None = None,
               shared: dict[bytes, list[Node]] | None = None, previous: list | None = None) -> Graph:
    """Decode and validate one ET file. ``cache`` maps a node's serialized bytes to its parsed
    Node across the files of one workload: ranks of one layout repeat most nodes byte for byte.
    With ``shared`` (see workload/shared_nodes.py) graphs share the Node objects that they would
    hold equal, dependencies included. ``previous``: a box holding the node messages of the file
    read before (the ranks of a layout repeat most in place, and a message equal to the one at its
    place there is that already-hashed object); the box then holds this file's."""
    p = path_str(path)  # as messages and Graph.path name the file (network/files.py: not pathlib)
    cache = {} if cache is None else cache
    try:
        metadata, nodes, frames = _parse_nodes(p, cache, clone=shared is None, previous=previous)
    except WorkloadError:
        if not exists(p):  # asked only now: a stat per file is a tenth of loading a small one
            raise WorkloadError(p, "", "workload file not found") from None
        raise
    if not nodes:
        raise WorkloadError(p, "", "the file holds no nodes (ASTRA-sim rejects this: nothing is dependency-free)")
    linked = None if shared is None else link_shared(p, frames, list(nodes.values()), shared, _may_share)
    if linked is not None:
        nodes = linked
    else:
        if shared is not None:  # a file to repair or refuse: its own nodes, linked as always
            nodes = {cache[f].id: cache[f].clone(i) for i, f in enumerate(frames)}
        link_dependencies(p, nodes)
    unknown_peers: list[int] = []
    # without a node that host_comms.py would change, it need not even be imported (a fifth of the
    # workload layer's code, at start-up)
    if _any_host_comms(nodes):
        from workload.host_comms import recognise_host_comms

        unknown_peers = recognise_host_comms(p, nodes, _RawNodes(frames, nodes))
    _warn_host_launchers(p, nodes)
    return Graph(p, nodes, metadata, unknown_peers)


def _host_comms_may_change(n: Node) -> bool:
    """A CPU operator (it may be communication), or a send or receive that does not name its peer."""
    if n.is_cpu_op:
        return True
    if n.type == pb.COMM_SEND_NODE:
        return n.comm_dst is None
    return n.type == pb.COMM_RECV_NODE and n.comm_src is None


def _any_host_comms(nodes: dict[int, Node]) -> bool:
    """Whether any node is one _host_comms_may_change names (workload/_graph_core.c's loop where
    compiled, without a Python call per node)."""
    found = GRAPH_CORE.host_comms_may_change(nodes) if GRAPH_CORE is not None else None
    return any(map(_host_comms_may_change, nodes.values())) if found is None else found


def _may_share(n: Node) -> bool:
    """Whether graphs may share the node: recognising host-side communication rewrites CPU
    operators and fills in the peers of sends and receives, per file (host_comms.py)."""
    return not n.is_cpu_op and n.type not in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)


def _warn_host_launchers(path: str, nodes: dict[int, Node]) -> None:
    launchers = [n.id for n in nodes.values() if n.host_launcher]
    if launchers:
        shown = ", ".join(map(str, launchers[:5])) + (", ..." if len(launchers) > 5 else "")
        warnings.warn(
            f"{path}: {len(launchers)} communication node(s) are CPU ops without the fields of a "
            f"communication (node {shown}): host-side launchers, replayed on the CPU for their duration; "
            "the GPU-side nodes carry the communication",
            stacklevel=3,
        )


class _RawNodes:
    """A node's message by id, decoded again only when asked: recognising host-side
    communication reads the attributes of a few CPU operators, and the parse cache keeps none.
    chakra_proto.wire decodes it (what et_def_pb2 would give, fields, HasField and WhichOneof);
    protobuf's runtime, whose import costs a run 40-60 ms, only where wire declines the bytes."""

    __slots__ = ("_frames", "_nodes")

    def __init__(self, frames: list[bytes], nodes: dict[int, Node]) -> None:
        self._frames = frames
        self._nodes = nodes

    def __getitem__(self, nid: int) -> Any:
        frame = self._frames[self._nodes[nid].index]
        node = wire.decode(frame, wire.Node)
        if node is None:
            from chakra_proto import et_def_pb2

            node = et_def_pb2.Node.FromString(frame)
        return node


def _parse_nodes(p: str, cache: dict[bytes, Node], clone: bool = True,
                 previous: list | None = None) -> tuple[Any, dict[int, Node], list[bytes]]:
    try:
        metadata, frames, starts = read_et_split(p, read_only=True, like=previous[0] if previous else None)
        if previous is not None:
            previous[0] = frames
        # decode every new message first: a corrupt file is named before any field rule
        fresh = {}
        for i, f in enumerate(frames):
            if f not in cache and f not in fresh:
                fresh[f] = read_node_fields(f, p, i, starts[i])  # chakra_proto.wire.fields_of
    except EtFormatError as e:
        raise WorkloadError(p, "", f"not a Chakra ET file: {e.args[0].split(': ', 1)[-1]}") from None
    nodes: dict[int, Node] = {}
    fast = _FAST_PARSE
    for i, f in enumerate(frames):
        t = cache.get(f)
        if t is None:  # the cached template belongs to no graph: what a graph changes stays its own
            t = fast(fresh[f], i) if fast is not None else None
            if t is None:
                t = _parse_node(p, fresh[f], i)
            cache[f] = t
        n = t.clone(i) if clone else t  # without clone: the templates, for link_shared
        if n.id in nodes:
            first = next(j for j in range(i) if cache[frames[j]].id == n.id)
            raise WorkloadError(p, f"node {n.id}", f"duplicate node id (entries #{first} and #{i})")
        nodes[n.id] = n
    return metadata, nodes, frames


def _where(nid: int, name: str) -> str:
    return f"node {nid}" + (f" ({name!r})" if name else "")


def _get_int(path: str, n: Node, attrs: dict, key: str, required: bool = False,
             minimum: int | None = None) -> int | None:
    """The integer value of the node's attribute ``key`` (None where it has none), checked."""
    a = attrs.get(key)
    if a is None:
        if required:
            raise WorkloadError(path, _where(n.id, n.name), f"{n.type_name} needs attribute {key!r}")
        return None
    if a[0] not in INTEGER_MEMBERS:
        raise WorkloadError(path, _where(n.id, n.name), f"attribute {key!r} must be an integer, got {a[0]}")
    v = int(a[1])
    if minimum is not None and v < minimum:  # a negative size would run the clock backwards
        raise WorkloadError(path, _where(n.id, n.name), f"attribute {key!r} must be >= {minimum}, got {v}")
    return v


def _parse_node(path: str, fields: tuple, index: int) -> Node:
    """One node from its fields (chakra_proto.wire.fields_of), checked. (Written for the common
    node, one per distinct message of a workload: no Node.__init__, no set of the dependencies
    unless there are several, an attribute read only where the node has it.)"""
    nid, name, t, ctrl_deps, data_deps, micros, inputs, attrs = fields
    if t not in NODE_TYPES:
        raise WorkloadError(path, _where(nid, name), f"unknown node type {t}; expected one of "
                            f"{', '.join(NODE_TYPES.values())}")
    n = _new(Node)
    n.children = []
    n.index = index
    n.id = nid
    n.name = name
    n.type = t
    n.data_deps = data_deps  # only read while linking: ``in`` on a few ids
    if not ctrl_deps and (len(data_deps) < 2 or len(set(data_deps)) == len(data_deps)):
        n.parents = data_deps
    else:
        seen: set[int] = set()
        parents = []
        for d in (*data_deps, *ctrl_deps):  # feeder_v3 waits on the union (formats.md A.5)
            if d not in seen:
                seen.add(d)
                parents.append(d)
        n.parents = tuple(parents)
    n.host_launcher = None

    cpu = attrs.get("is_cpu_op")
    n.is_cpu_op = cpu is not None and cpu[0] in INTEGER_MEMBERS and bool(int(cpu[1]))
    if "duration_ns" in attrs:
        dns = _get_int(path, n, attrs, "duration_ns")
        if dns < 0:
            raise WorkloadError(path, _where(nid, name), "attribute 'duration_ns' must be >= 0")
        n.duration_ns = dns
    else:
        n.duration_ns = micros * 1000
    n.comm_type = n.comm_size = n.comm_src = n.comm_dst = n.comm_tag = None
    n.comm_priority = 0
    n.pg_name = ""
    n.involved_dim = None
    n.num_ops = n.tensor_size = None
    n.inputs_values = inputs if inputs is not None else ""
    t = n.type
    if t in (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE) and n.is_cpu_op:
        defining = {pb.COMM_COLL_NODE: ("comm_type",), pb.COMM_SEND_NODE: ("comm_dst",),
                    pb.COMM_RECV_NODE: ("comm_src",)}[t]
        if any(f in attrs for f in defining):
            raise WorkloadError(path, _where(nid, name), f"a communication node with {defining[0]} cannot be a CPU op "
                                "(is_cpu_op is true): drop is_cpu_op, or drop the communication fields if "
                                "it is the host-side launcher of a GPU-side node")
        # the host-side launcher (c10d::allreduce_ ...) that converters emit next to the GPU
        # kernel node: what it means is CPU time; the kernel node carries the communication.
        # It becomes a CPU COMP node, so that every later stage sees what it means.
        n.host_launcher = t
        n.type = pb.COMP_NODE
        return n
    if t in (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
        n.comm_size = _get_int(path, n, attrs, "comm_size", required=True)
        if n.comm_size < 0:
            raise WorkloadError(path, _where(nid, name), f"comm_size must be >= 0, got {n.comm_size}")
        if "comm_priority" in attrs:
            n.comm_priority = _get_int(path, n, attrs, "comm_priority") or 0
        pg = attrs.get("pg_name")
        if pg is not None:
            if pg[0] == "string_val":
                n.pg_name = pg[1]
            elif pg[0] in INTEGER_MEMBERS:
                n.pg_name = str(int(pg[1]))
            else:
                raise WorkloadError(path, _where(nid, name), "attribute 'pg_name' must be a string")
            if n.pg_name not in ("", "0"):
                try:
                    if int(n.pg_name) < 0:
                        raise ValueError
                except ValueError:
                    raise WorkloadError(path, _where(nid, name), f"pg_name {n.pg_name!r} is not a communicator-group id") from None
    if t == pb.COMM_COLL_NODE:
        n.comm_type = _get_int(path, n, attrs, "comm_type", required=True)
        if n.comm_type not in COLL_TYPES:
            raise WorkloadError(path, _where(nid, name), f"unknown comm_type {n.comm_type}")
        if n.comm_type not in SUPPORTED_COLLECTIVES:
            raise WorkloadError(
                path, _where(nid, name),
                f"collective {COLL_TYPES[n.comm_type]} is not supported (ASTRA-sim 2.0 aborts on it too); "
                "supported: ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST",
            )
        inv = attrs.get("involved_dim")
        if inv is not None:
            if inv[0] != "bool_list":
                raise WorkloadError(path, _where(nid, name), "attribute 'involved_dim' must be a bool_list")
            n.involved_dim = list(inv[1])
    elif t == pb.COMM_SEND_NODE:
        n.comm_dst = _get_int(path, n, attrs, "comm_dst")  # Chakra's converter omits it: host_comms.py infers it
        n.comm_tag = _get_int(path, n, attrs, "comm_tag", required=n.comm_dst is not None)
        n.comm_src = _get_int(path, n, attrs, "comm_src")
    elif t == pb.COMM_RECV_NODE:
        n.comm_src = _get_int(path, n, attrs, "comm_src")
        n.comm_tag = _get_int(path, n, attrs, "comm_tag", required=n.comm_src is not None)
        n.comm_dst = _get_int(path, n, attrs, "comm_dst")
    elif t in (pb.MEM_LOAD_NODE, pb.MEM_STORE_NODE):
        n.tensor_size = _get_int(path, n, attrs, "tensor_size", required=True, minimum=0)
    elif t == pb.COMP_NODE:
        if "num_ops" in attrs:
            n.num_ops = _get_int(path, n, attrs, "num_ops", minimum=0)
        if "tensor_size" in attrs:
            n.tensor_size = _get_int(path, n, attrs, "tensor_size", minimum=0)
    return n


def _configured_parse() -> Any:
    """workload/_graph_core.c's parse_node, configured with Node and the constants of the rules
    above: _parse_node for the common node, None where _parse_node must decide (its errors, a
    host-side launcher); None where the extension is not compiled."""
    if GRAPH_CORE is None:
        return None
    GRAPH_CORE.configure_parse(Node, NODE_TYPES, INTEGER_MEMBERS, COLL_TYPES, SUPPORTED_COLLECTIVES,
                               (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.MEM_LOAD_NODE,
                                pb.MEM_STORE_NODE, pb.COMP_NODE), _may_share)
    return GRAPH_CORE.parse_node


_FAST_PARSE = _configured_parse()
