"""The one transport to the app, chosen by URL scheme, and one HTTP exchange over it.

Split out of ``upstream.py`` (issue 11): the transport (the bridge's own HTTP/1.1 pool for
``http://``, httpx for ``https://``, or a test's), picked by :func:`bridge.transport.make_transport`
(ARCHITECTURE §5: upstream never imports ``pool`` or ``httpx`` itself), and swapped when a
discovery file read later names the other scheme. ``Upstream`` binds :meth:`AppTransport.exchange`
once, so the per-request path calls it as it called ``Upstream``'s own method.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..core.config import BridgeConfig
from . import make_transport
from .base import Response, Transport

__all__ = ["AppTransport"]


class AppTransport:
    """The transport of one ``Upstream``: ``config`` gives the caps and timeouts,
    ``injected`` a test's transport (the caller keeps ownership of it),
    ``verify_connection`` the listener check for every new connection's socket, and
    ``timeout`` the ``Upstream``'s timeout dict (its ``"read"`` is the default read bound).
    """

    def __init__(
        self,
        config: BridgeConfig,
        *,
        injected: Any,
        verify_connection: Callable[[socket.socket], None] | None,
        timeout: dict[str, float | None],
    ) -> None:
        self._config = config
        self._injected = injected
        self._verify_connection = verify_connection
        self._timeout = timeout
        # Chosen once by scheme; a discovery file read later names the scheme only then (the
        # transport is swapped if it is not the one guessed, which an app never changes).
        self._scheme = "https:" if (config.url or "").startswith("https:") else "http:"
        self._transport: Transport = self._make_transport(self._scheme)
        self._stale: list[Transport] = []

    def _make_transport(self, scheme: str) -> Transport:
        return make_transport(
            scheme + "//",
            max_connections=self._config.max_concurrent_requests + 2,  # + the GET stream and DELETE
            connect_timeout_seconds=self._config.connect_timeout_seconds,
            pool_timeout_seconds=self._config.request_timeout_seconds,
            write_timeout_seconds=self._config.request_timeout_seconds,
            injected=self._injected,
            verify_connection=self._verify_connection,
        )

    @contextlib.asynccontextmanager
    async def exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes | None = None,
        timeout: dict[str, float | None] | None = None,
        *,
        bounded: bool = True,
    ) -> AsyncIterator[Response]:
        """One HTTP exchange; the response is closed (its connection freed) on exit."""
        if not url.startswith(self._scheme):
            self._stale.append(self._transport)
            self._scheme = "https:" if url.startswith("https:") else "http:"
            self._transport = self._make_transport(self._scheme)
        response = await self._transport.request(
            method, url, headers.items(), content, read_timeout_seconds=(timeout or self._timeout)["read"], bounded=bounded
        )
        try:
            yield response
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Close the transports this object opened (an injected transport stays open)."""
        for transport in [*self._stale, self._transport]:
            await transport.aclose()
