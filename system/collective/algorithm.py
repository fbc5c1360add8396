"""Base of the collective algorithms (ASTRA-sim: Algorithm)."""
from __future__ import annotations

from network.choices import IntChoice

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Any, Callable
    from system.stream import StreamBaseline


class ComType(IntChoice):
    """Collective kinds the system layer generates (ASTRA-sim: ComType)."""

    ALL_REDUCE = 0
    ALL_GATHER = 2
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7

    @property
    def config_name(self) -> str:
        return CONFIG_NAMES[self]


CONFIG_NAMES = {0: "all-reduce", 2: "all-gather", 6: "all-to-all", 7: "reduce-scatter"}


class Algorithm:
    """A collective algorithm running one phase of one stream.

    Event entry points, all called by the system layer:
    * ``run_stream_init``: the scheduler started the stream on this phase's queue.
    * ``run_general``: a packet bundle came back from the memory bus (ASTRA-sim: run(General)).
    * ``on_packet_received``: a message of this phase arrived (ASTRA-sim: run(PacketReceived)).
    """

    __slots__ = ("com_type", "id", "data_size", "final_data_size", "enabled", "stream", "sys")

    def __init__(self, com_type: ComType, npu_id: int, data_size: int) -> None:
        self.com_type = com_type
        self.id = npu_id
        self.data_size = data_size
        self.final_data_size = data_size
        self.enabled = True
        self.stream: "StreamBaseline | None" = None
        self.sys = None

    def fresh_copy(self, clone: Callable[[Any], Any]) -> "Algorithm | None":
        """A copy of this algorithm as constructed (``clone`` copies slots), for another stream of
        the same shape; None where the class does not copy (generation runs the constructor)."""
        return None

    def init(self, stream: "StreamBaseline") -> None:
        self.stream = stream
        self.sys = stream.owner

    def run_stream_init(self) -> None:
        raise NotImplementedError

    def run_general(self) -> None:
        raise NotImplementedError

    def on_packet_received(self) -> None:
        raise NotImplementedError

    def exit(self) -> None:
        self.sys.proceed_to_next_vnet_baseline(self.stream)
