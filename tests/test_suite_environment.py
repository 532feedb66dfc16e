"""The suite's environment is its own (``support.isolation``): the README's test command
passes whatever the caller's session holds. A set ``XDG_STATE_HOME`` used to fail
tests/clients/test_command.py (``config install`` writes it into the entry it makes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import platformdirs
import pytest
from support.apps import REPO_ROOT
from support.isolation import (
    BRIDGE_PREFIX,
    CALLER_ENVIRON,
    HARNESS_VARIABLES,
    XDG_VARIABLES,
    caller_home,
    dropped_variables,
)


def test_a_test_sees_a_home_and_temporary_folder_of_the_runs_own() -> None:
    home = Path.home()
    assert home != caller_home()
    assert home.parent == Path(tempfile.gettempdir())
    assert platformdirs.user_state_path("MyApp").is_relative_to(home)
    assert not [name for name in XDG_VARIABLES if name in os.environ]
    assert not [name for name in os.environ if name.startswith(BRIDGE_PREFIX) and name not in HARNESS_VARIABLES]


def test_what_is_dropped_and_what_is_kept() -> None:
    environ = {
        "XDG_STATE_HOME": "/x", "XDG_RUNTIME_DIR": "/run/user/1", "CODEX_HOME": "/c", "MCP_APP_BRIDGE_ANYTHING": "1",
        "MCP_APP_BRIDGE_EXE": "/bin/exe", "MCP_APP_BRIDGE_SITE_DIR": "/site", "PATH": "/bin", "CI": "true",
    }
    assert sorted(dropped_variables(environ)) == ["CODEX_HOME", "MCP_APP_BRIDGE_ANYTHING", "XDG_RUNTIME_DIR", "XDG_STATE_HOME"]


def test_every_bridge_variable_ci_sets_is_one_the_suite_keeps() -> None:
    """A variable .ci/run or a workflow sets for the suite, and the isolation dropped, would
    turn its step into a silent no-op: each must be in HARNESS_VARIABLES."""
    texts = [(REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")]
    texts += [path.read_text(encoding="utf-8") for path in sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))]
    named = {name for text in texts for name in re.findall(r"\b(MCP_APP_BRIDGE_[A-Z0-9_]+)=", text)}
    assert named and named <= set(HARNESS_VARIABLES), named - set(HARNESS_VARIABLES)


@pytest.mark.process
@pytest.mark.posix_only("the caller's odd folders are XDG and TMPDIR ones")
def test_the_readme_test_command_passes_with_the_callers_folders_set_to_odd_places(tmp_path: Path) -> None:
    """The test that a set XDG_STATE_HOME used to fail, run by a pytest of its own with the
    caller's folders (and a bridge variable) set to odd places, some of them missing."""
    env = {
        **CALLER_ENVIRON,
        "XDG_STATE_HOME": str(tmp_path / "odd1"), "XDG_CONFIG_HOME": str(tmp_path / "odd2"),
        "TMPDIR": str(tmp_path / "odd3"), "MCP_APP_BRIDGE_ODD": "1",
    }
    (tmp_path / "odd1").mkdir()
    target = "tests/clients/test_command.py::test_warnings_for_a_missing_file_a_file_that_cannot_run_and_no_mcp_stdio"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", target],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
