"""Remote memory for MEM_LOAD / MEM_STORE nodes (ASTRA-sim: astra-memory-analytical).

``memory-type``: NO_MEMORY_EXPANSION (such nodes are an error), PER_NPU_MEMORY_EXPANSION (each
access takes latency + trunc(size / bw), bw in bytes/ns, all in parallel), PER_NODE_MEMORY_EXPANSION
(one FIFO per node of ``num-npus-per-node`` NPUs) and MEMORY_POOL (one FIFO for all NPUs, so
ranks finish staggered). Keys: ``remote-mem-latency`` (ns), ``remote-mem-bw`` (bytes/ns).
"""
from __future__ import annotations

import os
from collections import deque

from network.files import loads_json, path_str
from system.errors import RemoteMemoryConfigError, UnsupportedFeatureError

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Callable

_TYPES = ("NO_MEMORY_EXPANSION", "PER_NPU_MEMORY_EXPANSION", "PER_NODE_MEMORY_EXPANSION", "MEMORY_POOL")
_KEYS = {"memory-type", "remote-mem-latency", "remote-mem-bw", "num-nodes", "num-npus-per-node"}
_MAX_VALUE = 2 ** 63  # ASTRA-sim keeps these in 64-bit integers and doubles


class RemoteMemory:
    def __init__(self, mem_type: str, latency_ns: int, bw_bytes_per_ns: float, npus_per_node: int,
                 path: str | None) -> None:
        self.mem_type = mem_type
        self.latency_ns = latency_ns
        self.bw = bw_bytes_per_ns
        self.npus_per_node = npus_per_node
        self.path = path
        self.systems: dict[int, Any] = {}
        self._busy: dict[int, bool] = {}
        self._pending: dict[int, deque] = {}

    def attach(self, sys: Any) -> None:
        self.systems[sys.id] = sys

    def runtime_ns(self, size: int) -> int:
        if self.bw <= 0:
            raise RemoteMemoryConfigError(self.path, "key 'remote-mem-bw'", "must be > 0 to model memory accesses")
        try:
            return self.latency_ns + int(float(size) / self.bw)
        except OverflowError:  # a bandwidth like 1e-320 bytes/ns
            raise RemoteMemoryConfigError(
                self.path, "key 'remote-mem-bw'", f"{self.bw!r} bytes/ns is too small: an access of {size} bytes "
                "would take longer than any simulated time") from None

    def _pool_of(self, rank: int) -> int | None:
        if self.mem_type == "MEMORY_POOL":
            return 0
        if self.mem_type == "PER_NODE_MEMORY_EXPANSION":
            return rank // self.npus_per_node
        return None

    def issue(self, rank: int, size: int, callback: Callable[..., None], *args: object) -> None:
        if self.mem_type == "NO_MEMORY_EXPANSION":
            raise UnsupportedFeatureError(
                self.path, "memory-type",
                "the workload has MEM_LOAD/MEM_STORE nodes but the remote memory is NO_MEMORY_EXPANSION; "
                "use PER_NPU_MEMORY_EXPANSION or MEMORY_POOL",
            )
        pool = self._pool_of(rank)
        if pool is None:
            self.systems[rank].register_event(self.runtime_ns(size), callback, *args)
            return
        if self._busy.get(pool):
            self._pending.setdefault(pool, deque()).append((rank, size, callback, args))
            return
        self._start(pool, rank, size, callback, args)

    def _start(self, pool: int, rank: int, size: int, callback: Callable[..., None], args: tuple) -> None:
        sys = self.systems[rank]
        rt = self.runtime_ns(size)
        sys.register_event(rt, callback, *args)
        sys.register_event(rt, self._served, pool)
        self._busy[pool] = True

    def _served(self, pool: int) -> None:
        q = self._pending.get(pool)
        if q:
            rank, size, callback, args = q.popleft()
            self._start(pool, rank, size, callback, args)
        else:
            self._busy[pool] = False


def load_remote_memory(path: str | os.PathLike, npus_count: int) -> RemoteMemory:
    p = path_str(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise RemoteMemoryConfigError(p, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RemoteMemoryConfigError(p, "", f"cannot read ({e})") from None
    try:
        data = loads_json(text)
    except ValueError as e:
        if getattr(e, "lineno", None) is None:  # not a json.JSONDecodeError
            raise
        raise RemoteMemoryConfigError(p, f"line {e.lineno}, column {e.colno}", f"not valid JSON ({e.msg})") from None
    if not isinstance(data, dict):
        raise RemoteMemoryConfigError(p, "", "expected a JSON object with key 'memory-type'")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise RemoteMemoryConfigError(p, f"key {unknown[0]!r}", f"unknown key; expected {', '.join(sorted(_KEYS))}")
    mt = data.get("memory-type", "NO_MEMORY_EXPANSION")
    if mt not in _TYPES:
        raise RemoteMemoryConfigError(p, "key 'memory-type'", f"{mt!r} is not one of {', '.join(_TYPES)}")

    def num(key: str, default: float) -> float:
        v = data.get(key, default)
        # the chained test also rejects NaN, Infinity (both parse as JSON) and 400-digit integers
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= _MAX_VALUE:
            raise RemoteMemoryConfigError(p, f"key {key!r}", f"expected a number from 0 to 2^63, got {v!r}")
        return v

    per_node = int(num("num-npus-per-node", 0))
    if mt == "PER_NODE_MEMORY_EXPANSION" and per_node <= 0:
        raise RemoteMemoryConfigError(p, "key 'num-npus-per-node'", "must be > 0 for PER_NODE_MEMORY_EXPANSION")
    return RemoteMemory(mt, int(num("remote-mem-latency", 0)), float(num("remote-mem-bw", 0)), per_node, str(p))
