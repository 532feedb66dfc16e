"""Demo: an AI client reaches a running "desktop app" through the bridge.

    python examples/demo.py [--show-logs]

1. Starts ``examples/app_server.py`` (an MCP server over Streamable HTTP on 127.0.0.1)
   on a free port and waits for its ``LISTENING <url>`` line.
2. Launches the bridge exactly as an AI client does: the MCP SDK's stdio client runs
   ``python -m bridge --url <url>`` as a child process and speaks newline-delimited
   JSON-RPC on its stdin/stdout.
3. Through the SDK's `ClientSession`: initialize (the classic handshake), tools/list,
   tools/call echo, tools/call progress (progress notifications printed as they arrive).
4. Closes the bridge's stdin (it should exit on its own and close the app session with a
   DELETE), then stops the app server.

Part 2, "the bridge starts the app" (the desktop-app lifecycle):

5. With the app *not* running (a fresh temporary folder: no discovery file; a local
   secret file with mode 0600), the SDK's stdio client runs the app's own entry point
   ``python examples/app_server.py --mcp-stdio --discovery-file … --secret-file …``, as
   an AI client configured with it would. That process is the bridge (built with the
   library's ``mcp_stdio_option``): it finds nothing listening, launches the app in server
   mode, waits until it listens, gets a token from the app's ``/auth/token`` route and
   forwards the initialize.
6. Shows the launched app's pid (tool ``app_info``) and how long initialize took, calls a
   tool, closes the client, then stops the launched app (its pid is in the discovery
   file) and removes the folder.

The transcript goes to stdout. The app's and the bridge's logs go to temporary files
(printed on failure), or to stderr with ``--show-logs``. Every wait is bounded. Exit
status: 0 on success, 1 if a step failed, 2 if the app server could not be started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import Implementation, TextContent

REPO_ROOT = Path(__file__).resolve().parent.parent
APP_SERVER_SCRIPT = REPO_ROOT / "examples" / "app_server.py"

LISTEN_TIMEOUT = 10.0
"""Seconds to wait for the app server to listen."""
STEP_TIMEOUT = 15.0
"""Seconds each client step (initialize, one request) may take."""
SHUTDOWN_TIMEOUT = 10.0
"""Seconds for the bridge to go away once its stdin is closed (the SDK kills it after 2 s)."""
BRIDGE_EXIT_GRACE = 2.0
"""The SDK stdio client closes stdin, waits this long, then kills the process tree."""
LAUNCH_BOUND = 30.0
"""Part 2: seconds the whole conversation may take, the app's launch included."""
APP_STOP_TIMEOUT = 5.0
"""Part 2: seconds the launched app gets after SIGTERM before it is killed."""

ECHO_TEXT = "Hello from the demo: Grüße, 你好, 🌍, and a U+2028 line separator:\u2028end"
PROGRESS_STEPS = 5


class DemoError(Exception):
    """A step failed; the message says which and why."""


class Transcript:
    """Prints numbered steps with times relative to the start of the demo."""

    def __init__(self) -> None:
        self._t0 = time.perf_counter()
        self.step = "start-up"
        """What the demo is doing now, named in a failure message."""

    def begin(self, step: str, text: str) -> None:
        self.step = step
        self.line(text)

    def line(self, text: str) -> None:
        print(f"[{time.perf_counter() - self._t0:6.3f}s] {text}", flush=True)

    def detail(self, text: str) -> None:
        print(f"          {text}", flush=True)


class AppServerProcess:
    """``examples/app_server.py`` as a subprocess, with its stderr in `log`."""

    def __init__(self, log: IO[bytes] | None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(APP_SERVER_SCRIPT), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=REPO_ROOT,
        )
        self.url = self._wait_listening()

    def _wait_listening(self) -> str:
        stdout = self.proc.stdout
        assert stdout is not None
        lines: list[bytes] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(LISTEN_TIMEOUT)
        line = lines[0].decode("utf-8", errors="replace").strip() if lines else ""
        if not line.startswith("LISTENING http://"):
            self.stop()
            raise DemoError(
                f"the app server did not start within {LISTEN_TIMEOUT:g} s "
                f"(exit code {self.proc.returncode}, first stdout line {line!r})"
            )
        return line.split(" ", 1)[1]

    def stop(self) -> int | None:
        """Terminate (then kill, if needed) and return the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


def _text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def talk_through_bridge(url: str, say: Transcript, bridge_log: TextIO) -> float:
    """Run the client conversation; return seconds the bridge took to exit after stdin closed."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bridge", "--url", url],
        cwd=REPO_ROOT,
    )
    say.line(f"launching the bridge the way an AI client does: {Path(sys.executable).name} -m bridge --url {url}")
    closing_started_at: list[float] = []
    try:
        with anyio.fail_after(4 * STEP_TIMEOUT + SHUTDOWN_TIMEOUT):
            await _converse(params, say, bridge_log, closing_started_at)
    except Exception as exc:
        raise _innermost(exc) from None
    if not closing_started_at:
        raise DemoError("the conversation ended early")
    return time.perf_counter() - closing_started_at[0]


def _innermost(exc: BaseException) -> BaseException:
    """Unwrap task-group exception groups that hold exactly one error."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _converse(
    params: StdioServerParameters, say: Transcript, bridge_log: TextIO, closing_started_at: list[float]
) -> None:
    async with stdio_client(params, errlog=bridge_log) as (read_stream, write_stream):
        async with ClientSession(
            read_stream,
            write_stream,
            read_timeout_seconds=STEP_TIMEOUT,
            client_info=Implementation(name="mcp-app-bridge-demo", version="1.0"),
        ) as session:
            say.begin("initialize", "-> initialize (classic handshake)")
            with anyio.fail_after(STEP_TIMEOUT):
                started = time.perf_counter()
                init = await session.initialize()
            server = init.server_info
            say.line(
                f"<- initialized in {1000 * (time.perf_counter() - started):.0f} ms: "
                f"server {server.name} {server.version}, protocol {init.protocol_version}"
            )
            if init.instructions:
                say.detail(f"instructions: {init.instructions}")

            say.begin("tools/list", "-> tools/list")
            with anyio.fail_after(STEP_TIMEOUT):
                tools = (await session.list_tools()).tools
            say.line(f"<- {len(tools)} tools:")
            for tool in tools:
                say.detail(f"{tool.name:10} {tool.description or ''}")
            names = {tool.name for tool in tools}
            missing = {"echo", "progress"} - names
            if missing:
                raise DemoError(f"tools/list lacks {sorted(missing)}")

            say.begin("tools/call echo", f"-> tools/call echo {ECHO_TEXT!r}")
            with anyio.fail_after(STEP_TIMEOUT):
                started = time.perf_counter()
                result = await session.call_tool("echo", {"text": ECHO_TEXT})
            echoed = _text_of(result)
            say.line(f"<- {echoed!r} ({1000 * (time.perf_counter() - started):.0f} ms)")
            if result.is_error or echoed != ECHO_TEXT:
                raise DemoError(f"echo came back different: {echoed!r} (isError={result.is_error})")
            say.detail("identical to what was sent")

            received: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                received.append(progress)
                say.line(f"   progress {progress:g}/{total:g}: {message}" if total else f"   progress {progress:g}")

            say.begin("tools/call progress", f"-> tools/call progress steps={PROGRESS_STEPS} (with a progress token)")
            with anyio.fail_after(STEP_TIMEOUT):
                started = time.perf_counter()
                result = await session.call_tool(
                    "progress",
                    {"steps": PROGRESS_STEPS, "delay_seconds": 0.2},
                    progress_callback=on_progress,
                )
            say.line(f"<- {_text_of(result)!r} ({1000 * (time.perf_counter() - started):.0f} ms)")
            if result.is_error:
                raise DemoError(f"progress failed: {_text_of(result)}")
            if len(received) != PROGRESS_STEPS:
                raise DemoError(f"expected {PROGRESS_STEPS} progress notifications, got {len(received)}")
            say.begin("shutdown", "closing the bridge's stdin (what a client does when it quits)")
            closing_started_at.append(time.perf_counter())


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return text[-limit:] if text.strip() else "(empty)"


@contextlib.contextmanager
def _log_files(show: bool) -> Iterator[tuple[Path | None, Path | None]]:
    if show:
        yield None, None
        return
    with tempfile.TemporaryDirectory(prefix="mcp-bridge-demo-") as tmp:
        yield Path(tmp) / "app_server.log", Path(tmp) / "bridge.log"


def run(show_logs: bool) -> int:
    say = Transcript()
    status = run_part_one(show_logs, say)
    if status == 0:
        status = run_part_two(show_logs, say)
    say.line("demo OK" if status == 0 else f"demo FAILED (exit {status})")
    return status


def run_part_one(show_logs: bool, say: Transcript) -> int:
    """Part 1: the app runs; the bridge (``python -m bridge --url``) reaches it."""
    say.line("part 1: the app is running; an AI client reaches it through the bridge")
    with _log_files(show_logs) as (app_log_path, bridge_log_path):
        app_log = open(app_log_path, "wb") if app_log_path else None  # noqa: SIM115
        bridge_log = open(bridge_log_path, "w", encoding="utf-8") if bridge_log_path else sys.stderr  # noqa: SIM115
        app: AppServerProcess | None = None
        status = 1
        try:
            say.line("starting the app (examples/app_server.py) on a free port")
            try:
                app = AppServerProcess(app_log)
            except DemoError as exc:
                say.line(f"FAILED: {exc}")
                status = 2
                return status
            say.line(f"app listening at {app.url}")

            exit_seconds = anyio.run(talk_through_bridge, app.url, say, bridge_log)
            if exit_seconds < BRIDGE_EXIT_GRACE:
                say.line(f"bridge exited on its own {1000 * exit_seconds:.0f} ms after stdin closed")
            else:
                say.line(
                    f"WARNING: the bridge was still running {BRIDGE_EXIT_GRACE:g} s after stdin closed "
                    f"and was terminated by the client ({exit_seconds:.1f} s)"
                )
            status = 0
        except DemoError as exc:
            say.line(f"FAILED during {say.step}: {exc}")
        except TimeoutError:
            say.line(f"FAILED: {say.step} did not finish in time (see the logs below)")
        except Exception as exc:  # the demo reports every failure as a readable line
            hint = ""
            if "Connection closed" in str(exc):
                hint = " (the bridge closed its stdout: did it exit? see its stderr below)"
            say.line(f"FAILED during {say.step}: {type(exc).__name__}: {exc}{hint}")
        finally:
            if app is not None:
                code = app.stop()
                say.line("app server stopped" + (" (SIGTERM)" if code == -15 else f" (exit code {code})"))
            if app_log is not None:
                app_log.close()
            if bridge_log is not sys.stderr:
                bridge_log.close()

        if app_log_path is not None and app is not None:
            deletes = [line for line in _tail(app_log_path, 10**6).splitlines() if '"DELETE /mcp' in line]
            if deletes:
                say.line(f"the bridge closed its app session: {deletes[-1].split(' - ', 1)[-1]}")
            elif status == 0:
                say.line("note: the app saw no DELETE /mcp (the bridge did not close its session)")
        if status != 0 and app_log_path and bridge_log_path:
            print(f"\n--- bridge stderr ---\n{_tail(bridge_log_path)}", flush=True)
            print(f"--- app server stderr ---\n{_tail(app_log_path)}", flush=True)
        return status


# -- part 2: the bridge starts the app -----------------------------------------------------


def run_part_two(show_logs: bool, say: Transcript) -> int:
    """Part 2: the app is not running; the app's own ``--mcp-stdio`` entry starts it."""
    print(flush=True)
    say.line("part 2: the app is NOT running; the AI client starts the app's --mcp-stdio entry")
    status = 1
    launched_pid: int | None = None
    with tempfile.TemporaryDirectory(prefix="mcp-bridge-example-app-") as tmp:
        folder = Path(tmp)
        discovery = folder / "example-app" / "mcp-endpoint.json"
        secret_file = folder / "example-app" / "secret"
        launch_log = folder / "launched-app.log"
        bridge_log_path = folder / "bridge.log"
        bridge_log = sys.stderr if show_logs else open(bridge_log_path, "w", encoding="utf-8")  # noqa: SIM115
        try:
            _write_secret(secret_file)
            say.line(f"no discovery file at {discovery}: nothing runs")
            say.detail(f"local secret for the app's auth route: {secret_file} (mode 0600)")
            seconds, launched_pid = anyio.run(
                bridge_starts_the_app, folder, discovery, secret_file, launch_log, say, bridge_log,
                None if show_logs else bridge_log_path,
            )
            say.line(f"client closed; the bridge went away after {1000 * seconds:.0f} ms, the app keeps running")
            status = 0
        except DemoError as exc:
            say.line(f"FAILED during {say.step}: {exc}")
        except TimeoutError:
            say.line(f"FAILED: {say.step} did not finish in time (see the logs below)")
        except Exception as exc:  # the demo reports every failure as a readable line
            say.line(f"FAILED during {say.step}: {type(exc).__name__}: {exc}")
        finally:
            if bridge_log is not sys.stderr:
                bridge_log.close()
            stopped = _stop_launched_app(discovery, launched_pid)
            if stopped is not None:
                say.line(f"launched app (pid {stopped}) stopped; its discovery file is gone: {not discovery.exists()}")
            if status != 0:
                if not show_logs:
                    print(f"\n--- bridge stderr ---\n{_tail(bridge_log_path)}", flush=True)
                print(f"--- launched app output ---\n{_tail(launch_log)}", flush=True)
    return status


def _write_secret(path: Path) -> None:
    """Create the app's local secret with mode 0600 (the app would create it on first run)."""
    import secrets

    path.parent.mkdir(mode=0o700, parents=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")


async def bridge_starts_the_app(
    folder: Path,
    discovery: Path,
    secret_file: Path,
    launch_log: Path,
    say: Transcript,
    bridge_log: TextIO,
    bridge_log_path: Path | None,
) -> tuple[float, int]:
    """Run the client conversation through ``app_server.py --mcp-stdio``; return (seconds
    the bridge took to exit after stdin closed, pid of the launched app)."""
    args = [
        str(APP_SERVER_SCRIPT), "--mcp-stdio",
        "--discovery-file", str(discovery),
        "--secret-file", str(secret_file),
        "--launch-log", str(launch_log),
    ]
    # The bridge's launch lock lives in the per-user state folder: keep this run's in the
    # temporary folder (the SDK passes HOME, PATH … itself).
    params = StdioServerParameters(
        command=sys.executable, args=args, cwd=REPO_ROOT, env={"XDG_STATE_HOME": str(folder / "state")}
    )
    say.line(f"launching like an AI client: {Path(sys.executable).name} examples/app_server.py --mcp-stdio "
             "--discovery-file … --secret-file …")
    closing_started_at: list[float] = []
    pid: list[int] = []
    try:
        with anyio.fail_after(LAUNCH_BOUND + SHUTDOWN_TIMEOUT):
            async with stdio_client(params, errlog=bridge_log) as (read_stream, write_stream):
                async with ClientSession(
                    read_stream,
                    write_stream,
                    read_timeout_seconds=LAUNCH_BOUND,
                    client_info=Implementation(name="mcp-app-bridge-demo", version="1.0"),
                ) as session:
                    say.begin("initialize (app down)", "-> initialize (the bridge must start the app first)")
                    started = time.perf_counter()
                    with anyio.fail_after(LAUNCH_BOUND):
                        init = await session.initialize()
                    took = time.perf_counter() - started
                    say.line(f"<- initialized in {1000 * took:.0f} ms: server {init.server_info.name}, "
                             f"protocol {init.protocol_version}")
                    for line in _launcher_lines(bridge_log_path):
                        say.detail(f"bridge: {line}")

                    say.begin("tools/call app_info", "-> tools/call app_info")
                    with anyio.fail_after(STEP_TIMEOUT):
                        info = await session.call_tool("app_info", {})
                    details = info.structured_content or json.loads(_text_of(info) or "{}")
                    if info.is_error or not isinstance(details.get("pid"), int):
                        raise DemoError(f"app_info failed: {_text_of(info)!r}")
                    pid.append(details["pid"])
                    say.line(f"<- the bridge started the app: pid {details['pid']}, mode {details.get('mode')}")
                    published = _discovered_pid(discovery)
                    say.detail(f"discovery file {discovery.name} names pid {published}")
                    if published != details["pid"]:
                        raise DemoError(f"the discovery file names pid {published}, app_info says {details['pid']}")

                    text = "the bridge started me"
                    say.begin("tools/call echo", f"-> tools/call echo {text!r}")
                    with anyio.fail_after(STEP_TIMEOUT):
                        result = await session.call_tool("echo", {"text": text})
                    if result.is_error or _text_of(result) != text:
                        raise DemoError(f"echo came back different: {_text_of(result)!r}")
                    say.line(f"<- {_text_of(result)!r}")
                    say.begin("shutdown", "closing the client (the app is left running, as a desktop app would be)")
                    closing_started_at.append(time.perf_counter())
    except Exception as exc:
        if pid:  # stop the app even though the conversation failed
            _stop_launched_app(discovery, pid[0])
        raise _innermost(exc) from None
    if not closing_started_at or not pid:
        raise DemoError("the conversation ended early")
    return time.perf_counter() - closing_started_at[0], pid[0]


def _launcher_lines(bridge_log_path: Path | None) -> list[str]:
    """What the bridge said about starting the app (its stderr), without the log prefix."""
    if bridge_log_path is None:
        return []
    text = bridge_log_path.read_text(encoding="utf-8", errors="replace")
    lines = [line.split("bridge.launcher: ", 1)[1] for line in text.splitlines() if "bridge.launcher: " in line]
    return [line if len(line) <= 110 else line[:107] + "..." for line in lines]


def _discovered_pid(discovery: Path) -> int | None:
    try:
        pid = json.loads(discovery.read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError):
        return None
    return pid if isinstance(pid, int) else None


def _stop_launched_app(discovery: Path, pid: int | None) -> int | None:
    """Stop the app the bridge launched (not our child: it runs detached). Its pid comes
    from the discovery file, else from ``app_info``. SIGTERM, then SIGKILL after
    `APP_STOP_TIMEOUT`. Returns the pid it stopped, or None."""
    pid = _discovered_pid(discovery) or pid
    if pid is None or not _alive(pid):
        return None
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + APP_STOP_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
    return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    if sys.platform.startswith("linux"):  # a zombie is gone for our purposes
        with contextlib.suppress(OSError, IndexError):
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Talk to a demo app through the bridge, like an AI client.")
    parser.add_argument("--show-logs", action="store_true", help="send app and bridge logs to stderr")
    args = parser.parse_args(argv)
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    return run(args.show_logs)


if __name__ == "__main__":
    sys.exit(main())
