"""docs/ and the README stand on their own: every relative link points into the repository, at a
file that exists (and, with an #anchor, at a heading of it), and nothing points at ../shared."""
from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_docs_do_not_point_outside_the_repository() -> None:
    for doc in DOCS:
        assert "../shared" not in doc.read_text(), doc.name


def test_relative_links_resolve() -> None:
    checked = 0
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            assert file.is_relative_to(ROOT) and file.exists(), (doc.name, target)
            if anchor:
                headings = re.findall(r"^#+ (.*)$", file.read_text(), re.M)
                assert anchor in {_anchor(h) for h in headings}, (doc.name, target)
            checked += 1
    assert checked >= 3
