"""The suite's own environment: none of the caller's per-user folders or bridge variables.

The README's test command must pass in any user's environment, so a run starts (root
``conftest.py``, ``pytest_configure``) by replacing what would reach the code under test
from the caller's session:

- ``HOME`` (on Windows also ``USERPROFILE``, ``APPDATA`` and ``LOCALAPPDATA``, and
  platformdirs' ``WIN_PD_OVERRIDE_APPDATA``/``_LOCAL_APPDATA``, as platformdirs asks
  Windows itself otherwise): a fresh folder of this run's, removed at its end;
- ``TMPDIR``: a short folder of this user's (POSIX: ``/tmp/mab-<uid>``, "mcp-app-bridge",
  0755 like a home folder: the tests that play another user need to reach a folder inside),
  where pytest's own numbered (0700) folders go. Short, because a Unix socket path must fit
  in 104 bytes (macOS) or 108 (Linux), and the tests put sockets in ``tmp_path``: with a
  longer root, ``<tmp_path>/state/mcp-endpoint.sock`` no longer fits;
- ``XDG_STATE_HOME``, ``XDG_CONFIG_HOME``, ``XDG_CACHE_HOME``, ``XDG_DATA_HOME`` and
  ``XDG_RUNTIME_DIR``: unset, as in a plain login, so the XDG folders are the private HOME's
  (``config install`` writes a set ``XDG_STATE_HOME`` into the entry it makes);
- the clients' own folder variables (``CODEX_HOME``, ``QWEN_HOME`` and ``COPILOT_HOME``,
  read by ``bridge.clients.clienttable``; Claude Code's ``CLAUDE_CONFIG_DIR``): unset;
- every ``MCP_APP_BRIDGE_*`` variable, and every variable a bridge option reads, except
  :data:`HARNESS_VARIABLES`, which CI sets on purpose: unset.

What must still see the caller's own session reads :data:`CALLER_ENVIRON`, the
environment as it was when this module was first imported (before the change): the
official SDK v1 client's venv of ``tests/process/test_eras_modern.py`` lives in the
caller's cache (``~/.cache/mcp-app-bridge-tests``) and is made with the caller's pip
settings. A test that needs a variable set sets it itself (``monkeypatch``,
``private_state_folder``, :func:`support.apps.isolated_env`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

CALLER_ENVIRON_VARIABLE = "MAB_SUITE_CALLER_ENVIRON"
"""Where :func:`isolate` leaves the caller's environment (JSON) for the processes the run
starts after it: pytest-xdist's workers (``-n auto``) inherit the isolated environment, and
read the caller's from here."""

CALLER_ENVIRON: Mapping[str, str] = (
    json.loads(os.environ[CALLER_ENVIRON_VARIABLE]) if CALLER_ENVIRON_VARIABLE in os.environ else dict(os.environ)
)
"""The environment the suite was started with, before :func:`isolate` changed it (in a
pytest-xdist worker: the one the controller was started with)."""

HARNESS_VARIABLES = (
    "MCP_APP_BRIDGE_EXE",  # support.processes.BRIDGE_EXE_VAR: the frozen file to test
    "MCP_APP_BRIDGE_BUNDLE_DIR",  # tests/clients/test_bundle.py: the unpacked bundle
    "MCP_APP_BRIDGE_SITE_DIR",  # tests/docs/test_site_layout.py: the built documentation site
    "MCP_APP_BRIDGE_LONG_CALL_SECONDS",  # tests/interop/test_interop_long_call.py: the call's length
)
"""The ``MCP_APP_BRIDGE_*`` variables the caller (``.ci/run``, the workflows, a developer)
sets on purpose to point the suite at something; they are kept."""

BRIDGE_PREFIX = "MCP_APP_BRIDGE_"
XDG_VARIABLES = ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR")
CLIENT_FOLDER_VARIABLES = ("CODEX_HOME", "QWEN_HOME", "COPILOT_HOME", "CLAUDE_CONFIG_DIR")
WINDOWS_FOLDER_VARIABLES = ("APPDATA", "LOCALAPPDATA", "WIN_PD_OVERRIDE_APPDATA", "WIN_PD_OVERRIDE_LOCAL_APPDATA")


def caller_home() -> Path:
    """The caller's home folder (``Path.home()`` before :func:`isolate`)."""
    name = "USERPROFILE" if sys.platform == "win32" else "HOME"
    given = CALLER_ENVIRON.get(name)
    return Path(given) if given else Path.home()


def dropped_variables(environ: Mapping[str, str]) -> list[str]:
    """The names in ``environ`` that :func:`isolate` unsets (see the module)."""
    from bridge.cli.optiontable import BRIDGE_OPTIONS

    option_variables = {option.env for option in BRIDGE_OPTIONS if option.env}
    return [
        name
        for name in environ
        if name in XDG_VARIABLES
        or name in CLIENT_FOLDER_VARIABLES
        or (name in WINDOWS_FOLDER_VARIABLES and sys.platform != "win32")
        or (name.startswith(BRIDGE_PREFIX) and name not in HARNESS_VARIABLES)
        or (name in option_variables and name not in HARNESS_VARIABLES)
    ]


def private_temp_root() -> Path:
    """This user's temporary folder for the suite: on POSIX ``/tmp/mab-<uid>``
    (made 0755; when it is a link, another user's or open to others' writes, a fresh one beside it);
    on Windows ``mab`` in the user's own ``TEMP``."""
    if sys.platform == "win32":
        folder = Path(tempfile.gettempdir()) / "mab"
        folder.mkdir(exist_ok=True)
        return folder
    folder = Path("/tmp") / f"mab-{os.geteuid()}"  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o755)
    status = os.lstat(folder)
    ours = stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid() and not status.st_mode & 0o022  # type: ignore[attr-defined,unused-ignore]
    if ours:
        return folder
    fresh = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir="/tmp"))
    fresh.chmod(0o755)
    return fresh


def isolate() -> Path:
    """Change this process's environment as the module says, for the whole run (the
    processes the tests start inherit it). Returns the private HOME, for :func:`release`."""
    os.environ[CALLER_ENVIRON_VARIABLE] = json.dumps(dict(CALLER_ENVIRON))
    for name in dropped_variables(os.environ):
        del os.environ[name]
    temp_root = private_temp_root()
    os.environ["TMPDIR"] = str(temp_root)
    tempfile.tempdir = None  # read TMPDIR again
    home = Path(tempfile.mkdtemp(prefix="home-", dir=temp_root))
    os.environ["HOME"] = str(home)
    if sys.platform == "win32":
        roaming, local = home / "AppData" / "Roaming", home / "AppData" / "Local"
        for folder in (roaming, local):
            folder.mkdir(parents=True)
        os.environ["USERPROFILE"] = str(home)
        os.environ["APPDATA"] = os.environ["WIN_PD_OVERRIDE_APPDATA"] = str(roaming)
        os.environ["LOCALAPPDATA"] = os.environ["WIN_PD_OVERRIDE_LOCAL_APPDATA"] = str(local)
    return home


def release(home: Path) -> None:
    """Remove the private HOME :func:`isolate` made (what a test left in it goes too)."""
    shutil.rmtree(home, ignore_errors=True)
