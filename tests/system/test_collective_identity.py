"""Messages of different collectives never pair (issue 14, item 10).

Each collective message carries its collective's identity (type, size, group, place in the
rank's order on that group); a message whose receive belongs to another collective is exit 3,
naming both collectives and both ranks, even when tags and sizes line up.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from network.analytical.unaware import CongestionUnawareBackend
from network.config import NetworkConfig
from network.errors import MessageMismatchError
from workload.builder import GraphBuilder

MIB = 1 << 20


def _net(tmp: Path, npus: int = 4) -> Path:
    p = tmp / "ring.yml"
    p.write_text(f"topology: [ Ring ]\nnpus_count: [ {npus} ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n")
    return p


def _two_collectives(tmp: Path, swapped_ranks: set[int]) -> str:
    """Rank r runs a 4 MiB reduce-scatter then a 1 MiB all-gather, or the other order when r is
    in ``swapped_ranks``: both give 256 KiB messages with the same tags."""
    for r in range(4):
        b = GraphBuilder()
        first = ("REDUCE_SCATTER", 4 * MIB) if r not in swapped_ranks else ("ALL_GATHER", MIB)
        second = ("ALL_GATHER", MIB) if r not in swapped_ranks else ("REDUCE_SCATTER", 4 * MIB)
        a = b.collective("first", first[0], first[1])
        b.collective("second", second[0], second[1], deps=[a])
        b.write(tmp / "w", r)
    return str(tmp / "w")


@pytest.mark.parametrize("backend", ["congestion-unaware", "congestion-aware"])
def test_collectives_in_different_orders_are_exit_3_naming_both(tmp_path: Path, backend: str) -> None:
    r = run_cli("--workload", _two_collectives(tmp_path, {1, 2, 3}), "--network", str(_net(tmp_path)),
                "--backend", backend, "--no-symmetry", "--quiet")
    assert r.returncode == 3, r.stdout + r.stderr
    err = r.stderr
    assert "reduce-scatter of 4194304 bytes" in err and "all-gather of 1048576 bytes" in err
    assert "rank 0" in err and ("rank 1" in err or "rank 3" in err)
    assert "Traceback" not in err


def test_the_same_order_on_every_rank_still_runs(tmp_path: Path) -> None:
    r = run_cli("--workload", _two_collectives(tmp_path, set()), "--network", str(_net(tmp_path)),
                "--no-symmetry", "--quiet")
    assert r.returncode == 0, r.stderr


def _backend(tmp: Path) -> CongestionUnawareBackend:
    return CongestionUnawareBackend(NetworkConfig.from_file(_net(tmp)))


def test_pairing_compares_labels_in_either_posting_order(tmp_path: Path) -> None:
    b = _backend(tmp_path)
    got: list[str] = []
    b.send(0, 1, 100, 7, got.append, "sent", label=("all-reduce", 1))
    b.recv(1, 0, 100, 7, got.append, "received", label=("all-reduce", 1))
    b.recv(1, 0, 100, 8, got.append, "unlabelled")  # no label on one side: nothing to compare
    b.send(0, 1, 100, 8, got.append, "sent 8", label=("x", 2))
    b.run()
    assert got == ["sent", "received", "sent 8", "unlabelled"]
    b.recv(1, 0, 100, 7, got.append, "r", label=("all-gather", 2))
    with pytest.raises(MessageMismatchError, match=r"rank 0's message to rank 1 belongs to \('all-reduce', 3\)"):
        b.send(0, 1, 100, 7, got.append, "s", label=("all-reduce", 3))
    b2 = _backend(tmp_path)
    b2.exchange(0, 1, 3, 100, 5, ("a", 1), got.append, "x")
    with pytest.raises(MessageMismatchError, match="posted for it belongs to"):
        b2.exchange(1, 2, 0, 100, 5, ("b", 1), got.append, "y")


def test_the_ranks_of_a_run_share_one_label_object_per_collective(tmp_path: Path) -> None:
    """Every message's label is compared with its receive's: the ranks of a run share one label
    object per collective (Sys.labels), so equal labels are the same object and the comparison
    stops at identity; labels that differ stay two objects, whose mismatch the test above sees."""
    from system.main import run_simulation
    from system.stream import CollectiveLabel

    result = run_simulation(_two_collectives(tmp_path, set()), NetworkConfig.from_file(_net(tmp_path)),
                            symmetry=False)
    tables = [s.labels for s in result.systems]
    assert len(tables) == 4 and all(t is tables[0] for t in tables)
    assert list(tables[0]) == [CollectiveLabel("reduce-scatter", 4 * MIB, None, 1),
                               CollectiveLabel("all-gather", MIB, None, 2)]
    again = run_simulation(_two_collectives(tmp_path, set()), NetworkConfig.from_file(_net(tmp_path)),
                           symmetry=False)
    assert again.systems[0].labels is not tables[0]  # a table per run, not one growing across runs
