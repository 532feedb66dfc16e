"""The one road to the app: resolve once, connect to each address in turn, keep the first
connection verified to be the app's.

A name such as ``localhost`` resolves to more than one address (``::1`` and ``127.0.0.1``).
The app usually listens on one of them; any local user may listen on the other. A
credential must go only on a socket verified to be the app's (docs/security.md), so every
caller that opens a connection to the app goes through :func:`connect_first_verified`, each
with its own ``connect``: the bridge's pool (``pool.py``, which also carries the auth
route's POST), ``check`` (``bridge/cli/check.py``) and the launcher's readiness probe
(:func:`verified_probe`). The algorithm is trio's ``open_tcp_stream`` (one function tries
each address, collects the failures, raises one) with the listener check added:

1. resolve the host once (:func:`resolve_addresses`; an IP literal is used as it is);
2. connect to each address in the resolver's order; on the first connection made, run the
   listener check (``bridge/app/listener.py``) on that very connection;
3. a connection refused, or one whose listener is not verified (another user's socket, not
   the discovery file's pid), is closed before a byte is written and the next address is
   tried; the first verified connection is returned, and the request goes on it;
4. when no address gives one, :func:`pick_failure` chooses the one failure raised.

One time bound covers the whole attempt (resolving, every connect and every check).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ipaddress
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..core.errors import AppUnreachableError, ListenerUnverifiedError
from ..core.pipeurl import is_pipe_url, split_pipe_url
from ..core.unixurl import is_unix_url, split_unix_url
from ..system.cancelscope import fail_after
from .base import ConnectFailed, ConnectTimeout, TransportError
from .unixlink import connect_unix_socket

__all__ = ["connect_first_verified", "connect_socket", "open_verified_socket", "resolve_addresses", "pick_failure", "verified_probe", "VERIFY_REFUSALS"]

log = logging.getLogger("bridge.listener")

#: What the listener check raises for one address (then the next one is tried).
VERIFY_REFUSALS: tuple[type[ListenerUnverifiedError], type[AppUnreachableError]] = (ListenerUnverifiedError, AppUnreachableError)

C = TypeVar("C")


async def connect_first_verified(
    host: str,
    port: int | None,
    *,
    connect: Callable[[str], Awaitable[C]],
    verify: Callable[[C], object] | None,
    close: Callable[[C], object],
    timeout_seconds: float | None,
) -> tuple[C, str, tuple[str, ...]]:
    """The first connection to ``host`` whose listener passes ``verify``.

    Args:
        host: a name or an IP literal (``[::1]`` too). With ``port=None`` it is one address
            used as it is, never resolved (a Unix socket's path).
        port: the TCP port, or ``None`` (see ``host``).
        connect: ``async (address) -> connection``; raises ``OSError`` when nothing accepts
            there (refused, unreachable). Anything else it raises ends the attempt.
        verify: ``(connection) -> None``, may return an awaitable: the listener check, run on
            each new connection before a byte is written. It raises one of
            :data:`VERIFY_REFUSALS` to refuse that connection. ``None``: no check (the first
            connection made is returned).
        close: ``(connection) -> None``: closes a refused connection (synchronously).
        timeout_seconds: the bound on the whole attempt, or ``None``.

    Returns:
        ``(connection, address, skipped)``: the verified connection, the address it went
        to, and the addresses skipped because their listener was refused, in order.

    Raises:
        ConnectFailed: the name does not resolve, or no address gave a verified connection
            and :func:`pick_failure` names no refusal (the message says why the last
            connect failed, and which addresses were skipped).
        ConnectTimeout: the attempt took longer than ``timeout_seconds``.
        ListenerUnverifiedError, AppUnreachableError: the refusal :func:`pick_failure` chose.

        After any error no connection is left open, and nothing was written on any.
    """
    where = host if port is None else f"{host}:{port}"
    refusals: list[BaseException] = []
    skipped: list[str] = []
    reason = "no address"
    nothing_listens = False
    # A cancel scope, not asyncio.wait_for: on Python 3.11, wait_for can swallow a
    # cancellation that arrives as the connection completes (CPython gh-86296).
    scope = fail_after(timeout_seconds) if timeout_seconds is not None else contextlib.nullcontext()
    try:
        with scope:
            if port is None:
                addresses = [host]
            else:
                try:
                    addresses = await resolve_addresses(host, port)
                except OSError as exc:
                    raise ConnectFailed(f"{host} does not resolve: {exc.strerror or exc}") from None
            for address in addresses:
                try:
                    connection = await connect(address)
                except OSError as exc:
                    reason = _why(exc)
                    nothing_listens = True
                    continue
                if verify is None:
                    return connection, address, tuple(skipped)
                try:
                    outcome = verify(connection)
                    if inspect.isawaitable(outcome):
                        await outcome
                except VERIFY_REFUSALS as exc:
                    close(connection)
                    if len(addresses) > 1:
                        log.warning("skipped %s: %s", address if port is None else f"{address} port {port}", exc)
                    refusals.append(exc)
                    skipped.append(address)
                    continue
                except BaseException:
                    close(connection)
                    raise
                return connection, address, tuple(skipped)
    except TimeoutError:  # (before OSError, its base class)
        raise ConnectTimeout(f"{where} did not accept the connection in time") from None
    refused = pick_failure(refusals, nothing_listens_somewhere=nothing_listens)
    if refused is not None:
        raise refused
    note = f" (skipped {', '.join(skipped)}: its listener is not the app's)" if skipped else ""
    raise ConnectFailed(f"connection to {where} failed: {reason}{note}")


def _why(exc: OSError) -> str:
    """The OS's words for a failed connect, the same whoever connected (asyncio's
    ``create_connection`` and ``sock_connect`` word the same refusal differently)."""
    if exc.errno:
        return os.strerror(exc.errno)
    return exc.strerror or type(exc).__name__


async def resolve_addresses(host: str, port: int) -> list[str]:
    """The addresses to try for ``host``, in the resolver's order, without duplicates.

    An IP literal (``127.0.0.1``, ``::1``, ``[::1]``) is returned as it is, without asking
    the resolver. A name is resolved once, for TCP.

    Raises:
        OSError: the name does not resolve (``socket.gaierror``).
    """
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return [str(ipaddress.ip_address(bare.split("%", 1)[0])) if "%" not in bare else bare]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for _family, _kind, _proto, _name, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def pick_failure(refusals: Sequence[BaseException], *, nothing_listens_somewhere: bool) -> BaseException | None:
    """What to raise when no address gave a verified connection: ``None`` when some address
    refused the connection or there was no refusal (the caller raises its connection
    failure: the app is not running there, and ``--launch`` may start it; a squatter on
    ``[::1]`` must not keep the app from being started on ``127.0.0.1``), else the first
    refusal by the listener check, in address order (``listener_unverified``, or the
    recoverable "the app is going away")."""
    if nothing_listens_somewhere or not refusals:
        return None
    return refusals[0]


async def connect_socket(address: str, port: int) -> socket.socket:
    """A non-blocking TCP socket connected to ``address`` (an IP literal) and ``port``; on
    any error (``OSError``: nothing accepts there) the socket is closed."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (address, port))
    except BaseException:
        sock.close()
        raise
    return sock


async def open_verified_socket(
    url: str, *, verify: Callable[[Any], object] | None, timeout_seconds: float | None
) -> tuple[Any, str, tuple[str, ...]]:
    """A plain socket to ``url``'s app by :func:`connect_first_verified`, for callers that
    only need to know who listens (the launcher's probe, ``check``): each address of an
    ``http://`` or ``https://`` URL's host in turn, the one socket of an ``http+unix://``
    URL (its file checked first when ``verify`` is given), or the client's end of an
    ``npipe://`` URL's pipe (an ``asyncio.windows_utils.PipeHandle``, ``pipelink.py``; Windows
    only). The caller closes it (``close()``); nothing is written on it.

    Returns and raises as :func:`connect_first_verified` (``ValueError`` too, for an
    ``http+unix://`` or ``npipe://`` URL that is not valid).
    """
    if is_pipe_url(url):
        from .pipelink import open_pipe  # Windows only: not loaded for sockets

        pipe, _target = split_pipe_url(url)

        def close_pipe(end: Any) -> None:
            end.close()

        return await connect_first_verified(
            pipe, None, connect=open_pipe, verify=verify, close=close_pipe, timeout_seconds=timeout_seconds
        )
    if is_unix_url(url):
        path, _target = split_unix_url(url)

        async def connect_unix(address: str) -> socket.socket:
            return await connect_unix_socket(address, check_file=verify is not None)

        return await connect_first_verified(
            path, None, connect=connect_unix, verify=verify, close=socket.socket.close, timeout_seconds=timeout_seconds
        )
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)

    async def connect(address: str) -> socket.socket:
        return await connect_socket(address, port)

    return await connect_first_verified(
        parts.hostname or "127.0.0.1", port, connect=connect, verify=verify, close=socket.socket.close,
        timeout_seconds=timeout_seconds,
    )


def verified_probe(verify: Callable[[Any], object] | None, *, timeout_seconds: float = 1.0) -> Callable[[str], Awaitable[bool]]:
    """An ``async (url) -> bool`` for the launcher: whether :func:`open_verified_socket`
    gets a connection to ``url``'s app whose listener passes ``verify`` (``None``: any
    listener counts). A listener that is not the app's does not count; an app that is
    going away does (it is there: its restart is waited for by the request).
    ``timeout_seconds`` bounds the whole probe. The connection is closed unused."""

    async def probe(url: str) -> bool:
        try:
            sock, _address, _skipped = await open_verified_socket(url, verify=verify, timeout_seconds=timeout_seconds)
        except AppUnreachableError:
            return True
        except (TransportError, ListenerUnverifiedError, ValueError):
            return False
        sock.close()
        return True

    return probe
