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
    base_env,
    bridge_error_reason,
    count_in_log,
    handshake,
    initialize,
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


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda s: signal.Signals(s).name)
def test_a_signal_right_after_the_early_initialize_reply_is_a_graceful_stop(app_server: AppServer, signum: int) -> None:
    """The running-app start writes the ``initialize`` reply before the serving loop is
    loaded, and a client that has it may end the bridge at once (``claude mcp list``:
    SIGINT as soon as it has listed): the signal is noted and the loop, once loaded, stops
    as on its own signal (exit 0, the MCP session deleted, no traceback). Before, SIGINT
    raised KeyboardInterrupt in the loading code and SIGTERM killed the process."""
    with start_bridge(app_server.url, "--log-level", "info") as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_reply(0)
        bridge.proc.send_signal(signum)  # (the loop is still loading: about 30 ms)
        status = bridge.wait(EXIT_TIMEOUT)
        assert status == 0, (status, bridge.stderr_tail())
        assert "Traceback" not in bridge.stderr_text()
        assert f"{signal.Signals(signum).name} received; shutting down" in bridge.stderr_text(), bridge.stderr_tail()


_LATE_SIGNAL_SCRIPT = """
import os, signal, sys
from bridge.cli.buildconfig import build_config
from bridge.cli.serve import parse_plain_argv
from bridge.serve.catalogstart import hold_signals
from bridge.serve.loop import run_stdio

hold_signals()  # as the mcp-app-bridge command does before its early starts
status = run_stdio(build_config(parse_plain_argv(["--url", sys.argv[1]])), catalog_start=None)
os.kill(os.getpid(), getattr(signal, sys.argv[2]))  # late: the serving loop is over, the exit not made yet
os._exit(40 + status)
"""


@pytest.mark.process
@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_after_the_serving_loop_is_over_does_not_end_the_exit(name: str) -> None:
    """Between the serving loop's end and the exit (the pool closed, asyncio's teardown), a
    late signal found the defaults again and ended a bridge that was leaving with its
    status: a one-file executable's bootloader passes the client's SIGTERM on to the bridge
    after the client sent it to the whole group, so the bridge gets it twice (Codex's kill
    of the group, 2026-07-28 era: exit -15 instead of 0). The command's held signals are
    held again once the loop is over."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _LATE_SIGNAL_SCRIPT, "http://127.0.0.1:9/mcp", name],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=EXIT_TIMEOUT,
        env=base_env(),
    )
    assert done.returncode == 40, (done.returncode, done.stderr.decode(errors="replace")[-2000:])
