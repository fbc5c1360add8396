"""Ring collective (ASTRA-sim: Ring.cc).

Each step sends ``msg_size`` bytes to the ring successor and receives from the predecessor;
packet groups are one zero-latency packet and N−1 non-zero-latency ones
(system/collective/packet_algorithm.py, docs/astra-sim-semantics.md §7.2).
"""
from __future__ import annotations

from system.collective.algorithm import ComType
from system.collective.packet_algorithm import PacketAlgorithm
from system.logical_topology import Direction, RingTopology


class Ring(PacketAlgorithm):
    """The ring algorithm on one ring (ASTRA-sim: Ring). Sizes in bytes."""

    __slots__ = ("direction", "packets", "_batch_group")

    def __init__(self, com_type: ComType, npu_id: int, topology: RingTopology, data_size: int,
                 direction: Direction) -> None:
        super().__init__(com_type, npu_id, topology, data_size)
        self.direction = direction
        n = self.nodes_in_ring
        self.curr_receiver = topology.get_receiver(direction)
        self.curr_sender = topology.get_sender(direction)
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
        self.packets = 0
        self._batch_group = None

    def run_stream_init(self) -> None:
        batcher = self.sys.ring_batcher
        if batcher is None or not batcher.join(self):
            super().run_stream_init()

    def finish_batched(self, messages: int, processed: bool) -> None:
        """The batcher's hand-back at the last receive (system/shortcuts/ring_batch.py): every message is
        out and in, so the state is that of the event path here, and the last packet's trip
        through the memory bus ends the phase as there."""
        self.sys.ring_batcher.exited(self)
        self.total_packets_received = messages
        self.stream_count = 0
        self.free_packets = 0
        self.packets = 1
        self.sys.mem_bus_transfer(self.stream, self.fast, processed, self.msg_size)

    def schedule(self) -> list[tuple[int, int, bool]]:
        """(0, size, carries a reduction) of each packet this phase inserts: its messages
        1..stream_count, then the last packet; stepped on a copy of this algorithm (not yet
        started) with the event path's own method (for system/shortcuts/phase_batch.py)."""
        from system.sys_core import SYS_CORE

        shadow = self.fresh_copy(SYS_CORE.clone_slots)
        per_group = (self.nodes_in_ring - 1) * self.parallel_reduce
        return [(0, self.msg_size, shadow._take_packet(per_group)) for _ in range(self.stream_count + 1)]

    def insert_packet(self) -> None:
        processed = self._take_packet((self.nodes_in_ring - 1) * self.parallel_reduce)
        self.packets += 1
        self.sys.mem_bus_transfer(self.stream, self.fast, processed, self.msg_size)

    def ready(self) -> bool:
        if self.packets == 0 or self.stream_count == 0 or self.free_packets == 0:
            return False
        self.sys.collective_send_recv(self.stream, self.curr_receiver, self.curr_sender, self.msg_size)
        self.packets -= 1
        self._message_sent()
        return True
