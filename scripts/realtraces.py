#!/usr/bin/env python
"""Real multi-rank PyTorch runs against the simulator: ``collect`` then ``check``
(the code is dtsim_tools/realtraces/harness.py).

    python scripts/realtraces.py collect --models lstm,cnn_bn --ranks 2,4 --out /tmp/rt/runs
    python scripts/realtraces.py check /tmp/rt/runs [--network N.yml] [--json OUT.json]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dtsim_tools.realtraces.harness import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
