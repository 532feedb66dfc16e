"""The MSIX package this process may run inside (Windows): whether it does, what that means
for the bridge's state folder, and starting the app outside it.

A packaged client (the MSIX Claude Desktop, the Codex desktop app) starts the bridge inside
its package's runtime environment, and the bridge inherits the package's file-system
virtualization (anthropics/claude-code issues 93152, 89113, 94254; openai/codex issue 41665).
Microsoft documents the rules (Learn, "Understanding how packaged desktop apps run on
Windows", the "Write under AppData" row, Windows 10 1903 and later): a *new* file or folder
created directly under ``AppData\\Local`` or ``AppData\\Roaming`` goes to the package's
private ``%LOCALAPPDATA%\\Packages\\<family name>\\LocalCache\\Local`` (or ``\\Roaming``); a
file opened is looked for there first, then in the real folder; what is written inside a
folder that exists in the real profile stays there.

So the bridge's own state folder (``%LOCALAPPDATA%\\mcp-app-bridge``: the served catalog and
the launch lock) made by a bridge inside a package lands where no other client's bridge
looks: two launches, a catalog per client. The fixes:

- :func:`package_full_name` tells whether this process has package identity
  (``GetCurrentPackageFullName``, appmodel.h, kernel32.dll: ``LONG (UINT32 *length, PWSTR
  name)``, ``ERROR_INSUFFICIENT_BUFFER`` (122) with the length needed, or
  ``APPMODEL_ERROR_NO_PACKAGE`` (15700) without identity);
- :func:`state_folder_problem` says, inside a package, when the state folder is missing from
  the real profile or was made inside the package, and how to fix it (``config install`` and
  ``check``, which run from the user's shell, outside any package, make it there);
- :func:`spawn_outside_package` starts ``--launch``'s app outside the package
  (``CreateProcessW`` with ``PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY`` through
  ``InitializeProcThreadAttributeList``/``UpdateProcThreadAttribute``, processthreadsapi.h).
  The value is ``PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_OVERRIDE |
  PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_ENABLE_PROCESS_TREE`` (0x4 | 0x1): the override
  makes the process being created leave the package's environment, and the tree flag lets
  its own children start outside too. Microsoft's page words the override as "will run
  inside"; the Package Support Framework's process helper
  (TimMangan/MSIX-PackageSupportFramework, include/StartInfo_helper.h) notes that it does the
  opposite, and uses this very value to start a process outside the container, as WSL's
  interop does with the override for the Windows programs it starts.

Every function that calls Windows takes the ``kernel32`` to call (the real one is
:func:`package_kernel32`, its prototypes as documented), so the tests of every OS pass a
stand-in, and ``mypy --platform win32`` checks the Windows-only bodies.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .winapi import (
    CREATE_BREAKAWAY_FROM_JOB,
    CREATE_NEW_PROCESS_GROUP,
    DETACHED_PROCESS,
    ERROR_INSUFFICIENT_BUFFER,
    STILL_ACTIVE,
)

__all__ = [
    "BREAKAWAY_POLICY",
    "OutsideChild",
    "package_family_name",
    "package_full_name",
    "package_kernel32",
    "current_package",
    "launch_plan",
    "spawn_outside_package",
    "state_folder_problem",
]

#: ``GetCurrentPackageFullName``'s results (winerror.h).
ERROR_SUCCESS = 0
APPMODEL_ERROR_NO_PACKAGE = 15700
#: ``PACKAGE_FULL_NAME_MAX_LENGTH`` (appmodel.h), without the terminating null.
PACKAGE_FULL_NAME_MAX_LENGTH = 127

#: ``ProcThreadAttributeValue(ProcThreadAttributeDesktopAppPolicy = 18, FALSE, TRUE, FALSE)``
#: and ``ProcThreadAttributeValue(ProcThreadAttributeHandleList = 2, …)`` (winbase.h).
PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY = 0x00020012
PROC_THREAD_ATTRIBUTE_HANDLE_LIST = 0x00020002
#: The desktop app policy values (winbase.h).
PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_ENABLE_PROCESS_TREE = 0x01
PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_DISABLE_PROCESS_TREE = 0x02
PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_OVERRIDE = 0x04
#: What :func:`spawn_outside_package` asks for (see the module).
BREAKAWAY_POLICY = PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_OVERRIDE | PROCESS_CREATION_DESKTOP_APP_BREAKAWAY_ENABLE_PROCESS_TREE
#: Process-creation flags and the startup flag (winbase.h), beside winapi's.
EXTENDED_STARTUPINFO_PRESENT = 0x00080000
CREATE_UNICODE_ENVIRONMENT = 0x00000400
STARTF_USESTDHANDLES = 0x00000100
#: Waits (winbase.h); the exit code of a running process is winapi's ``STILL_ACTIVE``.
WAIT_OBJECT_0 = 0
WAIT_TIMEOUT = 0x102

_DWORD = ctypes.c_uint32
_HANDLE = ctypes.c_void_p


class STARTUPINFOW(ctypes.Structure):
    """processthreadsapi.h's ``STARTUPINFOW``."""

    _fields_ = [
        ("cb", _DWORD),
        ("lpReserved", ctypes.c_wchar_p),
        ("lpDesktop", ctypes.c_wchar_p),
        ("lpTitle", ctypes.c_wchar_p),
        ("dwX", _DWORD),
        ("dwY", _DWORD),
        ("dwXSize", _DWORD),
        ("dwYSize", _DWORD),
        ("dwXCountChars", _DWORD),
        ("dwYCountChars", _DWORD),
        ("dwFillAttribute", _DWORD),
        ("dwFlags", _DWORD),
        ("wShowWindow", ctypes.c_uint16),
        ("cbReserved2", ctypes.c_uint16),
        ("lpReserved2", ctypes.c_void_p),
        ("hStdInput", _HANDLE),
        ("hStdOutput", _HANDLE),
        ("hStdError", _HANDLE),
    ]


class STARTUPINFOEXW(ctypes.Structure):
    """winbase.h's ``STARTUPINFOEXW``: the startup information and the attribute list."""

    _fields_ = [("StartupInfo", STARTUPINFOW), ("lpAttributeList", ctypes.c_void_p)]


class PROCESS_INFORMATION(ctypes.Structure):  # noqa: N801 - Win32's name
    """processthreadsapi.h's ``PROCESS_INFORMATION``."""

    _fields_ = [("hProcess", _HANDLE), ("hThread", _HANDLE), ("dwProcessId", _DWORD), ("dwThreadId", _DWORD)]


def package_full_name(kernel32: Any) -> str | None:
    """This process's package full name (``Name_Version_Architecture_ResourceId_PublisherId``),
    or ``None`` when it has no package identity, asked through ``kernel32``'s
    ``GetCurrentPackageFullName`` (a length query, then the name).

    Any other result (an error Windows did not document here) counts as no package."""
    length = ctypes.c_uint32(0)
    status = kernel32.GetCurrentPackageFullName(ctypes.byref(length), None)
    if status != ERROR_INSUFFICIENT_BUFFER or not 0 < length.value <= PACKAGE_FULL_NAME_MAX_LENGTH + 1:
        return None
    buffer = ctypes.create_unicode_buffer(length.value)
    if kernel32.GetCurrentPackageFullName(ctypes.byref(length), buffer) != ERROR_SUCCESS:
        return None
    return buffer.value or None


def package_family_name(full_name: str) -> str:
    """The package family name (``Name_PublisherId``) of a package full name
    (``Name_Version_Architecture_ResourceId_PublisherId``; a name holds no ``_``): the folder
    under ``%LOCALAPPDATA%\\Packages`` that holds the package's redirected AppData."""
    parts = full_name.split("_")
    return f"{parts[0]}_{parts[-1]}" if len(parts) >= 2 else full_name


def state_folder_problem(
    state_folder: Path, family_name: str | None, environ: Mapping[str, str], exists: Callable[[Path], bool] = os.path.isdir
) -> str | None:
    """What is wrong with the bridge's ``state_folder`` for a bridge inside the package
    ``family_name`` (``None``: not packaged, nothing is), and the fix; ``None`` when nothing.

    - The folder was made inside the package (its copy under the package's ``LocalCache``
      exists): this bridge's catalog and launch lock are its own, and every later file too.
    - The folder is missing: the bridge would make it inside the package.

    Only a folder directly under ``LOCALAPPDATA`` or ``APPDATA`` is redirected (the
    module's rules); a folder elsewhere (``WIN_PD_OVERRIDE_LOCAL_APPDATA``) has no problem.
    """
    if family_name is None:
        return None
    packages = Path(environ.get("LOCALAPPDATA", "")) / "Packages" / family_name / "LocalCache"
    for variable, redirected in (("LOCALAPPDATA", "Local"), ("APPDATA", "Roaming")):
        base = environ.get(variable, "").strip()
        if not base or Path(base) != state_folder.parent:
            continue
        copy = packages / redirected / state_folder.name
        fix = (
            f"run `mcp-app-bridge check` (or `config install`) once from a terminal, outside the package, "
            f"which makes {state_folder} in your real profile"
        )
        if exists(copy):
            return (
                f"this bridge runs inside the package {family_name}, and its state folder was made inside the package "
                f"({copy}): the app's served catalog and the launch lock there are seen by no bridge outside it. "
                f"Fix: quit the client, delete {copy}, then {fix}"
            )
        if not exists(state_folder):
            return (
                f"this bridge runs inside the package {family_name}, and its state folder {state_folder} does not exist: "
                f"Windows would make it inside the package, where no bridge outside it looks. Fix: {fix}"
            )
        return None
    return None


def launch_plan(package: str | None) -> tuple[bool, str]:
    """How ``--launch`` starts the app on Windows, for a bridge in ``package`` (its full
    name, ``None`` for none): ``(outside the package, the log line saying so)``."""
    if package is None:
        return False, "starting the app with CreateProcess (this bridge runs in no MSIX package)"
    return True, (
        f"this bridge runs inside the MSIX package {package}: starting the app outside it "
        f"(CreateProcessW with PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY {BREAKAWAY_POLICY:#x}, breakaway), "
        "so that its settings and discovery file land in the real profile"
    )


def current_package() -> str | None:  # pragma: no cover - Windows only
    """This process's package full name (Windows), or ``None`` (not packaged, not Windows)."""
    if sys.platform != "win32" or os.name != "nt":  # (os.name too: tests pretend to be win32 elsewhere)
        return None
    return package_full_name(package_kernel32())


def _command_line(command: Sequence[str]) -> str:
    """One ``CreateProcessW`` command line, quoted by the Microsoft C runtime's rules (as
    ``subprocess`` does)."""
    return subprocess.list2cmdline(list(command))


def _environment_block(env: Mapping[str, str]) -> str:
    """A ``CREATE_UNICODE_ENVIRONMENT`` block: ``NAME=value`` each ended by a null, sorted
    without regard to case (as Windows keeps its own), and a null at the end."""
    return "".join(f"{name}={value}\0" for name, value in sorted(env.items(), key=lambda item: item[0].upper())) + "\0"


class OutsideChild:
    """A process :func:`spawn_outside_package` started: the ``subprocess.Popen`` members the
    launcher uses (``pid``, ``returncode``, ``poll``, ``wait``, ``kill``), over its process
    handle, which is closed once the exit code is known.

    Raises (``wait``): ``subprocess.TimeoutExpired`` when it is still running after
    ``timeout`` seconds.
    """

    def __init__(self, kernel32: Any, handle: int, pid: int, args: Sequence[str]) -> None:
        self._kernel32, self._handle = kernel32, handle
        self.pid, self.args = pid, list(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code, or ``None`` while it runs."""
        return self.wait(0.0, raise_on_timeout=False)

    def wait(self, timeout: float | None = None, *, raise_on_timeout: bool = True) -> int | None:
        if self.returncode is not None:
            return self.returncode
        kernel32 = self._kernel32
        milliseconds = 0xFFFFFFFF if timeout is None else max(0, int(timeout * 1000))
        if kernel32.WaitForSingleObject(self._handle, milliseconds) == WAIT_TIMEOUT:
            if raise_on_timeout:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            return None
        code = ctypes.c_uint32(STILL_ACTIVE)
        kernel32.GetExitCodeProcess(self._handle, ctypes.byref(code))
        self.returncode = int(code.value)
        kernel32.CloseHandle(self._handle)
        return self.returncode

    def kill(self) -> None:
        """End it (``TerminateProcess``, exit code 1) unless it has ended already."""
        kernel32 = self._kernel32
        if self.returncode is None:
            kernel32.TerminateProcess(self._handle, 1)


def spawn_outside_package(
    kernel32: Any,
    command: Sequence[str],
    env: Mapping[str, str],
    std_handles: tuple[int, int, int],
    *,
    last_error: Callable[[], int] = lambda: 0,
) -> OutsideChild:
    """Start ``command`` outside this process's package (:data:`BREAKAWAY_POLICY`), detached,
    in a process group of its own, outside the client's job where the job allows
    (``CREATE_BREAKAWAY_FROM_JOB``, else a second try without it, as
    ``bridge.system.winapi.spawn_outside_job``), with ``env`` and the three standard handles
    ``std_handles`` (inheritable ones; only they are inherited: ``PROC_THREAD_ATTRIBUTE_HANDLE_LIST``).

    Raises:
        OSError: the attribute list could not be made, or ``CreateProcessW`` failed both
            times (its ``GetLastError`` in ``winerror``).
    """
    size = ctypes.c_size_t(0)
    kernel32.InitializeProcThreadAttributeList(None, 2, 0, ctypes.byref(size))  # the size only (fails by design)
    if not size.value:
        raise OSError(0, "InitializeProcThreadAttributeList gave no size")
    attributes = ctypes.create_string_buffer(size.value)
    if not kernel32.InitializeProcThreadAttributeList(attributes, 2, 0, ctypes.byref(size)):
        raise OSError(0, f"InitializeProcThreadAttributeList failed (error {last_error()})")
    try:
        # UpdateProcThreadAttribute keeps pointers to these: they live until CreateProcessW returns.
        policy = ctypes.c_uint32(BREAKAWAY_POLICY)
        handles = (_HANDLE * len(set(std_handles)))(*sorted(set(std_handles)))
        for attribute, value, value_bytes in (
            (PROC_THREAD_ATTRIBUTE_DESKTOP_APP_POLICY, ctypes.byref(policy), ctypes.sizeof(policy)),
            (PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles, ctypes.sizeof(handles)),
        ):
            if not kernel32.UpdateProcThreadAttribute(attributes, 0, attribute, value, value_bytes, None, None):
                raise OSError(0, f"UpdateProcThreadAttribute({attribute:#x}) failed (error {last_error()})")
        startup = STARTUPINFOEXW()
        startup.StartupInfo.cb = ctypes.sizeof(STARTUPINFOEXW)
        startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES
        startup.StartupInfo.hStdInput, startup.StartupInfo.hStdOutput, startup.StartupInfo.hStdError = std_handles
        startup.lpAttributeList = ctypes.cast(attributes, ctypes.c_void_p).value
        block = ctypes.create_unicode_buffer(_environment_block(env))
        flags = EXTENDED_STARTUPINFO_PRESENT | CREATE_UNICODE_ENVIRONMENT | CREATE_NEW_PROCESS_GROUP | DETACHED_PROCESS
        information = PROCESS_INFORMATION()
        error = 0
        for job_flag in (CREATE_BREAKAWAY_FROM_JOB, 0):
            line = ctypes.create_unicode_buffer(_command_line(command))  # CreateProcessW may write into it
            if kernel32.CreateProcessW(
                None, line, None, None, True, flags | job_flag, block, None,
                ctypes.byref(startup), ctypes.byref(information),
            ):
                break
            error = last_error()
        else:
            raise OSError(0, f"CreateProcessW failed (error {error})", command[0], error)
    finally:
        kernel32.DeleteProcThreadAttributeList(attributes)
    kernel32.CloseHandle(information.hThread)
    return OutsideChild(kernel32, information.hProcess, int(information.dwProcessId), command)


@functools.cache
def package_kernel32() -> Any:  # pragma: no cover - Windows only
    """``kernel32`` for this module (a DLL object of its own, ``use_last_error``), each
    function typed as Microsoft documents it: ``GetCurrentPackageFullName(UINT32*, PWSTR) ->
    LONG``; ``InitializeProcThreadAttributeList(LPPROC_THREAD_ATTRIBUTE_LIST, DWORD, DWORD,
    PSIZE_T) -> BOOL``; ``UpdateProcThreadAttribute(LPPROC_THREAD_ATTRIBUTE_LIST, DWORD,
    DWORD_PTR, PVOID, SIZE_T, PVOID, PSIZE_T) -> BOOL``; ``DeleteProcThreadAttributeList(…) ->
    void``; ``CreateProcessW(LPCWSTR, LPWSTR, LPSECURITY_ATTRIBUTES, LPSECURITY_ATTRIBUTES,
    BOOL, DWORD, LPVOID, LPCWSTR, LPSTARTUPINFOW, LPPROCESS_INFORMATION) -> BOOL``;
    ``WaitForSingleObject(HANDLE, DWORD) -> DWORD``; ``GetExitCodeProcess(HANDLE, LPDWORD) ->
    BOOL``; ``TerminateProcess(HANDLE, UINT) -> BOOL``; ``CloseHandle(HANDLE) -> BOOL``.

    Raises:
        OSError: not Windows.
    """
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        pointer, dword, boolean = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int
        prototypes: list[tuple[str, Any, list[Any]]] = [
            ("GetCurrentPackageFullName", ctypes.c_long, [ctypes.POINTER(ctypes.c_uint32), ctypes.c_wchar_p]),
            ("InitializeProcThreadAttributeList", boolean, [pointer, dword, dword, ctypes.POINTER(ctypes.c_size_t)]),
            ("UpdateProcThreadAttribute", boolean, [pointer, dword, ctypes.c_size_t, pointer, ctypes.c_size_t, pointer, pointer]),
            ("DeleteProcThreadAttributeList", None, [pointer]),
            ("CreateProcessW", boolean, [ctypes.c_wchar_p, ctypes.c_wchar_p, pointer, pointer, boolean, dword, pointer,
                                         ctypes.c_wchar_p, pointer, pointer]),
            ("WaitForSingleObject", dword, [pointer, dword]),
            ("GetExitCodeProcess", boolean, [pointer, ctypes.POINTER(ctypes.c_uint32)]),
            ("TerminateProcess", boolean, [pointer, ctypes.c_uint]),
            ("CloseHandle", boolean, [pointer]),
        ]
        for name, result, arguments in prototypes:
            function = getattr(kernel32, name)
            function.restype, function.argtypes = result, arguments
        return kernel32
    raise OSError("kernel32 exists only on Windows")


def spawn_app_outside_package(command: Sequence[str], stdout: Any, stderr: Any, env: Mapping[str, str]) -> OutsideChild:  # pragma: no cover
    """:func:`spawn_outside_package` with the real ``kernel32``, ``stdout``/``stderr`` as
    ``subprocess`` takes them (``DEVNULL``, an open file, or ``STDOUT`` for stderr) and stdin
    from the null device (Windows only)."""
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        import msvcrt

        with open(os.devnull, "r+b") as null:
            def handle_of(target: Any) -> int:
                file = null if target == subprocess.DEVNULL else target
                return int(msvcrt.get_osfhandle(file.fileno()))

            out = handle_of(stdout)
            err = out if stderr == subprocess.STDOUT else handle_of(stderr)
            std = (handle_of(subprocess.DEVNULL), out, err)
            for handle in set(std):
                os.set_handle_inheritable(handle, True)
            try:
                return spawn_outside_package(package_kernel32(), command, env, std, last_error=ctypes.get_last_error)
            finally:
                for handle in set(std):
                    os.set_handle_inheritable(handle, False)
    raise OSError("only Windows has packages")
