"""The ns-3 backend against the analytical ones: one message, two flows on one link, pairing,
and a ring all-reduce through the whole simulator.

Needs the ``ns3`` package (``pip install -e '.[ns3]'``); skipped without it. ``from ns import ns``
costs 5–10 s, so the module imports it once (the ``ns`` fixture) and keeps every run small: the
whole module takes about 15 s on 2 cores.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import IN_CI, need
from network.analytical.aware import CongestionAwareBackend
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from network.errors import NetworkConfigError, SimulationLimitError

need("ns", "ns3", import_it=False)  # no 10 s import at collection time

pytestmark = pytest.mark.ns3

MB = 1 << 20
DATA = Path(__file__).parent / "data"
BW, LAT = 12.5, 1000  # GB/s (100 Gb/s links), ns


@pytest.fixture(scope="module", autouse=True)
def ns():
    from network.ns3.loader import load_ns

    try:
        loaded = load_ns()  # first, so that cling's harmless stderr lines are filtered
    except ImportError as exc:
        if IN_CI:
            pytest.fail(f"CI=true and the ns3 package does not import: {exc}", pytrace=False)
        pytest.skip(f"the ns3 package does not import: {exc}")
    return loaded


def net(kinds=("Ring",), npus=(8,), **ns3) -> NetworkConfig:
    n = len(kinds)
    d = {"topology": list(kinds), "npus_count": list(npus), "bandwidth": [BW] * n, "latency": [LAT] * n}
    if ns3:
        d["ns3"] = ns3
    return NetworkConfig.from_dict(d)


def ns3_backend(cfg: NetworkConfig, **kw):
    from network.ns3.backend import Ns3Backend

    return Ns3Backend(cfg, **kw)


def deliver(backend, messages) -> dict[int, int]:
    """Send (src, dst, size) messages now, each with its receive posted; arrival time per index."""
    done: dict[int, int] = {}
    for i, (src, dst, size) in enumerate(messages):
        backend.recv(dst, src, size, i, lambda i=i: done.__setitem__(i, backend.now()))
        backend.send(src, dst, size, i, lambda: None)
    backend.run()
    assert len(done) == len(messages), backend.unmatched()
    return done


def serialisation_ns(size: int) -> float:
    return size / (BW * 2**30 / 1e9)


# -- one message ------------------------------------------------------------------------------
def test_single_message_matches_the_analytical_time():
    cfg = net()
    analytical = CongestionUnawareBackend(cfg).topology.unaware_delay_ns(0, 1, MB)  # 79125
    b = ns3_backend(cfg)
    first = deliver(b, [(0, 1, MB)])[0]
    t0 = b.now()
    second = deliver(b, [(0, 1, MB)])[0] - t0
    # Never faster than the wire; the connection was opened before time 0 (preconnect), so
    # both pay only the TCP/IP headers (54 B per 8948-B packet: 0.6 %).
    assert analytical <= first <= second == pytest.approx(analytical, rel=0.01)
    assert b.stats()["connections"] == 8 * 7  # every pair of the ring's one group, reused


def test_without_preconnect_the_first_message_pays_the_handshake():
    cfg = net(preconnect=False)
    analytical = CongestionUnawareBackend(cfg).topology.unaware_delay_ns(0, 1, MB)
    b = ns3_backend(cfg)
    cold = deliver(b, [(0, 1, MB)])[0]
    t0 = b.now()
    warm = deliver(b, [(0, 1, MB)])[0] - t0
    assert cold == pytest.approx(analytical + 2 * LAT, rel=0.01)  # + one round trip
    assert warm == pytest.approx(analytical, rel=0.01)
    assert b.stats()["connections"] == 1


def test_udp_single_message_pays_only_headers():
    cfg = net(transport="udp")
    analytical = CongestionUnawareBackend(cfg).topology.unaware_delay_ns(0, 1, MB)
    assert deliver(ns3_backend(cfg), [(0, 1, MB)])[0] == pytest.approx(analytical, rel=0.005)


# -- congestion -------------------------------------------------------------------------------
def test_two_flows_forced_over_one_link_take_twice_as_long():
    # Ring of 8: 0 -> 2 goes through 1 (2 hops against 6), so it shares the link 1 -> 2 with 1 -> 2.
    cfg = net()
    flows = [(0, 2, MB), (1, 2, MB)]
    ns3_end = max(deliver(ns3_backend(cfg), flows).values())
    aware_end = max(deliver(CongestionAwareBackend(cfg), flows).values())
    unaware_end = max(deliver(CongestionUnawareBackend(cfg), flows).values())
    assert aware_end == pytest.approx(2 * serialisation_ns(MB), rel=0.02)  # 158250 = 2 × 78125 + 2 µs
    assert ns3_end == pytest.approx(aware_end, rel=0.10)
    assert ns3_end / unaware_end == pytest.approx(2.0, rel=0.10)


def test_switch_down_link_is_shared():
    cfg = net(("Switch",), (3,))
    one = deliver(ns3_backend(cfg), [(0, 2, MB)])[0]
    two = max(deliver(ns3_backend(cfg), [(0, 2, MB), (1, 2, MB)]).values())
    assert two / one == pytest.approx(2.0, rel=0.10)
    assert two == pytest.approx(2 * serialisation_ns(MB), rel=0.10)


# -- pairing semantics (network/api.py) ------------------------------------------------------------
def test_pairing_follows_the_analytical_backends():
    b = ns3_backend(net(("Ring",), (4,)))
    log: list[tuple[str, int]] = []

    def note(what):
        log.append((what, b.now()))

    b.send(0, 1, 1000, 5, note, "send#1")
    b.send(0, 1, 1000, 5, note, "send#2")
    b.send(0, 1, 1000, 6, note, "send tag 6")
    b.recv(1, 0, 1000, 5, note, "recv#1")
    assert log == []  # never called from inside send/recv
    b.run()
    times = dict(log)
    assert set(times) == {"send#1", "send#2", "send tag 6", "recv#1"}
    # First with first; a pair's messages share one connection, in send order (here the two
    # arrive in one TCP segment, sent when the handshake completes).
    assert times["recv#1"] == times["send#1"] <= times["send#2"]
    assert [w for w, _ in log].index("send#1") < [w for w, _ in log].index("send#2")
    t_arrived = b.now()
    b.schedule(100, lambda: b.recv(1, 0, 1000, 5, note, "recv#2 late"))
    b.run()
    assert dict(log)["recv#2 late"] == t_arrived + 100  # already arrived: fires at delay 0
    assert b.unmatched() == [
        "message rank 0 -> rank 1 (tag 6, 1000 bytes, #1) arrived but was never received"
    ]
    b.recv(2, 3, 10, 9, note, "orphan")
    b.run()
    assert b.unmatched()[1] == "receive on rank 2 from rank 3 (tag 9, 10 bytes, #1) has no matching send"


def test_schedule_is_the_ns3_clock_fifo_on_ties():
    b = ns3_backend(net(("Ring",), (4,)))
    seen: list[tuple[str, int]] = []
    for name, delay in [("a", 50), ("b", 10), ("c", 50), ("d", 0)]:
        b.schedule(delay, lambda n: seen.append((n, b.now())), name)
    b.schedule(20, lambda: b.schedule(30, lambda: seen.append(("e", b.now()))))
    b.run()
    assert seen == [("d", 0), ("b", 10), ("a", 50), ("c", 50), ("e", 50)]
    assert b.now() == 50 and b.stats()["python_calls"] == 6


def test_zero_byte_message_still_crosses_the_network():
    b = ns3_backend(net(("Ring",), (4,)))
    assert deliver(b, [(0, 2, 0)])[0] >= 2 * LAT


def test_a_callback_error_surfaces_from_run():
    b = ns3_backend(net(("Ring",), (4,)))

    def boom():
        raise KeyError("boom")

    b.schedule(5, boom)
    with pytest.raises(KeyError, match="boom"):
        b.run()
    assert b.now() == 5


def test_an_error_anywhere_in_a_hook_surfaces_from_run(monkeypatch):
    """Python's hooks are ctypes callbacks, and ctypes drops what leaves one: an interrupt in the
    progress tick (after the callback ran) must still end the run with it."""
    import network.ns3.backend as backend

    monkeypatch.setattr(backend, "_TICK_CALLS", 1)
    b = ns3_backend(net(("Ring",), (4,)))

    def tick(now, events):
        raise KeyboardInterrupt

    b.queue.on_tick = tick
    b.schedule(5, lambda: None)
    b.schedule(9, lambda: None)
    with pytest.raises(KeyboardInterrupt):
        b.run()
    assert b.now() == 5


# -- topologies, determinism, limits -----------------------------------------------------------------
def test_multi_dimensional_fully_connected_and_switch():
    cfg = net(("FullyConnected", "Switch"), (4, 2))
    times = deliver(ns3_backend(cfg), [(0, 3, MB), (1, 5, MB), (2, 7, MB)])
    one_hop = CongestionUnawareBackend(cfg).topology.unaware_delay_ns(0, 3, MB)
    assert times[0] == pytest.approx(one_hop, rel=0.01)  # an FC link
    assert times[1] > one_hop + LAT  # through the dimension-1 switch: two links


def test_same_inputs_same_times():
    flows = [(0, 2, MB), (1, 2, MB), (3, 2, 200_000), (5, 4, 300_000)]
    assert deliver(ns3_backend(net()), flows) == deliver(ns3_backend(net()), flows)


def test_a_newer_backend_takes_over_ns3():
    old = ns3_backend(net(("Ring",), (4,)))
    ns3_backend(net(("Ring",), (4,)))
    with pytest.raises(RuntimeError, match="newer Ns3Backend"):
        old.send(0, 1, 10, 0, lambda: None)


def test_too_many_connections_to_preconnect_warns_and_connects_lazily():
    with pytest.warns(UserWarning, match="ns3.preconnect: 22350 connections"):
        b = ns3_backend(net(("Switch",), (150,)))
    assert b.stats()["connections"] == 0
    assert deliver(b, [(0, 149, 1000)])[0] > 0


def test_udp_loss_is_reported_not_hung():
    b = ns3_backend(net(transport="udp", queue_size=8))
    b.send(0, 1, MB, 0, lambda: None)
    b.recv(1, 0, MB, 0, lambda: None)
    b.run()  # ns-3 runs dry: nothing retransmits
    lines = b.unmatched()
    assert "still in flight" in lines[0] and "dropped" in lines[-1]
    assert b.stats()["packets_dropped"] > 0


def test_tcp_recovers_from_a_small_queue():
    b = ns3_backend(net(queue_size=8))
    times = deliver(b, [(0, 2, MB), (1, 2, MB)])
    assert b.stats()["packets_dropped"] > 0 and len(times) == 2


def test_event_budget():
    b = ns3_backend(net(), max_events=200)
    b.send(0, 4, MB, 0, lambda: None)
    with pytest.raises(SimulationLimitError, match="event budget of 200"):
        b.run()


def test_unknown_tcp_variant_is_a_config_error():
    with pytest.raises(NetworkConfigError, match="ns3.tcp_variant"):
        ns3_backend(net(tcp_variant="TcpWarpDrive"))


# -- the whole simulator -------------------------------------------------------------------------
def test_ring_all_reduce_8npus_1MB_within_25_percent_of_analytical(tmp_path):
    from system.main import main

    network = tmp_path / "ring8.yml"
    network.write_text(f"topology: [Ring]\nnpus_count: [8]\nbandwidth: [{BW}]\nlatency: [{LAT}]\n")
    ends = {}
    for backend in ("congestion-unaware", "ns3"):
        report = tmp_path / f"{backend}.json"
        rc = main(["--workload", str(DATA / "all_reduce_8npus_1MB" / "all_reduce"), "--network", str(network),
                   "--system", str(DATA / "Ring_4chunks.json"), "--backend", backend,
                   "--report", str(report), "--quiet"])
        assert rc == 0
        ends[backend] = [r["finish_cycles"] for r in json.loads(report.read_text())["ranks"]]
    analytical, ns3 = ends["congestion-unaware"], ends["ns3"]
    assert len(ns3) == 8 and len(set(analytical)) == 1
    # Measured: 194976 analytical, 195984 ns-3 (+0.5 %): 54 B of TCP/IP/PPP headers on each
    # 8948-B packet of the 56 messages of 32 KiB in a row on each rank (~0.9 µs), and ACKs.
    for t in ns3:
        assert analytical[0] <= t <= 1.25 * analytical[0]
        assert t == pytest.approx(analytical[0], rel=0.02)


def test_max_wall_seconds_is_honoured_not_a_crash(tmp_path):
    """--backend ns3 --max-wall-seconds N crashed ('_Ns3Queue' object has no attribute
    'wall_origin'); now the run's one budget reaches ns-3: a generous one finishes, a spent one
    stops with the limit's message."""
    from system.simulation import run_simulation
    from workload.builder import write_collective_microbenchmark

    w = write_collective_microbenchmark(tmp_path / "w", 4, "ALL_REDUCE", 1 << 16, shared=True)
    (tmp_path / "r4.yml").write_text("topology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: [500]\n")
    done = run_simulation(w, tmp_path / "r4.yml", backend="ns3", max_wall_s=300)
    assert done.end_ns > 0
    with pytest.raises(SimulationLimitError, match="wall-time budget"):
        run_simulation(w, tmp_path / "r4.yml", backend="ns3", max_wall_s=1e-9, symmetry=False)


def test_one_npu_graph_without_links_runs(tmp_path):
    from system.simulation import run_simulation
    from workload.builder import GraphBuilder

    (tmp_path / "one.txt").write_text("1 0 0\n\n")
    (tmp_path / "one.yml").write_text("topology-file: one.txt\n")
    b = GraphBuilder()
    b.comp("c", 1000)
    b.write(tmp_path / "w", 0)
    assert run_simulation(tmp_path / "w", tmp_path / "one.yml", backend="ns3").end_ns == 1000


def test_a_progress_line_covers_set_up_and_simulation(tmp_path):
    """ns-3's import and set-up take seconds before the first event, and ns-3 runs its own loop:
    the progress display says what the set-up is before it starts, then ticks from ns-3's Python
    callbacks with simulated time and ns-3's event count."""
    import io

    from system.progress import ProgressBar
    from system.simulation import run_simulation
    from workload.builder import write_collective_microbenchmark

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = ProgressBar(stream, delay_s=0.0, interval_s=0.0)
    w = write_collective_microbenchmark(tmp_path / "w", 16, "ALL_REDUCE", 1 << 20, shared=True)
    (tmp_path / "r16.yml").write_text("topology: [Ring]\nnpus_count: [16]\nbandwidth: [50]\nlatency: [500]\n")
    done = run_simulation(w, tmp_path / "r16.yml", backend="ns3", progress=bar, symmetry=False)
    out = stream.getvalue()
    assert "[dtsim] ns-3: loading the ns3 package and building 16 NPUs" in out
    ticks = [line for line in out.split("\r") if line.startswith("[dtsim] simulated")]
    assert ticks and bar.draws >= 2
    last = int(float(ticks[-1].split()[2]) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[ticks[-1].split()[3]])
    assert 0 < last <= done.end_ns
    assert out.endswith("\r")          # cleared when the run ended


def test_preconnect_opens_only_the_pairs_the_run_uses_and_the_answer_is_the_same(tmp_path, monkeypatch):
    """A ring all-reduce on a Switch of 8 talks over 8 of the group's 56 pairs; a run on the
    congestion-unaware backend names them and ns-3 connects only those (at 1,024 GPUs a million
    connections were otherwise not opened at all). Unused connections carry nothing, so the
    times equal those of opening every pair."""
    from system.simulation import _RankRun, run_simulation
    from workload.builder import write_collective_microbenchmark

    w = write_collective_microbenchmark(tmp_path / "w", 8, "ALL_REDUCE", 1 << 20, shared=True)
    (tmp_path / "s8.yml").write_text("topology: [Switch]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n")
    used = run_simulation(w, tmp_path / "s8.yml", backend="ns3", symmetry=False)
    monkeypatch.setattr(_RankRun, "_pairs_used", lambda self: None)
    every = run_simulation(w, tmp_path / "s8.yml", backend="ns3", symmetry=False)
    assert used.network_stats["connections"] == 8 and every.network_stats["connections"] == 56
    assert used.finish_ns == every.finish_ns


def test_the_narrow_import_gives_the_full_imports_answer(tmp_path):
    """load_ns parses only the headers the backend uses (2 s instead of 10 s); the package's own
    import of all 42 modules (DTSIM_NS3_FULL_IMPORT=1) runs the same C++ to the same cycles, here
    on a physical graph (per-flow routes) and TCP."""
    import os
    import subprocess
    import sys

    from network.ns3 import loader
    from workload.builder import write_collective_microbenchmark

    # this process took the narrow path: the package's own import defines helpers such as Time_ge
    assert os.environ.get("DTSIM_NS3_FULL_IMPORT") != "1" and not hasattr(loader.load_ns().cppyy.gbl, "Time_ge")
    w = write_collective_microbenchmark(tmp_path / "w", 8, "ALL_TO_ALL", 1 << 18, shared=True)
    (tmp_path / "ft.yml").write_text("topology-generator: {shape: fat-tree, leaves: 2, npus-per-leaf: 4}\n")
    ends = {}
    for full in ("0", "1"):
        report = tmp_path / f"r{full}.json"
        r = subprocess.run([sys.executable, "-m", "system.main", "--workload", str(w), "--network",
                            str(tmp_path / "ft.yml"), "--backend", "ns3", "--quiet", "--report", str(report)],
                           capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2],
                           env={**os.environ, "DTSIM_NS3_FULL_IMPORT": full})
        assert r.returncode == 0, r.stderr[-2000:]
        ends[full] = [x["finish_cycles"] for x in json.loads(report.read_text())["ranks"]]
    assert ends["0"] == ends["1"] and min(ends["0"]) > 0
