"""The seam between the MCP layer (``bridge/streamable/upstream.py``) and the HTTP clients.

One :class:`Transport` sends a request and returns a :class:`HttpResponse` once its head has
arrived; the body is read from the response. Which transport serves an endpoint is decided
once, by URL scheme, in :func:`bridge.transport.make_transport`: the bridge's own HTTP/1.1
pool for ``http://`` (``pool.py``), httpx for ``https://`` (``httpx_adapter.py``); tests
inject an httpx transport (respx) or a :class:`~bridge.transport.memory.MemoryTransport`.

Every transport raises only the classes below, whatever client is underneath (the httpx
adapter translates httpx's). ``bridge.streamable.failures.map_transport_errors`` turns each into
one of the bridge's errors with one table. No message holds a header value.

Hierarchy (what the bridge answers; the connection is closed after any of them)::

    TransportError            (any other) -> bad_upstream_response
    ├── ConnectFailed         nothing accepted the connection -> app_unreachable
    ├── ConnectTimeout        not accepted within the connect timeout -> timeout
    ├── PoolTimeout           no free connection within the pool timeout -> timeout
    ├── ReadTimeout           the response (head, or a JSON body) did not arrive in time,
    │                         or the app went silent for the read timeout -> timeout
    ├── WriteTimeout          the request could not be written in time -> timeout
    ├── ConnectionBroken      the connection ended before the response did -> stream_closed
    ├── ProtocolViolation     the app's bytes are not HTTP/1.1 -> bad_upstream_response
    └── LocalProtocolError    the bridge's own request cannot be encoded; nothing was
                              sent -> bridge_error (the bridge's fault, not the app's)

Pure: standard library only (the protocols declare awaitables, they await nothing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, Protocol

__all__ = [
    "Transport",
    "HttpResponse",
    "Fields",
    "Headers",
    "TransportError",
    "ConnectFailed",
    "ConnectTimeout",
    "PoolTimeout",
    "ReadTimeout",
    "WriteTimeout",
    "ConnectionBroken",
    "ProtocolViolation",
    "LocalProtocolError",
]


class TransportError(Exception):
    """An HTTP exchange with the app failed. The message names no header value."""


class ConnectFailed(TransportError):
    """Nothing accepted the connection (refused, unreachable, name not resolved)."""


class TlsFailed(ConnectFailed):
    """The TLS handshake failed (``https://``): the app's certificate is not trusted or
    not for this host, or no TLS version is shared. The app is there; starting it cannot
    help."""


class ConnectTimeout(TransportError):
    """The connection was not accepted within the connect timeout."""


class PoolTimeout(TransportError):
    """No connection became free within the pool timeout."""


class ReadTimeout(TransportError):
    """The response did not arrive in time: its head not complete within the read timeout
    of sending the request, a whole body not within the read timeout of starting to read
    it, or (while a body is streamed) nothing arrived for the read timeout."""


class WriteTimeout(TransportError):
    """The request's bytes could not be handed to the connection within the write timeout
    (the app stopped reading them)."""


class ConnectionBroken(TransportError):
    """The connection closed or failed before the response was complete."""


class ProtocolViolation(TransportError):
    """The app's bytes are not an HTTP/1.1 response this client can read."""


class LocalProtocolError(TransportError):
    """The request cannot be encoded (an invalid field name or value); nothing was sent."""


class Fields(Protocol):
    """Response fields: ``get`` by any case; repeated fields joined with ``", "``."""

    def get(self, name: str, default: Any = None) -> Any: ...


class Headers:
    """Response fields as HTTP/1.1 delivers them (``http1.py``): ``get`` by any case; repeated fields joined with ``", "``.

    Args:
        fields: ``(name, value)`` pairs as received, in order, decoded as ISO-8859-1 (each
            byte one character, RFC 9110 §5.5: obsolete text passes through), values
            without their surrounding white space.

    ``raw`` gives the same fields as ``(name, value)`` byte pairs, in order.
    """

    __slots__ = ("_fields", "_by_name")

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields
        by_name = {name.lower(): value for name, value in fields}
        if len(by_name) < len(fields):  # a field repeated (RFC 9110 §5.3): its values joined, in order
            by_name = {}
            for name, value in fields:
                key = name.lower()
                by_name[key] = f"{by_name[key]}, {value}" if key in by_name else value
        self._by_name = by_name

    @property
    def raw(self) -> list[tuple[bytes, bytes]]:
        """The fields as received, in order, as ``(name, value)`` byte pairs."""
        return [(name.encode("latin-1"), value.encode("latin-1")) for name, value in self._fields]

    def get(self, name: str, default: str | None = None) -> str | None:
        by_name = self._by_name
        value = by_name.get(name)  # the bridge asks in lower case: found without lowering
        return by_name.get(name.lower(), default) if value is None else value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_name


class HttpResponse(Protocol):
    """A response whose head has arrived.

    ``aclose`` must be called on every path (``bridge/streamable/upstream.py``'s exchange does): it frees
    the connection, back to the pool if the body was read to the end and it may persist.
    """

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Fields: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives (de-chunked), in pieces of any size. Each wait is bounded
        by the read timeout of silence.

        Raises:
            ReadTimeout, ConnectionBroken, ProtocolViolation."""
        ...

    def read_whole(self, limit: int, suffix: bytes = b"") -> Awaitable[bytes | None]:
        """The whole body plus ``suffix`` as one ``bytes``, bounded in total by the read
        timeout counted from this call; or ``None`` with nothing read, when the
        transport has no such fast path for this body (not a ``Content-Length`` body, or
        one longer than ``limit`` bytes): the caller streams it with :meth:`aiter_bytes`.

        Raises:
            ReadTimeout, ConnectionBroken."""
        ...

    def aclose(self) -> Awaitable[None]: ...


class Transport(Protocol):
    """Sends requests to the app; one per ``Upstream``, chosen by URL scheme."""

    def request(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None = None,
        *,
        read_timeout_seconds: float | None,
        bounded: bool = True,
    ) -> Awaitable[HttpResponse]:
        """Send one request; return once the response's head has arrived.

        Args:
            method: ``GET``, ``POST``, ``DELETE`` …
            url: an absolute URL of the scheme this transport serves.
            headers: ``(name, value)`` fields; ``Host`` and ``Content-Length`` are added.
            body: the request body, sent as given (``None``: no body).
            read_timeout_seconds: the head must be complete within this many seconds of
                sending the request, and a streamed body may be silent no longer
                (``None``: no bound, for streams that stay open).
            bounded: ``False`` may open a connection beyond the pool's size rather than
                wait for one (a cancellation must not queue behind what it cancels).

        Raises:
            TransportError: one of the subclasses above.
        """
        ...

    def aclose(self) -> Awaitable[None]:
        """Close idle connections; busy ones close as their responses are closed."""
        ...
