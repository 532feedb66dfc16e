"""Start-up errors reach the user: a configuration error found once the command line was
parsed goes to --log-file too, and a bridge a client started (stdin not a terminal)
answers every request with it instead of exiting at once, so the client shows the reason
rather than "Connection closed". Run by hand (stdin a terminal), and for every error click
finds while parsing, the bridge still exits 2 at once. Real bridge processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.apps import REPO_ROOT
from support.processes import BridgeProcess, assert_stdout_is_pure_jsonrpc, bridge_command, initialize, request

pytestmark = [pytest.mark.process, pytest.mark.frozen_relevant]

UNSET = "MCP_APP_BRIDGE_TEST_UNSET_VARIABLE"
SAYS = f"environment variable {UNSET} is not set or is empty"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(UNSET, None)
    return env


def test_a_client_started_bridge_answers_every_request_with_the_configuration_error(tmp_path: Path) -> None:
    log_file = tmp_path / "bridge.log"
    bridge = BridgeProcess("--url", "http://127.0.0.1:9/mcp", "--token-env", UNSET, "--log-file", str(log_file), env=_env())
    try:
        bridge.send(initialize(1))
        reply = bridge.read_reply(1)
        assert reply["error"]["code"] == -32603, reply
        assert reply["error"]["data"] == {"source": "bridge", "reason": "not_configured"}
        assert SAYS in reply["error"]["message"] and "--token-env" in reply["error"]["message"]
        bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # nothing for it
        bridge.send([request(2, "tools/list"), {"jsonrpc": "2.0", "method": "x"}, request("three", "ping")])
        batch = bridge.read_message()
        assert [item["id"] for item in batch] == [2, "three"], batch
        assert all(item["error"]["data"]["reason"] == "not_configured" for item in batch)
        assert bridge.proc.poll() is None  # still there for the client to ask again
        bridge.close_stdin()
        assert bridge.wait(10.0) == 2  # the status it would have exited with at once
        bridge.join_readers()
        assert len(bridge.stdout_lines) == 2, bridge.stdout_lines  # nothing for the notifications
        assert SAYS in bridge.stderr_text()
        assert_stdout_is_pure_jsonrpc(bridge.stdout_lines)
    finally:
        bridge.__exit__(AssertionError, None, None)  # clean up; its exit status was checked above
    assert SAYS in log_file.read_text(encoding="utf-8")


def test_the_error_is_also_in_the_log_file_when_stdin_is_already_closed(tmp_path: Path) -> None:
    log_file = tmp_path / "bridge.log"
    done = subprocess.run(
        [*bridge_command(), "--url", "http://127.0.0.1:9/mcp", "--token-env", UNSET, "--log-file", str(log_file)],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60, env=_env(), cwd=REPO_ROOT,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert SAYS.encode() in done.stderr
    assert SAYS in log_file.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--url", "http://127.0.0.1:9/mcp", "--bogus"], ["--url", "http://127.0.0.1:9/mcp", "--request-timeout", "soon"]],
    ids=["help", "unknown-option", "bad-value"],
)
def test_help_and_options_click_refuses_still_exit_at_once_with_piped_stdin(args: list[str]) -> None:
    """Errors click finds while parsing are a person's typing, not a client's entry: exit
    at once (2, or 0 for --help), even with a pipe on stdin that never closes."""
    proc = subprocess.Popen(
        [*bridge_command(), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT
    )
    try:
        status = proc.wait(timeout=30)  # stdin stays open
    finally:
        proc.kill()
        out, err = proc.communicate(timeout=30)
    assert status == (0 if args == ["--help"] else 2), err
    if args != ["--help"]:
        assert out == b"" and b"Error" in err


@pytest.mark.posix_only("a pseudo-terminal")
def test_run_by_hand_at_a_terminal_a_configuration_error_exits_2_at_once() -> None:
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX only")
    import pty

    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [*bridge_command(), "--url", "http://127.0.0.1:9/mcp", "--token-env", UNSET],
            stdin=follower, capture_output=True, timeout=30, env=_env(), cwd=REPO_ROOT,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 2 and done.stdout == b""
    assert SAYS.encode() in done.stderr


def test_the_reply_for_each_kind_of_line() -> None:
    """startuperror.answers_for_line, purely: requests get the error, notifications and
    responses nothing, unusable lines their own -32700/-32600."""
    from bridge.core.errors import NotConfiguredError
    from bridge.serve.startuperror import answers_for_line

    exc = NotConfiguredError("mcp-app-bridge cannot start: because")
    assert answers_for_line(b'{"jsonrpc":"2.0","method":"n"}', exc) is None
    assert answers_for_line(b'{"jsonrpc":"2.0","id":1,"result":{}}', exc) is None
    line = answers_for_line(b'{"jsonrpc":"2.0","id":"a","method":"m"}', exc)
    assert line is not None and json.loads(line)["error"]["message"] == "mcp-app-bridge cannot start: because"
    bad = answers_for_line(b"{not json", exc)
    assert bad is not None and json.loads(bad)["error"]["code"] == -32700


def test_an_apps_own_mcp_stdio_answers_with_its_configuration_error(tmp_path: Path) -> None:
    """The library path: a Python app's ``--mcp-stdio`` whose ``make_config`` raises a
    ``ConfigError`` (here a non-loopback URL) answers the client with the reason."""
    script = tmp_path / "myapp.py"
    script.write_text(
        "import click\n"
        "from bridge import BridgeConfig, mcp_stdio_option\n"
        "@click.command()\n"
        "@mcp_stdio_option(lambda: BridgeConfig(url='http://10.0.0.1/mcp'))\n"
        "def main():\n"
        "    print('the GUI')\n"
        "main()\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script), "--mcp-stdio"],
        input=json.dumps(initialize(1)).encode() + b"\n",
        capture_output=True, timeout=60, cwd=REPO_ROOT,
    )
    assert done.returncode == 2, done.stderr
    reply = json.loads(done.stdout)
    assert reply["id"] == 1 and reply["error"]["data"]["reason"] == "not_configured"
    assert "not a loopback address" in reply["error"]["message"]
    assert b"not a loopback address" in done.stderr and b"the GUI" not in done.stdout + done.stderr
