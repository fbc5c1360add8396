"""Symmetries of a physical graph: a permutation of the NPUs extended to switches and links.

An orbit run (system/shortcuts/orbits.py) simulates one rank per orbit of a group of rank
permutations. On a topology file that is exact only where each permutation is an automorphism of
the network: it maps every link onto a link of the same rate and latency (NVSwitches onto
NVSwitches), so that an image of a message sees the same links as the message. The routes must
follow too (ECMP's hash need not); ``GraphFlows.fold`` checks that pair by pair as the run uses
them (network/analytical/graph_links.py).

The switches' images come from their neighbours, tier by tier: a switch goes where a switch of
its tier has the images of its lower-tier neighbours. Switches with the same lower neighbours
(the spines of a two-tier fat-tree) are interchangeable there: a class mapped onto itself keeps
each switch, another class is matched in id order. The result is then checked link by link, so
a graph on which this guess is wrong gives None, never a wrong map.
"""
from __future__ import annotations

from typing import Sequence

from network.graph import PhysicalGraph


def extend_to_graph(graph: PhysicalGraph, rank_perm: Sequence[int]) -> tuple[list[int], list[int]] | None:
    """(node permutation, directed-link permutation) extending ``rank_perm`` (rank r → rank
    rank_perm[r]) to an automorphism of the graph; None where this finds none."""
    n = graph.nodes_count
    npus = graph.npus
    if len(rank_perm) != len(npus):
        return None
    vp = [-1] * n
    for r, node in enumerate(npus):
        vp[node] = npus[rank_perm[r]]
    tiers = graph.tiers
    adj = graph.adjacency
    by_tier: dict[int, dict[tuple[int, ...], list[int]]] = {}
    for s in sorted(graph.switches):
        t = tiers[s]
        lower = tuple(sorted(v for v, _ in adj[s] if tiers[v] == t - 1))
        if t <= 0 or not lower:
            return None  # unreachable from any NPU: nothing here says where it goes
        by_tier.setdefault(t, {}).setdefault(lower, []).append(s)
    for t in sorted(by_tier):
        classes = by_tier[t]
        for lower, members in classes.items():
            image = tuple(sorted(vp[v] for v in lower))
            target = classes.get(image)
            if target is None or len(target) != len(members):
                return None
            for a, b in zip(members, target):
                vp[a] = b
    if sorted(vp) != list(range(n)):
        return None
    nv = graph.nvswitches
    if any((v in nv) != (vp[v] in nv) for v in graph.switches):
        return None
    links = _link_perm(graph, vp)
    return None if links is None else (vp, links)


def _link_perm(graph: PhysicalGraph, vp: list[int]) -> list[int] | None:
    """Directed link i (a → b) onto the link vp[a] → vp[b] of the same rate and latency (the
    k-th of parallel links onto the k-th)."""
    between: dict[tuple[int, int], list[int]] = {}
    for i, link in enumerate(graph.links):
        between.setdefault((min(link.a, link.b), max(link.a, link.b)), []).append(i)
    out = [-1] * (2 * len(graph.links))
    for i, link in enumerate(graph.links):
        a, b = vp[link.a], vp[link.b]
        mine = between[(min(link.a, link.b), max(link.a, link.b))]
        theirs = between.get((min(a, b), max(a, b)))
        if theirs is None or len(theirs) != len(mine):
            return None
        j = theirs[mine.index(i)]
        other = graph.links[j]
        if (other.bandwidth_gb_s, other.latency_ns, other.error_rate) != \
                (link.bandwidth_gb_s, link.latency_ns, link.error_rate):
            return None
        forward = other.a == a and other.b == b
        if not forward and not (other.a == b and other.b == a):
            return None
        out[2 * i] = 2 * j if forward else 2 * j + 1
        out[2 * i + 1] = 2 * j + 1 if forward else 2 * j
    return out
