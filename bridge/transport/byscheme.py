"""A transport that picks the real one by URL scheme, and swaps it if the scheme changes.

The endpoint's scheme may be known only once the discovery file is read: this transport
starts with the one the configured URL names (``http://`` when none is configured), and
when a request names the other scheme it builds the matching transport with
:func:`bridge.transport.make_transport` and keeps the old one until :meth:`aclose` (a
response in flight may still use it). An app never changes scheme in practice; the swap
keeps the rule "the URL decides" true even when it does.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from typing import Any

from . import make_transport
from .base import Response, Transport

__all__ = ["ByScheme"]


class ByScheme:
    """A :class:`~bridge.transport.base.Transport` over the transport ``url``'s scheme needs.

    Args:
        url: the configured endpoint, or ``None`` when a discovery file will name it.
        max_connections, connect_timeout_seconds, pool_timeout_seconds,
        write_timeout_seconds, injected, verify_connection: as for
            :func:`bridge.transport.make_transport`, for every transport built.
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
    ) -> Response:
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
