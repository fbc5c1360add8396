"""When the system layer's C ring path (system/_sys_core.c) runs, and when the Python methods do.

Whole runs of both sides agree to every cycle in tests/network/test_native_parity.py; these say
which Sys objects take the C path at all."""
from __future__ import annotations

import pytest

from network.analytical.aware import CongestionAwareBackend
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from system.config import SystemConfig
from system.sys import Sys
from system.sys_core import SYS_CORE
from system.generation import _pristine
from system.stream import CollectivePhase

native = pytest.mark.skipif(SYS_CORE is None, reason="system._sys_core is not built")
NET = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [4], "bandwidth": [50.0], "latency": [500.0]})


def test_pip_install_built_the_system_core() -> None:
    """As for the event queue (tests/network/test_event_core.py): built wherever the network's C
    module is, and a failure under CI=true."""
    from conftest import IN_CI
    from network.event_queue import native_module

    if SYS_CORE is None:
        if IN_CI:
            pytest.fail("CI=true and system._sys_core did not build", pytrace=False)
        if native_module() is not None:
            pytest.fail("network._event_core was built but system._sys_core was not", pytrace=False)
        pytest.skip("no C modules built: the Python methods run")


@native
@pytest.mark.parametrize("backend", [CongestionAwareBackend, CongestionUnawareBackend])
def test_an_analytical_backend_takes_the_c_path(backend: type) -> None:
    s = Sys(0, backend(NET), SystemConfig.default())
    assert isinstance(s._fast, SYS_CORE.SysFast)
    assert s.mem_bus_transfer == s._fast.mem_bus_transfer and s.register_event == s._fast.register_event
    assert s._fast.direct  # the queue's calendar through network._event_core's capsule


@native
def test_the_calendar_is_reached_directly_whatever_was_imported_first() -> None:
    """The capsule of network._event_core is found even where this process imported the system
    layer's C module before the network's (PyCapsule_Import reads attributes of the package and
    does not import the submodule): a Sys made then used Python's calls for every event."""
    import subprocess
    import sys

    code = ("import system.generation\n"
            "from network.analytical.aware import CongestionAwareBackend\n"
            "from network.config import NetworkConfig\n"
            "from system.config import SystemConfig\nfrom system.sys import Sys\n"
            "net = NetworkConfig.from_dict({'topology': ['Ring'], 'npus_count': [4], 'bandwidth': [50.0], "
            "'latency': [500.0]})\n"
            "print(Sys(0, CongestionAwareBackend(net), SystemConfig.default())._fast.direct)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"], out.stderr


@native
def test_rendezvous_and_other_clocks_keep_the_python_methods() -> None:
    assert not hasattr(Sys(0, CongestionAwareBackend(NET), SystemConfig.default(), rendezvous=True), "_fast")

    class OwnClock(CongestionUnawareBackend):  # a backend whose time is not its queue's (as ns-3's)
        def now(self) -> int:
            return self.queue.now

    s = Sys(0, OwnClock(NET), SystemConfig.default())
    assert not hasattr(s, "_fast") and s.mem_bus_transfer.__func__ is Sys.mem_bus_transfer


@native
def test_a_queue_that_is_not_the_c_one_is_reached_through_its_schedule() -> None:
    from network.event_queue import PyEventQueue

    b = CongestionUnawareBackend(NET)
    b.queue = PyEventQueue()
    b.schedule = b.queue.schedule
    s = Sys(0, b, SystemConfig.default())
    assert isinstance(s._fast, SYS_CORE.SysFast) and not s._fast.direct


@native
def test_configure_refuses_classes_without_the_slots() -> None:
    class NoSlots:
        pass

    from system.collective.all_to_all import AllToAll
    from system.collective.halving_doubling import HalvingDoubling
    from system.collective.ring import Ring
    from system.logical_topology import RingTopology
    from system.scheduler_unit import SchedulerUnit
    from system.stream import CollectivePhase, DataSet, StreamBaseline

    from system.collective.algorithm import Algorithm

    good = (Ring, StreamBaseline, CollectivePhase, DataSet, 0, 7, AllToAll, RingTopology, HalvingDoubling,
            SchedulerUnit, Algorithm)
    for i in (0, 1, 2, 3, 6, 7, 8, 9, 10):
        with pytest.raises((TypeError, AttributeError)):
            SYS_CORE.configure(*good[:i], NoSlots, *good[i + 1:])
    # the module keeps its configuration: a Sys still takes the C path and runs
    assert isinstance(Sys(0, CongestionAwareBackend(NET), SystemConfig.default())._fast, SYS_CORE.SysFast)


def _scheduling_in_c(s: Sys) -> bool:
    fast = getattr(s, "_fast", None)
    return fast is not None and s.proceed_to_next_vnet_baseline == fast.proceed and \
        s.schedule == fast.schedule and s.insert_into_ready_list == fast.insert_into_ready_list


@native
def test_a_plain_sys_moves_its_streams_in_c_and_subclasses_keep_python() -> None:
    """The streams' moves between phases and queues (Sys.proceed_to_next_vnet_baseline, schedule,
    insert_into_ready_list and the SchedulerUnit's steps) run in C only for Sys and SchedulerUnit
    themselves: a subclass's overrides must run."""
    from system.scheduler_unit import SchedulerUnit

    assert _scheduling_in_c(Sys(0, CongestionAwareBackend(NET), SystemConfig.default()))

    class MySys(Sys):
        pass

    s = MySys(0, CongestionAwareBackend(NET), SystemConfig.default())
    assert isinstance(s._fast, SYS_CORE.SysFast) and not _scheduling_in_c(s)
    assert s.proceed_to_next_vnet_baseline.__func__ is Sys.proceed_to_next_vnet_baseline

    class MyUnit(SchedulerUnit):
        pass

    with pytest.raises(TypeError):
        Sys(0, CongestionAwareBackend(NET), SystemConfig.default())._fast.enable_scheduling(
            MyUnit(s, [1], 1, 1, 1), Sys.proceed_to_next_vnet_baseline)
    bare = SYS_CORE.SysFast(s, s.backend.clock_queue, s.backend.schedule, s.backend.exchange, 0, 10, 1e9)
    with pytest.raises(RuntimeError):  # not enabled: refused, not run half-configured
        bare.schedule(1)


@native
def test_clone_slots_copies_every_slot_and_refuses_other_layouts() -> None:
    """generation.py copies pristine algorithms with it: a copy is a new object of the class
    with each slot bound to the same value (an unset slot stays unset); a class with a
    ``__dict__`` or ``__weakref__``, or a C type's own fields, is refused."""
    clone = SYS_CORE.clone_slots

    class A:
        __slots__ = ("a", "b")

    class B(A):
        __slots__ = ("c", "d")

    x = B()
    x.a, x.b, x.c = 1, [2], "three"
    y = clone(x)
    assert type(y) is B and y is not x
    assert (y.a, y.b, y.c) == (1, [2], "three") and y.b is x.b
    with pytest.raises(AttributeError):
        y.d
    y.a = 5
    assert x.a == 1

    class WithDict:
        pass

    class WithWeakref:
        __slots__ = ("__weakref__",)

    class OnAList(list):
        __slots__ = ("n",)

    class AfterDict(WithDict):
        __slots__ = ("n",)

    for obj in (WithDict(), WithWeakref(), OnAList(), AfterDict(), [1], 3):
        with pytest.raises(TypeError, match="slots only"):
            clone(obj)


@native
def test_a_fresh_copy_is_the_constructed_state_with_its_own_queue() -> None:
    """Ring, direct and halving-doubling copies equal a new construction slot by slot, and the
    two that keep a queue of packets get their own."""
    from system.collective.algorithm import ComType
    from system.collective.all_to_all import AllToAll
    from system.collective.halving_doubling import HalvingDoubling
    from system.collective.ring import Ring
    from system.logical_topology import Direction, RingTopology

    s = Sys(3, CongestionAwareBackend(NetworkConfig.from_dict(
        {"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]})), SystemConfig.default())
    topo = s.get_logical_topology(ComType.ALL_REDUCE).get_basic_topology_at_dimension(0)
    assert isinstance(topo, RingTopology)

    def slots(o: object) -> dict:
        names = [n for c in type(o).__mro__ for n in getattr(c, "__slots__", ())]
        return {n: getattr(o, n) for n in names if hasattr(o, n)}

    for make in (lambda: Ring(ComType.ALL_REDUCE, 3, topo, 1 << 20, Direction.ANTICLOCKWISE),
                 lambda: AllToAll(ComType.ALL_TO_ALL, 2, 3, topo, 1 << 20, Direction.CLOCKWISE),
                 lambda: HalvingDoubling(ComType.REDUCE_SCATTER, 3, topo, 1 << 20)):
        proto = make()
        copy = proto.fresh_copy(SYS_CORE.clone_slots)
        # generation.py's pristine entry: copier(argument) is what streams get, without a Python call
        _, copier, argument = _pristine(CollectivePhase(0, make()), SYS_CORE.clone_slots)
        in_c = copier(argument)
        assert copier is (SYS_CORE.clone_fresh if proto.FRESH_SLOTS else SYS_CORE.clone_slots)
        for c in (copy, in_c):
            assert type(c) is type(proto) and slots(c) == slots(make())
        if hasattr(proto, "pending"):
            assert proto.FRESH_SLOTS == ("pending",)
            copy.pending.append((1, 2))
            in_c.pending.append((3, 4))
            assert not proto.pending and not argument[0].pending and list(copier(argument).pending) == []


@native
def test_clone_fresh_gives_each_named_slot_a_new_empty_container() -> None:
    from collections import deque

    class A:
        __slots__ = ("q", "d", "n")

    x = A()
    x.q, x.d, x.n = deque([1]), {"k": 1}, 5
    y = SYS_CORE.clone_fresh((x, ("q", "d")))
    assert type(y.q) is deque and not y.q and y.d == {} and y.n == 5 and list(x.q) == [1]
    for bad in (x, (x,), (x, ["q"])):
        with pytest.raises(TypeError, match="clone_fresh takes"):
            SYS_CORE.clone_fresh(bad)
    with pytest.raises(AttributeError):
        SYS_CORE.clone_fresh((x, ("missing",)))


def _batch_program(s: Sys, seed: int) -> list:
    """Events registered from outside and from callbacks (same tick, later ticks, delay 0 late
    joiners) on ``s``; the order and times they run in."""
    import random

    rng = random.Random(seed)
    q = s.backend.queue
    log: list = []

    def cb(tag: int, depth: int) -> None:
        log.append((q.now, tag))
        if depth < 3:
            for k in range(rng.randrange(3)):
                s.register_event(rng.choice([0, 0, 1, 5, 10]), cb, tag * 10 + k, depth + 1)

    for tag in range(40):
        q.schedule(rng.randrange(20), s.register_event, rng.choice([0, 3, 3, 7, 1 << 20]), cb, tag, 0)
    s.backend.run()
    return log


@native
@pytest.mark.parametrize("seed", range(5))
def test_the_c_batches_run_events_as_the_python_ones(seed: int) -> None:
    """A Sys's per-tick batches in C (register_event, call_events) against the Python methods
    (a rendezvous Sys keeps them): the same callbacks at the same times in the same order, late
    joiners in their tick's pass; nothing left pending."""
    fast = Sys(0, CongestionAwareBackend(NET), SystemConfig.default())
    slow = Sys(0, CongestionAwareBackend(NET), SystemConfig.default(), rendezvous=True)
    assert isinstance(fast._fast, SYS_CORE.SysFast) and not hasattr(slow, "_fast")
    got, ref = _batch_program(fast, seed), _batch_program(slow, seed)
    assert len(ref) > 60 and len({t for t, _ in ref}) > 10
    assert got == ref
    assert fast._fast.batches == {} and slow._batches == {}


@native
def test_the_c_batches_show_what_waits_and_refuse_a_tick_past_the_clock() -> None:
    from network.errors import SimulationLimitError

    s = Sys(0, CongestionAwareBackend(NET), SystemConfig.default())
    s.register_event(5, print, "a")
    s.register_event(5, len, "bc")
    s.mem_bus_transfer(None, True, False, 64)  # a bundle's return: 10 ns, no tuple until shown
    pending = s._fast.batches
    assert pending == {5: [(print, ("a",)), (len, ("bc",))], 10: [(s._fast.bundle_arrived, (None, False, 64))]}
    for delay in ((1 << 63) - 1 + 5, 1 << 70):
        s.backend.queue.schedule(1, s.register_event, delay, print)
        with pytest.raises(SimulationLimitError):
            s.backend.run()
    with pytest.raises(KeyError):
        s._fast.call_events(12345)
    with pytest.raises(TypeError):  # as the queue's schedule: a delay is a whole number of ns
        s.register_event(2.5, print)

    class Ns:
        def __index__(self) -> int:
            return 5

    s.register_event(Ns(), print, "b")  # a numpy integer, say: taken as the int it stands for
    assert s._fast.batches[s.now() + 5][-1] == (print, ("b",))
