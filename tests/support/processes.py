"""Real bridge processes: start one, talk JSON-RPC over its pipes, read its errors."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from support.apps import REPO_ROOT, AppServer

BRIDGE_EXE_VAR = "MCP_APP_BRIDGE_EXE"
"""Environment variable naming a frozen bridge executable to test instead of ``python -m bridge``."""

REPLY_TIMEOUT = 10.0
"""Seconds a reply may take when nothing slow is involved (a loaded CI machine)."""
BIG_TIMEOUT = 30.0
"""Seconds for the multi-MiB exchanges."""
EOF_EXIT_BOUND = 2.0
"""After stdin EOF the bridge exits within 2 s (docs/behaviour.md, "Shutdown")."""
EXIT_TIMEOUT = 5.0
"""Seconds a bridge gets to exit on its own at the end of a test before it is killed."""

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")




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
    (MCP basic/transports "stdio"; the SDKs' default environment): on POSIX only HOME, PATH and LOGNAME/USER when present. The
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
    """``data.reason`` of an error made by the bridge (docs/behaviour.md, "Errors"); fails for anything else."""
    assert "error" in reply, f"expected an error made by the bridge, got {str(reply)[:500]}"
    error = reply["error"]
    assert error.get("code") == -32603, error
    data = error.get("data")
    assert isinstance(data, dict) and data.get("source") == "bridge", error
    assert isinstance(error.get("message"), str) and error["message"], error
    return str(data.get("reason"))


def assert_stdout_is_pure_jsonrpc(lines: Sequence[bytes]) -> None:
    """Every stdout line is one UTF-8 JSON-RPC 2.0 message (or a batch array of them),
    terminated by a single ``\\n`` (docs/behaviour.md, "stdout")."""
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
        new_process_group: start it in a process group (and session) of its own, as
            clients that signal the whole group do (POSIX).
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
        new_process_group: bool = False,
    ) -> None:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [*bridge_command(), *args],
            stdin=subprocess.DEVNULL if stdin_devnull else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=new_process_group,
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


def python_pid(pid: int) -> int:
    """The pid of the bridge's Python in the process ``pid`` started: the one-file
    bootloader's one child when ``pid`` is a frozen executable's (it unpacks, then runs
    Python in a child), else ``pid`` itself. Linux only (``/proc/PID/task/PID/children``)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as children:
        found = [int(child) for child in children.read().split()]
    return found[0] if os.environ.get(BRIDGE_EXE_VAR) and len(found) == 1 else pid


def status_kib(pid: int, name: str) -> int:
    """A ``/proc/<pid>/status`` figure in KiB (``VmRSS``, ``VmHWM``); Linux only."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        lines = status.read().splitlines()
    for line in lines:
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {name} in /proc/{pid}/status")
