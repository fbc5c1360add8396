"""Double binary tree all-reduce (ASTRA-sim: DoubleBinaryTreeAllReduce.cc, logical_topology/
DoubleBinaryTreeTopology.cc, BinaryTree.cc).

Two binary trees span the same NPUs. Consecutive chunks use opposite trees: the topology object
keeps a counter and hands out the root-at-max tree for even calls and the root-at-min tree for odd
ones. ASTRA-sim builds that object once per NPU per collective type (``Sys::logical_topologies``),
and ``Sys`` here caches its logical topologies the same way, so the alternation runs across every
chunk of every collective of that type, as in ASTRA-sim.

Every message is the whole chunk (no per-step splitting). Per chunk (docs/astra-sim-semantics.md
§7.2): a leaf passes its chunk through the memory bus, sends it to its parent, waits for the
parent's result and passes that through the memory bus; an intermediate node reduces the data of
both children (memory bus + reduction each), sends to its parent, reduces the parent's result and
sends it to both children; the root reduces its only child's data and sends it back.
"""
from __future__ import annotations

import functools
import itertools

from network.choices import Choice
from system.collective.algorithm import Algorithm, ComType
from system.errors import UnsupportedFeatureError


class TreeType(Choice):
    """Where the in-order numbering puts the root (ASTRA-sim: BinaryTree::TreeType)."""

    ROOT_MAX = 0
    ROOT_MIN = 1


class NodeType(Choice):
    """A node's role in one tree (ASTRA-sim: BinaryTree::Type)."""

    LEAF = 0
    ROOT = 1
    INTERMEDIATE = 2


class BinaryTree:
    """One tree over ``total_tree_nodes`` NPUs ``start, start + stride, …`` (ASTRA-sim: BinaryTree).

    The shape is a root with a single child, which heads a complete binary tree; NPU ids are
    given in in-order, so the root takes the smallest id (ROOT_MIN) or the largest (ROOT_MAX).
    The tree has 2^floor(log2 N) nodes, so N must be a power of two.
    """

    __slots__ = ("tree_type", "total_tree_nodes", "start", "stride", "parent", "left", "right")

    def __init__(self, tree_type: TreeType, total_tree_nodes: int, start: int, stride: int) -> None:
        self.tree_type = tree_type
        self.total_tree_nodes = total_tree_nodes
        self.start = start
        self.stride = stride
        self.parent: dict[int, int] = {}
        self.left: dict[int, int] = {}
        self.right: dict[int, int] = {}
        depth = 1
        tmp = total_tree_nodes
        while tmp > 1:
            depth += 1
            tmp //= 2
        ids = itertools.count(start, stride)
        if tree_type is TreeType.ROOT_MIN:
            root = next(ids)
            child = self._build(depth - 1, ids)
            self._link(root, child, self.right)
        else:
            child = self._build(depth - 1, ids)
            root = next(ids)
            self._link(root, child, self.left)
        self.parent[root] = -1

    def _build(self, levels: int, ids: "itertools.count[int]") -> int | None:
        """Number a complete subtree of ``levels`` levels in in-order; return its root's id."""
        if levels < 1:
            return None
        left = self._build(levels - 1, ids)
        me = next(ids)
        right = self._build(levels - 1, ids)
        self._link(me, left, self.left)
        self._link(me, right, self.right)
        return me

    def _link(self, node: int, child: int | None, side: dict[int, int]) -> None:
        if child is not None:
            side[node] = child
            self.parent[child] = node

    def _check(self, npu_id: int) -> None:
        if npu_id not in self.parent:
            raise UnsupportedFeatureError(
                None, "doubleBinaryTree",
                f"a tree dimension of {self.total_tree_nodes} NPUs holds only "
                f"{len(self.parent)} tree nodes, so NPU {npu_id} is in no tree; use a power of two "
                "(ASTRA-sim crashes here)",
            )

    def get_parent_id(self, npu_id: int) -> int:
        self._check(npu_id)
        return self.parent[npu_id]

    def get_left_child_id(self, npu_id: int) -> int:
        return self.left.get(npu_id, -1)

    def get_right_child_id(self, npu_id: int) -> int:
        return self.right.get(npu_id, -1)

    def get_node_type(self, npu_id: int) -> NodeType:
        self._check(npu_id)
        if self.parent[npu_id] == -1:
            return NodeType.ROOT
        if npu_id not in self.left and npu_id not in self.right:
            return NodeType.LEAF
        return NodeType.INTERMEDIATE


@functools.lru_cache(maxsize=1024)
def _tree(tree_type: TreeType, total_tree_nodes: int, start: int, stride: int) -> BinaryTree:
    """Every NPU of a dimension asks for the same two trees, which nothing changes once built:
    built once, not once per NPU (256 NPUs: 262,000 recursive calls, half the run's 0.4 s)."""
    return BinaryTree(tree_type, total_tree_nodes, start, stride)


class DoubleBinaryTreeTopology:
    """The two trees of one logical dimension and the counter that alternates them per chunk
    (ASTRA-sim: DoubleBinaryTreeTopology)."""

    __slots__ = ("id", "dbmax", "dbmin", "counter")

    def __init__(self, npu_id: int, total_tree_nodes: int, start: int, stride: int) -> None:
        self.id = npu_id
        self.dbmax = _tree(TreeType.ROOT_MAX, total_tree_nodes, start, stride)
        self.dbmin = _tree(TreeType.ROOT_MIN, total_tree_nodes, start, stride)
        self.counter = 0

    def get_topology(self) -> BinaryTree:
        """The tree for the next chunk: root-at-max first, then root-at-min, and so on."""
        tree = self.dbmax if self.counter % 2 == 0 else self.dbmin
        self.counter += 1
        return tree

    @property
    def num_nodes(self) -> int:
        return self.dbmin.total_tree_nodes


class State(Choice):
    """Where a node is in one chunk's all-reduce (ASTRA-sim: DoubleBinaryTreeAllReduce::State)."""

    BEGIN = 0
    WAITING_FOR_TWO_CHILD_DATA = 1
    WAITING_FOR_ONE_CHILD_DATA = 2
    SENDING_DATA_TO_PARENT = 3
    WAITING_DATA_FROM_PARENT = 4
    SENDING_DATA_TO_CHILDREN = 5
    END = 6


class DoubleBinaryTreeAllReduce(Algorithm):
    """All-reduce of one chunk over one binary tree (ASTRA-sim: DoubleBinaryTreeAllReduce).

    Whatever collective the phase was asked for, this runs an all-reduce, as in ASTRA-sim.
    Every state is set before a receive is posted (ASTRA-sim PR #306): a message that has
    already arrived calls back, and must find the next state.
    """

    __slots__ = ("state", "reductions", "parent", "left_child", "right_child", "type")

    def __init__(self, npu_id: int, topology: "BinaryTree | DoubleBinaryTreeTopology", data_size: int) -> None:
        super().__init__(ComType.ALL_REDUCE, npu_id, data_size)
        # Sys hands over the dimension's DoubleBinaryTreeTopology; taking the tree here is
        # ASTRA-sim's one get_topology() call per phase (GeneralComplexTopology::
        # get_basic_topology_at_dimension), so the trees alternate per chunk.
        tree = topology.get_topology() if isinstance(topology, DoubleBinaryTreeTopology) else topology
        self.type = tree.get_node_type(npu_id)
        self.parent = tree.get_parent_id(npu_id)
        self.left_child = tree.get_left_child_id(npu_id)
        self.right_child = tree.get_right_child_id(npu_id)
        self.state = State.BEGIN
        self.reductions = 0

    @property
    def only_child(self) -> int:
        return self.left_child if self.left_child >= 0 else self.right_child

    def _through_mem_bus(self, reduce: bool) -> None:
        self.sys.mem_bus_transfer(self.stream, False, reduce, self.data_size)

    # -- events ---------------------------------------------------------------------------
    def run_stream_init(self) -> None:
        t = self.type
        if t is NodeType.LEAF:
            self.state = State.SENDING_DATA_TO_PARENT
            self._through_mem_bus(False)
        elif t is NodeType.INTERMEDIATE:
            self.state = State.WAITING_FOR_TWO_CHILD_DATA
            self.sys.collective_recv(self.stream, self.left_child, self.data_size)
            self.sys.collective_recv(self.stream, self.right_child, self.data_size)
        else:
            self.state = State.WAITING_FOR_ONE_CHILD_DATA
            self.sys.collective_recv(self.stream, self.only_child, self.data_size)

    def on_packet_received(self) -> None:
        state, t = self.state, self.type
        if t is NodeType.LEAF:
            if state is State.WAITING_DATA_FROM_PARENT:
                self.state = State.END
                self._through_mem_bus(False)
        elif t is NodeType.INTERMEDIATE:
            if state is State.WAITING_FOR_TWO_CHILD_DATA:
                self.state = State.WAITING_FOR_ONE_CHILD_DATA
                self._through_mem_bus(True)
            elif state is State.WAITING_FOR_ONE_CHILD_DATA:
                self.state = State.SENDING_DATA_TO_PARENT
                self._through_mem_bus(True)
            elif state is State.WAITING_DATA_FROM_PARENT:
                self.state = State.SENDING_DATA_TO_CHILDREN
                self._through_mem_bus(True)
        elif state is State.WAITING_FOR_ONE_CHILD_DATA:
            self.state = State.SENDING_DATA_TO_CHILDREN
            self._through_mem_bus(True)

    def run_general(self) -> None:
        """A memory-bus bundle came back: the next send, or the end of the chunk."""
        state, t = self.state, self.type
        if t is NodeType.LEAF:
            if state is State.SENDING_DATA_TO_PARENT:
                self._exchange_with_parent()
            elif state is State.END:
                self.exit()
        elif t is NodeType.INTERMEDIATE:
            if self.reductions < 1:
                # the first child's reduction only counts; the second one moves on
                self.reductions += 1
            elif state is State.SENDING_DATA_TO_PARENT:
                self._exchange_with_parent()
            elif state is State.SENDING_DATA_TO_CHILDREN:
                self.sys.collective_send(self.stream, self.left_child, self.data_size)
                self.sys.collective_send(self.stream, self.right_child, self.data_size)
                self.exit()
        elif state is State.SENDING_DATA_TO_CHILDREN:
            self.sys.collective_send(self.stream, self.only_child, self.data_size)
            self.exit()

    def _exchange_with_parent(self) -> None:
        self.state = State.WAITING_DATA_FROM_PARENT
        self.sys.collective_send(self.stream, self.parent, self.data_size)
        self.sys.collective_recv(self.stream, self.parent, self.data_size)
