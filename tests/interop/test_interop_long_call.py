"""A long tool call outlives a client's request timeout through the bridge's progress
heartbeats (docs/behaviour.md, "Long calls and client timeouts"; docs/clients.md, "Tool-call
budgets").

The client is the MCP TypeScript SDK's (pinned in ``tests/interop``), whose per-request timeout
(60 s by default, ``DEFAULT_REQUEST_TIMEOUT_MSEC``) is reset by each ``notifications/progress``
when the caller asks for it (``resetTimeoutOnProgress: true``): the SDK then also sends a
``progressToken``. The app's ``slow`` tool says nothing until it answers. The bridge's
heartbeat (``--progress-heartbeat``) is the only progress the client sees, so with it the call
succeeds, and with ``--progress-heartbeat 0`` the client gives up at its timeout.

The real figures are a 90 s call, a 60 s timeout and the default 20 s heartbeat. The times
scale with ``MCP_APP_BRIDGE_LONG_CALL_SECONDS`` (the call's length; default 9): the timeout is
2/3 of it and the heartbeat 2/9 of it, the same ratios as 90/60/20, so the default run takes
about 15 s. ``MCP_APP_BRIDGE_LONG_CALL_SECONDS=90`` runs the real figures.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from interop.harness import NODE, node_env, require_packages
from interop.peers import INTEROP_DIR, bridge_command
from support.apps import AppServer

pytestmark = pytest.mark.interop

CALL_SECONDS = float(os.environ.get("MCP_APP_BRIDGE_LONG_CALL_SECONDS", "9"))
"""How long the app's tool takes."""
CLIENT_TIMEOUT_SECONDS = CALL_SECONDS * 2 / 3
"""The client's per-request timeout: shorter than the call (60 s for a 90 s call)."""
HEARTBEAT_SECONDS = CALL_SECONDS * 2 / 9
"""The bridge's ``--progress-heartbeat`` (its default 20 s for a 90 s call)."""
CLIENT_SCRIPT = INTEROP_DIR / "long_call.mjs"


def _long_call(app_server: AppServer, heartbeat_seconds: float, log: Path) -> dict[str, object]:
    require_packages()
    bridge = bridge_command()
    args = ["--url", app_server.url, "--progress-heartbeat", f"{heartbeat_seconds:g}", "--log-file", str(log)]
    done = subprocess.run(
        [str(NODE), str(CLIENT_SCRIPT), f"{CALL_SECONDS:g}", f"{CLIENT_TIMEOUT_SECONDS * 1000:.0f}", *bridge, *args],
        cwd=INTEROP_DIR,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=CALL_SECONDS * 2 + 60,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the client printed no outcome:\n{done.stdout}\n{done.stderr}"
    outcome: dict[str, object] = json.loads(lines[-1])
    return outcome


@pytest.mark.timeout(int(CALL_SECONDS * 4 + 120))
def test_a_call_longer_than_the_clients_timeout_succeeds_with_heartbeats(app_server: AppServer, tmp_path: Path) -> None:
    outcome = _long_call(app_server, HEARTBEAT_SECONDS, tmp_path / "bridge.log")
    assert outcome.get("ok") is True, outcome
    assert outcome["text"] == f"done after {CALL_SECONDS:g} s", outcome
    assert isinstance(outcome["progress"], int) and outcome["progress"] >= 1, outcome


@pytest.mark.timeout(int(CALL_SECONDS * 4 + 120))
def test_without_heartbeats_the_client_gives_up_at_its_timeout(app_server: AppServer, tmp_path: Path) -> None:
    """The control: the same call with ``--progress-heartbeat 0`` times out in the client
    (the SDK's RequestTimeout, -32001), so the test above can fail."""
    outcome = _long_call(app_server, 0, tmp_path / "bridge.log")
    assert outcome.get("ok") is False and outcome.get("code") == -32001, outcome
    assert outcome["progress"] == 0, outcome
