"""Partial symmetry: one simulated rank per orbit of a rotation of communicator groups.

In a dp×tp×pp layout the ranks of one data-parallel group do the same thing at the same time
when everything else the run holds looks the same from each of them. Rotating every group of one
family (groups of one size that partition the ranks, e.g. the dp groups) by one place is then a
symmetry σ of the whole run; its orbits are the family's groups, and one rank per orbit (its
first member) stands for all of them. A run qualifies when, for σ:
* σ maps every communicator group onto a group: member by member (the ring positions are
  kept, so any algorithm), or as a rotation of its list (a family group onto itself), which only
  a ring algorithm ignores;
* every rank x = σ^j(r) runs r's graph with its peers and groups mapped by σ^j (up to node ids;
  no remote memory, metadata, host-side launchers or world-wide collectives);
* congestion-unaware delays are the same for every pair of ranks that can exchange messages and
  its image: (lowest differing dimension, hops there) is kept by σ; no topology file.
The simulated ranks then send a message meant for x = σ^j(ρ) as its image under σ^-j: the
message that ρ receives in the real run, at the same time (system/shortcuts/orbit_network.py). Anything
else runs on the general path; the answer is checked against it in tests/system/test_orbits.py.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from chakra_proto import enums as pb
from system.config import CONFIG_NAMES, ImplType, SystemConfig
from system.shortcuts.decline import Decline

_RING_IMPLS = (ImplType.RING, ImplType.ONE_RING)
_PLAIN_NODES = (pb.COMP_NODE, pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
_P2P = (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)


class Orbits(NamedTuple):
    """The orbits of σ: ``reps`` are simulated; rank x is σ^power[x](rep_of[x])."""

    reps: list[int]
    rep_of: list[int]
    power: list[int]
    perms: list[list[int]]  # perms[j][x] = σ^j(x)
    group_perms: list[dict[int, int]]  # group_perms[j][g] = the group σ^j maps g onto
    size: int  # ranks per orbit


def prove(graphs: Sequence[Any], groups: dict[int, list[int]], config: SystemConfig,
          topology: Any, backend_name: str) -> Orbits:
    """The largest family rotation that is a symmetry of the run; Decline, with each family's
    reason, when none is."""
    if backend_name != "congestion-unaware":
        raise Decline(f"the {backend_name} backend: orbits need fixed message delays")
    if not groups:
        raise Decline("no communicator groups")
    if getattr(topology, "graph", None) is not None:
        raise Decline("a topology file: ranks are not interchangeable")
    if config.per_node_custom or config.replay_only or config.custom_implementations:
        raise Decline("custom collectives")
    npus = topology.npus_count
    if any(len(m) >= npus for m in groups.values()):
        raise Decline("a world-sized group runs the world's per-dimension rings")
    reasons = []
    for family in _families(groups, npus):
        try:
            return _try_family(family, len(family[0]), graphs, groups, config, topology)
        except Decline as e:
            reasons.append(f"rotating the groups of {len(family[0])}: {e}")
    raise Decline("; ".join(reasons) or "no family of equal-sized groups covers every rank")


def _families(groups: dict[int, list[int]], npus: int) -> list[list[list[int]]]:
    """Sets of equal-sized groups that partition the ranks (dp groups, tp groups, ...), largest
    groups first; groups of one size are dealt, in id order, to the first set they fit."""
    by_size: dict[int, list[tuple[set[int], list[list[int]]]]] = {}
    for gid in sorted(groups):
        members = groups[gid]
        sets = by_size.setdefault(len(members), [])
        for used, family in sets:
            if used.isdisjoint(members):
                used.update(members)
                family.append(members)
                break
        else:
            sets.append((set(members), [members]))
    return [family for k in sorted(by_size, reverse=True) if k >= 2
            for used, family in by_size[k] if len(used) == npus]


def _try_family(family: list[list[int]], k: int, graphs: Sequence[Any], groups: dict[int, list[int]],
                config: SystemConfig, topology: Any) -> Orbits:
    npus = topology.npus_count
    sigma = [0] * npus
    rep_of = [0] * npus
    power = [0] * npus
    for members in family:
        for i, r in enumerate(members):
            sigma[r] = members[(i + 1) % k]
            rep_of[r] = members[0]
            power[r] = i
    perms = [list(range(npus))]
    for _ in range(1, k):
        perms.append([sigma[x] for x in perms[-1]])
    group_map, rotated = _map_groups(sigma, groups)
    if group_map is None:
        raise Decline("rotating the family does not map every group onto a group (or onto a rotation of one)")
    group_perms = [{g: g for g in groups}]
    for _ in range(1, k):
        group_perms.append({g: group_map[h] for g, h in group_perms[-1].items()})
    reps = sorted(m[0] for m in family)
    ring_only: set[int] = set()  # the collective types that some power of σ runs on a rotated list
    for r in reps:
        if not _plain(graphs[r]):
            raise Decline(f"rank {r}'s graph holds more than compute, group collectives and point-to-point "
                          "with known peers")
        for ct, g in _group_collectives(graphs[r]):
            h = g
            for _ in range(k):  # rank σ^j(r) runs this collective on the j-th image of g
                if h in rotated:
                    ring_only.add(ct)
                    break
                h = group_map[h]
    for x in range(npus):
        r, j = rep_of[x], power[x]
        if j and not _same_mapped(graphs[x], graphs[r], perms[k - j], group_perms[k - j]):
            raise Decline(f"rank {x}'s graph, mapped back onto rank {r}'s, differs from it")
    for ct in ring_only:
        name = CONFIG_NAMES.get(ct)
        if name is None:
            raise Decline(f"collective type {ct} on a group whose image is a rotated list")
        impls = config.impls_for(name)
        if not impls or len(impls) == 1 and impls[0].type not in _RING_IMPLS:
            # a sub-group runs a several-entry list as one ring (comm_group.py)
            raise Decline(f"a {name} runs {impls[0].type.value if impls else 'nothing'} on a group that a power "
                          "of the rotation maps onto a rotated list: only a ring ignores where a list starts")
    if not _delays_kept(sigma, groups, graphs, reps, topology):
        raise Decline("the rotation changes the delay between two ranks that exchange messages")
    return Orbits(reps, rep_of, power, perms, group_perms, k)


def _map_groups(sigma: list[int], groups: dict[int, list[int]]) -> tuple[dict[int, int] | None, set[int]]:
    """σ's action on the groups, and the groups whose image is a rotation of their target's list
    (a collective on such a group, or on a group some power of σ maps onto one, sees other ring
    positions than its representative's)."""
    by_set = {frozenset(m): g for g, m in groups.items()}
    out: dict[int, int] = {}
    rotated: set[int] = set()
    if len(by_set) != len(groups):
        return None, rotated  # two groups of the same ranks: which one an image is, is not told
    for g, members in groups.items():
        image = [sigma[r] for r in members]
        h = by_set.get(frozenset(image))
        if h is None:
            return None, rotated
        target = groups[h]
        if target != image:
            shift = target.index(image[0])
            if target[shift:] + target[:shift] != image:
                return None, rotated  # the same ranks in another ring order
            rotated.add(g)
        out[g] = h
    return out, rotated


def _group_collectives(graph: Any) -> set[tuple[int, int]]:
    return {(n.comm_type, int(n.pg_name)) for n in graph.nodes.values()
            if n.type == pb.COMM_COLL_NODE and n.pg_name not in (None, "", "0")}


def _plain(graph: Any) -> bool:
    """Only compute, group collectives and point-to-point, every peer known."""
    if graph.unknown_peers:
        return False
    for n in graph.nodes.values():
        t = n.type
        if t not in _PLAIN_NODES or n.host_launcher is not None:
            return False
        if t == pb.COMM_COLL_NODE and n.pg_name in (None, "", "0"):
            return False  # a world-wide collective runs the world's rings, which σ need not keep
    return True


def _same_mapped(graph: Any, rep: Any, perm: list[int], gperm: dict[int, int]) -> bool:
    """Is ``graph`` ``rep``'s with peers and groups relabelled by (perm, gperm)? Node ids must
    match too (reports name a rank's nodes by its representative's). Most nodes are the very
    objects of the representative's graph (workload/shared_nodes.py), which only a group can
    tell apart."""
    if graph.order != rep.order or graph.unknown_peers:
        return False
    mine = graph.nodes
    for nid, b in rep.nodes.items():
        a = mine[nid]
        t = a.type
        if a is not b:
            if t != b.type or a.parents != b.parents or a.duration_ns != b.duration_ns or a.is_cpu_op != b.is_cpu_op:
                return False
            if t == pb.COMP_NODE:
                if (a.num_ops, a.tensor_size, a.host_launcher) != (b.num_ops, b.tensor_size, b.host_launcher):
                    return False
                continue
            if t not in _PLAIN_NODES or a.host_launcher is not None:
                return False
            if (a.comm_type, a.comm_size, a.comm_priority, a.comm_tag, a.involved_dim) != \
                    (b.comm_type, b.comm_size, b.comm_priority, b.comm_tag, b.involved_dim):
                return False
            if t != pb.COMM_COLL_NODE:
                if _mapped(perm, a.comm_src) != b.comm_src or _mapped(perm, a.comm_dst) != b.comm_dst:
                    return False
                continue
        elif t != pb.COMM_COLL_NODE:
            if t != pb.COMP_NODE and (_mapped(perm, a.comm_src) != a.comm_src
                                      or _mapped(perm, a.comm_dst) != a.comm_dst):
                return False
            continue
        pa, pb_ = a.pg_name, b.pg_name
        if pa in (None, "", "0") or pb_ in (None, "", "0") or gperm.get(int(pa)) != int(pb_):
            return False
    return True


def _mapped(perm: list[int], rank: int | None) -> int | None:
    return None if rank is None else perm[rank]


def _delays_kept(sigma: list[int], groups: dict[int, list[int]], graphs: Sequence[Any], reps: list[int],
                 topology: Any) -> bool:
    """Every pair that may exchange a message keeps its delay class under σ (and so under its
    powers, which map such pairs onto such pairs)."""
    pairs = {(a, b) for m in groups.values() for a in m for b in m if a != b}
    for r in reps:
        for n in graphs[r].nodes.values():
            if n.type == pb.COMM_SEND_NODE and n.comm_dst is not None:
                pairs.add((r, n.comm_dst))
            elif n.type == pb.COMM_RECV_NODE and n.comm_src is not None:
                pairs.add((n.comm_src, r))
    seen: set[tuple[int, int]] = set()
    for a, b in pairs:
        while (a, b) not in seen:  # walk the pair's σ-orbit once
            seen.add((a, b))
            na, nb = sigma[a], sigma[b]
            if _delay_class(topology, na, nb) != _delay_class(topology, a, b):
                return False
            a, b = na, nb
    return True


def _delay_class(topology: Any, a: int, b: int) -> tuple[int, int]:
    dim, x, y = topology.local_pair(a, b)
    return dim, topology.dims[dim].hops(x, y)
