"""httpx behind the bridge's :class:`~bridge.transport.base.Transport` seam.

Serves ``https://`` endpoints (httpx's own connection pool, with TLS verification), for
the MCP exchange and the auth route alike, and any ``httpx.AsyncBaseTransport`` a test
injects (``httpx.MockTransport`` backed by respx). ``http://`` never comes here: it goes
over the bridge's own pool (``pool.py``). It is the only module of the bridge that imports
httpx, and the only one that catches httpx's exceptions: each becomes one
:class:`~bridge.transport.base.TransportError` subclass, by one table (:data:`HTTPX_ERRORS`,
most specific class first), so the rest of the bridge knows one family. httpx is imported
when this module is, which the factory does only for ``https://`` or an injected transport.

httpx's transports are used without ``AsyncClient``: the bridge needs none of what the
client adds per request (cookies, auth flows, redirects, default headers). No proxy
variable is read (loopback must not go to a proxy) and no redirect is followed (the
``Authorization`` header must not travel).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator

import httpx

from ..system.cancelscope import move_on_after
from .base import (
    ConnectFailed,
    ConnectionBroken,
    ConnectTimeout,
    HttpResponse,
    LocalProtocolError,
    PoolTimeout,
    ProtocolViolation,
    ReadTimeout,
    TlsFailed,
    TransportError,
    WriteTimeout,
)

__all__ = ["HttpxTransport", "HTTPX_ERRORS", "translate_httpx_errors", "build_https_transport"]

#: httpx's exception classes and what each becomes; the most specific class that matches
#: wins (a test proves every ``httpx.TransportError`` subclass is listed on purpose).
HTTPX_ERRORS: dict[type[Exception], type[TransportError]] = {
    httpx.ConnectTimeout: ConnectTimeout,
    httpx.ReadTimeout: ReadTimeout,
    httpx.WriteTimeout: WriteTimeout,
    httpx.PoolTimeout: PoolTimeout,
    httpx.TimeoutException: ReadTimeout,
    httpx.ConnectError: ConnectFailed,
    httpx.ProxyError: ConnectFailed,
    httpx.ReadError: ConnectionBroken,
    httpx.WriteError: ConnectionBroken,
    httpx.CloseError: ConnectionBroken,
    httpx.RemoteProtocolError: ConnectionBroken,  # h11's "server disconnected" is one
    httpx.NetworkError: ConnectionBroken,
    httpx.LocalProtocolError: LocalProtocolError,
    httpx.UnsupportedProtocol: LocalProtocolError,
    httpx.ProtocolError: ProtocolViolation,
    httpx.DecodingError: ProtocolViolation,
    httpx.TooManyRedirects: ProtocolViolation,
    httpx.TransportError: TransportError,
    httpx.RequestError: TransportError,
    httpx.HTTPError: TransportError,
}


def _translated(exc: httpx.HTTPError) -> TransportError:
    for cls in type(exc).__mro__:
        target = HTTPX_ERRORS.get(cls)
        if target is not None:
            break
    else:  # pragma: no cover - httpx.HTTPError is in the table
        target = TransportError
    if isinstance(exc, httpx.LocalProtocolError):
        # httpx's message quotes the offending header line, which may hold a secret.
        return target("the request could not be encoded (an invalid header value?)")
    if target is ConnectFailed and _caused_by_tls(exc):
        target = TlsFailed
    return target(str(exc) or type(exc).__name__)


def _caused_by_tls(exc: BaseException) -> bool:
    """Whether an ``ssl.SSLError`` (a certificate not trusted, a failed handshake) is in
    ``exc``'s chain: httpcore raises its ``ConnectError`` from it."""
    import ssl  # (loaded already: an https connection was tried)

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


@contextlib.contextmanager
def translate_httpx_errors() -> Iterator[None]:
    """Re-raise an httpx exception raised inside the block as its ``TransportError``."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise _translated(exc) from exc


class _HttpxResponse:
    """An ``httpx.Response`` seen through the bridge's ``HttpResponse`` protocol."""

    __slots__ = ("_response", "status_code", "headers")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        with translate_httpx_errors():
            async for chunk in self._response.aiter_bytes():
                yield chunk

    async def read_whole(self, limit: int, suffix: bytes = b"") -> bytes | None:
        return None  # no zero-copy path here: the caller streams the body

    async def aclose(self) -> None:
        with translate_httpx_errors():
            await self._response.aclose()


class HttpxTransport:
    """The bridge's ``Transport`` over an ``httpx.AsyncBaseTransport``.

    Args:
        transport: the httpx transport to send through.
        timeouts: httpx's timeout names in seconds (``connect``, ``write``, ``pool``); the
            read timeout comes with each request.
        owned: whether :meth:`aclose` closes ``transport`` (an injected one stays the
            caller's).
    """

    def __init__(self, transport: httpx.AsyncBaseTransport, *, timeouts: dict[str, float | None], owned: bool) -> None:
        self._transport = transport
        self._timeouts = timeouts
        self._owned = owned

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
        timeout = {**self._timeouts, "read": read_timeout_seconds}
        with translate_httpx_errors():
            request = httpx.Request(method, url, headers=list(headers), content=body, extensions={"timeout": timeout})
        # httpx bounds each read; the head as a whole gets the read timeout too (a head
        # dripped a byte at a time must not hold a request forever).
        scope = move_on_after(read_timeout_seconds) if read_timeout_seconds is not None else None
        with translate_httpx_errors(), scope or contextlib.nullcontext():
            response = await self._transport.handle_async_request(request)
        if scope is not None and scope.cancelled_caught:
            raise ReadTimeout("no complete response head within the read timeout")
        response.request = request
        return _HttpxResponse(response)

    async def aclose(self) -> None:
        if self._owned:
            await self._transport.aclose()


def build_https_transport(*, max_connections: int) -> httpx.AsyncHTTPTransport:
    """httpx's connection pool with TLS verification, no proxies, no retries."""
    return httpx.AsyncHTTPTransport(
        verify=True,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        retries=0,
    )
