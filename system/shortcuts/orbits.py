"""Partial symmetry: one simulated rank per orbit of a group of communicator-group rotations.

In a dp×tp×pp layout the ranks of one data-parallel group do the same thing at the same time
when everything else the run holds looks the same from each of them. Rotating every group of one
family (groups of one size that partition the ranks, e.g. the dp groups) by one place is then a
symmetry σ of the whole run; its orbits are the family's groups, and one rank per orbit stands
for all of them. Where the rotations of two families commute and both are symmetries (the dp and
the tp groups), so is every product of their powers: G, the group they generate, folds a stage's
dp·tp ranks onto one. A run qualifies when, for each generator σ:
* σ maps every communicator group onto a group: member by member (the ring positions are
  kept, so any algorithm), or as a rotation of its list (a family group onto itself), which only
  a ring algorithm ignores;
* every rank x = g(r) runs r's graph with its peers and groups mapped by g (up to node ids;
  no remote memory, metadata, host-side launchers or world-wide collectives);
* G acts freely: no element but the identity keeps a rank in place;
* the network keeps it: on built-in dimensions (congestion-unaware) the delay class (lowest
  differing dimension, hops there) of every pair that can exchange messages; on a topology file
  (either analytical backend) σ extends to an automorphism of the graph (network/graph_symmetry.py),
  and the backend folds the links by G and checks routes and same-tick service order as the run
  uses them (network/analytical/graph_links.py), redoing the run without the shortcut where they
  break the symmetry.
The simulated ranks send a message meant for x = g(ρ) as its image under g^-1: the message that
ρ receives in the real run, at the same time (system/shortcuts/orbit_network.py). Anything else
runs on the general path; the answer is checked against it in tests/system/test_orbits*.py.
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
    """The orbits of a group G of rank permutations (one family rotation, or the product of
    several that commute): ``reps`` are simulated; rank x is g_power[x](rep_of[x])."""

    reps: list[int]
    rep_of: list[int]
    power: list[int]  # the element of G that maps the rank's representative onto it
    perms: list[list[int]]  # perms[j][x] = g_j(x); element 0 is the identity
    group_perms: list[dict[int, int]]  # group_perms[j][g] = the group g_j maps g onto
    size: int  # ranks per orbit, |G|
    inverse: list[int]  # g_inverse[j] = g_j^-1
    link_perms: list[list[int]] | None = None  # on a topology file: g_j on its directed links


#: G's elements times ranks above which the tables cost more than they save
_MAX_TABLE = 20_000_000


def prove(graphs: Sequence[Any], groups: dict[int, list[int]], config: SystemConfig,
          topology: Any, backend_name: str) -> Orbits:
    """The largest group of family rotations that is a symmetry of the run: the first family
    whose rotation is one, times every further family whose rotation commutes with it and keeps
    it one. Decline, with each family's reason, when none is."""
    graph = getattr(topology, "graph", None)
    if backend_name == "congestion-aware" and graph is None:
        raise Decline("the congestion-aware backend on a built-in topology: its links are not folded")
    if backend_name not in ("congestion-unaware", "congestion-aware"):
        raise Decline(f"the {backend_name} backend: orbits need the analytical backends")
    if not groups:
        raise Decline("no communicator groups")
    if config.per_node_custom or config.replay_only or config.custom_implementations:
        raise Decline("custom collectives")
    npus = topology.npus_count
    if any(len(m) >= npus for m in groups.values()):
        raise Decline("a world-sized group runs the world's per-dimension rings")
    reasons = []
    families = _families(groups, npus)
    for i, family in enumerate(families):
        try:
            found = _try_group([_rotation(family, npus)], graphs, groups, config, topology)
        except Decline as e:
            reasons.append(f"rotating the groups of {len(family[0])}: {e}")
            continue
        gens = [_rotation(family, npus)]
        for other in families[i + 1:]:
            sigma = _rotation(other, npus)
            if any(sigma[g[x]] != g[sigma[x]] for g in gens for x in range(npus)):
                continue  # the product would not be the group of the two rotations' powers
            if found.size * len(other[0]) * npus > _MAX_TABLE:
                break
            try:
                found = _try_group(gens + [sigma], graphs, groups, config, topology)
                gens.append(sigma)
            except Decline:
                pass
        return found
    raise Decline("; ".join(reasons) or "no family of equal-sized groups covers every rank")


def _rotation(family: list[list[int]], npus: int) -> list[int]:
    sigma = list(range(npus))
    for members in family:
        k = len(members)
        for i, r in enumerate(members):
            sigma[r] = members[(i + 1) % k]
    return sigma


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


def _closure(gens: list[list[int]], links: list[list[int]] | None, npus: int) \
        -> tuple[list[list[int]], list[list[int]] | None]:
    """Every product of the generators (on ranks, and alongside on links), identity first."""
    perms = [list(range(npus))]
    lperms = [list(range(len(links[0])))] if links is not None else None
    index = {tuple(perms[0]): 0}
    todo = [0]
    while todo:
        j = todo.pop()
        p = perms[j]
        for k, gen in enumerate(gens):
            q = [gen[x] for x in p]
            key = tuple(q)
            if key in index:
                continue
            if len(perms) * npus > _MAX_TABLE:
                raise Decline("the group of the rotations is too large to tabulate")
            index[key] = len(perms)
            perms.append(q)
            if lperms is not None:
                lk = links[k]
                lperms.append([lk[x] for x in lperms[j]])
            todo.append(len(perms) - 1)
    return perms, lperms


def _try_group(gens: list[list[int]], graphs: Sequence[Any], groups: dict[int, list[int]],
               config: SystemConfig, topology: Any) -> Orbits:
    npus = topology.npus_count
    graph = getattr(topology, "graph", None)
    links = None
    if graph is not None:
        from network.graph_symmetry import extend_to_graph

        links = []
        for sigma in gens:
            ext = extend_to_graph(graph, sigma)
            if ext is None:
                raise Decline("the rotation is no symmetry of the topology file's graph")
            links.append(ext[1])
    perms, lperms = _closure(gens, links, npus)
    size = len(perms)
    for j in range(1, size):  # G acts freely: an orbit has |G| ranks, one per element
        p = perms[j]
        if any(p[x] == x for x in range(npus)):
            raise Decline("a product of the rotations keeps a rank in place")
    rep_of = [-1] * npus
    power = [0] * npus
    reps = []
    for x in range(npus):
        if rep_of[x] < 0:
            reps.append(x)
            for j, p in enumerate(perms):
                rep_of[p[x]] = x
                power[p[x]] = j
    index = {tuple(p): j for j, p in enumerate(perms)}
    inverse = [0] * size
    for j, p in enumerate(perms):
        inv = [0] * npus
        for x, y in enumerate(p):
            inv[y] = x
        inverse[j] = index[tuple(inv)]
    group_perms: list[dict[int, int]] = []
    rotated_by: list[set[int]] = []
    for p in perms:
        group_map, rotated = _map_groups(p, groups)
        if group_map is None:
            raise Decline("rotating the family does not map every group onto a group (or onto a rotation of one)")
        group_perms.append(group_map)
        rotated_by.append(rotated)
    ring_only: set[int] = set()  # the collective types that some element of G runs on a rotated list
    rotated_any = set().union(*rotated_by)
    for r in reps:
        if not _plain(graphs[r]):
            raise Decline(f"rank {r}'s graph holds more than compute, group collectives and point-to-point "
                          "with known peers")
        for ct, g in _group_collectives(graphs[r]):
            if g in rotated_any:
                ring_only.add(ct)
    for x in range(npus):
        r, j = rep_of[x], power[x]
        if j and not _same_mapped(graphs[x], graphs[r], perms[inverse[j]], group_perms[inverse[j]]):
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
    if graph is None:
        for sigma in gens:
            if not _delays_kept(sigma, groups, graphs, reps, topology):
                raise Decline("the rotation changes the delay between two ranks that exchange messages")
    return Orbits(reps, rep_of, power, perms, group_perms, size, inverse, lperms)


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
