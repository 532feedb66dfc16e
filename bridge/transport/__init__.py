"""HTTP transports to the app behind one seam (``base.py``), and the factory choosing one.

==================  ===================================================================
module              what it holds
==================  ===================================================================
``base.py``         ``Transport``/``Response`` protocols; the ``TransportError`` tree
``http1.py``        sans-I/O HTTP/1.1: encode a request head, parse a response (pure)
``pool.py``         the bridge's own keep-alive pool on asyncio, for ``http://`` and ``http+unix://``
``unixlink.py``     connecting to a Unix domain socket: the file, then the peer, checked
``httpx_adapter``   httpx for ``https://`` and injected test transports
``memory.py``       ``MemoryTransport(handler)``: an in-memory transport for tests
``byscheme.py``     ``ByScheme``: the transport picked by URL scheme, swapped if it changes
==================  ===================================================================
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .base import Response, Transport, TransportError

if TYPE_CHECKING:
    import httpx

__all__ = ["make_transport", "AuthClient", "Transport", "Response", "TransportError"]


def make_transport(
    url: str,
    *,
    max_connections: int,
    connect_timeout_seconds: float,
    pool_timeout_seconds: float,
    write_timeout_seconds: float | None = None,
    injected: Any = None,
    verify_connection: Callable[[socket.socket], object] | None = None,
) -> Transport:
    """The transport for ``url``'s scheme, chosen once.

    Args:
        url: the endpoint (only its scheme matters).
        max_connections: connections open at once (the request slots + GET stream + DELETE).
        connect_timeout_seconds, pool_timeout_seconds, write_timeout_seconds: the bounds
            on opening a connection, waiting for a free one and writing a request (httpx
            only: the own pool's head deadline covers a write the app stops reading).
        injected: a test's transport: an ``httpx.AsyncBaseTransport`` (respx) goes through
            the httpx adapter; a bridge ``Transport`` (``MemoryTransport``) is used as is.
            The caller keeps ownership of it.
        verify_connection: for the own pool, called once per new connection with its
            socket, before any byte is written; what it raises reaches the caller of
            ``request()``, and the connection is closed, never pooled.

    Returns:
        ``http://`` or ``http+unix://`` (a Unix domain socket) without ``injected``: the
        own HTTP/1.1 pool (httpx is not imported);
        ``https://``: httpx's pool with TLS verification.
    """
    timeouts = {"connect": connect_timeout_seconds, "write": write_timeout_seconds, "pool": pool_timeout_seconds}
    if injected is not None:
        if not hasattr(injected, "handle_async_request"):
            return injected  # type: ignore[no-any-return]
        from .httpx_adapter import HttpxTransport

        return HttpxTransport(injected, timeouts=timeouts, owned=False)
    if url.startswith("https:"):
        from .httpx_adapter import HttpxTransport, build_https_transport

        return HttpxTransport(build_https_transport(max_connections=max_connections), timeouts=timeouts, owned=True)
    from .pool import Http11Pool

    return Http11Pool(
        max_connections=max_connections,
        connect_timeout_seconds=connect_timeout_seconds,
        pool_timeout_seconds=pool_timeout_seconds,
        verify_connection=verify_connection,
    )


class AuthClient:
    """The ``httpx.AsyncClient`` for token sources that talk to the app's auth route, built
    (and httpx imported) on first use: no proxies from the environment, no redirects; its
    failures arrive as the bridge's ``TransportError`` subclasses.

    Args:
        injected: a test's ``httpx.AsyncBaseTransport`` to send through (other injected
            transports are ignored: the auth route then gets a pool of its own).
        timeout_seconds: the bound on each exchange (``--token-timeout``).
        verify_connection: the listener check, run on every new ``http://`` connection
            before a byte is written (it may return an awaitable): the client is pinned to
            verified connections (``verifiedconnect.py``), so a secret goes only on a
            socket that passed. ``None``: the check is off.
    """

    def __init__(
        self,
        injected: Any = None,
        *,
        timeout_seconds: float,
        verify_connection: Callable[[socket.socket], object] | None = None,
    ) -> None:
        self._inner = injected if hasattr(injected, "handle_async_request") else None
        self._timeout_seconds = timeout_seconds
        self._verify_connection = verify_connection
        self._client: httpx.AsyncClient | None = None

    def get(self) -> httpx.AsyncClient:
        """The client, built on the first call."""
        if self._client is None:
            from .httpx_adapter import auth_client

            self._client = auth_client(
                self._inner, timeout_seconds=self._timeout_seconds, verify_connection=self._verify_connection
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client if it was built (never the injected transport)."""
        if self._client is not None:
            await self._client.aclose()
