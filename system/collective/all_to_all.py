"""Direct collective: every peer at once, or ``window`` peers at a time (ASTRA-sim: AllToAll.cc).

ASTRA-sim's ``direct`` / ``directN`` / ``oneDirect[N]`` implementations. The class derives from
Ring and keeps its packet machinery, with three differences (docs/astra-sim-semantics.md §7.2):

* ``parallel_reduce`` is the window (N−1 peers by default): StreamInit injects that many packets,
  and a packet group is ``window`` zero-latency packets followed by ``window`` non-zero-latency
  ones (``window × (N−1)`` on the "local" rings of communicator groups).
* Each packet is addressed when it is inserted: after every insertion the receiver moves one
  place on and the sender one place back, skipping this NPU, so the k-th packet goes to the
  k-th peer (ASTRA-sim: AllToAll::process_max_count).
* All-reduce sends ``2(N−1)`` messages of ``data/N`` bytes. Its second half (the all-gather) does
  not start until all N−1 messages of the first half have arrived; then each returning bundle
  sends up to ``window`` messages at once.

All-to-all sends N−1 messages of ``data/N`` bytes (Ring would relay N(N−1)/2 of them).
"""
from __future__ import annotations

from collections import deque

from system.collective.algorithm import ComType
from system.collective.ring import Ring
from system.logical_topology import Direction, RingTopology


class AllToAll(Ring):
    """The direct algorithm on one ring dimension (ASTRA-sim: AllToAll). Sizes in bytes."""

    __slots__ = ("middle_point", "pending", "_receiver_index", "_sender_index", "_step")
    FRESH_SLOTS = ("pending",)

    def __init__(self, com_type: ComType, window: int, npu_id: int, topology: RingTopology,
                 data_size: int, direction: Direction) -> None:
        super().__init__(com_type, npu_id, topology, data_size, direction)
        n = self.nodes_in_ring
        self.middle_point = n - 1
        self.parallel_reduce = n - 1 if window == -1 else min(window, n - 1)
        if com_type is ComType.ALL_TO_ALL:
            self.stream_count = n - 1
        # (destination, source) of each inserted packet not yet sent, oldest first
        # (ASTRA-sim: Ring::packets, MyPacket::preferred_dest / preferred_src)
        self.pending: deque[tuple[int, int]] = deque()
        self._step = 1 if direction is Direction.CLOCKWISE else -1
        own = topology.index_in_ring
        self._receiver_index = (own + self._step) % n
        self._sender_index = (own - self._step) % n

    # -- events ---------------------------------------------------------------------------
    def run_general(self) -> None:
        self.free_packets += 1
        if self.com_type is ComType.ALL_REDUCE and self.stream_count <= self.middle_point:
            # the all-gather half waits for every reduce-scatter message (AllToAll::run)
            if self.total_packets_received < self.middle_point:
                return
            for _ in range(self.parallel_reduce):
                if not self.ready():  # nothing changed, so every further call would say no too
                    break
        else:
            self.ready()
        self.iteratable()

    # -- packets --------------------------------------------------------------------------
    def insert_packet(self) -> None:
        # AllToAll::get_non_zero_latency_packets: one round of the window, except on
        # communicator-group rings (RingTopology::Dimension::Local)
        rounds = self.nodes_in_ring - 1 if self.topology.local else 1
        processed = self._take_packet(self.parallel_reduce * rounds)
        self.pending.append((self.curr_receiver, self.curr_sender))
        self.sys.mem_bus_transfer(self.stream, self.fast, processed, self.msg_size)
        self._next_peers()

    def _next_peers(self) -> None:
        """Move the receiver one place on and the sender one place back, skipping this NPU."""
        n, step, own, topo = self.nodes_in_ring, self._step, self.topology.index_in_ring, self.topology
        i = (self._receiver_index + step) % n
        if i == own:
            i = (i + step) % n
        self._receiver_index = i
        self.curr_receiver = topo.member_at(i)
        i = (self._sender_index - step) % n
        if i == own:
            i = (i - step) % n
        self._sender_index = i
        self.curr_sender = topo.member_at(i)

    def ready(self) -> bool:
        if not self.pending or self.stream_count == 0 or self.free_packets == 0:
            return False
        dst, src = self.pending.popleft()
        self.sys.collective_send_recv(self.stream, dst, src, self.msg_size)
        self._message_sent()
        return True
