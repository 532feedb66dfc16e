"""The sans-I/O core imports only the standard library (DESIGN.md §6)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CORE = ["errors.py", "framing.py", "jsonrpc.py", "config.py", "policy.py", "ledger.py", "admission.py", "sse.py"]
PACKAGE = Path(__file__).resolve().parent.parent / "bridge"


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_only_the_standard_library_and_the_core(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: must stay inside the core
                assert f"{node.module}.py" in CORE, f"{module} imports .{node.module}"
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names, f"{module} imports {name}"
        assert not isinstance(node, ast.AsyncFunctionDef)
    assert not any(isinstance(node, (ast.AsyncFunctionDef, ast.Await)) for node in ast.walk(tree))
