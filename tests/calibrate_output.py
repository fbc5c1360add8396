"""Reading what `python -m network.calibrate` prints, for the calibration tests."""
from __future__ import annotations

import re


def geomeans(out: str) -> dict[str, float]:
    """Per printed table: its name → the simulator's geomean error in % (with --node a closed-form
    line follows it, which this leaves out)."""
    found, name = {}, None
    for line in out.splitlines():
        m = re.match(r"(\S+): \w+ on (\d+) NPUs", line)
        if m:
            name = m.group(1)
        m = re.match(r"  geomean error ([\d.]+) %", line)
        if m and name:
            found[name] = float(m.group(1))
    return found
