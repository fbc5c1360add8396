"""The pairs of ranks a workload sends between, found by running it on the congestion-unaware
backend first.

ns-3 opens a TCP connection per pair before time 0 (``ns3.preconnect``, as NCCL connects at
communicator creation). Opening every pair of a dimension group costs ~1 ms of set-up each
(16,256 pairs at 128 GPUs: 15 s; at 1,024 GPUs a million, which were not opened at all, so every
pair paid a handshake on its first message). The pairs an algorithm talks over do not depend on
the network's timing, so a run on this backend (with the ring batcher: about a second at 1,024
ranks) names them, and ns-3 opens only those. A connection nobody uses carries nothing after its
handshake, so the answer is the one of opening them all.
"""
from __future__ import annotations

from network.analytical.base import Message
from network.analytical.unaware import CongestionUnawareBackend


class PairRecorder(CongestionUnawareBackend):
    name = "congestion-unaware"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pairs: set[tuple[int, int]] = set()

    def _transfer(self, src: int, dst: int, size_bytes: int, msg: Message) -> None:
        self.pairs.add((src, dst))
        super()._transfer(src, dst, size_bytes, msg)

    def _graph_transfer(self, src: int, dst: int, size_bytes: int, msg: Message) -> None:
        self.pairs.add((src, dst))
        super()._graph_transfer(src, dst, size_bytes, msg)

    def account_flows(self, flows: list[tuple[int, int]], size_bytes: int, count: int) -> None:
        self.pairs.update(flows)
        super().account_flows(flows, size_bytes, count)
