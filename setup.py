"""The one thing pyproject.toml cannot say: network/_event_core.c, the event queue in C,
network/_aware_links.c, the congestion-aware links, network/_pairing.c, the send/receive pairing,
system/_sys_core.c, the system layer's per-message ring path (with system/_feeder.c, the workload's
feeder, and system/_ring_recurrence.c, the batched ring phases' recurrence), chakra_proto/_wire_core.c, the ET
node decoder, and workload/_graph_core.c, the parsing and linking of a workload's nodes.

It is optional: without a C compiler pip install still succeeds and the simulator runs the
Python queue (network/event_queue.py), with the same results, slower."""
import importlib.util
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
# network/native_build.py by its path: importing the package here would need its dependencies
_spec = importlib.util.spec_from_file_location("native_build", HERE / "network" / "native_build.py")
native_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(native_build)

setup(ext_modules=[
    Extension(
        "network._event_core", ["network/_event_core.c", "network/_aware_links.c", "network/_pairing.c"],
        depends=["network/_event_core.h", "network/_long_map.h"], optional=True,
        define_macros=[("DTSIM_SOURCE_CHECKSUM", f'"{native_build.source_checksum(HERE / "network")}"')],
    ),
    Extension(
        "system._sys_core", ["system/_sys_core.c", "system/_feeder.c", "system/_ring_recurrence.c"],
        include_dirs=["network"], optional=True,
        depends=["network/_event_core.h", "network/_long_map.h", "system/_feeder.h", "system/_ring_recurrence.h"],
        define_macros=[("DTSIM_SOURCE_CHECKSUM",
                        f'"{native_build.source_checksum(HERE / "system", native_build.SYSTEM_SOURCES)}"')],
    ),
    Extension(
        "chakra_proto._wire_core", ["chakra_proto/_wire_core.c"], optional=True,
        define_macros=[("DTSIM_SOURCE_CHECKSUM",
                        f'"{native_build.source_checksum(HERE / "chakra_proto", native_build.WIRE_SOURCES)}"')],
    ),
    Extension(
        "workload._graph_core", ["workload/_graph_core.c"], optional=True,
        define_macros=[("DTSIM_SOURCE_CHECKSUM",
                        f'"{native_build.source_checksum(HERE / "workload", native_build.GRAPH_SOURCES)}"')],
    ),
])
