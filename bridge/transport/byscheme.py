"""A transport that picks the real one by URL scheme, and swaps it if the scheme changes.

The endpoint's scheme may be known only once the discovery file is read: this transport
starts with the one the configured URL names (``http://`` when none is configured), and
when a request names the other scheme it builds the matching transport with
:func:`make_transport` and keeps the old one until :meth:`aclose` (a
response in flight may still use it). An app never changes scheme in practice; the swap
keeps the rule "the URL decides" true even when it does.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Any

from .base import HttpResponse, Transport

__all__ = ["ByScheme", "make_transport"]


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
        ``http://`` without ``injected``: the own HTTP/1.1 pool (httpx is not imported);
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


class ByScheme:
    """A :class:`~bridge.transport.base.Transport` over the transport ``url``'s scheme needs.

    Args:
        url: the configured endpoint, or ``None`` when a discovery file will name it.
        max_connections, connect_timeout_seconds, pool_timeout_seconds,
        write_timeout_seconds, injected, verify_connection: as for
            :func:`make_transport`, for every transport built.
    """

    def __init__(
        self,
        url: str | None,
        *,
        max_connections: int,
        connect_timeout_seconds: float,
        pool_timeout_seconds: float,
        write_timeout_seconds: float | None,
        injected: Any = None,
        verify_connection: Callable[[socket.socket], object] | None = None,
    ) -> None:
        self._options: dict[str, Any] = {
            "max_connections": max_connections,
            "connect_timeout_seconds": connect_timeout_seconds,
            "pool_timeout_seconds": pool_timeout_seconds,
            "write_timeout_seconds": write_timeout_seconds,
            "injected": injected,
            "verify_connection": verify_connection,
        }
        self._scheme = _family(url or "")
        self._transport: Transport = make_transport(self._scheme + "//", **self._options)
        self._stale: list[Transport] = []

    async def request(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None = None,
        *,
        read_timeout_seconds: float | None,
        bounded: bool = True,
    ) -> HttpResponse:
        """Send one request on the transport of ``url``'s scheme (see ``Transport.request``)."""
        if _family(url) != self._scheme:
            self._stale.append(self._transport)
            self._scheme = _family(url)
            self._transport = make_transport(self._scheme + "//", **self._options)
        return await self._transport.request(
            method, url, headers, body, read_timeout_seconds=read_timeout_seconds, bounded=bounded
        )

    async def aclose(self) -> None:
        """Close the transports this object opened (an injected transport stays open)."""
        for transport in [*self._stale, self._transport]:
            await transport.aclose()


def _family(url: str) -> str:
    """``"https:"`` for httpx's pool; ``"http:"`` for the own pool, which serves
    ``http://`` and ``http+unix://`` alike."""
    return "https:" if url.startswith("https:") else "http:"
