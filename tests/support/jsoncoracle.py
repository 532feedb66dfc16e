"""Microsoft's jsonc-parser (VS Code's own JSONC reader) as a test oracle: a small node script
(tests/clients/jsonc_oracle/oracle.cjs), one process per batch of documents, reports what
jsonc-parser makes of each (its errors, its value, where the root's "servers" member is).

The package is installed by ``npm ci --prefix tests/clients/jsonc_oracle`` (.ci/run does it);
without it a test using the oracle is skipped, or fails under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ORACLE", "oracle", "oracle_command"]

ORACLE = Path(__file__).resolve().parent.parent / "clients" / "jsonc_oracle"


def oracle_command() -> list[str]:
    """The command that runs the oracle; skips the test (fails it under ``CI=true``) without it."""
    node = shutil.which("node")
    installed = (ORACLE / "node_modules" / "jsonc-parser" / "package.json").is_file()
    if node is None or not installed:
        message = (
            "jsonc-parser is not installed: run `npm ci --prefix tests/clients/jsonc_oracle` (needs Node.js)"
            if node is not None
            else "Node.js (node) is not on PATH"
        )
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)
    return [node, str(ORACLE / "oracle.cjs")]


def oracle(command: list[str], documents: list[str]) -> list[dict[str, Any]]:
    """jsonc-parser's report on each of ``documents``, in order (one node process)."""
    done = subprocess.run(
        command, input=json.dumps(documents), capture_output=True, text=True, encoding="utf-8", timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    reports: list[dict[str, Any]] = json.loads(done.stdout)
    return reports
