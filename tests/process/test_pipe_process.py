"""The whole path over a Windows named pipe, with real processes (Windows only; the CI
workflow's named-pipes job runs this file and fails if it is skipped): the example app
serving on its pipe by default (``--link auto``), a bridge finding it through the discovery
file and calling a tool with progress over it, checking the pipe's server first.

The hostile cases (another user's pipe, a squatted name, a pid that is not the named one)
are in tests/transport/test_pipe_windows.py and, for another user, with stand-ins in
tests/app/test_pipepeer.py: the runner has no second account.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import processes
from support.apps import APP_SERVER_SCRIPT, REPO_ROOT, start_listening_app
from support.lifecycle import Desk, desk  # noqa: F401 (the fixture)

# mypy --platform reads this too: the rest of the module is Windows code.
if sys.platform != "win32":
    pytest.skip("named pipes: Windows only", allow_module_level=True)

pytestmark = [pytest.mark.process]


def test_a_bridge_calls_the_example_app_on_its_named_pipe(desk: Desk) -> None:  # noqa: F811 (the imported fixture)
    app = start_listening_app(
        [sys.executable, str(APP_SERVER_SCRIPT), *desk.app_args()], log_path=desk.root / "app.log",
        scheme="npipe", what="the example app on its named pipe",
    )
    try:
        desk.note_token()
        assert json.loads(desk.discovery.read_text(encoding="utf-8"))["url"].startswith("npipe://./pipe/mcp-app-bridge-")
        with desk.bridge("--discovery-file", str(desk.discovery), "--log-level", "info") as bridge:
            processes.handshake(bridge)
            bridge.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "progress", "arguments": {"steps": 3, "delay_seconds": 0.05},
                                    "_meta": {"progressToken": "p"}}})
            reply = bridge.read_reply(1)
            assert "completed 3 steps" in json.dumps(reply), reply
            progress = [m for m in bridge.messages if isinstance(m, dict) and m.get("method") == "notifications/progress"]
            assert [m["params"]["progress"] for m in progress] == [1, 2, 3], "SSE progress over the pipe"
        check = subprocess.run([*processes.bridge_command(), "check", "--discovery-file", str(desk.discovery)],
                               env=desk.env, capture_output=True, timeout=60, cwd=REPO_ROOT)
        report = check.stdout.decode("utf-8", errors="replace")
        assert check.returncode == 0 and "named pipe \\\\.\\pipe\\mcp-app-bridge-" in report, report
    finally:
        app.stop()
