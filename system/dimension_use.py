"""Network dimensions that no world collective can use, because the system file's implementation
lists are shorter than the network (ASTRA-sim builds one logical dimension per list entry, so the
rest carry nothing; docs/astra-sim-semantics.md §9.5). The cycles stay ASTRA-sim's; the user is
told once, since a 2-D network whose second dimension moves 0 bytes is rarely what was meant."""
from __future__ import annotations

from chakra_proto import enums as pb
from system.config import CONFIG_NAMES, SystemConfig

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Sequence


def uncovered_dimensions(graphs: Sequence[Any], config: SystemConfig, topology: Any,
                         groups: dict[int, list[int]]) -> str | None:
    """One warning naming, per collective the workload runs over all ranks, the dimensions it
    cannot use; None when every dimension of more than one NPU is covered."""
    dims = topology.dims
    npus = topology.npus_count
    short: dict[int, list[int]] = {}  # comm type → dimensions its implementation list leaves out
    for ct, name in CONFIG_NAMES.items():
        impls = config.impls_for(name)
        if not impls or name in config.custom_implementations or any(i.type.is_one for i in impls):
            continue
        left = [d for d in range(len(impls), len(dims)) if dims[d].npus_count > 1]
        if left:
            short[ct] = left
    if not short:
        return None
    world_groups = {str(g) for g, m in groups.items() if len(m) == npus}
    used: set[int] = set()
    seen: set[int] = set()
    for g in graphs:
        if id(g) in seen:
            continue
        seen.add(id(g))
        for n in g.nodes.values():
            if n.type == pb.COMM_COLL_NODE and n.comm_type in short and \
                    (n.pg_name in (None, "", "0") or n.pg_name in world_groups):
                used.add(n.comm_type)
        if used == short.keys():
            break
    if not used:
        return None
    parts = []
    for ct in sorted(used):
        name = CONFIG_NAMES[ct]
        n = len(config.impls_for(name))
        on = "dimension 0" if n == 1 else f"dimensions 0-{n - 1}"
        off = ", ".join(f"{d} ({dims[d].kind.value}, {dims[d].npus_count} NPUs)" for d in short[ct])
        parts.append(f"'{name}-implementation' lists {n} implementation(s) for {len(dims)} network dimensions, "
                     f"so a world {name} runs on {on} only and dimension(s) {off} carry none of it")
    example = "[" + ", ".join(['"ring"'] * len(dims)) + "]"
    return (f"{config.path or 'the default system configuration (Ring_4chunks.json)'}: " + "; ".join(parts)
            + f". That is ASTRA-sim's rule and the cycles are its; list one implementation per dimension "
            f"(e.g. {example}) to use them all")
