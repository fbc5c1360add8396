"""network/files.py's path functions answer as pathlib does: a run names and tests its files with
them (pathlib costs every process 0.6 MB and ~4 ms), and messages and reports show those names."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from chakra_proto.io import _path_str as chakra_path_str
from network.files import exists, is_dir, is_file, make_folders, path_join, path_parent, path_str, path_suffix

PARTS = st.sampled_from(["", ".", "..", "a", "b.json", "c.", "..json", ".hidden", "d.tar.gz", "e f", "é"])
PATHS = st.builds(lambda lead, parts, tail: lead + "/".join(parts) + tail,
                  st.sampled_from(["", "/", "//", "///", "./"]), st.lists(PARTS, max_size=5),
                  st.sampled_from(["", "/", "//", "/."]))


@settings(max_examples=2000, deadline=None)
@given(PATHS, PARTS.filter(lambda p: p not in ("", ".")))
def test_names_are_pathlibs(s: str, name: str) -> None:
    p = Path(s)
    assert path_str(s) == str(p) == chakra_path_str(s)  # chakra_proto keeps its own twin (a leaf package)
    assert path_parent(path_str(s)) == str(p.parent)
    assert path_suffix(path_str(s)) == p.suffix
    assert path_join(s, name) == str(p / name)


def test_tests_of_files_answer_and_raise_as_pathlibs(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    names = ["f", "d", "broken", "loop", "nowhere", "f/under", "d/", "d/../f", "a\0b"]
    for name in names:
        s = f"{tmp_path}/{name}"
        for ours, theirs in ((exists, Path.exists), (is_file, Path.is_file), (is_dir, Path.is_dir)):
            assert ours(s) == theirs(Path(s)), (name, ours.__name__)
    too_long = f"{tmp_path}/{'x' * 300}"
    for ours, theirs in ((exists, Path.exists), (is_file, Path.is_file), (is_dir, Path.is_dir)):
        with pytest.raises(OSError):
            theirs(Path(too_long))
        with pytest.raises(OSError):
            ours(too_long)


def test_make_folders_makes_the_parents_and_names_the_folder_it_could_not_make(tmp_path: Path) -> None:
    make_folders(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    make_folders(tmp_path / "a" / "b")  # there already: nothing to do
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError) as ours:
        make_folders(tmp_path / "file" / "sub")
    with pytest.raises(OSError) as theirs:
        (tmp_path / "file" / "sub").mkdir(parents=True, exist_ok=True)
    assert (type(ours.value), ours.value.filename) == (type(theirs.value), theirs.value.filename)
