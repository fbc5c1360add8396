"""Chunks of a collective and their bookkeeping (ASTRA-sim: DataSet, CollectivePhase, StreamBaseline)."""
from __future__ import annotations

from network.records import record

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)

if TYPE_CHECKING:
    from typing import Callable
    from system.collective.algorithm import Algorithm
    from system.sys import Sys


@record
class CollectiveLabel:
    """A collective's identity, carried by each of its messages: the network refuses to pair a
    message with a receive of another collective (network.errors.MessageMismatchError)."""

    com_type: str  # all-reduce, all-gather, ...
    size: int  # bytes the rank asked for
    group: int | None  # communicator group id; None: the whole network
    seq: int  # 1 for the rank's first collective on that group, 2 for the next, ...

    def __str__(self) -> str:
        where = "all ranks" if self.group is None else f"communicator group {self.group}"
        return f"{self.com_type} of {self.size} bytes (collective #{self.seq} on {where})"


class DataSet:
    """One collective on one NPU: counts its finished streams, then notifies (ASTRA-sim: DataSet)."""

    __slots__ = ("my_id", "total_streams", "finished_streams", "finished", "active",
                 "creation_tick", "finish_tick", "notifier", "label")

    def __init__(self, my_id: int, total_streams: int, now: int, label: CollectiveLabel | None = None) -> None:
        self.my_id = my_id
        self.label = label
        self.total_streams = total_streams
        self.finished_streams = 0
        self.finished = False
        self.active = True
        self.creation_tick = now
        self.finish_tick = 0
        self.notifier: Callable[["DataSet"], None] | None = None

    def notify_stream_finished(self, now: int) -> None:
        self.finished_streams += 1
        if self.finished_streams == self.total_streams:
            self.finished = True
            self.finish_tick = now
            notifier, self.notifier = self.notifier, None
            if notifier is not None:
                notifier(self)


class CollectivePhase:
    """One step of a stream: an algorithm on one logical dimension, on one queue."""

    __slots__ = ("queue_id", "algorithm", "initial_data_size", "final_data_size", "comm_type", "enabled")

    def __init__(self, queue_id: int, algorithm: "Algorithm") -> None:
        self.queue_id = queue_id
        self.algorithm = algorithm
        self.initial_data_size = algorithm.data_size
        self.final_data_size = algorithm.final_data_size
        self.comm_type = algorithm.com_type
        self.enabled = algorithm.enabled


class StreamBaseline:
    """A chunk of one collective, moving through one phase per logical dimension.
    Sizes in bytes (ASTRA-sim: StreamBaseline / BaseStream)."""

    __slots__ = ("owner", "dataset", "stream_id", "phases_to_go", "priority", "steps_finished",
                 "current_queue_id", "current_com_type", "my_current_phase", "initialized")

    def __init__(self, owner: "Sys", dataset: DataSet, stream_id: int,
                 phases: list[CollectivePhase], priority: int) -> None:
        self.owner = owner
        self.dataset = dataset
        self.stream_id = stream_id
        self.phases_to_go = phases
        self.priority = priority
        self.steps_finished = 0
        self.current_queue_id = -1
        self.current_com_type = None
        self.my_current_phase: CollectivePhase | None = None
        self.initialized = False
        for ph in phases:
            ph.algorithm.init(self)

    def init(self) -> None:
        """Start the current phase's algorithm (ASTRA-sim: StreamBaseline::init)."""
        self.initialized = True
        phase = self.my_current_phase
        if not phase.enabled:
            return
        phase.algorithm.run_stream_init()
