"""Imports run one way: (dtsim_tools →) workload → system → network; chakra_proto is a leaf (design.md)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"network": {"system", "workload", "dtsim_tools"}, "system": {"workload", "dtsim_tools"},
             "workload": {"dtsim_tools"}, "chakra_proto": {"network", "system", "workload", "dtsim_tools"}}


def imported_top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_layers_import_one_way() -> None:
    checked = 0
    for layer in FORBIDDEN:
        for path in (ROOT / layer).rglob("*.py"):
            if path.as_posix().endswith(("system/main.py", "system/simulation.py")):
                bad = imported_top_level_names(path) & {"dtsim_tools"}
                assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
                continue  # the composition root (the CLI and the run it drives) sees everything
            bad = imported_top_level_names(path) & FORBIDDEN[layer]
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
            checked += 1
    assert checked > 20
