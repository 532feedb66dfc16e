"""The sans-I/O core imports only the standard library (DESIGN.md §6)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path, PurePosixPath

import pytest

CORE = [
    "core/errors.py",
    "core/framing.py",
    "core/jsonrpc.py",
    "core/config.py",
    "core/policy.py",
    "core/era.py",
    "core/ledger.py",
    "core/admission.py",
    "core/sse.py",
    "transport/base.py",
    "transport/http1.py",
]
PACKAGE = Path(__file__).resolve().parent.parent / "bridge"


def _relative_target(module: str, node: ast.ImportFrom) -> str:
    """The package-relative file a relative import names (``..config`` from transport/x.py)."""
    folder = PurePosixPath(module).parent
    for _ in range(node.level - 1):
        folder = folder.parent
    target = folder / ((node.module or "").replace(".", "/") + ".py")
    return target.as_posix().removeprefix("./")


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_only_the_standard_library_and_the_core(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: must stay inside the core
                target = _relative_target(module, node)
                assert target in CORE, f"{module} imports {target}"
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names, f"{module} imports {name}"
        assert not isinstance(node, ast.AsyncFunctionDef)
    assert not any(isinstance(node, (ast.AsyncFunctionDef, ast.Await)) for node in ast.walk(tree))
