"""The parameters a calibration fits, and the two files they become.

A fitted machine is one network level per dimension (dimension 0 = inside a node, NVSwitch;
dimension 1 = between nodes, the NICs and their switch) and the system knobs that shape a
collective's time in the simulator: endpoint delay (the per-step software overhead, paid on
every packet bundle), chunking (``preferred-dataset-splits``: chunks per collective;
``active-chunks-per-dimension``: how many are in flight) and ``local-mem-bw`` (the reduction's
memory traffic, 3 bytes moved per byte reduced). Collectives run NCCL's ring in every dimension.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Level:
    """One network dimension: topology, NPUs on it, link bandwidth (GB/s, GB = 2^30 B) and per-hop
    latency (ns), with ASTRA-sim's meaning (a Switch counts two hops)."""

    npus: int
    bandwidth_gb_s: float
    latency_ns: float
    topology: str = "Switch"


@dataclass(frozen=True)
class MachineParams:
    levels: tuple[Level, ...]
    endpoint_delay_ns: int
    splits: int
    active_chunks: int
    local_mem_bw_gb_s: float
    backend: str = "congestion-aware"
    #: the system file's collective-fixed-delay (ns) and collective-copy-bw (GB/s of 10^9 B): the
    #: once-per-collective cost of the NCCL model (--node); 0 = off, and then not written at all
    fixed_delay_ns: int = 0
    copy_bw_gb_s: float = 0.0

    @property
    def npus(self) -> int:
        return math.prod(lv.npus for lv in self.levels)

    def with_npus(self, npus: int, nodes: int | None = None) -> "MachineParams":
        """The same machine with another GPU count: the one thing a held-out prediction changes.
        A one-level fit keeps one level; a two-level fit splits ``npus`` into ``npus/nodes`` per
        node over ``nodes`` nodes (one node: the inside level alone)."""
        if len(self.levels) == 1 or not nodes or nodes == 1:
            return replace(self, levels=(replace(self.levels[0], npus=npus),))
        per_node = npus // nodes
        levels = [replace(self.levels[0], npus=per_node), replace(self.levels[1], npus=nodes)]
        return replace(self, levels=tuple(lv for lv in levels if lv.npus > 1) or (levels[0],))

    def network_dict(self, description: str | None = None) -> dict:
        """The network YAML (ASTRA-sim's analytical keys plus ``backend``)."""
        d: dict = {
            "topology": [lv.topology for lv in self.levels],
            "npus_count": [lv.npus for lv in self.levels],
            "bandwidth": [round(lv.bandwidth_gb_s, 3) for lv in self.levels],
            "latency": [round(lv.latency_ns, 1) for lv in self.levels],
            "backend": self.backend,
        }
        if description:
            d["description"] = description
        return d

    def system_dict(self) -> dict:
        """The system JSON (ASTRA-sim's keys): ring everywhere, localBWAware multi-level all-reduce."""
        ring = ["ring"] * len(self.levels)
        return {
            "scheduling-policy": "LIFO",
            "endpoint-delay": int(self.endpoint_delay_ns),
            "active-chunks-per-dimension": int(self.active_chunks),
            "preferred-dataset-splits": int(self.splits),
            "all-reduce-implementation": ring,
            "all-gather-implementation": ring,
            "reduce-scatter-implementation": ring,
            "all-to-all-implementation": ring,
            "collective-optimization": "localBWAware",
            "local-mem-bw": round(self.local_mem_bw_gb_s, 1),
            **({"collective-fixed-delay": int(self.fixed_delay_ns)} if self.fixed_delay_ns else {}),
            **({"collective-copy-bw": round(self.copy_bw_gb_s, 3)} if self.copy_bw_gb_s else {}),
        }

    @classmethod
    def from_dicts(cls, network: dict, system: dict) -> "MachineParams":
        """Back from the two files (as written by ``network_dict``/``system_dict``)."""
        def as_list(v):
            return list(v) if isinstance(v, (list, tuple)) else [v]
        topo, npus = as_list(network["topology"]), as_list(network["npus_count"])
        bws, lats = as_list(network["bandwidth"]), as_list(network["latency"])
        levels = tuple(Level(int(n), float(b), float(lat), str(t)) for t, n, b, lat in zip(topo, npus, bws, lats))
        return cls(levels, int(system.get("endpoint-delay", 10)), int(system["preferred-dataset-splits"]),
                   int(system.get("active-chunks-per-dimension", 1)), float(system.get("local-mem-bw", 0.0)),
                   str(network.get("backend") or "congestion-unaware"), int(system.get("collective-fixed-delay", 0)),
                   float(system.get("collective-copy-bw", 0.0)))

    def describe(self) -> list[str]:
        out = []
        for d, lv in enumerate(self.levels):
            where = "inside a node" if d == 0 else "between nodes"
            out.append(f"dim {d} ({where}): {lv.topology}({lv.npus}), bandwidth {lv.bandwidth_gb_s:.2f} GB/s, "
                       f"latency {lv.latency_ns:.1f} ns")
        out.append(f"endpoint-delay {self.endpoint_delay_ns} ns, preferred-dataset-splits {self.splits}, "
                   f"active-chunks-per-dimension {self.active_chunks}, local-mem-bw {self.local_mem_bw_gb_s:.0f} GB/s, "
                   f"backend {self.backend}")
        if self.fixed_delay_ns or self.copy_bw_gb_s:
            out.append(f"once per collective: collective-fixed-delay {self.fixed_delay_ns} ns, collective-copy-bw "
                       f"{self.copy_bw_gb_s:.1f} GB/s (the NCCL model's base latency and per-byte cost)")
        return out
