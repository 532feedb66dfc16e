"""Connections to an app on a Unix domain socket (``http+unix://``), checked before the first byte.

The own HTTP/1.1 pool (``pool.py``) speaks the same HTTP over a Unix socket as over TCP;
only the connect differs. It is made of two steps, each a callable of its own so that a
connect loop of the shape ``connect(...) then verify(sock)`` can take them:

1. :func:`connect_unix`: check the socket file
   (:func:`~bridge.transport.socketfile.check_socket_file`: an ``lstat``, so a symbolic
   link is seen, not followed: a socket, owned by this user, in a folder owned by this
   user that nobody else may write to, below folders each owned by this user or root that
   nobody else may write to unless sticky, as OpenSSH wants of the folders above a key:
   ``bridge/system/privatefile.py``), then ``loop.create_unix_connection``;
2. the peer check, given by the caller as ``verify(sock)``: who serves the socket, as the
   OS says (``bridge/app/unixpeer.py``: ``SO_PEERCRED`` or ``LOCAL_PEERCRED``).

:func:`~bridge.transport.verifiedconnect.connect_first_verified` runs both under the
connect timeout, as for TCP (the socket's path is its one address); the socket is closed
unused when either refuses. The file check runs only when a verifier is given
(``--no-verify-listener`` turns both off: an app run as another user on purpose).

A socket file that does not exist, or one nobody listens on (``ECONNREFUSED``: a stale
socket of a dead run), is :class:`~bridge.transport.base.ConnectFailed`: the app is not
running, and ``--launch`` may start it. A file that is not the user's own socket is
:class:`~bridge.core.errors.ListenerUnverifiedError` and never leads to a launch.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from .base import ConnectFailed
from .socketfile import check_socket_file

__all__ = ["connect_unix", "connect_unix_socket", "verify_by_family"]

_P = TypeVar("_P", bound=asyncio.BaseProtocol)


async def connect_unix(path: str, protocol_factory: Callable[[], _P], *, check_file: bool = True) -> tuple[asyncio.Transport, _P]:
    """Connect to the Unix socket at ``path`` (the file checked first unless ``check_file``
    is false). Unbounded in time: the caller bounds it.

    Raises:
        ConnectFailed: no socket there, or nobody listens on it.
        ListenerUnverifiedError: the file check refused it (nothing was connected).
    """
    if check_file:
        check_socket_file(path)
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.create_unix_connection(protocol_factory, path)
    except OSError as exc:  # ENOENT, ECONNREFUSED (a stale socket), EACCES
        raise ConnectFailed(f"connection to the Unix socket {path} failed: {exc.strerror or type(exc).__name__}") from None
    return transport, protocol


async def connect_unix_socket(path: str, *, check_file: bool = True) -> socket.socket:
    """A non-blocking ``AF_UNIX`` socket connected to ``path`` (the file checked first unless
    ``check_file`` is false), for callers that only need to know who listens (the launcher's
    probe, ``check``). Unbounded in time: the caller bounds it. On any error the socket is
    closed.

    Raises:
        ConnectFailed, ListenerUnverifiedError: as :func:`connect_unix`.
    """
    if check_file:
        check_socket_file(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, path)
    except OSError as exc:
        sock.close()
        raise ConnectFailed(f"connection to the Unix socket {path} failed: {exc.strerror or type(exc).__name__}") from None
    except BaseException:
        sock.close()
        raise
    return sock


def verify_by_family(
    tcp: Callable[[Any], object] | None, unix: Callable[[Any], object] | None, pipe: Callable[[Any], object] | None = None
) -> Callable[[Any], object] | None:
    """One verifier for the pool: ``unix`` for an ``AF_UNIX`` socket, ``pipe`` for a named
    pipe's handle (no address family, a ``handle``: ``asyncio.windows_utils.PipeHandle``,
    ``pipelink.py``), ``tcp`` for any other. ``None`` when all are ``None``; a family whose
    verifier is ``None`` passes."""
    if tcp is None and unix is None and pipe is None:
        return None

    def verify(sock: Any) -> object:
        family = getattr(sock, "family", None)
        if family is None and hasattr(sock, "handle"):
            check = pipe
        else:
            check = unix if family == getattr(socket, "AF_UNIX", object()) else tcp
        return None if check is None else check(sock)

    return verify
