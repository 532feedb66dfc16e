"""Real app servers and processes for the tests: examples/app_server.py on 127.0.0.1, isolated
environments, secret files, pid reaping."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO_ROOT = Path(__file__).resolve().parents[2]


APP_SERVER_SCRIPT = REPO_ROOT / "examples" / "app_server.py"


LISTEN_TIMEOUT = 10.0
"""Seconds to wait for the app server's LISTENING line."""


STOP_TIMEOUT = 5.0
"""Seconds a stopping server gets after SIGTERM before it is killed."""


PROXY_VARS = tuple(
    name for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for name in (base, base.lower())
)


def env_without_proxies() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in PROXY_VARS}


@dataclass
class AppServer:
    """A running ``examples/app_server.py`` subprocess."""

    url: str
    """Endpoint, ``http://127.0.0.1:<port>/mcp``."""
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    """File holding the server's stderr (SDK logs and uvicorn access log)."""
    args: tuple[str, ...] = ()
    """The extra command-line arguments it was started with."""
    _stdout: IO[bytes] | None = field(default=None, repr=False)

    def stderr_text(self) -> str:
        """Everything the server wrote to stderr so far."""
        return self.log_path.read_bytes().decode("utf-8", errors="replace")

    def wait_for_stderr(self, text: str, timeout: float = 5.0) -> bool:
        """Poll stderr until it contains `text`; True if it did within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            if text in self.stderr_text():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL on POSIX), like an app that crashed."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=STOP_TIMEOUT)
        self._close_stdout()

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM), killing it if it takes longer than `STOP_TIMEOUT`."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)
        self._close_stdout()

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """``with launch_…(…) as app:`` stops the server (:meth:`stop`) when the block ends."""
        self.stop()

    def _close_stdout(self) -> None:
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None


def read_listening_line(proc: subprocess.Popen[bytes], timeout: float) -> str | None:
    """The server's first stdout line, or None if none arrived within `timeout` seconds."""
    stdout = proc.stdout
    assert stdout is not None
    lines: list[bytes] = []
    # A thread, not select(): pipes cannot be polled on Windows. If the wait times out the
    # caller kills the process, which ends the readline() with EOF.
    reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive() or not lines:
        return None
    return lines[0].decode("utf-8", errors="replace").strip()


def launch_app_server(*extra_args: str, log_path: Path) -> AppServer:
    """Start ``examples/app_server.py --port 0 *extra_args`` and wait for it to listen.

    A ``--port N`` in `extra_args` overrides the default port 0.

    Raises:
        RuntimeError: The server exited or did not print LISTENING within `LISTEN_TIMEOUT`;
            the message includes its stderr.
    """
    return start_listening_app(
        [sys.executable, str(APP_SERVER_SCRIPT), "--port", "0", *extra_args],
        log_path=log_path,
        scheme="http",
        what=f"app server {' '.join(extra_args) or '(default)'}",
        args=extra_args,
    )


def start_listening_app(
    command: list[str], *, log_path: Path, scheme: str, what: str, args: tuple[str, ...] = ()
) -> AppServer:
    """Start ``command`` (stderr to `log_path`) and wait, at most `LISTEN_TIMEOUT`, for its
    first stdout line ``LISTENING <scheme>://…``.

    Raises:
        RuntimeError: it exited or printed no such line in time; the message has its stderr.
    """
    log_file = open(log_path, "wb")  # noqa: SIM115 - the child holds it; we close our copy below
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=REPO_ROOT,
            env=env_without_proxies(),
        )
    finally:
        log_file.close()
    line = read_listening_line(proc, LISTEN_TIMEOUT)
    if line is None or not line.startswith(f"LISTENING {scheme}://"):
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()
        stderr = log_path.read_bytes().decode("utf-8", errors="replace")
        raise RuntimeError(
            f"{what} did not start within {LISTEN_TIMEOUT:g} s "
            f"(first stdout line: {line!r}, exit code {proc.returncode}); stderr:\n{stderr[-4000:]}"
        )
    url = line.split(" ", 1)[1]
    port = 0 if url.startswith(("http+unix://", "npipe://")) else int(url.rsplit(":", 1)[1].split("/", 1)[0])  # a socket or pipe: no port
    return AppServer(url=url, port=port, proc=proc, log_path=log_path, args=args, _stdout=proc.stdout)


def serve_until_stopped(asgi_app: Any, *, log_level: str = "info", access_log: bool = True) -> int:
    """Serve ``asgi_app`` as a test app script does: through the library's
    ``bridge.appserver.AppServer`` on a free port of 127.0.0.1, no token, logs on stderr at
    ``log_level``; ``LISTENING <url>`` on stdout once it accepts connections (AppServer calls
    back then, so a test reading the line never finds the port refusing), then nothing more
    on stdout. Returns the server's exit status."""
    import logging

    from bridge.appserver import AppServer as Serving

    logging.basicConfig(level=log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    def listening(server: Serving) -> None:
        sys.stdout.write(f"LISTENING {server.url}\n")
        sys.stdout.flush()
        sys.stdout = sys.stderr  # nothing else on stdout: the parent stops reading it

    return Serving(asgi_app, require_token=False, on_listening=listening, log_level=log_level, access_log=access_log).run()


def isolated_env(folder: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """An environment (default: this one without proxy variables) whose per-user folders
    are inside `folder`: HOME, and the XDG state/config/data/cache folders, so a bridge's
    launch lock (platformdirs' user_state_path) and default discovery files are private to
    the test."""
    env = dict(env_without_proxies() if base is None else base)
    home = folder / "home"
    for name, sub in (("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_CACHE_HOME", "cache")):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(home / sub)
    env["HOME"] = str(home)
    if sys.platform == "win32":  # pragma: no cover - platformdirs' Windows folders
        env["LOCALAPPDATA"] = env["APPDATA"] = str(home)
    return env


def make_secret_file(path: Path, secret: str | None = None) -> str:
    """Write a local secret (random unless given) with mode 0600; return it."""
    # URL-safe base64, not hex: the leak grep looks for 8-character pieces, and hex pieces
    # could turn up by chance in the hex session ids of the app's log.
    secret = secret or secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(secret + "\n")
    if os.name == "posix":
        os.chmod(path, 0o600)
    return secret


def read_pids(started_file: Path) -> list[int]:
    """The pids an app wrote to its ``--started-file``, one per start, in order."""
    try:
        text = started_file.read_text(encoding="ascii")
    except FileNotFoundError:
        return []
    return [int(line) for line in text.split()]


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (not our child: no wait possible)."""
    if sys.platform.startswith("linux"):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_pids(pids: list[int], timeout: float = STOP_TIMEOUT) -> list[int]:
    """SIGTERM each live pid, SIGKILL what is still alive after `timeout` seconds; return
    the pids that were still alive when asked to stop."""
    alive = [pid for pid in dict.fromkeys(pids) if process_alive(pid)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while any(process_alive(pid) for pid in alive) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in alive:
        if process_alive(pid):
            try:
                os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
            except OSError:
                pass
    return alive


def pids_mentioning(text: str) -> list[int]:
    """Processes of this user whose command line contains `text` (Linux; else none)."""
    found: list[int] = []
    if not sys.platform.startswith("linux"):
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid == os.getuid() and text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


PLATFORM_MARKERS: dict[str, tuple[str, Callable[[], bool]]] = {
    "posix_only": ("POSIX only", lambda: os.name == "posix"),
    "linux_only": ("Linux only", lambda: sys.platform.startswith("linux")),
    "windows_only": ("Windows only", lambda: sys.platform == "win32"),
}
