"""ASTRA-sim's --rendezvous-protocol: each message waits for an 8192-byte request from its receiver."""
from __future__ import annotations

from conftest import EXAMPLES, run_cli
from network.config import NetworkConfig
from system.main import run_simulation
from workload.builder import GraphBuilder


def test_ring_all_reduce_pays_one_request_per_step() -> None:
    args = ["--workload", str(EXAMPLES / "workload/all_reduce_8npus_1MB/all_reduce"),
            "--network", str(EXAMPLES / "network/Ring_8npus.yml"),
            "--system", str(EXAMPLES / "system/Ring_4chunks.json"), "--quiet"]
    plain = run_cli(*args)
    rdv = run_cli(*args, "--rendezvous-protocol")
    assert plain.returncode == rdv.returncode == 0, rdv.stderr
    end = lambda r: int(r.stdout.split("end ")[1].split()[0])  # noqa: E731
    bw = 50 * (1 << 30) / 1e9
    request = int(500 + 8192 / bw)  # one hop to the ring neighbour
    steps = 2 * (8 - 1) * 4  # all-reduce steps per chunk × chunks
    assert end(rdv) == end(plain) + steps * request == 64440 + 56 * 652


def test_point_to_point_waits_for_the_request(tmp_path) -> None:
    for r in range(2):
        b = GraphBuilder()
        if r == 0:
            b.send("s", 0, 1, 1 << 20, tag=3)
        else:
            b.comp("late", 30_000)
            b.recv("r", 0, 1, 1 << 20, tag=3, deps=[0])
        b.write(tmp_path / "p", r)
    net = NetworkConfig.from_dict({"topology": ["Ring"], "npus_count": [2], "bandwidth": [50], "latency": [500]})
    bw = 50 * (1 << 30) / 1e9
    data = int(500 + (1 << 20) / bw)
    request = int(500 + 8192 / bw)
    plain = run_simulation(tmp_path / "p", net)
    rdv = run_simulation(tmp_path / "p", net, rendezvous=True)
    assert plain.finish_ns == [data, 30_000]  # the data was already there when the receive was posted
    # the receive is posted at 30 µs, its request reaches the sender, and only then the data leaves
    assert rdv.finish_ns == [30_000 + request + data] * 2


def test_bad_value_is_exit_2() -> None:
    r = run_cli("--workload", "x", "--network", "y", "--rendezvous-protocol=maybe")
    assert r.returncode == 2 and "--rendezvous-protocol" in r.stderr
