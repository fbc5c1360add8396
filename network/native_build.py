"""The C sources of ``network._event_core`` (setup.py compiles them into one extension) and their
checksum, which the build writes into the binary: a binary compiled from other sources than the
ones beside it (a checkout edited or updated after ``pip install -e .``) is then not used, so a
stale binary can never run with semantics its sources no longer have."""
from __future__ import annotations

import zlib
from pathlib import Path

SOURCES = ("_event_core.c", "_aware_links.c", "_pairing.c", "_event_core.h")


def source_checksum(folder: Path) -> str | None:
    """The sources' CRC-32 as 8 hex digits; None where they are not all there (an installed wheel
    carries the binary only)."""
    crc = 0
    try:
        for name in SOURCES:
            crc = zlib.crc32((folder / name).read_bytes(), crc)
    except OSError:
        return None
    return f"{crc:08x}"
