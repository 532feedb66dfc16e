"""The frozen one-file executable's unpack folders: mark this run's as in use, remove the
ones that dead runs left behind (POSIX).

A PyInstaller one-file executable is two processes: the bootloader unpacks the bundle
(17 MB) into a fresh folder ``_MEI<pid><random>`` in the temporary directory, starts the
Python process from it, and removes the folder once that process exits. AI clients end
their servers with SIGKILL (Claude Code 0.52 s after SIGINT; Codex 7-9 ms after SIGTERM,
to the whole process group), and a SIGKILLed bootloader removes nothing: every session
would leave 17 MB behind. So each run removes what dead runs left.

Which folders are a dead run's (all must hold):

- the name is PyInstaller's, ``_MEI`` + the bootloader's pid as 8 hex digits + 6 random
  characters (PyInstaller ≥ 6.22.1, ``bootloader/src/pyi_utils_posix.c``), and it is not
  this run's own;
- it is a real directory (never a symbolic link), owned by this user, closed to group and
  others (``mkdtemp`` makes it 0700), in a temporary directory that others cannot rename
  entries in (not writable by them, or sticky like ``/tmp``);
- the bootloader whose pid the name carries is gone (``kill(pid, 0)``: no such process;
  a pid reused by a live process only keeps the folder);
- and its Python process is gone too. Each run's Python process holds an ``flock`` on
  :data:`LOCK_NAME` in its own folder from its first line of code until it exits (the
  kernel drops the lock with the process, however it dies). A folder with that file whose
  lock can be taken is a dead run's. A folder without it was killed before its Python
  process started (SIGKILL of the group during unpacking), or its bootloader's own clean-up
  was cut short by a SIGKILL (Codex's 8 ms): it is removed once it is older than
  :data:`GRACE_SECONDS` and every file in it is one this bundle also has (never another
  program's folder). The grace period covers a Python process that is starting from its
  folder while its bootloader alone was killed.

So N runs under any kill pattern leave at most the folders of the runs of the last :data:`GRACE_SECONDS`
and the last one, not N × 17 MB. Windows is not swept (a folder in
use cannot be deleted there, and its clients do not send signals).
"""

from __future__ import annotations

import os
import stat
import sys
import time

__all__ = ["GRACE_SECONDS", "LOCK_NAME", "hold_own_folder", "sweep_dead_folders", "start_sweep"]

#: The file in a run's unpack folder whose ``flock`` its Python process holds while alive.
LOCK_NAME = ".mcp-app-bridge.running"
#: How old a folder without a lock file must be before it counts as abandoned: a bootloader
#: unpacks and starts Python in well under a second, so this leaves a wide margin for a
#: live but slow start whose bootloader alone was killed.
GRACE_SECONDS = 10.0

_PREFIX = "_MEI"
_NAME_LENGTH = 18  # "_MEI" + 8 hex digits of the bootloader's pid + 6 from mkdtemp
_MKDTEMP_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def hold_own_folder(folder: str) -> int | None:
    """Create ``folder``/:data:`LOCK_NAME` (0600, no symbolic link followed) and hold its
    ``flock`` for the life of this process. Returns the descriptor (keep it open; it is not
    inherited by child processes), or None where that fails (a sweeper then leaves the
    folder alone while the bootloader lives, and takes it for one that was never started
    once it is gone). Windows: always None (nothing is swept there)."""
    if sys.platform == "win32":
        return None
    import fcntl

    try:
        fd = os.open(os.path.join(folder, LOCK_NAME), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def bootloader_pid(name: str) -> int | None:
    """The pid in a PyInstaller unpack folder's name (``_MEI0000a1b2XyZ123`` → 0xa1b2), or
    None if ``name`` is not one."""
    if len(name) != _NAME_LENGTH or not name.startswith(_PREFIX):
        return None
    digits, suffix = name[4:12], name[12:]
    if not set(suffix) <= _MKDTEMP_CHARACTERS:
        return None
    try:
        pid = int(digits, 16)
    except ValueError:
        return None
    return pid if pid > 0 and digits == digits.lower() else None


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: alive, another user's
        return False
    return False


def _parent_is_safe(parent: str) -> bool:
    """Whether nobody else can rename entries in ``parent``: not writable by group or others,
    or sticky (``/tmp``)."""
    try:
        info = os.stat(parent)
    except OSError:
        return False
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or bool(info.st_mode & stat.S_ISVTX)


def _relative_files(folder: str) -> set[str] | None:
    """Every entry under ``folder`` as a path relative to it (directories end with "/"), or
    None if any is a symbolic link or cannot be read."""
    found: set[str] = set()
    for root, dirs, files in os.walk(folder, onerror=_raise):
        relative = os.path.relpath(root, folder)
        prefix = "" if relative == "." else relative + "/"
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                return None
            found.add(prefix + name + "/")
        found.update(prefix + name for name in files)
    return found


def _raise(error: OSError) -> None:
    raise error


def _remove(path: str, checked: os.stat_result) -> bool:
    """Remove the folder ``path``, which the caller checked (``checked``: a real directory of
    this user in a parent where nobody else renames entries), its lock file last: a removal
    cut short (this process killed too) leaves a folder that still carries it, which the
    next sweep takes at once instead of after :data:`GRACE_SECONDS`.

    Everything inside goes through directory descriptors opened without following links,
    and only once the folder opened is the one checked (same device and inode): a link
    put in its place meanwhile is never followed, so nothing outside it is deleted."""
    if sys.platform == "win32":  # nothing is swept there
        return False
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(path, flags)
    except OSError:
        return False
    try:
        opened = os.fstat(top)
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            return False
        _empty(top, lock_last=True)
    finally:
        os.close(top)
    try:
        os.rmdir(path)  # a link now at ``path`` is not a directory: rmdir refuses it
    except OSError:
        pass
    return not os.path.lexists(path)


def _empty(folder: int, *, lock_last: bool = False) -> None:
    """Delete everything in the directory open as ``folder`` (best effort), never through a
    link; with ``lock_last`` the lock file goes after everything else."""
    if sys.platform == "win32":
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: lock_last and entry.name == LOCK_NAME)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                inner = os.open(entry.name, flags, dir_fd=folder)
                try:
                    _empty(inner)
                finally:
                    os.close(inner)
                os.rmdir(entry.name, dir_fd=folder)
            else:
                os.unlink(entry.name, dir_fd=folder)
        except OSError:
            pass


def sweep_dead_folders(own_folder: str, *, grace_seconds: float = GRACE_SECONDS, now: float | None = None) -> list[str]:
    """Remove the unpack folders of dead runs next to ``own_folder`` (this run's
    ``sys._MEIPASS``); returns the names removed. Never raises: a folder that cannot be
    checked or removed is left as it is. See the module docstring for the rules."""
    if sys.platform == "win32":
        return []
    import fcntl

    parent, own_name = os.path.split(os.path.abspath(own_folder))
    if not _parent_is_safe(parent):
        return []
    uid = os.geteuid()
    now = time.time() if now is None else now
    own_files: set[str] | None = None
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        pid = bootloader_pid(name)
        if pid is None or name == own_name:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
            continue
        if not _process_gone(pid):
            continue
        path = entry.path
        try:
            fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None
        except OSError:
            continue
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its Python process still runs
                if os.fstat(fd).st_nlink == 0:
                    continue  # another sweep took this folder first and unlinked its lock
            else:
                if now - info.st_mtime < grace_seconds:
                    continue
                if own_files is None:
                    own_files = _relative_files(own_folder) or set()
                theirs = _relative_files(path)
                if theirs is None or not theirs <= own_files:
                    continue
            if _remove(path, info):
                removed.append(name)
        except OSError:
            continue
        finally:
            if fd is not None:
                os.close(fd)
    return removed


#: The interpreter's thread switch interval while the sweep runs (seconds; default 0.005).
SWEEP_SWITCH_INTERVAL_SECONDS = 0.0001


def start_sweep(own_folder: str) -> None:
    """Run :func:`sweep_dead_folders` in a daemon thread, beside the start-up: deleting a
    left-over folder takes some milliseconds that the first reply need not wait for. A sweep
    cut short at exit leaves a folder the next run's sweep finishes."""
    import threading

    # The main thread imports while the sweep runs, holding the GIL; with the default 5 ms
    # switch interval the sweep waits up to that long after every system call and was cut
    # short by Codex's SIGKILL (~0.1 s after start) before removing a single folder. A short
    # interval while it runs lets it finish first.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWEEP_SWITCH_INTERVAL_SECONDS)

    def sweep() -> None:
        try:
            sweep_dead_folders(own_folder)
        finally:
            sys.setswitchinterval(previous)

    threading.Thread(target=sweep, name="unpack-sweep", daemon=True).start()
