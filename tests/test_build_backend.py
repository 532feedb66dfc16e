"""The build backend stops an install on a Python older than requires-python at once, with
a message that says what to do, before pip resolves anything (_backend/pep517_backend.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

ROOT = Path(__file__).resolve().parents[1]


def import_backend(version: tuple[int, int, int] | None) -> subprocess.CompletedProcess[str]:
    pretend = f"sys.version_info = {version + ('final', 0)!r}; " if version else ""
    code = f"import sys; {pretend}sys.path.insert(0, {str(ROOT / '_backend')!r}); import pep517_backend as b; print(sorted(b.__all__))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.process
@pytest.mark.parametrize("version", [(3, 9, 18), (3, 10, 19)], ids=["3.9", "3.10"])
def test_an_older_python_is_refused_with_the_reason_and_the_fix(version: tuple[int, int, int]) -> None:
    result = import_backend(version)
    found = ".".join(map(str, version))
    assert result.returncode == 1 and result.stdout == ""
    assert f"mcp-app-bridge needs Python >= 3.11, and this is Python {found}" in result.stderr
    assert "Install Python 3.11 or newer" in result.stderr
    assert "venv" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.process
def test_a_supported_python_gets_setuptools_hooks() -> None:
    result = import_backend(None)
    assert result.returncode == 0, result.stderr
    for hook in ("build_wheel", "build_sdist", "build_editable", "prepare_metadata_for_build_wheel"):
        assert hook in result.stdout


def test_the_check_and_pyproject_name_the_same_oldest_python() -> None:
    project = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["build-system"]["build-backend"] == "pep517_backend"
    assert project["build-system"]["backend-path"] == ["_backend"]
    assert project["project"]["requires-python"] == ">=3.11"
    assert "REQUIRES_PYTHON = (3, 11)" in (ROOT / "_backend" / "pep517_backend.py").read_text(encoding="utf-8")


def test_the_type_check_and_the_linter_aim_at_the_oldest_python() -> None:
    """mypy and ruff judge the code as the oldest supported Python runs it."""
    project = tomlkit.parse((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["mypy"]["python_version"] == "3.11"
    assert project["tool"]["ruff"]["target-version"] == "py311"
