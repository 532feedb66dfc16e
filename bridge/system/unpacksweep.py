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

Two more rules keep that bound at one folder under Codex's kill (SIGTERM, then SIGKILL of
the whole group 7-9 ms later), which often lands while the bootloader removes its folder
(its own order may take the lock file first, leaving a folder without one, spared for the
grace period):

- at its very end (``bridge/cli/diagnostics.py``, ``exit_now``), a run empties its own folder
  itself, all but the lock file (:func:`empty_own_folder`): the bootloader is then left the
  lock file and one ``rmdir``, and a kill at any point leaves a folder that still carries
  the lock (taken by the next sweep at once) or an empty one;
- an empty folder whose bootloader is gone is removed at once, whatever its age: nothing
  can be starting from it.

So N runs under any kill pattern leave at most the folders of the runs of the last :data:`GRACE_SECONDS`
and the last one, not N × 17 MB; under Codex's kill, the last run's alone (its lock file
and nothing else once it emptied it). Windows is not swept (a folder in
use cannot be deleted there, and its clients do not send signals).
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time

__all__ = [
    "GRACE_SECONDS",
    "LOCK_NAME",
    "empty_own_folder",
    "hold_own_folder",
    "own_unpack_folder",
    "start_sweep",
    "sweep_dead_folders",
]

#: The file in a run's unpack folder whose ``flock`` its Python process holds while alive.
LOCK_NAME = ".mcp-app-bridge.running"
#: How old a folder without a lock file must be before it counts as abandoned: a bootloader
#: unpacks and starts Python in well under a second, so this leaves a wide margin for a
#: live but slow start whose bootloader alone was killed.
GRACE_SECONDS = 10.0
#: How deep the sweep looks into a folder: a PyInstaller bundle's tree is about ten deep. A
#: folder with anything deeper is never taken for one without a lock file, and a dead run's
#: folder keeps what lies deeper (so a folder nested thousands deep costs neither recursion
#: nor thousands of open descriptors).
MAX_DEPTH = 64

_PREFIX = "_MEI"
_NAME_LENGTH = 18  # "_MEI" + 8 hex digits of the bootloader's pid + 6 from mkdtemp
_MKDTEMP_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def own_unpack_folder() -> str | None:
    """This run's unpack folder (``sys._MEIPASS``) when this is the Python process of a
    one-file build on POSIX, else None (a one-folder build unpacks nothing)."""
    folder = getattr(sys, "_MEIPASS", None)
    if sys.platform == "win32" or not getattr(sys, "frozen", False) or not folder:
        return None
    return folder if os.path.basename(folder).startswith(_PREFIX) else None


def empty_own_folder(folder: str) -> None:
    """Delete everything in this run's own unpack folder but the lock file (best effort,
    never through a link, never raises): for the very end of the run, so that the
    bootloader's own clean-up, which a SIGKILL may cut short, is the lock file and an
    ``rmdir``. The running process keeps what it has mapped (POSIX)."""
    if sys.platform == "win32":
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(folder, flags)
    except OSError:
        return
    try:
        _empty(top, keep_lock=True)
    except Exception:  # noqa: BLE001 (the end of a run: never a traceback)
        pass
    finally:
        os.close(top)


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
    None if any is a symbolic link, cannot be read, or lies deeper than :data:`MAX_DEPTH`.
    Iterative: a folder nested thousands deep costs no recursion."""
    found: set[str] = set()
    pending = [("", 0)]
    while pending:
        prefix, depth = pending.pop()
        try:
            with os.scandir(os.path.join(folder, prefix) if prefix else folder) as listing:
                entries = list(listing)
        except OSError:
            return None
        for entry in entries:
            if entry.is_symlink():
                return None
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > MAX_DEPTH:
                    return None
                found.add(prefix + entry.name + "/")
                pending.append((prefix + entry.name + "/", depth + 1))
            else:
                found.add(prefix + entry.name)
    return found


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


def _empty(folder: int, *, lock_last: bool = False, keep_lock: bool = False) -> None:
    """Delete everything in the directory open as ``folder`` (best effort), never through a
    link; with ``lock_last`` the lock file goes after everything else, with ``keep_lock`` it
    stays. Iterative, and no deeper than :data:`MAX_DEPTH` (so at most that many
    descriptors are open): what lies deeper stays, with the folders above it."""
    if sys.platform == "win32":
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    # (descriptor, entries still to delete, its name in the folder above); entries are taken
    # from the end, so the lock file, sorted first, goes last.
    entries = _listing(folder, lock_last)
    if keep_lock:
        entries = [entry for entry in entries if entry.name != LOCK_NAME]
    stack: list[tuple[int, list[os.DirEntry[str]], str]] = [(folder, entries, "")]
    try:
        while stack:
            fd, entries, name = stack[-1]
            if not entries:
                stack.pop()
                if stack:  # a subfolder, now empty (or as empty as it gets)
                    os.close(fd)
                    try:
                        os.rmdir(name, dir_fd=stack[-1][0])
                    except OSError:
                        pass
                continue
            entry = entries.pop()
            try:
                if entry.is_dir(follow_symlinks=False):
                    if len(stack) > MAX_DEPTH:
                        continue
                    inner = os.open(entry.name, flags, dir_fd=fd)
                    stack.append((inner, _listing(inner, False), entry.name))
                else:
                    os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)


def _listing(folder: int, lock_last: bool) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as listing:
            return sorted(listing, key=lambda entry: not (lock_last and entry.name == LOCK_NAME))
    except OSError:
        return []


def sweep_dead_folders(own_folder: str, *, grace_seconds: float = GRACE_SECONDS, now: float | None = None) -> list[str]:
    """Remove the unpack folders of dead runs next to ``own_folder`` (this run's
    ``sys._MEIPASS``); returns the names removed. Never raises: a folder that cannot be
    checked or removed is left as it is, whatever the failure (a lock file that is a FIFO,
    a folder nested thousands deep: :data:`MAX_DEPTH`). See the module docstring for the rules."""
    if sys.platform == "win32":
        return []
    parent, own_name = os.path.split(os.path.abspath(own_folder))
    if not _parent_is_safe(parent):
        return []
    uid = os.geteuid()
    now = time.time() if now is None else now
    own_files_cache: list[set[str]] = []  # this run's files, listed once when needed
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        try:
            if _sweep_one(entry, own_name, uid, now, grace_seconds, own_folder, own_files_cache):
                removed.append(entry.name)
        except Exception:  # noqa: BLE001 (whatever one folder does, the others are still swept)
            continue
    return removed


def _sweep_one(
    entry: os.DirEntry[str],
    own_name: str,
    uid: int,
    now: float,
    grace_seconds: float,
    own_folder: str,
    own_files_cache: list[set[str]],
) -> bool:
    """Remove ``entry`` if it is a dead run's folder (the module docstring's rules); return
    whether it was removed. Raises ``OSError`` where a check cannot be made."""
    if sys.platform == "win32":  # nothing is swept there
        return False
    import fcntl

    name = entry.name
    pid = bootloader_pid(name)
    if pid is None or name == own_name:
        return False
    info = entry.stat(follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & 0o077:
        return False
    if not _process_gone(pid):
        return False
    path = entry.path
    try:
        # O_NONBLOCK: a FIFO put in the lock file's place would block a plain open for ever.
        fd = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        fd = None
    try:
        if fd is not None:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False  # not a lock file this bundle makes: never a run of ours
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # its Python process still runs
            if os.fstat(fd).st_nlink == 0:
                return False  # another sweep took this folder first and unlinked its lock
        else:
            try:
                os.rmdir(path)  # empty (a run that emptied itself, its bootloader killed at the end): nothing can start from it
                return True
            except OSError:
                pass  # not empty
            if now - info.st_mtime < grace_seconds:
                return False
            if not own_files_cache:
                own_files_cache.append(_relative_files(own_folder) or set())
            theirs = _relative_files(path)
            if theirs is None or not theirs <= own_files_cache[0]:
                return False
        return _remove(path, info)
    finally:
        if fd is not None:
            os.close(fd)


#: The interpreter's thread switch interval while the sweep runs (seconds; default 0.005).
SWEEP_SWITCH_INTERVAL_SECONDS = 0.0001


def start_sweep(own_folder: str) -> threading.Thread:
    """Run :func:`sweep_dead_folders` in a daemon thread, beside the start-up: deleting a
    left-over folder takes some milliseconds that the first reply need not wait for. A sweep
    cut short at exit leaves a folder the next run's sweep finishes. Returns the thread.

    While it runs, the interpreter's switch interval is :data:`SWEEP_SWITCH_INTERVAL_SECONDS`;
    the thread puts the previous value back when the sweep ends, however it ends (unless
    something else changed it meanwhile: that value stays). The sweep itself cannot block:
    it opens nothing that could wait (``O_NONBLOCK``), walks no deeper than :data:`MAX_DEPTH`,
    and catches every failure.
    """
    # The main thread imports while the sweep runs, holding the GIL; with the default 5 ms
    # switch interval the sweep waits up to that long after every system call and was cut
    # short by Codex's SIGKILL (~0.1 s after start) before removing a single folder. A short
    # interval while it runs lets it finish first.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWEEP_SWITCH_INTERVAL_SECONDS)
    ours = sys.getswitchinterval()  # as the interpreter rounds it

    def sweep() -> None:
        try:
            sweep_dead_folders(own_folder)
        except BaseException:  # noqa: BLE001 (never a traceback at start-up; it cannot happen)
            pass
        finally:
            if sys.getswitchinterval() == ours:
                sys.setswitchinterval(previous)

    thread = threading.Thread(target=sweep, name="unpack-sweep", daemon=True)
    try:
        thread.start()
    except BaseException:
        sys.setswitchinterval(previous)
        raise
    return thread
