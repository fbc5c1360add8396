"""Recursive halving and doubling (ASTRA-sim: HalvingDoubling.cc).

Each step exchanges one message with the partner ``rank_offset`` ring positions away, clockwise
when ``index_in_ring / rank_offset`` is even and anticlockwise otherwise, so partners pair up.
After every message the offset and the size change by ``offset_multiplier``
(docs/astra-sim-semantics.md §7.2):

* reduce-scatter: offset 1, 2, 4 … N/2 with ``data/2``, ``data/4`` … ``data/N`` bytes;
* all-gather: offset N/2 … 1 with ``data``, ``2·data`` … bytes (the output grows N-fold);
* all-reduce: the reduce-scatter steps, then, when the offset reaches N, the same steps back.

Packets come in groups of one zero-latency and ``log2 N − 1`` non-zero-latency packets (ASTRA-sim
writes ``log2(N) - 1 * parallel_reduce``); the non-zero-latency ones of reduce-scatter, and of
all-reduce's first group, carry a reduction. A bundle is sized with the message size current when
it is inserted, i.e. the size of the message it will send, not of the one just received.
ASTRA-sim does nothing special for N not a power of two: step counts are ``log2 N`` truncated.
"""
from __future__ import annotations

import math
from collections import deque

from system.collective.algorithm import ComType
from system.collective.packet_algorithm import PacketAlgorithm
from system.errors import UnsupportedFeatureError
from system.logical_topology import RingTopology


class HalvingDoubling(PacketAlgorithm):
    """Halving-doubling on one ring dimension (ASTRA-sim: HalvingDoubling). Sizes in bytes."""

    __slots__ = ("rank_offset", "offset_multiplier", "pending")
    FRESH_SLOTS = ("pending",)

    def __init__(self, com_type: ComType, npu_id: int, topology: RingTopology, data_size: int) -> None:
        super().__init__(com_type, npu_id, topology, data_size)
        n = self.nodes_in_ring
        log_n = math.log2(n)
        self.stream_count = int(2 * log_n) if com_type is ComType.ALL_REDUCE else int(log_n)
        if com_type is ComType.ALL_REDUCE:
            self.final_data_size = data_size
            self.msg_size = data_size // 2
            self.rank_offset, self.offset_multiplier = 1, 2.0
        elif com_type is ComType.ALL_GATHER:
            self.final_data_size = data_size * n
            self.msg_size = data_size
            self.rank_offset, self.offset_multiplier = n // 2, 0.5
        elif com_type is ComType.REDUCE_SCATTER:
            self.final_data_size = data_size // n
            self.msg_size = data_size // 2
            self.rank_offset, self.offset_multiplier = 1, 2.0
        else:  # ASTRA-sim exits here too
            raise UnsupportedFeatureError(
                None, "halvingDoubling", f"implements all-reduce, reduce-scatter and all-gather, not {com_type.config_name}")
        self.pending: deque[tuple[int, int]] = deque()  # (partner, size) per packet not yet sent
        self._check_pairing()
        self._find_partner()

    def _check_pairing(self) -> None:
        """Refuse a ring size on which some step's partners do not pair up (N not a power of
        two, except e.g. all-gather on 6): ASTRA-sim waits forever for the missing message.
        Every chunk of every collective asks again: what pairs once is remembered."""
        n, own = self.nodes_in_ring, self.topology.index_in_ring
        key = (n, own, self.com_type, self.stream_count)
        if key in _PAIRED:
            return
        offset, multiplier = self.rank_offset, self.offset_multiplier
        for step in range(self.stream_count):
            partner = _partner_index(own, offset, n)
            if _partner_index(partner, offset, n) != own:
                raise UnsupportedFeatureError(
                    None, "halvingDoubling",
                    f"{self.com_type.config_name} on a ring of {n} NPUs does not pair up: at step {step + 1} "
                    f"position {own} exchanges with {partner}, which exchanges with "
                    f"{_partner_index(partner, offset, n)} (ASTRA-sim never finishes); use a power of two",
                )
            offset = int(offset * multiplier)
            if offset == n and self.com_type is ComType.ALL_REDUCE:
                multiplier = 0.5
                offset = int(offset * multiplier)
        _PAIRED.add(key)

    def _find_partner(self) -> None:
        """The node ``rank_offset`` places away, in the direction that pairs this NPU with it
        (HalvingDoubling::specify_direction)."""
        if self.rank_offset == 0:  # after the last step: ASTRA-sim walks zero places
            self.curr_receiver = self.curr_sender = self.id
            return
        index = _partner_index(self.topology.index_in_ring, self.rank_offset, self.nodes_in_ring)
        self.curr_receiver = self.curr_sender = self.topology.member_at(index)

    def schedule(self) -> list[tuple[int, int, bool]]:
        """(offset, size, carries a reduction) of each packet this phase inserts: its messages
        1..stream_count, then the last packet; stepped on a copy of this algorithm (not yet
        started) with the event path's own methods (for system/shortcuts/phase_batch.py)."""
        from system.sys_core import SYS_CORE

        shadow = self.fresh_copy(SYS_CORE.clone_slots)
        per_group = int(math.log2(self.nodes_in_ring) - 1 * self.parallel_reduce)
        out = []
        for _ in range(self.stream_count + 1):
            processed = shadow._take_packet(per_group)
            out.append((shadow.rank_offset, shadow.msg_size, processed))
            shadow._next_step()
        return out

    # -- packets --------------------------------------------------------------------------
    def insert_packet(self) -> None:
        processed = self._take_packet(int(math.log2(self.nodes_in_ring) - 1 * self.parallel_reduce))
        self.pending.append((self.curr_receiver, self.msg_size))
        self.sys.mem_bus_transfer(self.stream, self.fast, processed, self.msg_size)
        self._next_step()

    def _next_step(self) -> None:
        """Scale offset and size for the next message; all-reduce turns round at offset N
        (HalvingDoubling::process_max_count)."""
        self.rank_offset = int(self.rank_offset * self.offset_multiplier)
        self.msg_size = int(self.msg_size / self.offset_multiplier)
        if self.rank_offset == self.nodes_in_ring and self.com_type is ComType.ALL_REDUCE:
            self.offset_multiplier = 0.5
            self.rank_offset = int(self.rank_offset * self.offset_multiplier)
            self.msg_size = int(self.msg_size / self.offset_multiplier)
        self._find_partner()

    def ready(self) -> bool:
        if not self.pending or self.stream_count == 0 or self.free_packets == 0:
            return False
        partner, size = self.pending.popleft()
        self.sys.collective_send_recv(self.stream, partner, partner, size)
        self._message_sent()
        return True


#: (ring size, position, collective, steps) whose partners pair up at every step
_PAIRED: set[tuple] = set()


def _partner_index(index: int, offset: int, n: int) -> int:
    """Ring position ``offset`` places from ``index``: clockwise when ``index / offset`` is even,
    anticlockwise when odd (HalvingDoubling::specify_direction)."""
    step = 1 if (index // offset) % 2 == 0 else -1
    return (index + step * offset) % n
