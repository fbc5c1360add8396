"""Shortcuts: the every-event path's answer with less work, each taken only where it is proved.

A run of dtsim is, by definition, the every-event path: one ``Sys`` per rank and one event per
message. A shortcut may stand in for it where it proves the answer equal, and declines otherwise,
with a reason (``Decline``; ``--debug`` prints the reasons, the report keeps them):

* ``representative`` (representative.py, network/analytical/symmetric*.py): every rank runs the
  same graph of compute and world collectives on a translation-symmetric algorithm, so one rank
  stands for all;
* ``orbits`` (orbits.py, orbit_network.py): rotating the groups of one family is a symmetry of the
  run, so one rank per orbit stands for its orbit;
* ``batched`` (ring_batch.py): ring phases of the Ring algorithm advanced for all their ranks at
  once by their max-plus recurrence.

``plan`` proves them in that order; ``run_simulation`` tries each proved one in turn, and one that
meets at run time what it cannot reproduce (``FastPathConflict``) or ends stuck hands over to the
next, down to the every-event path, which decides. ``--verify-shortcuts`` runs the every-event path
after a shortcut answered and compares (verify.py).
"""
from __future__ import annotations

from network.records import record
from system.shortcuts.decline import Decline
from system.shortcuts.orbits import Orbits, prove as prove_orbits, prove_declared
from system.shortcuts.ring_batch import prove_on_pipes

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Sequence

__all__ = ["Attempt", "Decline", "Orbits", "plan"]


@record
class Attempt:
    name: str  # representative | orbits | batched | none (the every-event path)
    symmetry: Any  # per-dimension XOR flags (representative), Orbits, or None (every rank)
    batching: bool  # ring phases batched where the batcher proves them


#: why the congestion-aware backend runs every rank with several queues per dimension
SEVERAL_QUEUES = ("--num-queues-per-dim > 1 on the congestion-aware backend: the streams of one collective run "
                  "on queues of both directions, where same-tick order between ranks is not proven (an "
                  "all-reduce then a oneDirect all-gather on FullyConnected(4) finishes ranks 0 and 1 earlier)")


#: why no phase is batched where the endpoint delay is 0
ZERO_ENDPOINT = ("endpoint-delay 0: a phase's first message leaves in the very tick its stream starts, so which "
                 "of a rank's streams sends first is the order of that tick's events, which a batched phase's "
                 "hand-back does not keep (a 3-D layout of 2-rank rings deadlocked on the event path and "
                 "finished batched)")


def plan(graphs: Sequence[Any], groups: dict[int, list[int]], config: Any, net: Any, backend_name: str, *,
         symmetry: bool, batching: bool, rendezvous: bool,
         declared: list[list[list[int]]] | None = None, queues_per_dim: int = 1) -> tuple[list[Attempt], list[str]]:
    """The attempts to make, shortcuts first and the every-event path last, and why each
    shortcut left out was declined. ``declared``: a workload written per orbit
    (workload/orbit_files.py), whose families' rotations are the only attempt."""
    attempts: list[Attempt] = []
    declined: list[str] = []
    topology = net.topology
    zero_endpoint = batching and config.endpoint_delay_ns == 0
    batching = batching and not zero_endpoint
    several_queues = backend_name == "congestion-aware" and queues_per_dim > 1
    if declared is not None:
        if not symmetry or rendezvous or several_queues:
            return [], ["orbits: " + ("--no-symmetry" if not symmetry else "--rendezvous-protocol" if rendezvous
                                      else SEVERAL_QUEUES)]
        try:
            orbits = prove_declared(graphs, declared, groups, config, topology, backend_name)
        except Decline as e:
            return [], [f"orbits: {e}"]
        return [Attempt("orbits", orbits, batching and backend_name != "congestion-aware")], []

    def why(name: str, reason: str) -> None:
        declined.append(f"{name}: {reason}")

    if not symmetry:
        why("representative", "--no-symmetry")
        why("orbits", "--no-symmetry")
    elif rendezvous:
        why("representative", "--rendezvous-protocol: requests and replies are point-to-point messages")
        why("orbits", "--rendezvous-protocol")
    elif net.extra.get("congestion_aware"):
        why("representative", "congestion-aware settings in the network file: the general backend judges them")
        why("orbits", "congestion-aware settings in the network file")
    elif several_queues:
        why("representative", SEVERAL_QUEUES)
        why("orbits", SEVERAL_QUEUES)
    else:
        rep = None
        try:
            if groups:
                raise Decline("communicator groups")
            if getattr(topology, "graph", None) is not None:
                raise Decline("a topology file: ranks are not interchangeable")
            # imported where the proof runs: a layout with communicator groups is spared it (start-up)
            from system.shortcuts.representative import prove as prove_representative

            rep = prove_representative(graphs, config, topology.npus_count_per_dim, backend_name,
                                       [d.kind.value for d in topology.dims])
            attempts.append(Attempt("representative", rep, False))
        except Decline as e:
            why("representative", str(e))
        if rep is None:
            try:
                # on the congestion-aware backend ring phases would run in RingFlows, which
                # moves every rank of a ring: the folded links carry only the representatives'
                attempts.append(Attempt("orbits", prove_orbits(graphs, groups, config, topology, backend_name),
                                        batching and backend_name != "congestion-aware"))
            except Decline as e:
                why("orbits", str(e))
    if not batching or rendezvous:
        why("batched", "--rendezvous-protocol" if rendezvous else ZERO_ENDPOINT if zero_endpoint else "--no-batching")
    else:
        try:
            if backend_name == "congestion-aware":  # ring phases advance through the links' queues
                prove_on_pipes(graphs, config, groups, built_in=getattr(topology, "graph", None) is None)
            attempts.append(Attempt("batched", None, True))
        except Decline as e:
            why("batched", str(e))
    attempts.append(Attempt("none", None, False))
    return attempts, declined
