"""Windows named pipes: the two checks a pipe link needs, kept apart from the Win32 calls.

Not a transport: the bridge's pipe link is ``bridge/transport/pipelink.py`` (with the
check of ``bridge/app/pipepeer.py``) and the server half's is
``bridge/appserver/pipeserver.py``. These are the checks they make, written against the
Win32 API given as arguments (``kernel32``, ``advapi32``: :func:`win32_pipe_api` on
Windows, stand-ins in the tests of every OS, as ``winapi.py`` does), so that their logic is
unit-tested everywhere and type-checked for Windows.

The client side, before the first byte (:func:`pipe_server_identity`,
:func:`check_pipe_server`): ``GetNamedPipeServerProcessId`` on the client's handle gives
the server's pid (``namedpipeapi.h``); that process's token user
(``OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION)``, ``OpenProcessToken(TOKEN_QUERY)``,
``GetTokenInformation(TokenUser)``, ``ConvertSidToStringSidW``) must be the SID of the
bridge's own user, and the pid the one the discovery file names. A pipe name another user
created first (pipe squatting) fails the SID check.

The server side (:func:`create_pipe_instance`): ``CreateNamedPipeW`` with
``FILE_FLAG_FIRST_PIPE_INSTANCE`` for the first instance (it fails with
``ERROR_ACCESS_DENIED`` when any process already holds the name: the squatter is found
before anything is served), ``PIPE_REJECT_REMOTE_CLIENTS``, and a security descriptor
whose protected DACL admits only the current user (:func:`current_user_only_sddl`, from
``ConvertStringSecurityDescriptorToSecurityDescriptorW``; Microsoft's "Named Pipe Security
and Access Rights").

Standard library only.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .winapi import PROCESS_QUERY_LIMITED_INFORMATION

__all__ = [
    "FILE_FLAG_FIRST_PIPE_INSTANCE",
    "PIPE_REJECT_REMOTE_CLIENTS",
    "PipeServer",
    "PipeServerRefused",
    "PipeUnavailable",
    "check_pipe_server",
    "create_pipe_instance",
    "current_user_only_sddl",
    "process_user_sid",
    "pipe_server_identity",
    "win32_pipe_api",
]

# winbase.h / namedpipeapi.h / winnt.h values.
PIPE_ACCESS_DUPLEX = 0x00000003
FILE_FLAG_OVERLAPPED = 0x40000000
FILE_FLAG_FIRST_PIPE_INSTANCE = 0x00080000
PIPE_TYPE_BYTE = 0x00000000
PIPE_READMODE_BYTE = 0x00000000
PIPE_WAIT = 0x00000000
PIPE_REJECT_REMOTE_CLIENTS = 0x00000008
PIPE_UNLIMITED_INSTANCES = 255
TOKEN_QUERY = 0x0008
TOKEN_USER_CLASS = 1  # TOKEN_INFORMATION_CLASS TokenUser
SDDL_REVISION_1 = 1
ERROR_ACCESS_DENIED = 5
INVALID_HANDLE_VALUE = ctypes.c_void_p(-1).value
_PIPE_BUFFER_BYTES = 64 * 1024


class PipeUnavailable(OSError):
    """A Win32 call of the check or of the pipe's creation failed (the message names it and
    its error code); nothing was sent or served."""


class PipeServerRefused(PermissionError):
    """The pipe's server is not the app: another user's process, or not the named pid."""


@dataclass(frozen=True)
class PipeServer:
    """Who serves a named pipe, as Windows says: the server process's pid and the string
    SID of its token's user (``S-1-5-21-…``)."""

    pid: int
    sid: str


class _SecurityAttributes(ctypes.Structure):
    """``SECURITY_ATTRIBUTES`` (minwinbase.h)."""

    _fields_ = [("nLength", ctypes.c_ulong), ("lpSecurityDescriptor", ctypes.c_void_p), ("bInheritHandle", ctypes.c_int)]


def _last_error(get: Callable[[], int] | None) -> int:
    return get() if get is not None else 0


def process_user_sid(kernel32: Any, advapi32: Any, pid: int | None, *, last_error: Callable[[], int] | None = None) -> str:
    """The string SID of the user that process ``pid`` runs as (``None``: this process).

    Raises:
        PipeUnavailable: a call failed (the process is gone or not ours to query, say).
    """
    process = kernel32.GetCurrentProcess() if pid is None else kernel32.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, False, pid)
    if not process:
        raise PipeUnavailable(f"OpenProcess({pid}) failed (error {_last_error(last_error)})")
    token = ctypes.c_void_p()
    try:
        if not advapi32.OpenProcessToken(process, TOKEN_QUERY, ctypes.byref(token)):
            raise PipeUnavailable(f"OpenProcessToken failed (error {_last_error(last_error)})")
        try:
            size = ctypes.c_ulong(0)
            advapi32.GetTokenInformation(token, TOKEN_USER_CLASS, None, 0, ctypes.byref(size))
            if not size.value:
                raise PipeUnavailable(f"GetTokenInformation(TokenUser) gave no size (error {_last_error(last_error)})")
            buffer = ctypes.create_string_buffer(size.value)
            if not advapi32.GetTokenInformation(token, TOKEN_USER_CLASS, buffer, size, ctypes.byref(size)):
                raise PipeUnavailable(f"GetTokenInformation(TokenUser) failed (error {_last_error(last_error)})")
            sid = ctypes.c_void_p.from_buffer(buffer).value  # TOKEN_USER.User.Sid: the first member
            text = ctypes.c_wchar_p()
            if not sid or not advapi32.ConvertSidToStringSidW(ctypes.c_void_p(sid), ctypes.byref(text)):
                raise PipeUnavailable(f"ConvertSidToStringSidW failed (error {_last_error(last_error)})")
            try:
                value = text.value
            finally:
                kernel32.LocalFree(text)
        finally:
            kernel32.CloseHandle(token)
    finally:
        if pid is not None:
            kernel32.CloseHandle(process)
    if not value:
        raise PipeUnavailable("ConvertSidToStringSidW gave an empty SID")
    return value


def pipe_server_identity(kernel32: Any, advapi32: Any, handle: int, *, last_error: Callable[[], int] | None = None) -> PipeServer:
    """Who serves the named pipe the client opened as ``handle`` (see the module).

    Raises:
        PipeUnavailable: a call failed; the caller sends nothing.
    """
    pid = ctypes.c_ulong(0)
    if not kernel32.GetNamedPipeServerProcessId(handle, ctypes.byref(pid)):
        raise PipeUnavailable(f"GetNamedPipeServerProcessId failed (error {_last_error(last_error)})")
    if not pid.value:
        raise PipeUnavailable("GetNamedPipeServerProcessId named no process")
    return PipeServer(pid=pid.value, sid=process_user_sid(kernel32, advapi32, pid.value, last_error=last_error))


def check_pipe_server(server: PipeServer, *, own_sid: str, expected_pid: int | None, pipe_name: str) -> None:
    """Refuse a pipe served by another user, or by another process than the named one.

    Args:
        server: :func:`pipe_server_identity`'s answer.
        own_sid: the bridge's own user (``process_user_sid(kernel32, advapi32, None)``).
        expected_pid: the discovery file's pid, if it names one.
        pipe_name: for the message (``\\\\.\\pipe\\NAME``).

    Raises:
        PipeServerRefused: the message says who serves the pipe and who was expected.
    """
    if server.sid.upper() != own_sid.upper():
        raise PipeServerRefused(
            f"the pipe {pipe_name} is served by pid {server.pid} of another user ({server.sid}), not by this user "
            f"({own_sid}): another user may have created the pipe name first; nothing was sent"
        )
    if expected_pid is not None and server.pid != expected_pid:
        raise PipeServerRefused(
            f"the pipe {pipe_name} is served by pid {server.pid}, not by pid {expected_pid} that the discovery file "
            "names; nothing was sent"
        )


def current_user_only_sddl(user_sid: str) -> str:
    """A security descriptor (SDDL) that makes ``user_sid`` the owner and gives it, and
    nobody else, access: a protected DACL (``P``: no inherited entry) with one allow
    entry, generic all. Without a DACL entry, others (``Everyone``, ``ANONYMOUS LOGON``,
    which the default named-pipe DACL lets read) get nothing.

    Raises:
        ValueError: ``user_sid`` is not a string SID (``S-1-…``).
    """
    if not user_sid.startswith("S-1-") or not all(part.isdigit() for part in user_sid[4:].split("-")):
        raise ValueError(f"not a string SID: {user_sid!r}")
    return f"O:{user_sid}D:P(A;;GA;;;{user_sid})"


def create_pipe_instance(
    kernel32: Any,
    advapi32: Any,
    name: str,
    *,
    user_sid: str,
    first: bool,
    last_error: Callable[[], int] | None = None,
) -> int:
    """``CreateNamedPipeW`` for ``name`` (``\\\\.\\pipe\\NAME``), admitting only ``user_sid``
    (:func:`current_user_only_sddl`), local clients only, overlapped, byte mode.

    Args:
        first: the server's first instance: ``FILE_FLAG_FIRST_PIPE_INSTANCE``, so that a
            name already held by any process (a squatter) fails instead of joining it.

    Returns:
        the pipe handle.

    Raises:
        PipeServerRefused: ``first`` and the name is held already (``ERROR_ACCESS_DENIED``).
        PipeUnavailable: another failure (the message names the call and its error code).
        ValueError: ``user_sid`` is not a string SID.
    """
    sddl = current_user_only_sddl(user_sid)
    descriptor = ctypes.c_void_p()
    if not advapi32.ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl, SDDL_REVISION_1, ctypes.byref(descriptor), None):
        raise PipeUnavailable(f"ConvertStringSecurityDescriptorToSecurityDescriptorW failed (error {_last_error(last_error)})")
    try:
        attributes = _SecurityAttributes(ctypes.sizeof(_SecurityAttributes), descriptor.value, 0)
        open_mode = PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | (FILE_FLAG_FIRST_PIPE_INSTANCE if first else 0)
        pipe_mode = PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS
        handle = kernel32.CreateNamedPipeW(
            name, open_mode, pipe_mode, PIPE_UNLIMITED_INSTANCES, _PIPE_BUFFER_BYTES, _PIPE_BUFFER_BYTES, 0,
            ctypes.byref(attributes),
        )
        # Read at once, before LocalFree: a call that succeeds may reset the last error to 0
        # (Microsoft, GetLastError: "call it immediately"), and a squatter would then read as
        # an unexplained failure instead of PipeServerRefused.
        failed = not handle or handle in (INVALID_HANDLE_VALUE, -1)
        error = _last_error(last_error) if failed else 0
    finally:
        kernel32.LocalFree(descriptor)
    if failed:
        if first and error == ERROR_ACCESS_DENIED:
            raise PipeServerRefused(
                f"the pipe name {name} is held by another process already (it may be another user's, squatting it); "
                "nothing was served"
            )
        raise PipeUnavailable(f"CreateNamedPipeW({name}) failed (error {error})")
    return int(handle)


@functools.cache
def win32_pipe_api() -> tuple[Any, Any, Callable[[], int]]:  # pragma: no cover - Windows only
    """``(kernel32, advapi32, last_error)`` for this module's functions on Windows: DLLs of
    their own (``use_last_error``, so ``last_error`` is ``ctypes.get_last_error``), each
    function typed: a handle or pointer is pointer-sized, and ctypes's default ``int``
    would cut it (``GetCurrentProcess``'s pseudo-handle, -1, among them).

    Raises:
        OSError: not Windows.
    """
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        advapi32 = ctypes.WinDLL("advapi32", use_last_error=True)
        handle, dword, pointer = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p
        prototypes: list[tuple[Any, str, Any, list[Any]]] = [
            (kernel32, "GetCurrentProcess", handle, []),
            (kernel32, "OpenProcess", handle, [dword, ctypes.c_int, dword]),
            (kernel32, "CloseHandle", ctypes.c_int, [handle]),
            (kernel32, "LocalFree", pointer, [pointer]),
            (kernel32, "GetNamedPipeServerProcessId", ctypes.c_int, [handle, pointer]),
            (kernel32, "CreateNamedPipeW", handle, [ctypes.c_wchar_p, dword, dword, dword, dword, dword, dword, pointer]),
            (advapi32, "OpenProcessToken", ctypes.c_int, [handle, dword, pointer]),
            (advapi32, "GetTokenInformation", ctypes.c_int, [handle, ctypes.c_int, pointer, dword, pointer]),
            (advapi32, "ConvertSidToStringSidW", ctypes.c_int, [pointer, pointer]),
            (advapi32, "ConvertStringSecurityDescriptorToSecurityDescriptorW", ctypes.c_int,
             [ctypes.c_wchar_p, dword, pointer, pointer]),
        ]
        for dll, name, result, arguments in prototypes:
            function = getattr(dll, name)
            function.restype, function.argtypes = result, arguments
        return kernel32, advapi32, ctypes.get_last_error
    raise OSError("named pipes exist only on Windows")
