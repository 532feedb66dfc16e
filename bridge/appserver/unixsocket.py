"""The server half's Unix domain socket: a private place, a safe bind, a safe clean-up.

Where (:func:`socket_path_for`): beside the discovery file, as ``mcp-endpoint.sock`` in
its folder (made 0700 and checked like the discovery file itself), when that path fits
the OS's limit (``sun_path``: 107 bytes on Linux, 103 on macOS); otherwise, or without a
discovery file, in a folder of this user's own in the temporary folder,
``$TMPDIR/mcp-app-bridge-<uid>/`` (created 0700; refused unless it is a real folder, not a
link, owned by this user and closed to others), named after a hash of the discovery
file's path. When another user made that folder first (or it is refused for another
reason), the socket goes to ``mcp-app-bridge/`` in the user's runtime folder
(``$XDG_RUNTIME_DIR``, ``/run/user/<uid>``: made by the OS for this user alone) under the
same rules, with a log line, instead of the app falling back to TCP.

How (:func:`bind_private_socket`): ``bind``, then ``chmod 0600`` (the folder is private,
so nobody else can reach the socket in between), then ``listen``. A file already at that
path is replaced only when it is a stale socket of this user: ``lstat`` says it is a
socket (not a link, which is never followed) owned by this user, and connecting to it is
refused (nobody listens: a run that died). A live socket is left alone (another server
serves there: ``OSError`` ``EADDRINUSE``); anything else is :class:`UnsafeFileError`.

Clean-up (:func:`remove_socket_file`): on the way out the file is removed only when it is
provably the one this server bound. A restart may replace the socket while the old
server still finishes its graceful shutdown (it stopped listening, so the socket reads
as stale), and ext4 hands the freed inode number to the new socket at once: an inode
alone would name the new, live socket. So the server keeps what names its own file:
its device, inode and change time, and, where the OS has ``O_PATH`` (Linux), a
descriptor on the file itself, which keeps its inode allocated (no other file can get
that number while it is held). The comparison and the ``unlink`` run under a short
``flock`` on the socket's folder, which a successor also takes to replace a stale
socket, so the check and the removal cannot straddle a replacement.

Why not uvicorn's own ``uds`` option: it makes the socket file mode 0666 (uvicorn 0.30
to 0.35, ``Server.startup``), and removes whatever is at the path first. The socket is
bound here and handed to uvicorn as a ready socket (``sockets=[…]``), which it serves as
it serves its ``uds`` one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ..core.unixurl import MAX_SOCKET_PATH_BYTES
from ..system.privatefile import UnsafeFileError, check_folders, make_private_folders

__all__ = [
    "SOCKET_FILE_NAME",
    "FOLDER_LOCK_SECONDS",
    "BoundSocketFile",
    "unix_sockets_supported",
    "socket_path_for",
    "bind_private_socket",
    "remove_socket_file",
]

log = logging.getLogger("bridge.appserver")

SOCKET_FILE_NAME = "mcp-endpoint.sock"
#: The longest wait for the socket folder's ``flock`` (seconds): its holders hold it for
#: one ``lstat`` and ``unlink``, or one connect probe (bounded by 1 s) and a ``bind``.
FOLDER_LOCK_SECONDS = 5.0


class BoundSocketFile:
    """What names the socket file one server bound (see the module, "Clean-up").

    Attributes:
        path: the socket's path.
        device, inode, ctime_ns: its ``lstat`` once bound and made 0600.
        handle: an ``O_PATH`` descriptor on it (Linux; ``None`` elsewhere, or once
            released), which keeps its inode number from going to another file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle: int | None = None
        o_path = getattr(os, "O_PATH", 0)
        if o_path:
            with contextlib.suppress(OSError):
                self.handle = os.open(path, o_path | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        status = os.fstat(self.handle) if self.handle is not None else os.lstat(path)
        self.device, self.inode, self.ctime_ns = status.st_dev, status.st_ino, status.st_ctime_ns

    def names(self, status: os.stat_result) -> bool:
        """Whether ``status`` (an ``lstat``) is of this very file."""
        return stat.S_ISSOCK(status.st_mode) and (status.st_dev, status.st_ino, status.st_ctime_ns) == (
            self.device,
            self.inode,
            self.ctime_ns,
        )

    def release(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.handle is not None:
            with contextlib.suppress(OSError):
                os.close(self.handle)
            self.handle = None


def unix_sockets_supported() -> bool:
    """Whether this OS serves HTTP on a Unix domain socket here: Linux, macOS and the
    BSDs (Windows has ``AF_UNIX`` since 2018, but the bridge checks its peer only on these)."""
    return hasattr(socket, "AF_UNIX") and os.name == "posix" and sys.platform != "cygwin"


def socket_path_for(discovery_file: Path | None, *, temp_root: str | None = None, runtime_root: str | None = None) -> Path:
    """The socket's path for an app publishing through ``discovery_file`` (see the module).

    Args:
        temp_root: the temporary folder (default: ``tempfile.gettempdir()``).
        runtime_root: the user's runtime folder (default: ``$XDG_RUNTIME_DIR``, else
            platformdirs' ``user_runtime_path``), the place taken when the temporary
            folder's ``mcp-app-bridge-<uid>`` cannot be used (another user made it first).

    Raises:
        UnsafeFileError: no folder is this user's private folder (the first one's problem).
        OSError: none could be created.
    """
    if discovery_file is not None:
        beside = discovery_file.with_name(SOCKET_FILE_NAME)
        if len(os.fsencode(str(beside))) <= MAX_SOCKET_PATH_BYTES:
            make_private_folders(beside.parent)
            check_folders(beside)
            _check_private_folder(beside.parent, strict=False)
            return beside
    uid = os.geteuid()  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    key = str(discovery_file.resolve()) if discovery_file is not None else f"pid-{os.getpid()}"
    name = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:16] + ".sock"
    places = [Path(temp_root or tempfile.gettempdir()) / f"mcp-app-bridge-{uid}"]
    runtime = runtime_root if runtime_root is not None else _runtime_root()
    if runtime:
        places.append(Path(runtime) / "mcp-app-bridge")
    first: Exception | None = None
    for folder in places:
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)  # (never its parents: a runtime folder is the OS's to make)
            _check_private_folder(folder, strict=True)
            check_folders(folder / name)
        except (UnsafeFileError, OSError) as exc:
            if first is None:
                first = exc
            log.warning("the socket folder %s cannot be used: %s", folder, exc)
            continue
        if len(os.fsencode(str(folder / name))) <= MAX_SOCKET_PATH_BYTES:
            return folder / name
    if first is not None:
        raise first
    raise OSError(errno.ENAMETOOLONG, f"no socket folder gives a path within the OS's limit of {MAX_SOCKET_PATH_BYTES} bytes", str(places[-1] / name))


def _runtime_root() -> str | None:
    """The user's runtime folder (``$XDG_RUNTIME_DIR``, else ``/run/user/<uid>``; on macOS
    platformdirs' ``user_runtime_path``), or ``None`` when there is none."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime and sys.platform == "darwin":
        import platformdirs

        runtime = str(platformdirs.user_runtime_path(appauthor=False))
    elif not runtime:
        runtime = f"/run/user/{os.geteuid()}"  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    return runtime if os.path.isdir(runtime) else None


def _check_private_folder(folder: Path, *, strict: bool) -> None:
    """``folder`` is a real folder (not a link), this user's, closed to group and others
    (``strict``: no access at all; else: nobody else may write)."""
    status = os.lstat(folder)
    me = os.geteuid()  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    mask = 0o077 if strict else 0o022
    if stat.S_ISLNK(status.st_mode) or not stat.S_ISDIR(status.st_mode):
        raise UnsafeFileError(f"the socket folder {folder} is a symbolic link or not a folder; remove it")
    if status.st_uid != me:
        raise UnsafeFileError(f"the socket folder {folder} belongs to uid {status.st_uid}, not to this user (uid {me})")
    if status.st_mode & mask:
        raise UnsafeFileError(f"the socket folder {folder} has mode {stat.S_IMODE(status.st_mode):04o}; run: chmod 700 {folder}")


def bind_private_socket(path: Path, *, backlog: int = 128) -> tuple[socket.socket, BoundSocketFile]:
    """A listening ``AF_UNIX`` socket at ``path`` (mode 0600), replacing a stale one of
    this user's (see the module).

    Returns:
        the socket (not inheritable) and what names its file (for :func:`remove_socket_file`).

    Raises:
        UnsafeFileError: ``path``'s folder is a link, another user's or open to others'
            writes; or something else is at ``path`` (a link, a file, another user's socket).
        OSError: ``EADDRINUSE`` when a live server accepts connections there; a bind
            failure; ``EAGAIN`` when the folder's lock stayed taken for
            :data:`FOLDER_LOCK_SECONDS`.
    """
    _check_private_folder(path.parent, strict=False)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    try:
        try:
            sock.bind(str(path))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            with _folder_lock(path.parent):  # an old server's clean-up waits for this replacement
                _remove_stale(path)
                sock.bind(str(path))
        os.chmod(path, 0o600)  # the folder is private: nobody could reach it before this
        bound = BoundSocketFile(path)
        sock.listen(backlog)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock, bound


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` itself (no file of its own), waited for at most
    :data:`FOLDER_LOCK_SECONDS`.

    Raises:
        OSError: ``EAGAIN`` when it stayed taken; the folder could not be opened.
    """
    import fcntl

    descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        deadline = time.monotonic() + FOLDER_LOCK_SECONDS
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # type: ignore[attr-defined,unused-ignore]  # POSIX only
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OSError(errno.EAGAIN, f"the socket folder {folder} stayed locked for {FOLDER_LOCK_SECONDS:g} s") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(descriptor)  # (closing drops the lock)


def _remove_stale(path: Path) -> None:
    status = os.lstat(path)
    me = os.geteuid()  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    if stat.S_ISLNK(status.st_mode):
        raise UnsafeFileError(f"{path} is a symbolic link, not a socket of this app; it was left alone, remove it")
    if not stat.S_ISSOCK(status.st_mode):
        raise UnsafeFileError(f"{path} is not a socket; it was left alone, remove it")
    if status.st_uid != me:
        raise UnsafeFileError(f"the socket {path} belongs to uid {status.st_uid}; it was left alone")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except ConnectionRefusedError:
        log.info("replacing the stale socket %s (nothing listens on it)", path)
        os.unlink(path)
        return
    except OSError as exc:
        raise OSError(errno.EADDRINUSE, f"the socket {path} could not be probed ({exc.strerror or exc}); it was left alone") from None
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"another server accepts connections on {path}; stop it first")


def remove_socket_file(bound: BoundSocketFile) -> None:
    """Remove the socket file if it is still the one this server bound (see the module,
    "Clean-up"): a later server's socket at the same path is left alone, even one that got
    the same inode number. Releases ``bound``'s descriptor. Never raises."""
    try:
        with contextlib.suppress(OSError), _folder_lock(bound.path.parent):
            if bound.names(os.lstat(bound.path)):
                os.unlink(bound.path)
    finally:
        bound.release()
