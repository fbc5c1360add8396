"""The packet machinery Ring, Direct (AllToAll) and HalvingDoubling share (ASTRA-sim: Ring.cc,
which the other two copy or derive from).

Packets come in groups of ``parallel_reduce`` "zero-latency" packets (through the memory bus
towards the memory accelerator) followed by the "non-zero-latency" ones; the latter carry a
reduction (3 × msg_size / local-mem-bw) for reduce-scatter, and for all-reduce in the first
group only (docs/astra-sim-semantics.md §7.2). A packet back from the memory bus frees a slot
(``run_general``); each message sent counts down ``stream_count``; the phase ends when every
message is out and every slot is back.
"""
from __future__ import annotations

from system.collective.algorithm import Algorithm, ComType
from system.logical_topology import RingTopology

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable


class PacketAlgorithm(Algorithm):
    __slots__ = ("topology", "nodes_in_ring", "curr_receiver", "curr_sender", "parallel_reduce",
                 "stream_count", "msg_size", "toggle", "zero_latency_packets", "non_zero_latency_packets",
                 "free_packets", "remained_packets_per_message", "fast", "total_packets_received")

    def __init__(self, com_type: ComType, npu_id: int, topology: RingTopology, data_size: int) -> None:
        super().__init__(com_type, npu_id, data_size)
        self.topology = topology
        self.nodes_in_ring = topology.nodes_in_ring
        self.curr_receiver = self.curr_sender = npu_id
        self.parallel_reduce = 1  # InjectionPolicy::Normal, the only one ASTRA-sim generates
        self.stream_count = 0
        self.msg_size = 0
        self.toggle = False
        self.zero_latency_packets = 0
        self.non_zero_latency_packets = 0
        self.free_packets = 0
        self.remained_packets_per_message = 1
        self.fast = topology.local  # group rings: MemBus's fixed 10-cycle "fast" delay
        self.total_packets_received = 0

    #: slots that hold a container of the algorithm's own (empty before a stream runs): a copy
    #: gets a new empty one of the same type, every other slot is shared
    FRESH_SLOTS: tuple[str, ...] = ()

    def fresh_copy(self, clone: Callable[[Any], Any]) -> "PacketAlgorithm | None":
        """Called on an algorithm no stream has run: every slot is a number, a shared immutable,
        None, or an empty container named in FRESH_SLOTS, so ``clone``'s shallow copy
        (system/_sys_core.c: clone_slots) with new containers is the state the constructor would
        give (system/_sys_core.c: clone_fresh does the same in one call)."""
        c = clone(self)
        for name in self.FRESH_SLOTS:
            setattr(c, name, type(getattr(self, name))())
        return c

    # -- events ---------------------------------------------------------------------------
    def run_stream_init(self) -> None:
        fast = getattr(self.sys, "_fast", None)
        if fast is not None:  # the same insertions in C (system/_sys_core.c): direct starts N-1 at once
            fast.insert_packets(self, self.parallel_reduce)
            return
        for _ in range(self.parallel_reduce):
            self.insert_packet()

    def run_general(self) -> None:
        self.free_packets += 1
        self.ready()
        self.iteratable()

    def on_packet_received(self) -> None:
        self.total_packets_received += 1
        self.insert_packet()

    # -- what subclasses provide ----------------------------------------------------------
    def insert_packet(self) -> None:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    # -- shared steps ---------------------------------------------------------------------
    def _take_packet(self, non_zero_per_group: int) -> bool:
        """Account one more packet of the current group, starting a new group (and flipping
        ``toggle``) when the last one is used up; True when the packet carries a reduction."""
        if self.zero_latency_packets == 0 and self.non_zero_latency_packets == 0:
            self.zero_latency_packets = self.parallel_reduce
            self.non_zero_latency_packets = non_zero_per_group
            self.toggle = not self.toggle
        if self.zero_latency_packets > 0:
            self.zero_latency_packets -= 1
            return False
        self.non_zero_latency_packets -= 1
        return self.com_type is ComType.REDUCE_SCATTER or (self.com_type is ComType.ALL_REDUCE and self.toggle)

    def _message_sent(self) -> None:
        """One message of this step is out: count it and take its slot (Ring::reduce)."""
        if self.remained_packets_per_message > 0:
            self.remained_packets_per_message -= 1
        if self.remained_packets_per_message == 0 and self.stream_count > 0:
            self.stream_count -= 1
            if self.stream_count > 0:
                self.remained_packets_per_message = 1
        self.free_packets -= 1

    def iteratable(self) -> bool:
        if self.stream_count == 0 and self.free_packets == self.parallel_reduce:
            self.exit()
            return False
        return True
