"""The token sources' one HTTP exchange: ``POST`` a JSON body to the app's auth route.

It goes over the same transports as the MCP exchange (:func:`~bridge.transport.byscheme.make_transport`):
the bridge's own HTTP/1.1 pool for ``http://``, whose every new connection is verified on
the very socket the secret then goes on (``verifiedconnect.py``), and httpx for
``https://`` (TLS verifies the app). No proxy variable is read, no redirect is followed.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from .base import Transport, TransportError
from .byscheme import ByScheme

__all__ = ["AuthRouteClient", "MAX_AUTH_REPLY_BYTES"]

#: The most of an auth route's reply read (bytes); a token reply is far shorter.
MAX_AUTH_REPLY_BYTES = 1024 * 1024


class AuthRouteClient:
    """``post_json`` for token sources that talk to the app (its auth route); the
    transport is built on the first call (httpx is imported only for ``https://``).

    Args:
        injected: a test's ``httpx.AsyncBaseTransport`` to send through (other injected
            transports are not used: the auth route then gets a pool of its own).
        timeout_seconds: the bound on connecting, on waiting for a free connection, and on
            the reply's head and its body (``--token-timeout``).
        verify_connection: the listener check, run on every new ``http://`` connection
            before a byte is written (it may return an awaitable); ``None``: the check is off.
        user_agent: the ``User-Agent`` sent.
    """

    def __init__(
        self,
        injected: Any = None,
        *,
        timeout_seconds: float,
        verify_connection: Callable[[socket.socket], object] | None = None,
        user_agent: str = "mcp-app-bridge",
    ) -> None:
        self._injected = injected if hasattr(injected, "handle_async_request") else None
        self._timeout_seconds = timeout_seconds
        self._verify_connection = verify_connection
        self._user_agent = user_agent
        self._transport: Transport | None = None

    async def post_json(self, url: str, body: object) -> tuple[int, bytes]:
        """``POST url`` with ``body`` as JSON; the reply's status and body.

        Raises:
            TransportError: its subclasses (``ConnectFailed``: nothing accepts connections
                there); the reply's body is longer than :data:`MAX_AUTH_REPLY_BYTES`.
            ListenerUnverifiedError, AppUnreachableError: from the listener check; nothing
                was sent.
        """
        if self._transport is None:
            timeout = self._timeout_seconds
            self._transport = ByScheme(
                url, max_connections=4, connect_timeout_seconds=timeout, pool_timeout_seconds=timeout,
                write_timeout_seconds=timeout, injected=self._injected, verify_connection=self._verify_connection,
            )
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        headers = [("Content-Type", "application/json"), ("Accept", "application/json"), ("User-Agent", self._user_agent)]
        response = await self._transport.request("POST", url, headers, content, read_timeout_seconds=self._timeout_seconds)
        try:
            whole = await response.read_whole(MAX_AUTH_REPLY_BYTES)
            if whole is None:
                chunks = bytearray()
                async for chunk in response.aiter_bytes():
                    chunks += chunk
                    if len(chunks) > MAX_AUTH_REPLY_BYTES:
                        raise TransportError(f"the reply is longer than {MAX_AUTH_REPLY_BYTES} bytes")
                whole = bytes(chunks)
        finally:
            await response.aclose()
        return response.status_code, whole

    async def aclose(self) -> None:
        """Close the transport if it was built (never the injected one)."""
        if self._transport is not None:
            await self._transport.aclose()
