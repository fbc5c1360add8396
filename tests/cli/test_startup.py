"""Start-up: a plain run imports only what it uses (issue 13: a tiny workload must not pay for
the TrioSim converter, the plotter, numpy or gzip)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from workload.builder import write_collective_microbenchmark

ROOT = Path(__file__).resolve().parents[2]
UNUSED = ["workload.triosim.converter", "workload.triosim.trace", "system.plot", "system.trace_export",
          "numpy", "gzip", "traceback", "csv", "fractions"]


def test_a_small_run_does_not_import_what_it_does_not_use(tmp_path: Path) -> None:
    spec = write_collective_microbenchmark(tmp_path / "ar", 16, "ALL_REDUCE", 1 << 20)
    net = tmp_path / "net.yml"
    net.write_text("topology: [Ring]\nnpus_count: [16]\nbandwidth: [50]\nlatency: [500]\n")
    code = (
        "import sys, json\n"
        "from system.main import main\n"
        f"rc = main(['--workload', {str(spec)!r}, '--network', {str(net)!r}, '--quiet'])\n"
        f"print(json.dumps([rc, [m for m in {UNUSED!r} if m in sys.modules]]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    rc, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0 and "end 99640 cycles" in out.stdout  # ASTRA-sim's 16-NPU 1 MB ring all-reduce
    assert loaded == []


def test_the_triosim_package_still_offers_its_names_lazily() -> None:
    import workload.triosim as t

    assert callable(t.convert_triosim) and callable(t.is_trace_dir) and t.Layout.__name__ == "Layout"
    assert "convert_triosim" in dir(t)
