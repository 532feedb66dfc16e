"""The public API: exactly these names at these three import paths, and the docs import
nothing else (the ``bridge`` package docstring; docs/api.md)."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = {
    "bridge": [
        "REASONS",
        "AuthRouteTokenSource",
        "Bridge",
        "BridgeConfig",
        "BridgeError",
        "ConfigError",
        "UnsafeFileError",
        "UpstreamError",
        "__version__",
        "default_discovery_path",
        "mcp_stdio_option",
        "read_private_file",
        "remove_discovery_file",
        "run_stdio",
        "write_discovery_file",
        "write_private_file",
    ],
    "bridge.clients": [
        "CLIENTS",
        "CLIENT_INFO",
        "ClientConfigError",
        "ClientInfo",
        "ServerEntry",
        "app_entry",
        "config_path",
        "entry_document",
        "entry_object",
        "install_entry",
        "read_servers",
        "split_secrets",
        "uninstall_entry",
    ],
    "bridge.appserver": [
        "AlreadyServingError",
        "AppServer",
        "LoopbackHostMiddleware",
        "TokenAuthMiddleware",
        "UnsafeFileError",
        "load_or_create_secret",
        "serve_app",
    ],
}


@pytest.mark.parametrize("path", sorted(PUBLIC))
def test_each_public_path_exports_exactly_its_names(path: str) -> None:
    module = importlib.import_module(path)
    assert sorted(module.__all__) == sorted(PUBLIC[path])
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{path}.{name}"
    public = {name for name in dir(module) if not name.startswith("_")} - set(PUBLIC[path])
    # Submodules appear as attributes once imported; nothing else public may.
    assert all(importlib.util.find_spec(f"{path}.{name}") is not None for name in public), public


def test_no_two_public_names_with_different_contracts_share_a_name() -> None:
    seen: dict[str, object] = {}
    for path, names in PUBLIC.items():
        module = importlib.import_module(path)
        for name in names:
            value = getattr(module, name)
            if name in seen and name != "__version__":
                assert seen[name] is value, f"{name} means two things"
            seen[name] = value


def _python_blocks() -> list[tuple[Path, str]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] if (ROOT / "docs").exists() else [ROOT / "README.md"]
    blocks = []
    for file in files:
        for match in re.finditer(r"```python\n(.*?)^\s*```", file.read_text(encoding="utf-8"), flags=re.S | re.M):
            blocks.append((file, textwrap.dedent(match.group(1))))
    return blocks


def test_the_docs_python_examples_import_only_the_public_api() -> None:
    """Every ```python block in the README and docs/ compiles, and its bridge imports name
    only public paths and names."""
    blocks = _python_blocks()
    assert blocks, "the docs show no Python"
    wrong = []
    for file, code in blocks:
        tree = ast.parse(code)  # a block that does not compile fails here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bridge":
                if node.module not in PUBLIC:
                    wrong.append(f"{file.name}: from {node.module} import …")
                else:
                    wrong += [f"{file.name}: {node.module}.{a.name}" for a in node.names if a.name not in PUBLIC[node.module]]
            elif isinstance(node, ast.Import):
                wrong += [f"{file.name}: import {a.name}" for a in node.names
                          if a.name.split(".")[0] == "bridge" and a.name not in PUBLIC]
    assert not wrong, wrong
