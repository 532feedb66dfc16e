"""Process-level tests: the real bridge process between a client and a real MCP server.

The bridge runs as a child process exactly as an AI client starts it (``python -m bridge
--url …``, or the frozen executable named by ``MCP_APP_BRIDGE_EXE``); the app is
``examples/app_server.py`` on 127.0.0.1 (``tests/conftest.py``). Two kinds of client:

- the official MCP SDK (``stdio_client`` + ``ClientSession``, and the high-level ``Client``);
- raw pipes (:class:`BridgeProcess`): bytes in, lines out, every read bounded by a timeout,
  and every stdout line checked by :func:`assert_stdout_is_pure_jsonrpc` when it ends.

Each test names the hazard of ../shared/HAZARDS.md it pins. Bounds are generous (a loaded
2-core machine), except the exit after stdin EOF, which DESIGN.md §2.11 fixes at 2 s.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import REPO_ROOT, AppServer
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

BRIDGE_EXE_VAR = "MCP_APP_BRIDGE_EXE"
"""Environment variable naming a frozen bridge executable to test instead of ``python -m bridge``."""

REPLY_TIMEOUT = 10.0
"""Seconds a reply may take when nothing slow is involved (a loaded CI machine)."""
BIG_TIMEOUT = 30.0
"""Seconds for the multi-MiB exchanges."""
EOF_EXIT_BOUND = 2.0
"""DESIGN.md §2.11: after stdin EOF the bridge exits within 2 s."""
EXIT_TIMEOUT = 5.0
"""Seconds a bridge gets to exit on its own at the end of a test before it is killed."""

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- launching -------------------------------------------------------------------------------


def bridge_command() -> list[str]:
    """The command that starts the bridge: the frozen executable if configured, else this Python."""
    exe = os.environ.get(BRIDGE_EXE_VAR)
    if exe:
        return [exe]
    return [sys.executable, "-m", "bridge"]


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cut_down_env() -> dict[str, str]:
    """The environment an SDK client gives a stdio server without an ``env`` setting
    (SPEC-CHECKLIST item 15): on POSIX only HOME, PATH and LOGNAME/USER when present. The
    venv's Python needs nothing else (pyvenv.cfg locates the base install); on Windows
    Python needs SYSTEMROOT for sockets, so the SDK's Windows list is used there."""
    if sys.platform == "win32":
        names: tuple[str, ...] = (
            "APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
            "PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE",
        )
    else:
        names = ("HOME", "PATH", "LOGNAME", "USER")
    return {name: os.environ[name] for name in names if name in os.environ}


def base_env(**changes: str | None) -> dict[str, str]:
    """This process's environment (already without proxy variables, see conftest) with
    ``changes`` applied; a value of None removes the variable."""
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# -- messages --------------------------------------------------------------------------------


def message_line(message: Any) -> bytes:
    """One compact UTF-8 JSON line (non-ASCII left raw, as many clients send it)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def initialize(request_id: Any = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test-process", "version": "0"},
        },
    }


INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def tool_call(request_id: Any, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return request(request_id, "tools/call", params)


def result_text(reply: dict[str, Any]) -> str:
    """The text of a successful tools/call reply (its text content blocks joined)."""
    assert "result" in reply, f"expected a result, got {str(reply)[:500]}"
    result = reply["result"]
    assert not result.get("isError"), f"tool error: {str(result)[:500]}"
    return "".join(block["text"] for block in result["content"] if block.get("type") == "text")


def bridge_error_reason(reply: dict[str, Any]) -> str:
    """``data.reason`` of an error made by the bridge (DESIGN.md §3); fails for anything else."""
    assert "error" in reply, f"expected an error made by the bridge, got {str(reply)[:500]}"
    error = reply["error"]
    assert error.get("code") == -32603, error
    data = error.get("data")
    assert isinstance(data, dict) and data.get("source") == "bridge", error
    assert isinstance(error.get("message"), str) and error["message"], error
    return str(data.get("reason"))


def assert_stdout_is_pure_jsonrpc(lines: Sequence[bytes]) -> None:
    """Every stdout line is one UTF-8 JSON-RPC 2.0 message (or a batch array of them),
    terminated by a single ``\\n`` (HAZARDS B09, DESIGN.md §2.2)."""
    for number, line in enumerate(lines, 1):
        shown = line[:300]
        assert line.endswith(b"\n"), f"stdout line {number} is not terminated by a newline: {shown!r}"
        assert not line.endswith(b"\r\n"), f"stdout line {number} ends with CRLF: {shown!r}"
        try:
            value = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise AssertionError(f"stdout line {number} is not UTF-8 JSON ({exc}): {shown!r}") from None
        items = value if isinstance(value, list) else [value]
        assert items, f"stdout line {number} is an empty array"
        for item in items:
            assert isinstance(item, dict) and item.get("jsonrpc") == "2.0", (
                f"stdout line {number} is not a JSON-RPC 2.0 message: {shown!r}"
            )


# -- the raw-pipe driver ---------------------------------------------------------------------


class BridgeProcess:
    """The bridge as a child process with raw pipes.

    A reader thread collects stdout lines into a queue, so every read is bounded by a
    timeout (threads, not select(): Windows pipes cannot be polled); another collects
    stderr. Use it as a context manager: on a normal exit stdin is closed, the bridge must
    exit by itself with status 0 within `EXIT_TIMEOUT`, and all of stdout must be pure
    JSON-RPC; in every case the process is killed if still alive.

    Args:
        args: bridge arguments (``--url`` …).
        env: the child's environment (default: this process's, without proxy variables).
        stdin_devnull: start with stdin already at EOF.
        read_stdout: start the stdout reader thread. Without it the test reads with
            :meth:`read_line_unthreaded` and may close its end of stdout (:meth:`close_stdout`):
            a thread blocked in a read would keep the pipe open.
    """

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        stdin_devnull: bool = False,
        read_stdout: bool = True,
    ) -> None:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [*bridge_command(), *args],
            stdin=subprocess.DEVNULL if stdin_devnull else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
        )
        self.stdout_lines: list[bytes] = []
        """Every complete stdout line read so far (raw bytes, newline included)."""
        self.messages: list[Any] = []
        """Every parsed stdout message read by the test so far, in order."""
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr = bytearray()
        self._stdout_closed = False
        self._threads = [threading.Thread(target=self._collect_stderr, daemon=True)]
        if read_stdout:
            self._threads.append(threading.Thread(target=self._collect_stdout, daemon=True))
        for thread in self._threads:
            thread.start()

    # reader threads

    def _collect_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            for line in iter(stdout.readline, b""):
                self.stdout_lines.append(line)
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    def _collect_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        try:
            while chunk := os.read(stderr.fileno(), 65536):
                self._stderr += chunk
        except (OSError, ValueError):
            pass

    # writing

    def send(self, data: Any, timeout: float = REPLY_TIMEOUT) -> None:
        """Write bytes as they are, or anything else as one compact JSON line. The write
        runs in a thread so a bridge that stops reading cannot hang the test."""
        payload = data if isinstance(data, bytes) else message_line(data)
        stdin = self.proc.stdin
        assert stdin is not None
        failure: list[BaseException] = []

        def write() -> None:
            try:
                stdin.write(payload)
                stdin.flush()
            except BaseException as exc:  # reported to the test below
                failure.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(timeout)
        if writer.is_alive():
            raise AssertionError(f"the bridge did not take {len(payload)} bytes on stdin within {timeout:g} s")
        if failure:
            raise AssertionError(f"writing to the bridge failed: {failure[0]!r}\n{self.stderr_tail()}")

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    # reading

    def read_message(self, timeout: float = REPLY_TIMEOUT) -> Any:
        """The next stdout message (parsed), waiting at most `timeout` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no stdout line within {timeout:g} s\n{self.stderr_tail()}") from None
        if line is None:
            self._lines.put(None)  # keep reporting EOF
            raise AssertionError(f"the bridge closed its stdout (exit code {self.proc.poll()})\n{self.stderr_tail()}")
        try:
            message = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise AssertionError(f"stdout line is not UTF-8 JSON: {line[:300]!r}") from None
        self.messages.append(message)
        return message

    def read_reply_line(self, request_id: Any, timeout: float = REPLY_TIMEOUT) -> tuple[bytes, dict[str, Any]]:
        """The reply to `request_id` (same JSON type and value) with its raw stdout line;
        messages read on the way (notifications, other replies) stay in :attr:`messages`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no reply for id {request_id!r} within {timeout:g} s\n{self.stderr_tail()}")
            message = self.read_message(remaining)
            if (
                isinstance(message, dict)
                and "method" not in message
                and type(message.get("id")) is type(request_id)
                and message.get("id") == request_id
            ):
                return self.stdout_lines[len(self.messages) - 1], message

    def read_reply(self, request_id: Any, timeout: float = REPLY_TIMEOUT) -> dict[str, Any]:
        return self.read_reply_line(request_id, timeout)[1]

    def read_line_unthreaded(self, timeout: float = REPLY_TIMEOUT) -> dict[str, Any]:
        """Read one line without a reader thread (``read_stdout=False``): a short-lived
        thread reads until a newline and is gone when this returns."""
        stdout = self.proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        buffer = bytearray()

        def read() -> None:
            while b"\n" not in buffer:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                buffer.extend(chunk)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        assert not reader.is_alive(), f"no stdout line within {timeout:g} s\n{self.stderr_tail()}"
        assert b"\n" in buffer, f"the bridge closed its stdout\n{self.stderr_tail()}"
        lines = bytes(buffer).splitlines(keepends=True)
        self.stdout_lines.extend(lines)
        message = json.loads(lines[0])
        self.messages.append(message)
        assert isinstance(message, dict), message
        return message

    def close_stdout(self) -> None:
        """Close the test's (reading) end of the bridge's stdout, like a client that went away."""
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._stdout_closed = True

    # the process

    def wait(self, timeout: float) -> int:
        """The exit status, waiting at most `timeout` seconds for it."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the bridge still runs after {timeout:g} s\n{self.stderr_tail()}") from None

    def close_and_time_exit(self, timeout: float = EXIT_TIMEOUT) -> tuple[int, float]:
        """Close stdin, then return (exit status, seconds from closing stdin to exit)."""
        started = time.monotonic()
        self.close_stdin()
        status = self.wait(timeout)
        return status, time.monotonic() - started

    def stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", errors="replace")

    def stderr_tail(self, limit: int = 3000) -> str:
        return f"--- bridge stderr (tail) ---\n{self.stderr_text()[-limit:]}"

    def finish(self) -> None:
        """End of a passing test: the bridge exits by itself on EOF with status 0, and all
        of stdout was pure JSON-RPC."""
        if self.proc.poll() is None:
            status, _ = self.close_and_time_exit(EXIT_TIMEOUT)
        else:
            self.close_stdin()
            status = self.proc.returncode
        assert status == 0, f"exit status {status}\n{self.stderr_tail()}"
        self.join_readers()
        assert_stdout_is_pure_jsonrpc(self.stdout_lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass

    def join_readers(self) -> None:
        for thread in self._threads:
            thread.join(EXIT_TIMEOUT)

    def __enter__(self) -> BridgeProcess:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self.finish()
        finally:
            self.kill()
            self.close_stdin()
            self.join_readers()
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()


def start_bridge(url: str, *args: str, **options: Any) -> BridgeProcess:
    return BridgeProcess("--url", url, *args, **options)


def handshake(bridge: BridgeProcess, request_id: Any = 0) -> dict[str, Any]:
    """initialize + notifications/initialized; returns the initialize result."""
    bridge.send(initialize(request_id))
    reply = bridge.read_reply(request_id)
    assert "result" in reply, reply
    bridge.send(INITIALIZED)
    result: dict[str, Any] = reply["result"]
    return result


def count_in_log(server: AppServer, text: str) -> int:
    return server.stderr_text().count(text)


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


# -- 1, 2: the official SDK as the client ----------------------------------------------------


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
                    assert init.server_info.name == "demo-app"
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


# -- 3-5: raw pipes --------------------------------------------------------------------------


@pytest.mark.process
def test_raw_pipes_handshake_list_call(app_server: AppServer) -> None:
    """initialize, notifications/initialized (no reply), tools/list, tools/call; progress
    notifications are relayed on stdout before the reply of their call."""
    with start_bridge(app_server.url) as bridge:
        result = handshake(bridge, 1)
        assert result["serverInfo"]["name"] == "demo-app"

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
def test_large_messages_both_directions(app_server: AppServer) -> None:
    """HAZARDS B01 on the real pipe: a 5 MiB result and an 8 MiB request (non-ASCII) intact."""
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
def test_non_ascii_round_trip_in_c_locale(app_server: AppServer) -> None:
    """HAZARDS B05: raw UTF-8 in, valid UTF-8 out, text unchanged, under LANG=C/LC_ALL=C with
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
        # DESIGN.md §2.2: U+2028/U+2029 never appear raw on the wire.
        assert "\u2028".encode() not in raw and "\u2029".encode() not in raw


# -- 6: the app dies -------------------------------------------------------------------------


@pytest.mark.process
def test_app_killed_mid_call(start_app_server: Callable[..., AppServer]) -> None:
    """HAZARDS B18/B21: the app dies during slow(30) → an error for that id within 5 s; the
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


# -- 7: stdin EOF (B12) ----------------------------------------------------------------------


@pytest.mark.process
def test_stdin_eof_exits_and_deletes_session(app_server: AppServer) -> None:
    """HAZARDS B12: after EOF the bridge exits 0 within 2 s and closes its MCP session."""
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
def test_stdin_at_eof_from_the_start(app_server: AppServer) -> None:
    """HAZARDS B12 variant: stdin is /dev/null (NUL) from the start → exit 0 within 2 s."""
    with start_bridge(app_server.url, stdin_devnull=True) as bridge:
        status = bridge.wait(EXIT_TIMEOUT)
        seconds = time.monotonic() - bridge.started_at
        assert status == 0, bridge.stderr_tail()
        assert seconds < EOF_EXIT_BOUND, f"exit took {seconds:.2f} s from start with stdin at EOF"


@pytest.mark.process
def test_stdin_eof_during_a_call(app_server: AppServer) -> None:
    """EOF while slow(30) is in flight → that id gets reason shutting_down; exit 0 within 2 s."""
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)
        bridge.send(tool_call(9, "slow", {"seconds": 30}))
        time.sleep(0.5)
        status, seconds = bridge.close_and_time_exit()
        assert status == 0, bridge.stderr_tail()
        assert seconds < EOF_EXIT_BOUND, f"exit took {seconds:.2f} s after stdin EOF\n{bridge.stderr_tail()}"
        reply = bridge.read_reply(9, timeout=1.0)  # already written: the process has exited
        assert bridge_error_reason(reply) == "shutting_down", reply


# -- 8: stdout hygiene with everything turned up (B09) ----------------------------------------


@pytest.mark.process
def test_debug_logging_never_reaches_stdout(app_server: AppServer) -> None:
    """HAZARDS B09: with --log-level debug and PYTHONWARNINGS=always, stdout carries exactly
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


# -- 9: the client goes away (B11) ------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize("also_close_stdin", [True, False], ids=["stdout-and-stdin", "stdout-only"])
def test_client_gone_while_reply_in_flight(app_server: AppServer, also_close_stdin: bool) -> None:
    """HAZARDS B11: slow(2) in flight, the client closes its end of stdout (and stdin) after
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


# -- 10: proxy variables (B34) ----------------------------------------------------------------


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
    """HAZARDS B34: proxy variables (NO_PROXY unset, or unparsable) never touch loopback traffic."""
    proxy_url = f"http://127.0.0.1:{closing_proxy.port}" if proxy == "accept-and-close" else "http://127.0.0.1:9"
    changes: dict[str, str | None] = {name: proxy_url for name in PROXY_VARS}
    no_proxy = ":::" if proxy == "broken-no-proxy" else None
    changes.update(NO_PROXY=no_proxy, no_proxy=no_proxy)
    with start_bridge(app_server.url, env=base_env(**changes)) as bridge:
        result = handshake(bridge)
        assert result["serverInfo"]["name"] == "demo-app"
        bridge.send(tool_call(1, "echo", {"text": "no proxy"}))
        assert result_text(bridge.read_reply(1)) == "no proxy"
    assert closing_proxy.accepted == 0, "the bridge connected to the proxy"


# -- 11: timeouts (B22) -----------------------------------------------------------------------


@pytest.mark.process
def test_long_call_outlives_httpx_default_timeout(app_server: AppServer) -> None:
    """HAZARDS B22: a 6 s silent tool call (longer than httpx's 5 s default) succeeds by default."""
    with start_bridge(app_server.url) as bridge:
        handshake(bridge)
        bridge.send(tool_call(1, "slow", {"seconds": 6}))
        assert result_text(bridge.read_reply(1, timeout=6 + REPLY_TIMEOUT)) == "done after 6 s"


@pytest.mark.process
def test_request_timeout_option(app_server: AppServer) -> None:
    """HAZARDS B22: with --request-timeout 1, slow(3) → reason timeout for that id; a ping
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
    """SPEC-CHECKLIST item 15: the bridge works with only HOME, PATH, LOGNAME/USER (and, on
    POSIX, with no environment at all)."""
    env = cut_down_env() if env_kind == "sdk-like" else {}
    with start_bridge(app_server.url, env=env) as bridge:
        handshake(bridge)
        bridge.send(tool_call(1, "echo", {"text": "cut-down env ✓"}))
        assert result_text(bridge.read_reply(1)) == "cut-down env ✓"


# -- the token never leaks (HAZARDS B27) -----------------------------------------------------

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
    """DESIGN.md §2.2: once `run_stdio` holds the wire, a `print()` from the app's own code
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
@pytest.mark.posix_only("preexec_fn and O_NONBLOCK pipes")
def test_a_non_blocking_stdin_from_the_parent_is_not_taken_for_eof(app_server: AppServer) -> None:
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
