"""Signals end the bridge gracefully (a real bridge process against the example app): the
open request is answered ``shutting_down``, the MCP session gets its DELETE, exit code 0.
SIGHUP (a closed terminal, a parent that hung up) is handled like SIGTERM and SIGINT."""

from __future__ import annotations

import signal
import sys
import time

import pytest
from support.apps import AppServer
from support.processes import (
    EXIT_TIMEOUT,
    bridge_error_reason,
    count_in_log,
    handshake,
    start_bridge,
    tool_call,
    wait_until,
)

pytestmark = pytest.mark.posix_only("POSIX signals")
# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip('POSIX signals', allow_module_level=True)


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_a_signal_answers_the_open_request_deletes_the_session_and_exits_0(app_server: AppServer, signum: int) -> None:
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)
        bridge.send(tool_call(9, "slow", {"seconds": 30}))
        time.sleep(0.5)
        deletes_before = count_in_log(app_server, '"DELETE /mcp HTTP/1.1"')
        bridge.proc.send_signal(signum)
        status = bridge.wait(EXIT_TIMEOUT)
        assert status == 0, bridge.stderr_tail()
        reply = bridge.read_reply(9, timeout=1.0)  # written before the exit
        assert bridge_error_reason(reply) == "shutting_down", reply
        assert wait_until(lambda: count_in_log(app_server, '"DELETE /mcp HTTP/1.1"') > deletes_before, 5.0), (
            "the app saw no DELETE /mcp"
        )
        assert "Traceback" not in bridge.stderr_text()
