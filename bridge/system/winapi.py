"""The bridge's Windows logic, kept apart from the Win32 calls so that it runs everywhere.

Each function takes the Win32 API it needs as an argument (``kernel32``, ``popen``,
``get_std_handle``): the bridge passes the real one on Windows, and the tests of every OS
pass stand-ins, so a name error or a wrong decision shows up in CI on Linux too. The
functions that call Windows themselves, :func:`adopt_std_handles` and
:func:`windows_kernel32`, are checked by ``mypy --platform win32`` (CONTRIBUTING.md, "CI on
three operating systems").

The real ``kernel32`` is :func:`windows_kernel32`: a DLL object of its own with each function
this module calls typed as Microsoft documents it (a handle is pointer-sized; ctypes's
default ``int`` result would cut a 64-bit one). ``ctypes.windll.kernel32`` is shared with
every other library in the process, so its prototypes are neither relied on nor changed.

The constants are the values of the Win32 headers named beside them (the same values as
``subprocess``'s constants on Windows, which a Windows-only test checks).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "STD_HANDLE_IDS",
    "adopt_std_handles",
    "parent_waiter",
    "pid_is_alive",
    "spawn_outside_job",
    "std_handles_to_adopt",
    "windows_kernel32",
]

#: ``GetStdHandle``'s ids for stdin, stdout and stderr (processenv.h), by descriptor.
STD_HANDLE_IDS = {0: -10, 1: -11, 2: -12}
#: Process-creation flags (winbase.h).
CREATE_NEW_PROCESS_GROUP = 0x00000200
DETACHED_PROCESS = 0x00000008
CREATE_BREAKAWAY_FROM_JOB = 0x01000000
#: Access rights and wait values (winnt.h, winbase.h, processthreadsapi.h).
SYNCHRONIZE = 0x00100000
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
INFINITE = 0xFFFFFFFF
STILL_ACTIVE = 259
#: A call's buffer was too small; the length needed comes back (winerror.h).
ERROR_INSUFFICIENT_BUFFER = 122


def std_handles_to_adopt(
    fd_is_open: Callable[[int], bool], get_std_handle: Callable[[int], int | None], invalid_handle: int
) -> list[tuple[int, int]]:
    """Which standard handles to turn into C-runtime descriptors (pyinstaller/pyinstaller#7217).

    A windowed program (no console) starts without descriptors 0/1/2 even when the AI
    client gave it pipes; the pipes are still there as ``GetStdHandle`` handles.

    Returns:
        ``(fd, handle)`` for each of descriptors 0, 1 and 2 that is not open although
        ``get_std_handle(STD_HANDLE_IDS[fd])`` names a handle: neither ``None``/0 (no
        handle at all: a double click) nor ``invalid_handle`` (``INVALID_HANDLE_VALUE``).
        An open descriptor is kept as it is.
    """
    plan = []
    for fd, std_handle_id in STD_HANDLE_IDS.items():
        if fd_is_open(fd):
            continue
        handle = get_std_handle(std_handle_id)
        if handle and handle != invalid_handle:
            plan.append((fd, handle))
    return plan


def _fd_is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def adopt_std_handles() -> None:  # pragma: no cover - Windows only
    """Give this process descriptors 0/1/2 for the standard handles it has (Windows; a
    no-op elsewhere). See :func:`std_handles_to_adopt`."""
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        import msvcrt

        get_std_handle = windows_kernel32().GetStdHandle
        invalid = ctypes.c_void_p(-1).value or -1
        for fd, handle in std_handles_to_adopt(_fd_is_open, get_std_handle, invalid):
            mode = os.O_RDONLY if fd == 0 else os.O_WRONLY
            new_fd = msvcrt.open_osfhandle(handle, mode | os.O_BINARY)
            if new_fd != fd:
                os.dup2(new_fd, fd)
                os.close(new_fd)


def spawn_outside_job(popen: Callable[..., Any], command: list[str], options: dict[str, Any]) -> Any:
    """Start ``command`` detached, in a process group of its own, and outside the AI
    client's job object where the job allows that (``CREATE_BREAKAWAY_FROM_JOB``).

    The official SDKs put the server in a job object and kill the job, with everything
    inside, when the client closes; the app the bridge starts must outlive it. A job that
    forbids breaking away makes the first ``popen`` raise ``OSError``, and the app is then
    started inside the job (it ends with the client, as it would have without the bridge).

    Args:
        popen: ``subprocess.Popen`` (a stand-in in the tests).
        command, options: its arguments; ``creationflags`` is added here.
    Returns:
        What ``popen`` returned. Raises ``OSError`` when the second start fails too.
    """
    flags = CREATE_NEW_PROCESS_GROUP | DETACHED_PROCESS
    try:
        return popen(command, creationflags=flags | CREATE_BREAKAWAY_FROM_JOB, **options)
    except OSError:
        return popen(command, creationflags=flags, **options)


def parent_waiter(kernel32: Any, parent_pid: int, on_parent_gone: Callable[[], None]) -> Callable[[], None] | None:
    """The parent watchdog's body on Windows (pyinstaller/pyinstaller#4858).

    Returns:
        A function that waits on a handle to the parent process (``OpenProcess(SYNCHRONIZE)``,
        ``WaitForSingleObject(INFINITE)``), closes the handle and calls
        ``on_parent_gone()``; or ``None`` when the parent cannot be opened (gone already, or
        not ours to open), and then nothing is watched.
    """
    handle = kernel32.OpenProcess(SYNCHRONIZE, False, parent_pid)
    if not handle:
        return None

    def wait() -> None:
        kernel32.WaitForSingleObject(handle, INFINITE)
        kernel32.CloseHandle(handle)
        on_parent_gone()

    return wait


def pid_is_alive(kernel32: Any, pid: int) -> bool:
    """Whether ``pid`` is a live process, asked through ``kernel32`` (``OpenProcess``,
    ``GetExitCodeProcess``, ``CloseHandle``). False when it cannot be opened or asked."""
    handle = kernel32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return False
        return code.value == STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


@functools.cache
def windows_kernel32() -> Any:  # pragma: no cover - Windows only
    """``kernel32`` for this module's functions (see the module), each typed as documented:
    ``GetStdHandle(DWORD) -> HANDLE``, ``OpenProcess(DWORD, BOOL, DWORD) -> HANDLE``,
    ``WaitForSingleObject(HANDLE, DWORD) -> DWORD``, ``GetExitCodeProcess(HANDLE, LPDWORD)
    -> BOOL``, ``CloseHandle(HANDLE) -> BOOL``.

    Raises:
        OSError: not Windows.
    """
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        kernel32 = ctypes.WinDLL("kernel32")
        handle, dword, boolean = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int
        prototypes: list[tuple[str, Any, list[Any]]] = [
            ("GetStdHandle", handle, [dword]),
            ("OpenProcess", handle, [dword, boolean, dword]),
            ("WaitForSingleObject", dword, [handle, dword]),
            ("GetExitCodeProcess", boolean, [handle, ctypes.POINTER(ctypes.c_ulong)]),
            ("CloseHandle", boolean, [handle]),
        ]
        for name, result, arguments in prototypes:
            function = getattr(kernel32, name)
            function.restype, function.argtypes = result, arguments
        return kernel32
    raise OSError("kernel32 exists only on Windows")
