"""The discovery file: how a running app tells the bridge where it listens (docs/discovery.md).

The app writes a small JSON document when its MCP server is up and removes it when it
stops; the bridge reads it on every (re)connect and after every 401, so an app that comes
back on another port or with a rotated token is found again without touching the AI
client's configuration::

    {"url": "http://127.0.0.1:8765/mcp", "pid": 4242, "token": "…"}

- ``url`` (required): the MCP endpoint, with an explicit loopback address (``127.x.y.z``
  or ``[::1]``), never a name such as ``localhost`` that could resolve elsewhere; or a
  Unix domain socket, ``http+unix://`` with the socket's absolute path percent-encoded
  and then the MCP path (``http+unix://%2Frun%2Fuser%2F1000%2Fapp%2Fmcp.sock/mcp``,
  ``bridge/core/unixurl.py``); or a Windows named pipe, ``npipe://./pipe/NAME`` and then
  the MCP path (``bridge/core/pipeurl.py``). A reader that predates the socket or pipe
  form refuses such a file (its scheme is not http or https) instead of guessing a TCP
  address.
- ``pid`` (optional): the app's process id. While that process lives, the bridge waits for
  it instead of launching a second instance.
- ``pid_start_time`` (optional): when that process started, in Unix seconds, as the OS
  reports it (Linux: ``/proc/PID/stat`` field 22 in clock ticks after the boot time of
  ``/proc/stat``; macOS and Windows: psutil's ``create_time()``).
  :func:`write_discovery_file` records it. A pid is the app's only while the process
  with that pid started at that time (within :data:`START_TIME_TOLERANCE_SECONDS`): after
  a crash the pid may be reused by an unrelated process, and the file then counts as
  absent (the app is started, with ``--launch``). A file without it (an older writer)
  is judged by its modification time: a process that started after the file was
  written cannot be the one that wrote its pid there.
- ``token`` (optional): a bearer token for the endpoint.

The file must be owned by the user running the bridge, not be a symbolic link, not be
writable by group or others (nor readable by them when it holds a token), and sit in
folders nobody else may write to (``bridge/system/privatefile.py``: the app writes it with mode
0600, atomically); otherwise it is refused. A file whose ``pid`` is not alive, or alive
but another process than the app's (a reused pid, see ``pid_start_time``), counts as
absent: the app is not running, and nothing is sent to its old port.
Its default place is per user: ``platformdirs.user_state_path(app_name) / "mcp-endpoint.json"``.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import stat
import sys
from pathlib import Path
from urllib.parse import urlsplit

from ..core.config import ConfigError
from ..core.pipeurl import is_pipe_url, split_pipe_url
from ..core.unixurl import is_unix_url, split_unix_url

__all__ = [
    "DISCOVERY_FILE_NAME",
    "Discovery",
    "DiscoveryError",
    "default_discovery_path",
    "read_discovery_file",
    "write_discovery_file",
    "remove_discovery_file",
    "pid_is_alive",
    "process_start_time",
    "pid_is_the_apps",
    "START_TIME_TOLERANCE_SECONDS",
]

#: How far a process's start time may be from the one recorded (seconds): the clock-tick
#: rounding of Linux, a writer that computes it differently (another language's runtime).
START_TIME_TOLERANCE_SECONDS = 2.0

DISCOVERY_FILE_NAME = "mcp-endpoint.json"


class DiscoveryError(ConfigError):
    """The discovery file is missing, unsafe or malformed. The message says which; a request
    that needed it gets reason ``app_unreachable``; the bridge keeps serving.

    Attributes:
        missing: the file does not exist, so the app is simply not running (and may be
            started). ``False`` for a file that exists but was refused: starting a second
            instance would not help, and would hide the problem.
    """

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


class Discovery:
    """What the app published: its endpoint, and optionally its pid and a token.

    Attributes:
        url: the endpoint.
        pid: the app's process id, or ``None``.
        token: the bearer token, or ``None`` (never in the ``repr``).
        pid_start_time: when ``pid`` started (Unix seconds), as recorded by the writer;
            ``None``: not recorded.
        written_at: the file's modification time (Unix seconds) when it was read (not
            compared, not in the ``repr``).

    A plain class, not a dataclass: importing :mod:`dataclasses` loads :mod:`inspect` and
    :mod:`ast` at every start of the bridge.
    """

    __slots__ = ("url", "pid", "token", "pid_start_time", "written_at")

    def __init__(
        self,
        url: str,
        pid: int | None = None,
        token: str | None = None,
        pid_start_time: float | None = None,
        written_at: float | None = None,
    ) -> None:
        self.url, self.pid, self.token, self.pid_start_time, self.written_at = url, pid, token, pid_start_time, written_at

    def _compared(self) -> tuple[object, ...]:
        return (self.url, self.pid, self.token, self.pid_start_time)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Discovery)
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        return f"Discovery(url={self.url!r}, pid={self.pid!r}, pid_start_time={self.pid_start_time!r})"


def default_discovery_path(app_name: str) -> Path:
    """The per-user discovery file of ``app_name`` (``user_state_path`` of platformdirs)."""
    from .statefolder import user_state_path

    return user_state_path(app_name) / DISCOVERY_FILE_NAME


#: At most this many other apps are named in :func:`unpublished_app_hint`.
MAX_NAMED_APPS = 10


def published_app_names() -> list[str]:
    """The names of the apps whose discovery file is at its default place for this user
    (:func:`default_discovery_path`: a folder of the app's name in the per-user state
    folder, holding ``mcp-endpoint.json``), sorted; at most :data:`MAX_NAMED_APPS`, only
    names of printable characters. Empty when the folder cannot be read."""
    root = default_discovery_path("x").parent.parent
    try:
        folders = sorted(os.listdir(root))
    except OSError:
        return []
    found = []
    for name in folders:
        if name.isprintable() and (root / name / DISCOVERY_FILE_NAME).is_file():
            found.append(name)
            if len(found) == MAX_NAMED_APPS:
                break
    return found


def unpublished_app_hint(app_name: str, path: Path | None) -> str | None:
    """``no app called NAME has published here; found: A, B`` when ``path`` is the default
    discovery file of ``app_name`` (``--app-name`` without ``--discovery-file``) and is
    missing: the name may be misspelt, and the apps that did publish are named. ``None``
    otherwise (another path, or the file exists)."""
    if path is None or path != default_discovery_path(app_name) or path.exists():
        return None
    others = [name for name in published_app_names() if name != app_name]
    return f"no app called {app_name} has published here ({path.parent.parent}); found: {', '.join(others) if others else 'none'}"


def read_discovery_file(path: Path) -> Discovery:
    """Read and check a discovery file.

    Raises:
        DiscoveryError: the file does not exist (the app is not running), is writable by
            group or others, belongs to another user, is not the JSON described above, or
            names an endpoint that is not an explicit loopback address.
    """
    from ..system.privatefile import UnsafeFileError, read_private_file

    try:
        raw = read_private_file(path, "discovery file", secret=False)
    except FileNotFoundError:
        raise DiscoveryError(f"no discovery file at {path}: the app is not running", missing=True) from None
    except UnsafeFileError as exc:
        raise DiscoveryError(f"refusing the discovery file: {exc}") from None
    except OSError as exc:
        raise DiscoveryError(f"cannot read the discovery file {path}: {exc.strerror}") from None
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DiscoveryError(f"the discovery file {path} is not valid JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("url"), str):
        raise DiscoveryError(f'the discovery file {path} has no "url" string')
    url = document["url"]
    _check_explicit_loopback(url, path)
    pid = document.get("pid")
    token = document.get("token")
    if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0):
        raise DiscoveryError(f'the "pid" in {path} is not a positive integer')
    if token is not None and (not isinstance(token, str) or not token):
        raise DiscoveryError(f'the "token" in {path} is not a non-empty string')
    started = document.get("pid_start_time")
    if started is not None and (not isinstance(started, (int, float)) or isinstance(started, bool) or not started > 0):
        raise DiscoveryError(f'the "pid_start_time" in {path} is not a positive number')
    if token is not None and os.name == "posix" and os.lstat(path).st_mode & 0o044:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        raise DiscoveryError(
            f"refusing the discovery file: Permissions {mode:04o} for '{path}' are too open: it holds a token, "
            "so others must not read it; the app must write it with mode 0600"
        )
    try:
        written_at: float | None = os.lstat(path).st_mtime
    except OSError:
        written_at = None
    return Discovery(url=url, pid=pid, token=token, pid_start_time=None if started is None else float(started), written_at=written_at)


def _check_explicit_loopback(url: str, path: Path) -> None:
    if is_unix_url(url) or is_pipe_url(url):
        try:
            split_pipe_url(url) if is_pipe_url(url) else split_unix_url(url)
        except ValueError as exc:
            raise DiscoveryError(f"refusing the discovery file {path}: {exc}") from None
        return
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        address = ipaddress.ip_address(host)
    except ValueError:
        raise DiscoveryError(
            f"refusing the discovery file {path}: its url {url!r} must name an explicit "
            "loopback address such as 127.0.0.1 or [::1]"
        ) from None
    if parts.scheme not in ("http", "https") or not address.is_loopback:
        raise DiscoveryError(
            f"refusing the discovery file {path}: its url {url!r} is not http(s) on loopback, http+unix:// nor npipe://"
        )


def write_discovery_file(path: Path, *, url: str, pid: int | None = None, token: str | None = None) -> None:
    """Publish the app's endpoint, for Python apps (call it once the server listens).

    Writes atomically (a temporary file in the same folder, then a rename) with mode 0600,
    creating the folder (mode 0700) if needed. ``pid`` defaults to this process; its start
    time is recorded beside it (``pid_start_time``) when the OS tells it.

    Raises:
        DiscoveryError: ``url`` is not an explicit loopback http(s) URL nor a valid
            ``http+unix://`` or ``npipe://`` one.
        UnsafeFileError: the folder, or one above it, is open to other users.
        OSError: the file could not be written.
    """
    _check_explicit_loopback(url, path)
    pid = os.getpid() if pid is None else pid
    document: dict[str, object] = {"url": url, "pid": pid}
    started = process_start_time(pid)
    if started is not None:
        document["pid_start_time"] = round(started, 3)
    if token is not None:
        document["token"] = token
    from ..system.privatefile import write_private_file

    write_private_file(path, json.dumps(document).encode("utf-8"))


def remove_discovery_file(path: Path, *, pid: int | None = None) -> None:
    """Remove the discovery file when the app stops, if it is still this app's.

    Only removes it when its ``pid`` is ``pid`` (default: this process), so a second
    instance that took over is not disturbed. A missing or unreadable file is ignored.
    """
    expected = os.getpid() if pid is None else pid
    try:
        current = read_discovery_file(path)
    except DiscoveryError:
        return
    if current.pid == expected:
        with contextlib.suppress(OSError):
            os.unlink(path)


def pid_is_alive(pid: int) -> bool:
    """Return whether a process with this id exists (best effort, never raises)."""
    if sys.platform == "win32":  # pragma: no cover - Windows only
        from ..system.winapi import pid_is_alive as windows_pid_is_alive
        from ..system.winapi import windows_kernel32

        return windows_pid_is_alive(windows_kernel32(), pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    try:  # Linux: a zombie (exited, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


@functools.lru_cache(maxsize=1)
def _boot_time() -> int:
    """``btime`` of ``/proc/stat``: when the system booted, Unix seconds (read once)."""
    with open("/proc/stat", "rb") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(b"btime "))


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started, in Unix seconds; ``None`` when it does not exist or
    the OS will not say. Never raises.

    Linux: ``/proc/PID/stat`` field 22 (``starttime``, clock ticks since boot, ``proc(5)``)
    divided by ``SC_CLK_TCK``, plus ``btime`` of ``/proc/stat`` (the boot time, Unix
    seconds). Elsewhere: psutil's ``Process.create_time()`` (installed with the bridge on
    macOS and Windows).
    """
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                ticks = int(handle.read().rsplit(b")", 1)[1].split()[19])
            return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError, StopIteration):
            return None
    try:
        import psutil  # type: ignore[import-untyped,unused-ignore]

        return float(psutil.Process(pid).create_time())
    except Exception:  # ImportError, NoSuchProcess, AccessDenied: the OS will not say
        return None


def pid_is_the_apps(discovery: Discovery) -> bool:
    """Whether the discovery file's ``pid`` is (still) the app that wrote it: alive, and
    started when the file says (``pid_start_time``), or, for a file without it, not after
    the file was written. ``True`` when the file names no pid. A start time the OS will not
    tell is no evidence either way (the pid counts as the app's while alive)."""
    pid = discovery.pid
    if pid is None:
        return True
    if not pid_is_alive(pid):
        return False
    started = process_start_time(pid)
    if started is None:
        return True
    if discovery.pid_start_time is not None:
        return abs(started - discovery.pid_start_time) <= START_TIME_TOLERANCE_SECONDS
    if discovery.written_at is not None:
        return started <= discovery.written_at + START_TIME_TOLERANCE_SECONDS
    return True


class Endpoint:
    """Where the app's MCP endpoint is: a fixed URL, or the discovery file's, or both.

    With a discovery file the file is read at the first request and again whenever
    :meth:`reload` is called (on every reconnect attempt and after every 401), so an app
    that restarted on another port, or with a rotated token, is found again. A file whose
    pid is dead, or now another process's (see ``pid_start_time``), counts as missing.

    Args:
        url: a fixed endpoint (``--url``); it wins over the discovery file's.
        discovery_file: the app's discovery file, or ``None``.
    """

    def __init__(self, *, url: str | None = None, discovery_file: Path | None = None) -> None:
        if url is None and discovery_file is None:
            raise ValueError("an endpoint needs a URL or a discovery file")
        self._fixed_url = url
        self.discovery_file = discovery_file
        self._discovery: Discovery | None = None
        self.problem: DiscoveryError | None = None
        self._loaded = False

    def reload(self) -> None:
        """Read the discovery file again (if there is one). Never raises: a problem is
        kept in :attr:`problem` and raised by :meth:`url` when no fixed URL exists."""
        self._loaded = True
        if self.discovery_file is None:
            return
        try:
            discovery = read_discovery_file(self.discovery_file)
            if discovery.pid is not None and not pid_is_the_apps(discovery):
                if pid_is_alive(discovery.pid):
                    why = "which now belongs to another process (not the one that wrote the file)"
                else:
                    why = "which is not running"
                raise DiscoveryError(
                    f"the discovery file {self.discovery_file} names pid {discovery.pid}, {why}: "
                    "the app is not running (it left a stale file behind)",
                    missing=True,
                )
            self._discovery = discovery
            self.problem = None
        except DiscoveryError as exc:
            self._discovery = None
            self.problem = exc

    @property
    def discovery(self) -> Discovery | None:
        """The discovery file's content as last read (``None`` if absent or refused)."""
        if not self._loaded:
            self.reload()
        return self._discovery

    def url(self) -> str:
        """Return the endpoint URL.

        Raises:
            DiscoveryError: no fixed URL and no usable discovery file (the message says why).
        """
        if self._fixed_url is not None:
            return self._fixed_url
        discovery = self.discovery
        if discovery is None:
            raise self.problem or DiscoveryError("no discovery file", missing=True)
        return discovery.url

    def listener_pid(self, port: int) -> int | None:
        """The pid that must hold the socket listening on ``port``: the discovery file's,
        when that file describes the endpoint on this port; else ``None``."""
        discovery = self._discovery
        if discovery is None or discovery.pid is None:
            return None
        try:
            described = urlsplit(discovery.url).port
        except ValueError:
            return None
        return discovery.pid if described == port else None

    def discovery_for_socket(self, socket_path: str) -> Discovery | None:
        """The discovery file's content when it describes the endpoint on the Unix socket
        ``socket_path`` (its pid, and that pid's start time, are then what the peer of a
        connection there must be: ``bridge/app/unixpeer.py``); else ``None``."""
        discovery = self._discovery
        if discovery is None or not is_unix_url(discovery.url):
            return None
        try:
            described, _target = split_unix_url(discovery.url)
        except ValueError:
            return None
        return discovery if described == socket_path else None

    def discovery_for_pipe(self, pipe: str) -> Discovery | None:
        """The discovery file's content when it describes the endpoint on the named pipe
        ``pipe`` (``\\\\.\\pipe\\NAME``, compared without regard to case, as Windows
        names pipes; its pid and start time are then what the pipe's server must be:
        ``bridge/app/pipepeer.py``); else ``None``."""
        discovery = self._discovery
        if discovery is None or not is_pipe_url(discovery.url):
            return None
        try:
            described, _target = split_pipe_url(discovery.url)
        except ValueError:
            return None
        return discovery if described.lower() == pipe.lower() else None

    def token(self) -> str | None:
        """The discovery file's token, freshly read."""
        self.reload()
        return self._discovery.token if self._discovery else None
