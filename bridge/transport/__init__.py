"""HTTP transports to the app behind one seam (``base.py``), and the factory choosing one.

==================  ===================================================================
module              what it holds
==================  ===================================================================
``base.py``         ``Transport``/``Response`` protocols; the ``TransportError`` tree
``http1.py``        sans-I/O HTTP/1.1: encode a request head, parse a response (pure)
``pool.py``         the bridge's own keep-alive pool on asyncio, for ``http://``
``httpx_adapter``   httpx for ``https://`` and injected test transports
``memory.py``       ``MemoryTransport(handler)``: an in-memory transport for tests
==================  ===================================================================
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from .base import Response, Transport, TransportError

__all__ = ["make_transport", "Transport", "Response", "TransportError"]


def make_transport(
    url: str,
    *,
    max_connections: int,
    connect_timeout_seconds: float,
    pool_timeout_seconds: float,
    write_timeout_seconds: float | None = None,
    injected: Any = None,
    verify_connection: Callable[[socket.socket], None] | None = None,
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
