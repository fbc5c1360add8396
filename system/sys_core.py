"""The system layer's per-message path of ring, direct and halving-doubling in C, and the moves of
every stream between its phases and queues (system/_sys_core.c), where pip install compiled it:
``SYS_CORE`` is that module, configured with the classes whose slots it reads, or None where the
Python methods run (not compiled, ``DTSIM_PURE_PYTHON=1``, or compiled from other sources).
``Sys`` decides per run whether it applies (see ``Sys.__init__``); the results are the same
either way, and tests hold the two to every cycle."""
from __future__ import annotations

import os
from types import ModuleType

from network.native_build import SYSTEM_SOURCES, load_checked


def _load() -> ModuleType | None:
    mod = load_checked("system._sys_core", os.path.dirname(os.path.realpath(__file__)), SYSTEM_SOURCES)
    if mod is None:
        return None
    from system.collective.algorithm import Algorithm, ComType
    from system.collective.all_to_all import AllToAll
    from system.collective.halving_doubling import HalvingDoubling
    from system.collective.ring import Ring
    from system.logical_topology import RingTopology
    from system.scheduler_unit import SchedulerUnit
    from system.stream import CollectivePhase, DataSet, StreamBaseline

    mod.configure(Ring, StreamBaseline, CollectivePhase, DataSet, ComType.ALL_REDUCE, ComType.REDUCE_SCATTER,
                  AllToAll, RingTopology, HalvingDoubling, SchedulerUnit, Algorithm)
    return mod


SYS_CORE = _load()
