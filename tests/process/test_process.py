"""Process-level tests: the real bridge process between a client and a real MCP server.

The bridge runs as a child process exactly as an AI client starts it (``python -m bridge
--url …``, or the frozen executable named by ``MCP_APP_BRIDGE_EXE``); the app is
``examples/app_server.py`` on 127.0.0.1 (``tests/support/apps.py``). Two kinds of client:

- the official MCP SDK (``stdio_client`` + ``ClientSession``, and the high-level ``Client``);
- raw pipes (:class:`BridgeProcess`): bytes in, lines out, every read bounded by a timeout,
  and every stdout line checked by :func:`assert_stdout_is_pure_jsonrpc` when it ends.

Each test names the failure it pins, with a public report of it where there is one. Bounds
are generous (a loaded 2-core machine), except the exit after stdin EOF: 2 s, the time both
official SDKs wait after closing stdin before they send SIGTERM (docs/behaviour.md, "Shutdown").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from support.apps import REPO_ROOT, AppServer
from support.processes import (
    BIG_TIMEOUT,
    EOF_EXIT_BOUND,
    EXIT_TIMEOUT,
    INITIALIZED,
    PROXY_VARS,
    REPLY_TIMEOUT,
    BridgeProcess,
    assert_stdout_is_pure_jsonrpc,
    base_env,
    bridge_command,
    bridge_error_reason,
    count_in_log,
    cut_down_env,
    free_port,
    handshake,
    initialize,
    message_line,
    request,
    result_text,
    start_bridge,
    tool_call,
    wait_until,
)


def _sdk_params(url: str, *args: str) -> StdioServerParameters:
    command = bridge_command()
    return StdioServerParameters(command=command[0], args=[*command[1:], "--url", url, *args], cwd=REPO_ROOT)


@pytest.mark.process
@pytest.mark.anyio
async def test_sdk_stdio_client_session(app_server: AppServer, tmp_path: Path) -> None:
    """The SDK's stdio client (cut-down environment included) drives the bridge: initialize,
    tools/list, echo, and a progress call whose notifications all arrive before its result."""
    steps = 5
    with open(tmp_path / "bridge.log", "w", encoding="utf-8") as errlog:
        with anyio.fail_after(60):
            async with stdio_client(_sdk_params(app_server.url), errlog=errlog) as (read_stream, write_stream):
                async with ClientSession(read_stream, write_stream, read_timeout_seconds=REPLY_TIMEOUT) as session:
                    init = await session.initialize()
                    assert init.server_info.name == "example-app"
                    assert init.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS

                    names = {tool.name for tool in (await session.list_tools()).tools}
                    assert {"echo", "slow", "progress", "large", "size"} <= names

                    text = "through the SDK: Grüße, 世界, 🌍"
                    result = await session.call_tool("echo", {"text": text})
                    assert not result.is_error
                    assert "".join(b.text for b in result.content if isinstance(b, TextContent)) == text

                    seen: list[float] = []

                    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                        seen.append(progress)

                    result = await session.call_tool(
                        "progress", {"steps": steps, "delay_seconds": 0.05}, progress_callback=on_progress
                    )
                    seen_at_result = list(seen)
                    assert not result.is_error
    bridge_log = (tmp_path / "bridge.log").read_text(encoding="utf-8", errors="replace")
    assert seen_at_result == [float(step) for step in range(1, steps + 1)], (
        f"progress seen before the result: {seen_at_result}\n{bridge_log[-3000:]}"
    )
    assert "Traceback" not in bridge_log, bridge_log[-3000:]


async def _auto_client_round_trip(url: str) -> tuple[str, list[float]]:
    """``mcp.Client`` in its default ``auto`` mode through the bridge: connect, list the
    tools, echo, and a progress call. Returns the protocol version and the progress seen."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(60):
        async with Client(_sdk_params(url), read_timeout_seconds=REPLY_TIMEOUT) as client:
            version = client.protocol_version
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo", "progress"} <= names
            result = await client.call_tool("echo", {"text": "auto mode: Grüße 🌍"})
            assert not result.is_error
            assert "".join(b.text for b in result.content if isinstance(b, TextContent)) == "auto mode: Grüße 🌍"
            result = await client.call_tool("progress", {"steps": 3, "delay_seconds": 0.05}, progress_callback=on_progress)
            assert not result.is_error
    return version, seen


@pytest.mark.process
@pytest.mark.anyio
async def test_sdk_client_auto_mode_speaks_2026_07_28_through_the_bridge(app_server: AppServer) -> None:
    """The official client probes ``server/discover``; with the era's headers the (dual-era)
    app answers it, and the whole conversation is stateless 2026-07-28 (issue 6)."""
    deletes_before = count_in_log(app_server, '"DELETE /mcp HTTP/1.1"')
    version, progress = await _auto_client_round_trip(app_server.url)
    assert version in MODERN_PROTOCOL_VERSIONS
    assert progress == [1.0, 2.0, 3.0]
    assert count_in_log(app_server, '"DELETE /mcp HTTP/1.1"') == deletes_before  # no session to delete


@pytest.mark.process
@pytest.mark.anyio
async def test_sdk_client_auto_mode_falls_back_to_initialize_on_a_legacy_only_app(
    start_app_server: Callable[..., AppServer],
) -> None:
    """A server that predates 2026-07-28 refuses the probe (HTTP 400); the bridge relays the
    refusal with the probe's id and the client falls back to initialize at once."""
    legacy = start_app_server("--legacy-only")
    started = time.monotonic()
    version, progress = await _auto_client_round_trip(legacy.url)
    assert version in HANDSHAKE_PROTOCOL_VERSIONS
    assert progress == [1.0, 2.0, 3.0]
    assert time.monotonic() - started < 8  # no 10 s probe timeout on the way
    assert count_in_log(legacy, '"POST /mcp HTTP/1.1" 400') >= 1  # the probe really crossed the bridge


@pytest.mark.process
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["2026-07-28", "auto"])
async def test_sdk_client_speaking_2026_07_28_works_with_a_legacy_only_app_when_translated(
    start_app_server: Callable[..., AppServer], mode: str
) -> None:
    """``--protocol-era legacy``: the official client pinned to 2026-07-28 (it never probes), or in
    ``auto`` mode, through the bridge to an app that refuses 2026-07-28: the bridge opens a
    legacy session at once, answers the probe from the app's initialize and sends the calls
    within that session."""
    legacy = start_app_server("--legacy-only")
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(60):
        async with Client(_sdk_params(legacy.url, "--protocol-era", "legacy"), mode=mode, read_timeout_seconds=REPLY_TIMEOUT) as client:
            assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo", "progress"} <= names
            result = await client.call_tool("echo", {"text": "translated: Grüße 🌍"})
            assert "".join(b.text for b in result.content if isinstance(b, TextContent)) == "translated: Grüße 🌍"
            result = await client.call_tool("progress", {"steps": 3, "delay_seconds": 0.05}, progress_callback=on_progress)
            assert not result.is_error
    assert seen == [1.0, 2.0, 3.0]
    assert count_in_log(legacy, '"POST /mcp HTTP/1.1" 400') == 0  # legacy: no probe, the session at once
    assert count_in_log(legacy, '"DELETE /mcp HTTP/1.1"') == 1  # the session the bridge opened, closed at exit


# -- 3-5: raw pipes --------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.frozen_relevant
def test_raw_pipes_handshake_list_call(app_server: AppServer) -> None:
    """initialize, notifications/initialized (no reply), tools/list, tools/call; progress
    notifications are relayed on stdout before the reply of their call."""
    with start_bridge(app_server.url) as bridge:
        result = handshake(bridge, 1)
        assert result["serverInfo"]["name"] == "example-app"

        bridge.send(request(2, "tools/list"))
        names = {tool["name"] for tool in bridge.read_reply(2)["result"]["tools"]}
        assert {"echo", "slow", "progress", "large", "size", "app_info", "fail"} <= names

        bridge.send(tool_call("three", "echo", {"text": "hello"}))
        assert result_text(bridge.read_reply("three")) == "hello"

        bridge.send(tool_call(4, "progress", {"steps": 3, "delay_seconds": 0.05}, meta={"progressToken": "p4"}))
        first = len(bridge.messages)
        reply = bridge.read_reply(4)
        assert "result" in reply, reply
        before = [m for m in bridge.messages[first:-1] if m.get("method") == "notifications/progress"]
        assert [m["params"]["progress"] for m in before] == [1, 2, 3]
        assert all(m["params"]["progressToken"] == "p4" for m in before)
        # Nothing but replies and notifications: notifications/initialized got no reply.
        assert all("method" in m or m.get("id") in (1, 2, "three", 4) for m in bridge.messages)
        assert len([m for m in bridge.messages if "method" not in m]) == 4


@pytest.mark.process
@pytest.mark.frozen_relevant
def test_large_messages_both_directions(app_server: AppServer) -> None:
    """Messages over 64 KiB (QwenLM/qwen-code#9298) on the real pipe: a 5 MiB result and an 8 MiB request (non-ASCII) intact."""
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)

        size = 5 * 1024 * 1024
        bridge.send(tool_call(1, "large", {"size_bytes": size}))
        text = result_text(bridge.read_reply(1, timeout=BIG_TIMEOUT))
        assert len(text) == size
        pattern = text[:64]
        assert len(pattern) == 64 and pattern.isascii()
        assert text == pattern * (size // 64), "the 5 MiB text came back altered"

        unit = "é世界😀abc"  # 15 UTF-8 bytes
        target = 8 * 1024 * 1024
        reps, rest = divmod(target, len(unit.encode("utf-8")))
        big = unit * reps + "a" * rest
        assert len(big.encode("utf-8")) == target
        line = message_line(tool_call(2, "size", {"text": big}))
        assert len(line) > target
        bridge.send(line, timeout=BIG_TIMEOUT)
        reply = bridge.read_reply(2, timeout=BIG_TIMEOUT)
        assert result_text(reply) == str(target)


@pytest.mark.process
@pytest.mark.frozen_relevant
def test_non_ascii_round_trip_in_c_locale(app_server: AppServer) -> None:
    """Locale code pages (openai/codex#14311): raw UTF-8 in, valid UTF-8 out, text unchanged, under LANG=C/LC_ALL=C with
    PYTHONIOENCODING unset. PYTHONUTF8=0 as well, so Python's own stdio would be ASCII: only a
    bridge that keeps to bytes passes."""
    env = base_env(LANG="C", LC_ALL="C", PYTHONIOENCODING=None, PYTHONUTF8="0")
    text = "café é, 世界, emoji 😀🌍, line\u2028separator, para\u2029end"
    with start_bridge(app_server.url, env=env) as bridge:
        handshake(bridge)
        line = message_line(tool_call(7, "echo", {"text": text}))
        assert "é".encode() in line and "😀".encode() in line and "\u2028".encode() in line  # raw, not \u-escaped
        bridge.send(line)
        raw, reply = bridge.read_reply_line(7)
        raw.decode("utf-8")  # strict: the bytes on stdout are valid UTF-8
        assert result_text(reply) == text
        # docs/behaviour.md, "stdout": U+2028/U+2029 never appear raw on the wire.
        assert "\u2028".encode() not in raw and "\u2029".encode() not in raw


# -- 6: the app dies -------------------------------------------------------------------------


@pytest.mark.process
def test_app_killed_mid_call(start_app_server: Callable[..., AppServer]) -> None:
    """The app dies mid-call (modelcontextprotocol/python-sdk#3441): during slow(30) → an error for that id within 5 s; the
    bridge keeps serving (a ping gets a reply) and stays alive."""
    server = start_app_server()
    with start_bridge(server.url) as bridge:
        handshake(bridge)
        bridge.send(tool_call(5, "slow", {"seconds": 30}))
        time.sleep(0.5)
        server.kill()
        reply = bridge.read_reply(5, timeout=5.0)
        assert bridge_error_reason(reply) in ("stream_closed", "app_unreachable"), reply

        bridge.send(request(6, "ping"))
        reply = bridge.read_reply(6, timeout=REPLY_TIMEOUT)
        if "error" in reply:
            assert bridge_error_reason(reply) == "app_unreachable", reply
        assert bridge.proc.poll() is None, "the bridge exited because the app went away"


# -- 7: stdin EOF ----------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.frozen_relevant
def test_stdin_eof_exits_and_deletes_session(app_server: AppServer) -> None:
    """modelcontextprotocol/python-sdk#2231: after EOF the bridge exits 0 within 2 s and closes its MCP session."""
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        assert "result" in bridge.read_reply(1)
        deletes_before = count_in_log(app_server, '"DELETE /mcp HTTP/1.1"')
        status, seconds = bridge.close_and_time_exit()
        assert status == 0, bridge.stderr_tail()
        assert seconds < EOF_EXIT_BOUND, f"exit took {seconds:.2f} s after stdin EOF\n{bridge.stderr_tail()}"
        assert wait_until(lambda: count_in_log(app_server, '"DELETE /mcp HTTP/1.1"') > deletes_before, 5.0), (
            "the app saw no DELETE /mcp"
        )


@pytest.mark.process
@pytest.mark.frozen_relevant
def test_stdin_at_eof_from_the_start(app_server: AppServer) -> None:
    """The same with stdin /dev/null (NUL) from the start → exit 0 within 2 s."""
    with start_bridge(app_server.url, stdin_devnull=True) as bridge:
        status = bridge.wait(EXIT_TIMEOUT)
        seconds = time.monotonic() - bridge.started_at
        assert status == 0, bridge.stderr_tail()
        assert seconds < EOF_EXIT_BOUND, f"exit took {seconds:.2f} s from start with stdin at EOF"


@pytest.mark.process
@pytest.mark.parametrize("call_seconds", [0.8, 3.0])
def test_stdin_eof_keeps_the_replies_in_flight(app_server: AppServer, call_seconds: float) -> None:
    """A pipeline: initialize, a slow tool call and a ping, then EOF at once. Every request
    gets the app's own reply (none ``shutting_down``), then the bridge exits 0 by itself."""
    with start_bridge(app_server.url) as bridge:
        bridge.send(initialize(0))
        bridge.send(INITIALIZED)
        bridge.send(tool_call(1, "slow", {"seconds": call_seconds}))
        bridge.send(request(2, "ping"))
        bridge.close_stdin()
        assert bridge.wait(call_seconds + BIG_TIMEOUT) == 0, bridge.stderr_tail()
        bridge.join_readers()
        replies = {m["id"]: m for m in bridge.messages if isinstance(m, dict) and "method" not in m}
        while True:  # (the lines not read yet)
            try:
                message = bridge.read_message(timeout=0.01)
            except AssertionError:
                break
            replies[message.get("id")] = message
        assert sorted(replies) == [0, 1, 2], replies
        assert "result" in replies[0], replies[0]
        assert result_text(replies[1]) == f"done after {call_seconds:g} s", replies[1]
        assert replies[2]["result"] == {}, replies[2]


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.posix_only("POSIX signals")
def test_a_signal_after_stdin_eof_ends_the_wait_at_once(app_server: AppServer) -> None:
    """EOF while slow(30) is in flight: the bridge waits for it; the SIGTERM that the MCP
    SDKs send 2 s after closing stdin answers it ``shutting_down`` and ends the run."""
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)
        bridge.send(tool_call(9, "slow", {"seconds": 30}))
        time.sleep(0.5)
        bridge.close_stdin()
        time.sleep(0.5)
        assert bridge.proc.poll() is None, "the bridge did not wait for the call in flight"
        started = time.monotonic()
        bridge.proc.send_signal(signal.SIGTERM)
        status = bridge.wait(EXIT_TIMEOUT)
        seconds = time.monotonic() - started
        assert status == 0, bridge.stderr_tail()
        assert seconds < EOF_EXIT_BOUND, f"exit took {seconds:.2f} s after SIGTERM\n{bridge.stderr_tail()}"
        reply = bridge.read_reply(9, timeout=1.0)  # already written: the process has exited
        assert bridge_error_reason(reply) == "shutting_down", reply


# -- 8: stdout hygiene with everything turned up ----------------------------------------------


@pytest.mark.process
@pytest.mark.frozen_relevant
def test_debug_logging_never_reaches_stdout(app_server: AppServer) -> None:
    """Nothing but JSON-RPC on stdout (MCP basic/transports, "stdio"): with --log-level debug and PYTHONWARNINGS=always, stdout carries exactly
    one JSON-RPC line per reply, on success and on an upstream failure; diagnostics go to stderr."""
    env = base_env(PYTHONWARNINGS="always")
    with start_bridge(app_server.url, "--log-level", "debug", env=env) as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        assert "result" in bridge.read_reply(1)
        bridge.finish()
        assert len(bridge.stdout_lines) == 2, bridge.stdout_lines  # initialize + tools/list
        assert "DEBUG" in bridge.stderr_text()

    dead_url = f"http://127.0.0.1:{free_port()}/mcp"
    with start_bridge(dead_url, "--log-level", "debug", env=env) as bridge:
        bridge.send(initialize(0))
        assert bridge_error_reason(bridge.read_reply(0)) == "app_unreachable"
        bridge.send(INITIALIZED)  # fails upstream too: logged, never answered
        bridge.send(request(1, "tools/list"))
        assert bridge_error_reason(bridge.read_reply(1)) == "app_unreachable"
        bridge.finish()
        assert len(bridge.stdout_lines) == 2, bridge.stdout_lines
        stderr = bridge.stderr_text()
        assert "DEBUG" in stderr
        assert "Traceback" not in stderr, stderr[-3000:]


# -- 9: the client goes away ------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.parametrize("also_close_stdin", [True, False], ids=["stdout-and-stdin", "stdout-only"])
def test_client_gone_while_reply_in_flight(app_server: AppServer, also_close_stdin: bool) -> None:
    """A client gone mid-reply (modelcontextprotocol/typescript-sdk#1564): slow(2) in flight, the client closes its end of stdout (and stdin) after
    0.5 s → the bridge exits promptly with status 0, no traceback, no "Exception ignored".
    With stdin left open, only the failed write can tell the bridge to go."""
    with start_bridge(app_server.url, "--log-level", "debug", read_stdout=False) as bridge:
        bridge.send(initialize(0))
        assert "result" in bridge.read_line_unthreaded()
        bridge.send(INITIALIZED)
        bridge.send(tool_call(1, "slow", {"seconds": 2}))
        time.sleep(0.5)
        bridge.close_stdout()
        if also_close_stdin:
            bridge.close_stdin()
        status = bridge.wait(5.0)
        assert status == 0, bridge.stderr_tail()
        bridge.join_readers()
        stderr = bridge.stderr_text()
        assert "Traceback" not in stderr, stderr[-3000:]
        assert "Exception ignored" not in stderr, stderr[-3000:]


# -- 10: proxy variables ----------------------------------------------------------------------


class ClosingProxy:
    """A "proxy" on 127.0.0.1 that accepts each connection and closes it at once."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.port = int(self._sock.getsockname()[1])
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:  # socket.timeout is TimeoutError since Python 3.10
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@pytest.fixture
def closing_proxy() -> Iterator[ClosingProxy]:
    proxy = ClosingProxy()
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.mark.process
@pytest.mark.parametrize("proxy", ["dead", "accept-and-close", "broken-no-proxy"])
def test_proxy_variables_are_ignored(app_server: AppServer, closing_proxy: ClosingProxy, proxy: str) -> None:
    """anthropics/claude-code#23344: proxy variables (NO_PROXY unset, or unparsable) never touch loopback traffic."""
    proxy_url = f"http://127.0.0.1:{closing_proxy.port}" if proxy == "accept-and-close" else "http://127.0.0.1:9"
    changes: dict[str, str | None] = {name: proxy_url for name in PROXY_VARS}
    no_proxy = ":::" if proxy == "broken-no-proxy" else None
    changes.update(NO_PROXY=no_proxy, no_proxy=no_proxy)
    with start_bridge(app_server.url, env=base_env(**changes)) as bridge:
        result = handshake(bridge)
        assert result["serverInfo"]["name"] == "example-app"
        bridge.send(tool_call(1, "echo", {"text": "no proxy"}))
        assert result_text(bridge.read_reply(1)) == "no proxy"
    assert closing_proxy.accepted == 0, "the bridge connected to the proxy"


# -- 11: timeouts -----------------------------------------------------------------------------


@pytest.mark.process
def test_long_call_outlives_httpx_default_timeout(app_server: AppServer) -> None:
    """A 6 s silent tool call (longer than httpx's 5 s default timeout) succeeds by default."""
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)
        bridge.send(tool_call(1, "slow", {"seconds": 6}))
        assert result_text(bridge.read_reply(1, timeout=6 + REPLY_TIMEOUT)) == "done after 6 s"


@pytest.mark.process
def test_request_timeout_option(app_server: AppServer) -> None:
    """With --request-timeout 1, slow(3) → reason timeout for that id; a ping
    still works afterwards."""
    with start_bridge(app_server.url, "--request-timeout", "1") as bridge:
        handshake(bridge)
        bridge.send(tool_call(1, "slow", {"seconds": 3}))
        assert bridge_error_reason(bridge.read_reply(1, timeout=REPLY_TIMEOUT)) == "timeout"
        bridge.send(request(2, "ping"))
        reply = bridge.read_reply(2)
        assert reply.get("result") == {}, reply


# -- 12: the cut-down environment an SDK client gives ----------------------------------------


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.parametrize(
    "env_kind",
    [
        "sdk-like",
        pytest.param(
            "empty",
            marks=pytest.mark.posix_only("Python on Windows needs SYSTEMROOT"),
        ),
    ],
)
def test_cut_down_environment(app_server: AppServer, env_kind: str) -> None:
    """The SDKs' cut-down environment for a stdio server: the bridge works with only HOME, PATH, LOGNAME/USER (and, on
    POSIX, with no environment at all)."""
    env = cut_down_env() if env_kind == "sdk-like" else {}
    with start_bridge(app_server.url, env=env) as bridge:
        handshake(bridge)
        bridge.send(tool_call(1, "echo", {"text": "cut-down env ✓"}))
        assert result_text(bridge.read_reply(1)) == "cut-down env ✓"


# -- the token never leaks ---------------------------------------------------------------------

TOKEN = "tok-PLACEHOLDER-0123456789"


def assert_no_token(text: str) -> None:
    """Neither the token nor any 8-character piece of it (nor its hex form) appears."""
    for start in range(len(TOKEN) - 7):
        assert TOKEN[start : start + 8] not in text, f"token piece {TOKEN[start:start + 8]!r} leaked"
    assert TOKEN.encode().hex()[:16] not in text


@pytest.mark.process
@pytest.mark.parametrize("source", ["env", "file"])
def test_token_never_appears_in_stdout_stderr_or_the_log_file(app_server: AppServer, tmp_path: Path, source: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    token_file.chmod(0o600)  # a token file others may read is refused
    token_args = ["--token-env", "MYAPP_TOKEN"] if source == "env" else ["--token-file", str(token_file)]
    env = base_env(MYAPP_TOKEN=TOKEN, PYTHONWARNINGS="always")
    log_file = tmp_path / "bridge.log"
    seen: list[str] = []
    with start_bridge(app_server.url, *token_args, "--log-level", "debug", env=env) as bridge:
        handshake(bridge)
        bridge.send(request(1, "tools/list"))
        bridge.read_reply(1)
        bridge.send(tool_call(2, "fail", {"message": "boom"}))
        bridge.read_reply(2)
    seen += [line.decode() for line in bridge.stdout_lines] + [bridge.stderr_text()]
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    with start_bridge(dead, *token_args, "--log-level", "debug", "--log-file", str(log_file), env=env) as bridge:
        bridge.send(request(3, "tools/list"))
        assert bridge_error_reason(bridge.read_reply(3)) == "app_unreachable"
    seen += [line.decode() for line in bridge.stdout_lines] + [bridge.stderr_text(), log_file.read_text()]
    assert "DEBUG" in "".join(seen)
    assert_no_token("".join(seen))


@pytest.mark.process
def test_library_run_stdio_keeps_stray_prints_off_the_wire(app_server: AppServer) -> None:
    """docs/behaviour.md, "stdout": once `run_stdio` holds the wire, a `print()` from the app's own code
    (here its token provider) lands on stderr, never between the JSON-RPC lines."""
    script = (
        "import sys\n"
        "from bridge import BridgeConfig, run_stdio\n"
        "def provider(base_url):\n"
        "    print('stray output from the app')\n"
        "    return None\n"
        f"sys.exit(run_stdio(BridgeConfig(url={app_server.url!r}, token_source=provider)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=message_line(initialize(0)) + message_line(request(1, "tools/list")),
        capture_output=True,
        timeout=30,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines(keepends=True)
    assert_stdout_is_pure_jsonrpc(lines)
    assert len(lines) == 2
    assert b"stray output from the app" in done.stderr


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.posix_only("preexec_fn and O_NONBLOCK pipes")
def test_a_non_blocking_stdin_from_the_parent_is_not_taken_for_eof(app_server: AppServer) -> None:
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX only")
    proc = subprocess.Popen(
        [*bridge_command(), "--url", app_server.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        preexec_fn=lambda: os.set_blocking(0, False),  # noqa: PLW1509 - test-only, POSIX
    )
    try:
        time.sleep(0.5)  # nothing to read yet: EAGAIN, which must not end the bridge
        assert proc.poll() is None
        out, _ = proc.communicate(message_line(initialize(0)), timeout=30)
        assert proc.returncode == 0
        assert "result" in json.loads(out.splitlines()[0])
    finally:
        if proc.poll() is None:
            proc.kill()


# -- progress heartbeats: a long call outlives a client's tool-call timer ----------------------


def _progress_of(bridge: BridgeProcess, token: object) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in bridge.messages
        if isinstance(m, dict) and m.get("method") == "notifications/progress" and m["params"].get("progressToken") == token
    ]


@pytest.mark.process
def test_a_silent_call_with_a_progress_token_gets_heartbeats_and_one_without_gets_none(app_server: AppServer) -> None:
    """slow(3) with ``--progress-heartbeat 0.5``: the call with a progress token sees the
    bridge's progress notifications (its token, increasing values, a message naming the
    wait), then the app's reply; the same call without a token sees none."""
    with start_bridge(app_server.url, "--progress-heartbeat", "0.5", "--app-name", "Slow app") as bridge:
        handshake(bridge)
        call = tool_call(1, "slow", {"seconds": 3})
        call["params"]["_meta"] = {"progressToken": "tok-1"}
        bridge.send(call)
        assert result_text(bridge.read_reply(1, timeout=BIG_TIMEOUT)) == "done after 3 s"
        beats = _progress_of(bridge, "tok-1")
        assert len(beats) >= 2, bridge.messages
        values = [beat["progress"] for beat in beats]
        assert values == sorted(values) and len(set(values)) == len(values), values
        assert all("waiting for Slow app" in beat["message"] and "total" not in beat for beat in beats), beats
        seen = len(bridge.messages)
        bridge.send(tool_call(2, "slow", {"seconds": 3}))
        assert result_text(bridge.read_reply(2, timeout=BIG_TIMEOUT)) == "done after 3 s"
        assert not [m for m in bridge.messages[seen:] if isinstance(m, dict) and m.get("method") == "notifications/progress"]


@pytest.mark.process
def test_the_apps_own_progress_passes_unchanged_and_heartbeats_stay_below_it(app_server: AppServer) -> None:
    """The app reports 3 steps 1.2 s apart, heartbeats every 0.5 s: the app's notifications
    arrive as it sent them, and every value the client sees for the token increases."""
    with start_bridge(app_server.url, "--progress-heartbeat", "0.5") as bridge:
        handshake(bridge)
        call = tool_call(1, "progress", {"steps": 3, "delay_seconds": 1.2})
        call["params"]["_meta"] = {"progressToken": 7}
        bridge.send(call)
        bridge.read_reply(1, timeout=BIG_TIMEOUT)
        notes = _progress_of(bridge, 7)
        real = [n for n in notes if n.get("message", "").startswith("step ")]
        assert [(n["progress"], n["total"]) for n in real] == [(1, 3), (2, 3), (3, 3)], notes
        assert len(notes) > len(real), notes  # heartbeats came between the steps
        values = [n["progress"] for n in notes]
        assert all(a < b for a, b in zip(values, values[1:], strict=False)), values
