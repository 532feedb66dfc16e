"""Connections to an app on a Windows named pipe (``npipe://``), checked before the first byte.

The own HTTP/1.1 pool (``pool.py``) speaks the same HTTP over a named pipe as over TCP or
a Unix socket; only the connect differs, in two steps, as for a Unix socket
(``unixlink.py``):

1. :func:`open_pipe_handle`: ``CreateFileW`` on ``\\\\.\\pipe\\NAME`` for reading and
   writing, overlapped, with ``SECURITY_SQOS_PRESENT | SECURITY_ANONYMOUS`` (as go-winio,
   Docker's pipe client, opens pipes): whoever serves the pipe cannot act as the bridge's
   user with the connection (Microsoft, "Impersonating a Named Pipe Client": without the
   flag a server may impersonate its client). A pipe whose every instance is busy
   (``ERROR_PIPE_BUSY``) is tried again after 1 ms, doubling up to 100 ms, as asyncio's
   own ``IocpProactor.connect_pipe`` does; the caller's connect timeout bounds the whole.
   The handle is then wrapped in asyncio's proactor pipe transport (:func:`connect_pipe`,
   the same wrapping ``ProactorEventLoop.create_pipe_connection`` does; that method
   itself cannot pass the security flags).
2. the server check, given by the caller as ``verify(pipe)`` on the
   ``asyncio.windows_utils.PipeHandle`` (``bridge/app/pipepeer.py``:
   ``GetNamedPipeServerProcessId``, that process's user SID, the discovery file's pid and
   its start time).

:func:`~bridge.transport.verifiedconnect.connect_first_verified` runs both under the
connect timeout (the pipe's path is its one address); the pipe is closed unused when the
check refuses it. Nothing is written before the check has passed, so a squatter never
reads a byte.

No pipe by that name (``ERROR_FILE_NOT_FOUND``) is :class:`~bridge.transport.base.ConnectFailed`:
the app is not running, and ``--launch`` may start it. A pipe whose access list shuts this
user out (``ERROR_ACCESS_DENIED``: another user's pipe) is
:class:`~bridge.core.errors.ListenerUnverifiedError` and never leads to a launch.

Windows only: :func:`connect_pipe` and :func:`open_pipe` raise ``ConnectFailed`` elsewhere
(``--url`` refuses ``npipe://`` there first). :func:`open_pipe_handle` takes the Win32 API as
an argument, so its logic runs in the tests of every OS with a stand-in.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ..core.errors import ListenerUnverifiedError
from ..core.policy import PIPE_BUSY_BACKOFF
from .base import ConnectFailed

__all__ = [
    "PIPE_OPEN_FLAGS",
    "connect_pipe",
    "open_pipe",
    "open_pipe_handle",
]

_P = TypeVar("_P", bound=asyncio.BaseProtocol)

# winnt.h / fileapi.h / winbase.h / winerror.h values.
GENERIC_READ = 0x80000000
GENERIC_WRITE = 0x40000000
OPEN_EXISTING = 3
FILE_FLAG_OVERLAPPED = 0x40000000
SECURITY_SQOS_PRESENT = 0x00100000
SECURITY_ANONYMOUS = 0x00000000  # SecurityAnonymous << 16
#: ``CreateFileW``'s flags for the client's end of the pipe.
PIPE_OPEN_FLAGS = FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT | SECURITY_ANONYMOUS
ERROR_FILE_NOT_FOUND = 2
ERROR_ACCESS_DENIED = 5
ERROR_PIPE_BUSY = 231
INVALID_HANDLE_VALUE = ctypes.c_void_p(-1).value


async def open_pipe_handle(kernel32: Any, path: str, *, last_error: Callable[[], int]) -> int:
    """Open the client's end of the pipe ``path`` (``\\\\.\\pipe\\NAME``; see the module).
    Unbounded in time while the pipe is busy: the caller bounds it.

    Args:
        kernel32: the Win32 API (``CreateFileW``), or a test's stand-in.
        last_error: ``ctypes.get_last_error``, or a stand-in.

    Returns:
        the pipe handle, opened overlapped; the caller closes it.

    Raises:
        ConnectFailed: no such pipe (the app is not running), or another failure (with
            Windows's error code).
        ListenerUnverifiedError: the pipe's access list shuts this user out.
    """
    busy = 0  # the wait before trying a busy pipe again: policy.PIPE_BUSY_BACKOFF
    while True:
        handle = kernel32.CreateFileW(path, GENERIC_READ | GENERIC_WRITE, 0, None, OPEN_EXISTING, PIPE_OPEN_FLAGS, None)
        if handle and handle not in (INVALID_HANDLE_VALUE, -1):
            return int(handle)
        error = last_error()
        if error != ERROR_PIPE_BUSY:
            break
        await asyncio.sleep(PIPE_BUSY_BACKOFF.seconds(busy))
        busy += 1
    if error == ERROR_FILE_NOT_FOUND:
        raise ConnectFailed(f"no named pipe {path} (the app is not running)")
    if error == ERROR_ACCESS_DENIED:
        raise ListenerUnverifiedError(
            f"the app's named pipe {path} is refused: its access list does not admit the user running the bridge (another "
            "user's pipe, or one created by another user first); no credential and no request were sent. If the app runs "
            "as another user on purpose, give it a pipe this user may open."
        )
    raise ConnectFailed(f"opening the named pipe {path} failed (Windows error {error})")


@functools.cache
def _kernel32() -> Any:  # pragma: no cover - Windows only
    """``kernel32`` with ``CreateFileW`` typed (a handle is pointer-sized: the default
    ``int`` result would cut it), and the last error kept for ``ctypes.get_last_error``."""
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        kernel32.CreateFileW.restype = ctypes.c_void_p
        kernel32.CreateFileW.argtypes = [
            ctypes.c_wchar_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong,
            ctypes.c_void_p,
        ]
        return kernel32
    raise ConnectFailed("named pipes (npipe://) exist only on Windows")


async def open_pipe(path: str) -> Any:  # pragma: no cover - Windows only
    """An ``asyncio.windows_utils.PipeHandle`` for the client's end of the pipe ``path``
    (:func:`open_pipe_handle`), with the pipe's path as its ``path`` attribute, for
    callers that only need to know who serves it (the launcher's probe, ``check``) and for
    :func:`connect_pipe`. The caller closes it.

    Raises:
        ConnectFailed, ListenerUnverifiedError: as :func:`open_pipe_handle`; ``ConnectFailed``
            off Windows.
    """
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        from asyncio import windows_utils

        handle = await open_pipe_handle(_kernel32(), path, last_error=ctypes.get_last_error)
        pipe = windows_utils.PipeHandle(handle)
        setattr(pipe, "path", path)  # noqa: B010 (for the server check's messages and its discovery lookup)
        return pipe
    raise ConnectFailed("named pipes (npipe://) exist only on Windows")


async def connect_pipe(path: str, protocol_factory: Callable[[], _P]) -> tuple[asyncio.BaseTransport, _P]:
    """Open the pipe ``path`` (:func:`open_pipe`) and wrap it in asyncio's proactor duplex
    pipe transport, whose ``get_extra_info("pipe")`` is the ``PipeHandle``. Unbounded in
    time: the caller bounds it. On any error the pipe is closed.

    Raises:
        ConnectFailed: no such pipe, another failure, or not Windows's proactor event loop.
        ListenerUnverifiedError: as :func:`open_pipe_handle`.
    """
    loop: Any = asyncio.get_running_loop()
    if not hasattr(loop, "_make_duplex_pipe_transport"):
        raise ConnectFailed("named pipes (npipe://) need Windows and asyncio's proactor event loop (its default there)")
    pipe = await open_pipe(path)
    try:
        protocol = protocol_factory()
        waiter = loop.create_future()
        # What ProactorEventLoop.create_pipe_connection does with the handle it opened
        # (CPython Lib/asyncio/windows_events.py), with a waiter: connection_made has run
        # when this returns.
        transport = loop._make_duplex_pipe_transport(pipe, protocol, waiter, extra={"addr": path})
    except BaseException:
        pipe.close()
        raise
    try:
        await waiter
    except BaseException:
        transport.close()
        raise
    return transport, protocol
