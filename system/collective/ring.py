"""Ring collective (ASTRA-sim: Ring.cc).

Each step sends ``msg_size`` bytes to the ring successor and receives from the predecessor.
Packets come in groups of one "zero-latency" packet (through the memory bus towards the
memory accelerator) followed by N−1 "non-zero-latency" ones; the latter carry a reduction
(3 × msg_size / local-mem-bw) for reduce-scatter, and for all-reduce in the first group only
(docs/astra-sim-semantics.md §7.2).
"""
from __future__ import annotations

from system.collective.algorithm import Algorithm, ComType
from system.logical_topology import Direction, RingTopology


class Ring(Algorithm):
    __slots__ = ("topology", "direction", "nodes_in_ring", "curr_receiver", "curr_sender",
                 "parallel_reduce", "stream_count", "msg_size", "toggle", "zero_latency_packets",
                 "non_zero_latency_packets", "packets", "free_packets", "remained_packets_per_message",
                 "fast", "total_packets_received")

    def __init__(self, com_type: ComType, npu_id: int, topology: RingTopology, data_size: int,
                 direction: Direction) -> None:
        super().__init__(com_type, npu_id, data_size)
        self.topology = topology
        self.direction = direction
        n = self.nodes_in_ring = topology.nodes_in_ring
        self.curr_receiver = topology.get_receiver(direction)
        self.curr_sender = topology.get_sender(direction)
        self.parallel_reduce = 1  # InjectionPolicy::Normal, the only one ASTRA-sim generates
        self.fast = topology.local
        if com_type is ComType.ALL_REDUCE:
            self.stream_count = 2 * (n - 1)
        elif com_type is ComType.ALL_TO_ALL:
            self.stream_count = (n - 1) * n // 2
        else:
            self.stream_count = n - 1
        if com_type is ComType.ALL_REDUCE:
            self.final_data_size = data_size
            self.msg_size = data_size // n
        elif com_type is ComType.ALL_GATHER:
            self.final_data_size = data_size * n
            self.msg_size = data_size
        elif com_type is ComType.REDUCE_SCATTER:
            self.final_data_size = data_size // n
            self.msg_size = data_size // n
        else:  # all-to-all
            self.final_data_size = data_size
            self.msg_size = data_size // n
        self.toggle = False
        self.zero_latency_packets = 0
        self.non_zero_latency_packets = 0
        self.packets = 0
        self.free_packets = 0
        self.remained_packets_per_message = 1
        self.total_packets_received = 0

    def run_stream_init(self) -> None:
        for _ in range(self.parallel_reduce):
            self.insert_packet()

    def run_general(self) -> None:
        self.free_packets += 1
        self.ready()
        self.iteratable()

    def on_packet_received(self) -> None:
        self.total_packets_received += 1
        self.insert_packet()

    def insert_packet(self) -> None:
        if self.zero_latency_packets == 0 and self.non_zero_latency_packets == 0:
            self.zero_latency_packets = self.parallel_reduce
            self.non_zero_latency_packets = (self.nodes_in_ring - 1) * self.parallel_reduce
            self.toggle = not self.toggle
        self.packets += 1
        if self.zero_latency_packets > 0:
            self.zero_latency_packets -= 1
            self.sys.mem_bus_transfer(self.stream, self.fast, False, self.msg_size)
            return
        processed = self.com_type is ComType.REDUCE_SCATTER or (
            self.com_type is ComType.ALL_REDUCE and self.toggle)
        self.non_zero_latency_packets -= 1
        self.sys.mem_bus_transfer(self.stream, self.fast, processed, self.msg_size)

    def ready(self) -> bool:
        if self.packets == 0 or self.stream_count == 0 or self.free_packets == 0:
            return False
        stream = self.stream
        self.sys.collective_send_recv(stream, self.curr_receiver, self.curr_sender, self.msg_size)
        # reduce(): one message of this step is out
        if self.remained_packets_per_message > 0:
            self.remained_packets_per_message -= 1
        if self.remained_packets_per_message == 0 and self.stream_count > 0:
            self.stream_count -= 1
            if self.stream_count > 0:
                self.remained_packets_per_message = 1
        self.packets -= 1
        self.free_packets -= 1
        return True

    def iteratable(self) -> bool:
        if self.stream_count == 0 and self.free_packets == self.parallel_reduce:
            self.exit()
            return False
        return True
