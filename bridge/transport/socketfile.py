"""The socket file of an app on a Unix domain socket (``http+unix://``), checked before connecting.

A Unix socket is a file: whoever may replace it, or the folder it is in, may put their own
server where the bridge looks for the app. So before any connect to it (the serving loop's
through ``bridge/transport/unixlink.py``, the running-app start's through
``bridge/serve/appstart.py``), :func:`check_socket_file` looks at it with ``lstat`` (a
symbolic link is seen, not followed): a socket, owned by this user, in a folder owned by this
user that nobody else may write to, below folders each owned by this user or root that
nobody else may write to unless sticky, as OpenSSH wants of the folders above a key
(``bridge/system/privatefile.py``).

Its own module, with no asyncio: the running-app start makes this check before asyncio is
loaded (docs/behaviour.md, "Start-up"). POSIX only (``os.geteuid``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..core.errors import ListenerUnverifiedError
from ..system.privatefile import UnsafeFileError, check_folders
from .base import ConnectFailed

__all__ = ["check_socket_file"]


def check_socket_file(path: str, *, euid: int | None = None) -> None:
    """Check the socket file at ``path`` and its folder without following a link.

    Raises:
        ConnectFailed: nothing is there (the app is not running).
        ListenerUnverifiedError: the path is a symbolic link, not a socket, another
            user's, or in a folder that is a link, another user's, or writable by group
            or others (someone else could swap the socket), or below a folder that is
            neither this user's nor root's, or that others may write to (not sticky).
    """
    me = euid if euid is not None else os.geteuid()  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        raise ConnectFailed(f"no socket at {path} (the app is not running)") from None
    except OSError as exc:
        raise _refused(path, f"it cannot be looked at ({exc.strerror or exc})") from None
    if stat.S_ISLNK(status.st_mode):
        raise _refused(path, "it is a symbolic link, not the app's socket")
    if not stat.S_ISSOCK(status.st_mode):
        raise _refused(path, "it is not a socket")
    if status.st_uid != me:
        raise _refused(path, f"the socket file belongs to uid {status.st_uid}, not to the user running the bridge (uid {me})")
    folder = os.path.dirname(path) or "/"
    try:
        place = os.lstat(folder)
    except OSError as exc:
        raise _refused(path, f"its folder cannot be looked at ({exc.strerror or exc})") from None
    if stat.S_ISLNK(place.st_mode) or not stat.S_ISDIR(place.st_mode):
        raise _refused(path, f"its folder {folder} is a symbolic link or not a folder")
    if place.st_uid != me:
        raise _refused(path, f"its folder {folder} belongs to uid {place.st_uid}")
    if place.st_mode & 0o022:
        raise _refused(
            path, f"its folder {folder} has mode {stat.S_IMODE(place.st_mode):04o}: group or others may write to it (chmod go-w {folder})"
        )
    try:  # and every folder above it, as OpenSSH checks a key's: another user's could swap ours
        check_folders(Path(path), euid=me)
    except UnsafeFileError as exc:
        raise _refused(path, str(exc)) from None


def _refused(path: str, why: str) -> ListenerUnverifiedError:
    return ListenerUnverifiedError(
        f"the app's Unix socket {path} is refused: {why}; no credential and no request were sent. "
        "If the app runs as another user on purpose, give --no-verify-listener."
    )
