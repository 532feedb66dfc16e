"""Credential files read and written so that no other local user can swap or read them.

The bridge's credential files are ``--token-file``, ``--secret-file`` and the discovery
file; apps that write a discovery or secret file for the bridge should use
:func:`write_private_file` (and read theirs back with :func:`read_private_file`). The rules
are OpenSSH's for private keys, with the same kind of message:

- the file is opened **without following a symbolic link** (``O_NOFOLLOW``; where the OS
  has none, an ``lstat`` before and an ``fstat`` after the open must name the same file);
- it must be a regular file **owned by the user running the bridge**;
- ``secret`` files must have no permission bits for group or others ("Permissions 0644
  for '…' are too open"); other files only must not be writable by them;
- **its folder and every folder above it**, up to ``/``, must belong to this user or to
  root and must not be writable by group or others ("bad ownership or modes for directory
  …"). Unlike OpenSSH, a world-writable folder with the sticky bit (``/tmp``) is
  accepted: there nobody else can rename or delete this user's entries.

On Windows only the symlink rule applies (ownership and ACLs are not checked).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = [
    "UnsafeFileError",
    "read_private_file",
    "write_private_file",
    "check_folders",
    "make_private_folders",
    "MAX_PRIVATE_FILE_BYTES",
    "state_file_digest",
]

#: Credential files are small; more than this is not read.
MAX_PRIVATE_FILE_BYTES = 64 * 1024
_POSIX = os.name == "posix"


def state_file_digest(key: str) -> str:
    """16 hex digits naming the state file of ``key`` (the launch lock, the catalog): the
    BLAKE2b digest (RFC 7693), 8 bytes long, of its UTF-8 bytes.

    Two keys share a file only if their 64-bit digests collide: about one pair in 2**32
    even among 2**16 endpoints, and no one can find such a pair by trying (a CRC-32 and
    an Adler-32, the names before, collided in milliseconds: two endpoints then overwrote
    each other's catalog and took each other's launch lock).

    BLAKE2b from CPython's built-in ``_blake2`` module: ``import hashlib`` would load
    OpenSSL's (3.5 MiB resident, some 8 ms) into every bridge that starts with ``--launch``.
    ``hashlib``'s is taken only where a build lacks the built-in one.
    """
    try:
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - every CPython 3.11+ build has it
        from hashlib import blake2b
    return blake2b(key.encode("utf-8"), digest_size=8).hexdigest()


class UnsafeFileError(Exception):
    """A credential file, or a folder above it, could be swapped or read by another user.
    The message names the path and the fix; nothing was read."""


def check_folders(path: Path, *, euid: int | None = None) -> None:
    """Check the folders above ``path`` (resolved) up to ``/``: owned by this user (or
    ``euid``) or root, not writable by group or others unless sticky.

    Raises:
        UnsafeFileError: ``bad ownership or modes for directory …``.
    """
    if not _POSIX:
        return
    me = os.geteuid() if euid is None else euid  # type: ignore[attr-defined,unused-ignore]  # POSIX only; mypy cannot narrow _POSIX
    folder = Path(os.path.realpath(path.parent))
    while True:
        try:
            status = os.stat(folder)
        except OSError:
            status = None
        if status is not None:
            unsafe_owner = status.st_uid not in (0, me)
            open_mode = status.st_mode & 0o022 and not status.st_mode & stat.S_ISVTX
            if unsafe_owner or open_mode:
                why = f"owned by uid {status.st_uid}" if unsafe_owner else f"mode {stat.S_IMODE(status.st_mode):04o}: group or others may write to it"
                raise UnsafeFileError(
                    f"bad ownership or modes for directory {folder} ({why}); "
                    f"it holds {path}, which another user could then replace"
                )
        if folder.parent == folder:
            return
        folder = folder.parent


def make_private_folders(folder: Path) -> None:
    """Create ``folder`` and any missing folder above it with mode 0700, whatever the umask.

    ``Path.mkdir(mode=0o700, parents=True)`` gives only the last folder that mode; the
    others get ``0777 & ~umask``, 0775 under the 0002 umask of Ubuntu and Fedora, which
    :func:`check_folders` then refuses. Here each folder this call creates is made 0700
    explicitly (``chmod`` after ``mkdir``). Folders that exist are left as they are.

    Raises:
        OSError: a folder could not be created (or a file is in the way).
    """
    missing: list[Path] = []
    current = Path(folder)
    while not current.exists() and current.parent != current:
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue  # created meanwhile by someone else: not ours to change (it is checked)
        if _POSIX:
            os.chmod(path, 0o700)


def read_private_file(path: Path, what: str, *, secret: bool = True, max_bytes: int = MAX_PRIVATE_FILE_BYTES) -> bytes:
    """Read a credential file by the rules above; return its bytes (at most ``max_bytes``).

    Args:
        path: the file.
        what: how it is named in messages ("token file").
        secret: refuse any group/other permission bit (``False``: only write bits).

    Raises:
        FileNotFoundError: it does not exist.
        UnsafeFileError: a symbolic link, not a regular file, another user's, too open, or
            in a folder others can write to.
        OSError: it could not be read (the ``strerror`` says why).
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    before = None if hasattr(os, "O_NOFOLLOW") else os.lstat(path)
    if before is not None and stat.S_ISLNK(before.st_mode):
        raise _link(path, what)
    try:
        descriptor = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise _link(path, what) from None
        raise
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if before is not None and (before.st_ino, before.st_dev) != (status.st_ino, status.st_dev):
            raise _link(path, what)
        if not stat.S_ISREG(status.st_mode):
            raise UnsafeFileError(f"refusing the {what} '{path}': it is not a regular file")
        if _POSIX:
            if status.st_uid != os.geteuid():  # type: ignore[attr-defined,unused-ignore]  # POSIX only; mypy cannot narrow _POSIX
                raise UnsafeFileError(
                    f"bad ownership for the {what} '{path}': it belongs to uid {status.st_uid}, "
                    f"not to the user running the bridge (uid {os.geteuid()})"  # type: ignore[attr-defined,unused-ignore]  # POSIX only; mypy cannot narrow _POSIX
                )
            loose = status.st_mode & (0o077 if secret else 0o022)
            if loose:
                rule = "readable or writable by others" if secret else "writable by group or others"
                import shlex  # (only for this message: not on every start)

                raise UnsafeFileError(
                    f"Permissions {stat.S_IMODE(status.st_mode):04o} for '{path}' are too open: the {what} "
                    f"must not be {rule}; run: chmod 600 {shlex.quote(str(path))}"
                )
            check_folders(path)
        return handle.read(max_bytes)


def credential_text(raw: bytes, path: Path, what: str) -> str:
    """A credential file's content as text: UTF-8, surrounding white space stripped.

    Raises:
        ValueError: not UTF-8, or nothing but white space (the message names ``what``).
    """
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"the {what} {path} is not UTF-8 text") from None
    if not text:
        raise ValueError(f"the {what} {path} is empty")
    return text


def _link(path: Path, what: str) -> UnsafeFileError:
    return UnsafeFileError(f"refusing the {what} '{path}': it is a symbolic link (credential files are never followed through one)")


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` atomically with mode 0600: a new file in the same folder (created
    ``O_EXCL``, never through a link), then a rename over ``path``. The folder is created
    with mode 0700 if needed, and checked as :func:`check_folders` says.

    Raises:
        UnsafeFileError: the folder, or one above it, is another user's or others may write to it.
        OSError: the file could not be written (``path`` is then unchanged).
    """
    make_private_folders(path.parent)
    check_folders(path)
    temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")  # (not `secrets`: it loads OpenSSL)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
