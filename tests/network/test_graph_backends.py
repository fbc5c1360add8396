"""Every backend on a physical graph: a one-switch star equals the built-in Switch (on the aware
backend when its packets are whole chunks), the
unaware time is the path's closed form, oversubscription slows a cross-leaf all-to-all on the
aware backend and on ns-3, and the link-class report shows where the bytes went."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from network.analytical.aware import CongestionAwareBackend
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from system.report import build_report, format_breakdown
from system.simulation import run_simulation
from workload.builder import write_collective_microbenchmark

from conftest import need

MB = 1 << 20


def _system(tmp: Path, impl: str) -> Path:
    p = tmp / f"sys_{impl}.json"
    cfg = {"scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
           "preferred-dataset-splits": 4, "collective-optimization": "localBWAware", "local-mem-bw": 1600}
    for c in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
        cfg[f"{c}-implementation"] = [impl]
    p.write_text(json.dumps(cfg))
    return p


def _fat_tree_yaml(tmp: Path, os_: int) -> Path:
    p = tmp / f"ft{os_}.yml"
    p.write_text(f"topology-generator: {{shape: fat-tree, leaves: 4, npus-per-leaf: 8, oversubscription: {os_}}}\n")
    return p


@pytest.mark.parametrize("coll, impl", [("ALL_REDUCE", "ring"), ("ALL_TO_ALL", "direct")])
@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_one_switch_star_equals_switch(tmp_path, coll, impl, backend):
    # a file's rate is bits/s exactly; YAML bandwidth 50 is ASTRA-sim's 50 x 2^30 bytes/s = 429.4967296 Gbps
    (tmp_path / "star.txt").write_text("17 1 16\n16\n" + "".join(f"{i} 16 429.4967296Gbps 0.0005ms 0\n"
                                                                for i in range(16)))
    (tmp_path / "star.yml").write_text("topology-file: star.txt\n")
    (tmp_path / "sw.yml").write_text("topology: [Switch]\nnpus_count: [16]\nbandwidth: [50]\nlatency: [500]\n")
    w = write_collective_microbenchmark(tmp_path / "w", 16, coll, MB, shared=True)
    s = _system(tmp_path, impl)
    switch = run_simulation(w, tmp_path / "sw.yml", s, backend=backend, symmetry=False)
    if backend == "congestion-aware":
        # a file's links carry packets (9000 B), which pipeline through the switch; with packets as
        # large as a message the file's links store and forward whole chunks, as ASTRA-sim's Switch
        (tmp_path / "star_sf.yml").write_text("topology-file: star.txt\ncongestion_aware: {packet_bytes: 1073741824}\n")
        whole = run_simulation(w, tmp_path / "star_sf.yml", s, backend=backend)
        assert whole.finish_ns == switch.finish_ns
        piped = run_simulation(w, tmp_path / "star.yml", s, backend=backend)
        assert all(a < b for a, b in zip(piped.finish_ns, switch.finish_ns))
    else:
        star = run_simulation(w, tmp_path / "star.yml", s, backend=backend)
        assert star.finish_ns == switch.finish_ns


def test_unaware_message_is_latencies_plus_size_over_slowest_link():
    cfg = NetworkConfig.from_dict({"topology-generator": {"shape": "fat-tree", "leaves": 2, "npus-per-leaf": 4,
                                                          "oversubscription": 2, "uplinks-per-leaf": 1,
                                                          "uplink-latency": "1us"}})
    b = CongestionUnawareBackend(cfg)
    got = {}
    for dst in (1, 4):
        b.recv(dst, 0, MB, 0, lambda d=dst: got.__setitem__(d, b.now()))
        b.send(0, dst, MB, 0, lambda: None)
    b.run()
    npu_bw = 50.0                 # 400 Gbps: 50 bytes per ns, exactly
    up_bw = 50.0 * 4 / 2          # 4 NPUs of 400 Gbps over one uplink at 2:1
    assert got[1] == int(500 + 500 + MB / npu_bw)
    assert got[4] == int(500 + 1000 + 1000 + 500 + MB / min(npu_bw, up_bw))


@pytest.mark.parametrize("packet, want", [
    (None, 4 * 500 + int(MB / 50.0) + 3 * int(9000 / 50.0)),   # 9000 B packets pipeline over the 4 hops
    (MB, 4 * int(500 + MB / 50.0)),                             # whole-message packets: store and forward
    (4096, 4 * 500 + int(MB / 50.0) + 3 * int(4096 / 50.0)),
])
def test_aware_pipelines_packets_along_the_path(packet, want):
    gen = {"topology-generator": {"shape": "fat-tree", "leaves": 2, "npus-per-leaf": 2}}
    cfg = NetworkConfig.from_dict({**gen, **({"congestion_aware": {"packet_bytes": packet}} if packet else {})})
    b = CongestionAwareBackend(cfg)
    got = []
    b.recv(3, 0, MB, 5, lambda: got.append(b.now()))
    b.send(0, 3, MB, 5, lambda: None)
    b.run()
    assert got == [want]  # npu-leaf-spine-leaf-npu, 400 Gbps = 50 bytes/ns each, 500 ns each
    st = b.stats()
    assert {k: v["bytes"] for k, v in st["link_classes"].items()} == {"npu-leaf": 2 * MB, "leaf-spine": 2 * MB}


def test_whole_message_packets_store_and_forward_to_the_cycle_with_fractional_latency(tmp_path):
    """With packets as large as a message a file's links are the Switch's Link to the cycle, also
    where latency and size / bandwidth both have fractions (int(end + L) alone came a cycle short)."""
    (tmp_path / "star.txt").write_text("9 1 8\n8\n" + "".join(f"{i} 8 429.4967296Gbps 0.0001234ms 0\n"
                                                              for i in range(8)))
    (tmp_path / "star.yml").write_text("topology-file: star.txt\ncongestion_aware: {packet_bytes: 1073741824}\n")
    (tmp_path / "sw.yml").write_text("topology: [Switch]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [123.4]\n")
    w = write_collective_microbenchmark(tmp_path / "w", 8, "ALL_REDUCE", (1 << 20) + 4099, shared=True)
    s = _system(tmp_path, "ring")
    star = run_simulation(w, tmp_path / "star.yml", s, backend="congestion-aware")
    switch = run_simulation(w, tmp_path / "sw.yml", s, backend="congestion-aware", symmetry=False)
    assert star.finish_ns == switch.finish_ns


def test_packets_queue_behind_each_other_and_a_slow_hop_holds_the_tail(tmp_path):
    """Two messages into one down-link: the second waits for the first (FIFO); a path whose last
    hop is slower than its first ends when the tail has crossed the slow hop."""
    text = "4 1 3\n3\n0 3 800Gbps 0.0005ms 0\n1 3 800Gbps 0.0005ms 0\n2 3 400Gbps 0.0005ms 0\n"
    (tmp_path / "t.txt").write_text(text)
    b = CongestionAwareBackend(NetworkConfig.from_dict({"topology-file": str(tmp_path / "t.txt")}))
    got = {}
    for src in (0, 1):
        b.recv(2, src, MB, 7, lambda s=src: got.__setitem__(s, b.now()))
        b.send(src, 2, MB, 7, lambda: None)
    b.run()
    fast, slow, p = MB / 100.0, MB / 50.0, 9000
    first = int(500 + p / 100.0)                       # first packet at the switch
    end0 = max(first + int(slow), int(int(fast) + 500) + int(p / 50.0))
    assert got[0] == int(end0 + 500)
    end1 = max(end0 + int(slow), int(int(fast) + 500) + int(p / 50.0))   # queued behind message 0
    assert got[1] == int(end1 + 500)


def _a2a(tmp_path: Path, backend: str, size: int) -> dict[int, object]:
    w = write_collective_microbenchmark(tmp_path / f"a2a{size}", 32, "ALL_TO_ALL", size, shared=True)
    s = _system(tmp_path, "direct")
    return {os_: run_simulation(w, _fat_tree_yaml(tmp_path, os_), s, backend=backend) for os_ in (1, 4)}


def test_oversubscription_slows_cross_leaf_all_to_all_on_aware(tmp_path):
    runs = _a2a(tmp_path, "congestion-aware", 8 * MB)
    t = {k: max(r.finish_ns) for k, r in runs.items()}
    assert t[4] >= 2 * t[1]
    rep = {k: build_report(r) for k, r in runs.items()}
    cls = {k: r["network"]["link_classes"] for k, r in rep.items()}
    assert cls[4]["leaf-spine"]["peak_utilisation"] > 0.8 > cls[4]["npu-leaf"]["peak_utilisation"]
    # each of the 32×31 messages of 8 MiB / 32 crosses its two NPU links; 24 of 31 cross leaves
    assert cls[1]["npu-leaf"]["bytes"] == 2 * 32 * 31 * (8 * MB // 32)
    assert cls[1]["leaf-spine"]["bytes"] == 2 * 32 * 24 * (8 * MB // 32)
    assert "leaf-spine" in format_breakdown(rep[4])


def test_ns3_oversubscription_and_agreement_with_aware(tmp_path):
    need("ns", "ns3", import_it=False)
    ns3 = {k: max(r.finish_ns) for k, r in _a2a(tmp_path, "ns3", 2 * MB).items()}
    aware = {k: max(r.finish_ns) for k, r in _a2a(tmp_path, "congestion-aware", 2 * MB).items()}
    assert ns3[4] >= 2 * ns3[1]
    for k in (1, 4):
        # both move packets over the same per-pair paths: +0.9 % and +2.2 % measured (whole-chunk
        # store and forward on the aware side was 25 % apart allowed, and needed it)
        assert abs(ns3[k] - aware[k]) <= 0.05 * aware[k], (k, ns3[k], aware[k])


def test_compare_backends_takes_a_topology_file(tmp_path, capsys):
    from dtsim_tools import compare_backends as cb
    from network.topology_file import write_topology_file
    from network.topology_gen import fat_tree

    write_topology_file(tmp_path / "ft.txt", fat_tree(4, 2, oversubscription=2))
    w = write_collective_microbenchmark(tmp_path / "ar", 8, "ALL_REDUCE", MB, shared=True)
    code = cb.main(["--workload", w, "--topology-file", str(tmp_path / "ft.txt"), "--logical-dims", "4,2",
                    "--backends", "congestion-unaware", "congestion-aware", "--json", str(tmp_path / "rows.json")])
    assert code == 0
    rows = json.loads((tmp_path / "rows.json").read_text())
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert set(rows[1]["link_classes"]) == {"npu-leaf", "leaf-spine"}
    assert "peak link utilisation" in capsys.readouterr().out
