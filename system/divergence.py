"""Where dtsim answers and ASTRA-sim would not: it loops, never finishes, or aborts.

ASTRA-sim 2.0 gives no answer on a few inputs that still have an obvious meaning. dtsim answers
them, and says so: each place notes what ASTRA-sim does and what dtsim does instead, once per
run (docs/astra-sim-semantics.md, "Where dtsim answers and ASTRA-sim does not"). The notes become
``AstraSimDiffers`` warnings and the report's ``inputs.astra_sim_differs``. Inputs with no
sensible answer are refused instead (exit 2), where they are found.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Iterable


class AstraSimDiffers(UserWarning):
    """dtsim answers an input on which ASTRA-sim loops, never finishes or aborts."""


class Divergences:
    """The notes of one attempt at a run, first note per key kept."""

    __slots__ = ("_notes",)

    def __init__(self) -> None:
        self._notes: dict[object, str] = {}

    def note(self, key: object, message: str) -> None:
        if key not in self._notes:
            self._notes[key] = message

    def __contains__(self, key: object) -> bool:
        return key in self._notes

    @property
    def messages(self) -> list[str]:
        return list(self._notes.values())


def world_tag_disagreements(first_ids: Iterable[tuple[int, dict[int, int]]]) -> str | None:
    """ASTRA-sim tags a world collective's chunks with a per-rank counter that group collectives
    advance too (Sys::generate_collective: ``stream_id = num_streams++`` before a group's own
    counter replaces it). ``first_ids``: per rank, {world collective number: ASTRA-sim's tag of its
    first chunk}. A note on the first collective whose ranks disagree, or None."""
    tags: dict[int, dict[int, list[int]]] = {}
    for rank, ids in first_ids:
        for seq, tag in ids.items():
            tags.setdefault(seq, {}).setdefault(tag, []).append(rank)
    for seq in sorted(tags):
        by_tag = tags[seq]
        if len(by_tag) > 1:
            parts = "; ".join(f"rank(s) {_ranks(rs)}: tag {t}" for t, rs in sorted(by_tag.items()))
            return (f"world collective #{seq}: ASTRA-sim numbers its chunks with one counter per rank that "
                    f"communicator-group collectives advance too, so the ranks tag it differently ({parts}); "
                    "its messages never pair and ASTRA-sim never finishes (exit 0, no rank finished). dtsim "
                    "numbers world and group collectives apart and answers")
    return None


def _ranks(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    return ", ".join(map(str, ranks[:8])) + (f", ... ({len(ranks)} ranks)" if len(ranks) > 8 else "")
