"""Topology files (ASTRA-sim ns-3 / SimAI format): what loads, what is refused and where, and
the generators that write them. Fixtures are written here, in the two projects' layouts."""
from __future__ import annotations

import pytest

from network.config import NetworkConfig
from network.graph_routes import RouteTable
from network.topology_file import TopologyFileError, format_topology, parse_topology_text, read_topology_file
from network.topology_gen import GeneratorError, fat_tree, fat_tree_3, generate, main as gen_main, rail_optimized
from tests.conftest import run_cli

STAR = "9 1 8\n8\n" + "".join(f"8 {i} 400Gbps 0.0005ms 0\n" for i in range(8))


def _bps(link) -> float:
    """A link's rate in bit/s: the YAML unit is GB/s of 2^30 bytes (ASTRA-sim's)."""
    return link.bandwidth_gb_s * 2**30 * 8


def simai_file(servers: int = 2, gps: int = 4) -> str:
    """SimAI's layout: 6-field header, NVSwitch ids first, then ASWs and one PSW, trailing space."""
    gpus = servers * gps
    nv = list(range(gpus, gpus + servers))
    asw = list(range(gpus + servers, gpus + servers + gps))
    psw = gpus + servers + gps
    lines = [f"{psw + 1} {gps} {servers} {gps + 1} {gpus * 2 + gps} H100", " ".join(map(str, nv + asw + [psw])) + " "]
    for g in range(gpus):
        lines.append(f"{g} {nv[g // gps]} 2880Gbps 0.000025ms 0")
        lines.append(f"{g} {asw[g % gps]} 400Gbps 0.0005ms 0")
    lines += [f"{a} {psw} 400Gbps 0.0005ms 0" for a in asw]
    return "\n".join(lines) + "\n"


def test_astra_sim_star_loads():
    g = parse_topology_text(STAR)
    assert g.npus == tuple(range(8)) and g.switches == {8}
    assert _bps(g.links[0]) == 400e9 and g.links[0].latency_ns == pytest.approx(500.0)  # bits/s, exactly
    assert set(g.link_classes) == {"npu-leaf"}


def test_simai_header_marks_nvswitches_and_classes():
    g = parse_topology_text(simai_file())
    assert g.npus == tuple(range(8))
    assert g.nvswitches == {8, 9} and len(g.switches) == 2 + 4 + 1
    assert set(g.link_classes) == {"npu-nvswitch", "npu-leaf", "leaf-spine"}
    # same server: through its NVSwitch; same rail on another server: through the rail switch
    r = RouteTable(g)
    assert r.node_path(0, 1) == [0, 8, 1]
    assert r.node_path(0, 4) == [0, 10, 4]


def test_stream_quirks_load():
    """Ids over two lines, an empty id line, extra spaces, a missing error rate, trailing fields,
    comments, and the unit spellings ns-3 reads."""
    g = parse_topology_text("5 2 4\n3\n 4 \n0 3 100Mbps 1us\n1  3 1.6Tbps 10ns 0 extra\n2 3 50GBps 0.5us 0 # c\n3 4 8Gibps 0.001ms 0\n")
    assert g.switches == {3, 4} and g.npus == (0, 1, 2)
    assert [_bps(x) for x in g.links] == [100e6, 1.6e12, 50e9 * 8, 8 * 1024**3]
    assert [x.latency_ns for x in g.links] == pytest.approx([1000.0, 10.0, 500.0, 1000.0])
    assert parse_topology_text("# drawn by hand\n\n" + STAR).switches == {8}  # blank and comment lines first
    ring = parse_topology_text("4 0 4\n\n0 1 25Gbps 0.005ms 0\n1 2 25Gbps 0.005ms 0\n2 3 25Gbps 0.005ms 0\n3 0 25Gbps 0.005ms 0\n")
    assert RouteTable(ring).node_path(0, 2) in ([0, 1, 2], [0, 3, 2])  # NPUs forward when no switch does


def test_lines_after_the_announced_links_are_ignored_with_a_warning():
    with pytest.warns(UserWarning, match="1 line.*ignored"):
        g = parse_topology_text(STAR + "8 0 400Gbps 0.0005ms 0\n")
    assert len(g.links) == 8


@pytest.mark.parametrize("text, where, what", [
    ("9 1 8\n8\n" + "8 9 400Gbps 0.0005ms 0\n" * 8, "line 3, column 3", "node id must be from 0 to 8"),
    ("3 1 2\n2\n0 2 400Gbps 1us 0\n1 1 400Gbps 1us 0\n", "line 4, column 3", "to itself"),
    ("3 1 2\n2\n0 2 400Gbps 1us 0\n1 2 400Gbit 1us 0\n", "line 4, column 5", "link rate"),
    ("3 1 2\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1 0\n", "line 4, column 13", "latency"),
    ("4 1 2\n3\n0 3 400Gbps 1us 0\n1 3 400Gbps 1us 0\n", "links", "NPU node 2 (rank 2) has no link"),
    ("5 1 3\n4\n0 4 400Gbps 1us 0\n1 4 400Gbps 1us 0\n2 3 400Gbps 1us 0\n", "links", "cannot reach NPU node 0 through switches"),
    ("3 1 3\n2\n0 2 400Gbps 1us 0\n1 2 400Gbps 1us 0\n", "line 5", "announces 3 links"),
    ("3 1\n2\n", "line 1", "got 2 fields"),
    ("3 1 2\n7\n", "line 2, column 1", "switch id must be from 0 to 2"),
])
def test_bad_files_name_line_and_column(text, where, what):
    with pytest.raises(TopologyFileError) as e:
        parse_topology_text(text, "t.txt")
    assert e.value.where == where and what in e.value.problem


def test_bad_file_is_exit_2_with_the_place(tmp_path):
    (tmp_path / "t.txt").write_text("3 1 2\n2\n0 2 400Gbps 1us 0\n1 5 400Gbps 1us 0\n")
    (tmp_path / "n.yml").write_text("topology-file: t.txt\n")
    (tmp_path / "w.et").write_bytes(b"")
    r = run_cli("--workload", str(tmp_path / "w.et"), "--network", str(tmp_path / "n.yml"))
    assert r.returncode == 2 and "t.txt: line 4, column 3" in r.stderr and "Traceback" not in r.stderr


def test_yaml_keys_and_logical_dims(tmp_path):
    (tmp_path / "star.txt").write_text(STAR)
    cfg = NetworkConfig.from_dict({"topology-file": "star.txt", "npus_count": [4, 2]}, tmp_path / "n.yml")
    assert cfg.topology.npus_count_per_dim == [4, 2] and len(cfg.topology.graph.links) == 8
    assert NetworkConfig.from_dict({"topology-file": "star.txt"}, tmp_path / "n.yml").topology.npus_count_per_dim == [8]
    with pytest.raises(Exception, match="hold 6 NPUs"):
        NetworkConfig.from_dict({"topology-file": "star.txt", "npus_count": [3, 2]}, tmp_path / "n.yml")
    with pytest.raises(Exception, match="belongs to the built-in networks"):
        NetworkConfig.from_dict({"topology-file": "star.txt", "bandwidth": 50}, tmp_path / "n.yml")
    (tmp_path / "ld.json").write_text('{"logical-dims": ["2", "4"]}')
    from network.graph_config import read_logical_dims

    assert cfg.with_logical_dims(read_logical_dims(tmp_path / "ld.json"), "ld.json").topology.npus_count_per_dim == [2, 4]


def test_fat_tree_oversubscription_sets_uplinks():
    g = fat_tree(npus_per_leaf=8, leaves=4, oversubscription=4)
    up = [x for x, c in zip(g.links, g.link_classes) if c == "leaf-spine"]
    assert len(up) == 4 * 2 and {_bps(x) for x in up} == {400e9}  # 2 uplinks of 400 Gbps per leaf
    g2 = fat_tree(npus_per_leaf=8, leaves=4, uplinks_per_leaf=4, oversubscription=4)
    assert {_bps(x) for x, c in zip(g2.links, g2.link_classes) if c == "leaf-spine"} == {200e9}
    g3 = fat_tree(npus_per_leaf=8, leaves=2, uplinks_per_leaf=4, spines=2)  # 2 parallel links per pair
    assert len(g3.switches) == 4 and len(g3.links) == 16 + 8
    with pytest.raises(GeneratorError, match="spread evenly"):
        fat_tree(npus_per_leaf=8, leaves=2, uplinks_per_leaf=3, spines=2)


def test_three_tier_paths_and_rail_optimized():
    g = fat_tree_3(npus_per_leaf=4, leaves=2, pods=2, uplinks_per_leaf=2, spine_uplinks=2)
    assert set(g.link_classes) == {"npu-leaf", "leaf-spine", "spine-core"}
    r = RouteTable(g)
    assert len(r.path(0, 1)) == 2 and len(r.path(0, 4)) == 4 and len(r.path(0, 8)) == 6
    ro = rail_optimized(servers=4, gpus_per_server=8)
    assert len(ro.nvswitches) == 4 and format_topology(ro, gpus_per_server=8).startswith("44 8 4 8 64 NONE\n")


def test_generated_files_read_back_and_ecmp_spreads(tmp_path):
    for g in (fat_tree(8, 4, oversubscription=2), rail_optimized(2, 4, spines=2), fat_tree_3(2, 2, 2)):
        (tmp_path / "g.txt").write_text(format_topology(g, gpus_per_server=4))
        back = read_topology_file(tmp_path / "g.txt")
        assert [(x.a, x.b, x.bandwidth_gb_s) for x in back.links] == [(x.a, x.b, x.bandwidth_gb_s) for x in g.links]
        assert [x.latency_ns for x in back.links] == pytest.approx([x.latency_ns for x in g.links])
        assert back.switches == g.switches and back.nvswitches == g.nvswitches
    r = RouteTable(fat_tree(8, 4))  # 8 spines
    spines = {r.node_path(0, 8, tag)[2] for tag in range(200)}
    assert len(spines) == 8  # different flows, different spines
    assert r.path(0, 8, 7) == RouteTable(fat_tree(8, 4)).path(0, 8, 7)  # reproducible


def test_generator_command_and_yaml_form(tmp_path):
    out = tmp_path / "ft.txt"
    assert gen_main(["fat-tree", "--leaves", "4", "--npus-per-leaf", "8", "--oversubscription", "4", "-o", str(out)]) == 0
    assert out.read_text().startswith("38 6 40\n")
    assert gen_main(["fat-tree", "--leaves", "0", "--npus-per-leaf", "8", "-o", str(out)]) == 2
    cfg = NetworkConfig.from_dict({"topology-generator": {"shape": "fat-tree", "leaves": 4, "npus-per-leaf": 8}}, None)
    assert len(cfg.topology.graph.npus) == 32
    with pytest.raises(GeneratorError, match="unknown parameter"):
        generate({"shape": "fat-tree", "leaves": 4, "npus-per-leaf": 8, "wings": 2})


def test_generator_draws_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "ft.png"
    assert gen_main(["fat-tree", "--leaves", "2", "--npus-per-leaf", "4", "-o", str(tmp_path / "ft.txt"), "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_400gbps_link_moves_50_bytes_per_ns_on_the_analytical_backends(tmp_path):
    """The worked example of docs/network-backends.md: 1 GiB between two NPUs through one switch,
    over 400Gbps links of 250 ns, takes 2^30 / 50 + 500 ns on the unaware backend (21,475,336 ns,
    what ASTRA-sim's and SimAI's ns-3 give on one such 500 ns link), not the 20,000,500 ns that
    reading 400Gbps as ASTRA-sim's 50 GB/s (of 2^30 bytes) gave."""
    from network.analytical.aware import CongestionAwareBackend
    from network.analytical.unaware import CongestionUnawareBackend
    from network.config import NetworkConfig

    (tmp_path / "pair.txt").write_text("3 1 2\n2\n0 2 400Gbps 0.00025ms 0\n1 2 400Gbps 0.00025ms 0\n")
    cfg = NetworkConfig.from_dict({"topology-file": str(tmp_path / "pair.txt")})
    for cls in (CongestionUnawareBackend, CongestionAwareBackend):
        b = cls(cfg)
        got = []
        b.recv(1, 0, 1 << 30, 0, lambda b=b: got.append(b.now()))
        b.send(0, 1, 1 << 30, 0, lambda: None)
        b.run()
        per_hop = (1 << 30) / 50
        # unaware: the slowest link's serialisation once; aware: the same plus one 9000 B packet's
        # serialisation at the switch (the message pipelines through it as packets)
        want = int(250 + 250 + per_hop) if cls is CongestionUnawareBackend else int(250 + 250 + per_hop) + 180
        assert got == [want], cls.__name__


_SERVERS = ("4 5\n" + "".join(f"{g} 4 2880Gbps 0.000025ms 0\n" for g in range(4))
            + "".join(f"{g} 5 400Gbps 0.0005ms 0\n" for g in range(4)))


@pytest.mark.parametrize("text, where, what", [
    ("3 1 2\n2\n0 2 0Gbps 0.0005ms 0\n1 2 400Gbps 0.0005ms 0\n", "line 3, column 5", "must be above 0"),
    ("3 1 3\n2\n0 2 400Gbps 0.0005ms 0\n1 2 400Gbps 0.0005ms 0\n2 0 200Gbps 0.0005ms 0\n", "line 5",
     "contradicts line 3's link between the same nodes"),
    ("6 3 1 1 8 H100\n" + _SERVERS, "line 1, column 3", "do not fill whole servers"),
    ("6 2 1 1 8 H100\n" + _SERVERS, "line 1, column 3", "NVSwitch node 4 links GPUs of servers 0 and 1"),
])
def test_contradictions_in_a_file_are_refused_with_their_place(text, where, what):
    with pytest.raises(TopologyFileError) as e:
        parse_topology_text(text, "t.txt")
    assert where in str(e.value) and what in str(e.value)


def test_parallel_links_that_agree_are_kept_and_a_right_server_size_is_read():
    g = parse_topology_text("3 1 3\n2\n0 2 400Gbps 0.0005ms 0\n1 2 400Gbps 0.0005ms 0\n2 0 400Gbps 0.0005ms 0\n")
    assert len(g.links) == 3
    assert parse_topology_text("6 4 1 1 8 H100\n" + _SERVERS).nvswitches == {4}


@pytest.mark.parametrize("text, what", [
    ("2 1 1\n1\n0 1 400Gbps 0.0005ms 0\n", "this is a topology file"),
    ("ENABLE_QCN 1\nUSE_DYNAMIC_PFC_THRESHOLD 1\nTOPOLOGY_FILE topo/8.txt\n", "this is ASTRA-sim ns-3's config.txt"),
])
def test_a_text_file_given_as_the_network_yaml_names_topology_file(tmp_path, text, what):
    from network.config import NetworkConfig
    from network.errors import NetworkConfigError

    (tmp_path / "x.txt").write_text(text)
    with pytest.raises(NetworkConfigError) as e:
        NetworkConfig.from_file(tmp_path / "x.txt")
    assert what in str(e.value) and "topology-file:" in str(e.value)


def test_routes_follow_simais_rules_npus_never_forward_and_servers_use_their_nvswitch():
    """graph_routes.py: SimAI's CalculateRoute. (1) NPU 2 links NPUs 0 and 1 as directly as the
    switch does; only the switch forwards. (2) SimAI's DCN+ shape: a server's 4 GPUs on one ToR
    and on their NVSwitch, both 2 hops; every same-server pair takes the NVSwitch, for every tag."""
    tri = parse_topology_text("4 1 5\n3\n0 2 400Gbps 1us 0\n2 1 400Gbps 1us 0\n0 3 400Gbps 1us 0\n"
                              "1 3 400Gbps 1us 0\n2 3 400Gbps 1us 0\n")
    r = RouteTable(tri)
    assert {tuple(r.node_path(0, 1, tag)) for tag in range(32)} == {(0, 3, 1)}
    # 2 servers of 4 GPUs (0-7), NVSwitches 8 and 9, one ToR 10 for all
    links = [f"{g} {8 + g // 4} 2880Gbps 0.000025ms 0" for g in range(8)] + [f"{g} 10 400Gbps 0.0005ms 0"
                                                                              for g in range(8)]
    dcn = parse_topology_text(f"11 4 2 1 16 H100\n8 9 10\n" + "\n".join(links) + "\n")
    r = RouteTable(dcn)
    for a in range(8):
        for b in range(8):
            if a != b:
                mid = {tuple(r.node_path(a, b, tag))[1] for tag in range(16)}
                assert mid == ({8 + a // 4} if a // 4 == b // 4 else {10}), (a, b, mid)


@pytest.mark.parametrize("collective", ["ALL_TO_ALL", "ALL_REDUCE"])
def test_ring_phases_on_a_topology_file_batch_on_the_unaware_backend(tmp_path, collective):
    """One path per pair makes a message's unaware delay a function of (src, dst, size) on a
    topology file too, so the ring batcher advances the phases without events (an all-to-all on
    SimAI's 128-GPU AlibabaHPN file: 20.6 s to 0.75 s); cycles and the per-link report equal the
    every-event path's, on a file whose ring crosses fast and slow links (NVSwitch and ToR)."""
    from system.report import build_report
    from system.simulation import run_simulation
    from workload.builder import write_collective_microbenchmark

    (tmp_path / "simai.txt").write_text(simai_file(servers=4, gps=4))
    net = NetworkConfig.from_dict({"topology-file": str(tmp_path / "simai.txt")})
    w = write_collective_microbenchmark(tmp_path / "w", 1, collective, 1 << 20, shared=True)
    fast = run_simulation(w, net, backend="congestion-unaware")
    slow = run_simulation(w, net, backend="congestion-unaware", batching=False)
    assert fast.inputs["shortcut"] == "batched" and slow.inputs["shortcut"] == "none"
    assert fast.finish_ns == slow.finish_ns and fast.end_ns > 0
    a, b = build_report(fast)["network"], build_report(slow)["network"]
    assert a["link_classes"] == b["link_classes"] and a["bytes_per_dim"] == b["bytes_per_dim"]
    assert fast.events * 10 < slow.events


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_a_pair_the_topology_cannot_join_is_exit_2_naming_the_file(tmp_path, backend):
    """A rail-optimized cluster without spines joins rails only inside a server: a ring that
    crosses servers between rails has no path. That is the network file's fault: exit 2, with
    the file and the pair, not an internal error."""
    from workload.builder import write_collective_microbenchmark

    w = write_collective_microbenchmark(tmp_path / "w", 8, "ALL_REDUCE", 1 << 20, shared=True)
    (tmp_path / "n.yml").write_text("topology-generator: {shape: rail-optimized, servers: 2, gpus-per-server: 4}\n"
                                    "npus_count: [8]\n")
    r = run_cli("--workload", w, "--network", str(tmp_path / "n.yml"), "--backend", backend)
    assert r.returncode == 2, r.stderr
    assert str(tmp_path / "n.yml") in r.stderr and "cannot reach rank" in r.stderr and "Traceback" not in r.stderr
