"""Writing a file so that readers see the old or the new content, never a half."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["replace_bytes", "replace_if", "write_private"]


def replace_bytes(path: Path, data: bytes, *, mode: int | None = None, through_symlink: bool = True) -> Path:
    """Replace the file at ``path`` with ``data`` atomically (temporary file + rename).

    Args:
        path: the file to replace or create.
        data: its new content.
        mode: the new file's permission bits (POSIX); by default those of the file it
            replaces, or 0600 when there was none.
        through_symlink: when ``path`` is a symbolic link (as dotfile managers make them),
            the link stays and its target is the file replaced; otherwise the rename
            replaces the link itself.

    Returns:
        the file actually written (the link's target, or ``path``).

    Raises:
        OSError: nothing was replaced and no temporary file is left behind.
    """
    target = Path(os.path.realpath(path)) if through_symlink and path.is_symlink() else path
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600
    temporary, _ = _write_temporary(target, data, mode)
    try:
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return target


def replace_if(
    target: Path,
    data: bytes,
    *,
    mode: int,
    unchanged: Callable[[], bool],
    create: bool,
    is_original: Callable[[os.stat_result], bool] | None = None,
) -> bool:
    """Write ``data`` to a temporary file beside ``target``, then, if ``unchanged()`` still
    says yes right before it, put it in place: renamed over ``target``, or, with ``create``,
    linked at ``target`` only if nothing is there yet (so a file another program creates
    meanwhile is never replaced).

    Where the system can swap two names atomically (Linux ``renameat2(RENAME_EXCHANGE)``),
    the file is swapped in instead of renamed over, and the file it displaced is checked
    with ``is_original``: when another program replaced the file in the instant between
    the check and the swap, its file is swapped back and False returned, so its write is
    never lost (elsewhere a plain rename follows the check).

    Args:
        target: the file to replace or create (not a symbolic link: resolve it first).
        data: its new content.
        mode: the new file's permission bits (POSIX).
        unchanged: called after the data is on disk, just before the rename; False when
            the file changed since it was read (another program wrote it).
        create: ``target`` did not exist when it was read.
        is_original: whether a displaced file (its ``lstat``) is the version read.

    Returns:
        True when the file was replaced; False when another program's write came first
        (the caller reads the file again and redoes its edit). No temporary file is left.

    Raises:
        OSError: nothing was replaced and no temporary file is left behind.
    """
    temporary, mine = _write_temporary(target, data, mode)
    try:
        if not unchanged():
            return False
        if create:
            try:
                os.link(temporary, target)  # fails if a file appeared at target meanwhile
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links: the check above must do
                os.replace(temporary, target)
                temporary = ""
            return True
        if is_original is not None and _exchange(temporary, target):
            if is_original(os.lstat(temporary)):
                return True  # (the original, now at the temporary name, is removed below)
            _exchange(temporary, target)  # another program's file came first: it goes back
            displaced = os.lstat(temporary)
            if (displaced.st_dev, displaced.st_ino) != (mine.st_dev, mine.st_ino):
                _exchange(temporary, target)  # and a newer one of theirs came after ours
            return False
        os.replace(temporary, target)
        temporary = ""
        return True
    finally:
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _write_temporary(target: Path, data: bytes, mode: int) -> tuple[str, os.stat_result]:
    """A new file beside ``target`` (``mkstemp``: exclusive, an unpredictable name) holding
    ``data`` with ``mode`` (POSIX), flushed to disk; its path and ``fstat``. Nothing is left
    behind if this raises."""
    import tempfile

    descriptor, temporary = tempfile.mkstemp(prefix="." + target.name + ".", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if sys.platform != "win32":
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            return temporary, os.fstat(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise

def _exchange(first: str, second: Path) -> bool:
    """Swap two names atomically; False where the system or file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import errno

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it (glibc < 2.28, musl < 1.2.?)
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE (linux/fcntl.h, linux/fs.h)
    if renameat2(at_cwd, os.fsencode(first), at_cwd, os.fsencode(second), exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(second))


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (0600), replacing whatever was
    there (a symbolic link at ``path`` is replaced, never followed)."""
    replace_bytes(path, data, mode=0o600, through_symlink=False)
