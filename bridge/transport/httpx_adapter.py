"""httpx behind the bridge's :class:`~bridge.transport.base.Transport` seam.

Serves ``https://`` endpoints (httpx's own connection pool, with TLS verification) and
any ``httpx.AsyncBaseTransport`` a test injects (``httpx.MockTransport`` backed by respx).
It is the only module of the bridge that imports httpx for the MCP exchange, and the only
one that catches httpx's exceptions: each becomes one
:class:`~bridge.transport.base.TransportError` subclass (:data:`HTTPX_ERRORS`, most
specific class first), so the rest of the bridge knows one family. httpx is imported when
this module is, which the factory does only for ``https://`` or an injected transport.

httpx's transports are used without ``AsyncClient``: the bridge needs none of what the
client adds per request (cookies, auth flows, redirects, default headers). No proxy
variable is read (loopback must not go to a proxy) and no redirect is followed (the
``Authorization`` header must not travel).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any

import anyio
import httpx

from .base import (
    ConnectFailed,
    ConnectionBroken,
    ConnectTimeout,
    LocalProtocolError,
    PoolTimeout,
    ProtocolViolation,
    ReadTimeout,
    Response,
    TlsFailed,
    TransportError,
    WriteTimeout,
)

__all__ = ["HttpxTransport", "HTTPX_ERRORS", "translate_httpx_errors", "build_https_transport", "auth_client"]

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
    """An ``httpx.Response`` seen through the bridge's ``Response`` protocol."""

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
    ) -> Response:
        timeout = {**self._timeouts, "read": read_timeout_seconds}
        with translate_httpx_errors():
            request = httpx.Request(method, url, headers=list(headers), content=body, extensions={"timeout": timeout})
        # httpx bounds each read; the head as a whole gets the read timeout too (a head
        # dripped a byte at a time must not hold a request forever).
        scope = anyio.CancelScope(deadline=anyio.current_time() + read_timeout_seconds) if read_timeout_seconds is not None else None
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


class _Translating(httpx.AsyncBaseTransport):
    """Another httpx transport whose failures arrive as the bridge's ``TransportError``s;
    closing it closes the inner one only if ``owned``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, *, owned: bool) -> None:
        self._inner = inner
        self._owned = owned

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with translate_httpx_errors():
            response = await self._inner.handle_async_request(request)
        return httpx.Response(response.status_code, headers=response.headers, stream=_TranslatingStream(response))

    async def aclose(self) -> None:
        if self._owned:
            await self._inner.aclose()


class _TranslatingStream(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        stream = self._response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        with translate_httpx_errors():
            async for chunk in stream:
                yield chunk

    async def aclose(self) -> None:
        with translate_httpx_errors():
            await self._response.aclose()


class _VerifyingBackend:
    """An httpcore network backend whose TCP connections are verified before use: the
    host is resolved once, each address connected in turn, and the first connection that
    ``verify`` accepts is returned; refused or unverified ones are closed unused
    (``verifiedconnect.py``). Built on httpcore's public backend interface
    (``httpcore.AsyncNetworkBackend``; anyio underneath, as httpx's own default)."""

    def __init__(self, verify: Callable[[Any], object]) -> None:
        import httpcore

        self._inner = httpcore.AnyIOBackend()
        self._verify = verify

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        import httpcore

        from .verifiedconnect import VERIFY_REFUSALS, note_skipped, pick_failure, resolve_addresses, skipped_note

        refusals: list[BaseException] = []
        skipped: list[str] = []
        failure: BaseException | None = None
        scope = anyio.fail_after(timeout) if timeout is not None else contextlib.nullcontext()
        try:
            with scope:
                try:
                    addresses = await resolve_addresses(host, port)
                except OSError as exc:
                    raise ConnectFailed(f"{host} does not resolve: {exc.strerror or exc}") from None
                for address in addresses:
                    try:
                        stream = await self._inner.connect_tcp(
                            address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                        )
                    except (httpcore.ConnectError, OSError) as exc:
                        failure = exc  # nothing listens there
                        continue
                    try:
                        outcome = self._verify(stream.get_extra_info("socket"))
                        if inspect.isawaitable(outcome):
                            await outcome
                    except VERIFY_REFUSALS as exc:
                        await stream.aclose()
                        if len(addresses) > 1:
                            note_skipped(address, port, exc)
                        refusals.append(exc)
                        skipped.append(address)
                        continue
                    except BaseException:
                        await stream.aclose()
                        raise
                    return stream
        except TimeoutError:
            raise ConnectTimeout(f"{host}:{port} did not accept the connection in time") from None
        refused = pick_failure(refusals, nothing_listens_somewhere=failure is not None)
        if refused is not None:
            raise refused
        raise ConnectFailed(f"connection to {host}:{port} failed: {failure or 'no address'}{skipped_note(skipped)}")

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise ConnectFailed("the auth route is never reached over a Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


#: httpcore's exception classes and what each becomes (most specific first).
def _httpcore_errors() -> dict[type[Exception], type[TransportError]]:
    import httpcore

    return {
        httpcore.ConnectTimeout: ConnectTimeout,
        httpcore.ReadTimeout: ReadTimeout,
        httpcore.WriteTimeout: WriteTimeout,
        httpcore.PoolTimeout: PoolTimeout,
        httpcore.TimeoutException: ReadTimeout,
        httpcore.ConnectError: ConnectFailed,
        httpcore.ReadError: ConnectionBroken,
        httpcore.WriteError: ConnectionBroken,
        httpcore.RemoteProtocolError: ConnectionBroken,
        httpcore.NetworkError: ConnectionBroken,
        httpcore.LocalProtocolError: LocalProtocolError,
        httpcore.UnsupportedProtocol: LocalProtocolError,
        httpcore.ProtocolError: ProtocolViolation,
    }


@contextlib.contextmanager
def _translate_httpcore_errors() -> Iterator[None]:
    import httpcore

    try:
        yield
    except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
        table = _httpcore_errors()
        target = next((table[cls] for cls in type(exc).__mro__ if cls in table), TransportError)
        if isinstance(exc, httpcore.LocalProtocolError):
            raise target("the request could not be encoded (an invalid header value?)") from exc
        raise target(str(exc) or type(exc).__name__) from exc


class _VerifiedHttpTransport(httpx.AsyncBaseTransport):
    """``http://`` requests over an httpcore pool whose every connection is verified
    (:class:`_VerifyingBackend`); ``https://`` ones over httpx's own transport (TLS
    verifies the app). No retries, no proxies."""

    def __init__(self, verify: Callable[[Any], object]) -> None:
        import httpcore

        self._pool = httpcore.AsyncConnectionPool(retries=0, network_backend=_VerifyingBackend(verify))  # type: ignore[arg-type]
        self._tls = httpx.AsyncHTTPTransport(verify=True, retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            return await self._tls.handle_async_request(request)
        import httpcore

        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port, target=request.url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _translate_httpcore_errors():
            response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status, headers=response.headers, stream=_CoreStream(response), extensions=response.extensions
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
        await self._tls.aclose()


class _CoreStream(httpx.AsyncByteStream):
    def __init__(self, response: Any) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translate_httpcore_errors():
            async for chunk in self._response.aiter_stream():
                yield chunk

    async def aclose(self) -> None:
        with _translate_httpcore_errors():
            await self._response.aclose()


def auth_client(
    inner: httpx.AsyncBaseTransport | None,
    *,
    timeout_seconds: float,
    verify_connection: Callable[[Any], object] | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for token sources that talk to the app (its auth route).

    It sends through ``inner`` (an injected test transport) or a pool of its own, reads no
    proxy variable and follows no redirect; its transport failures arrive as the bridge's
    ``TransportError`` subclasses (``ConnectFailed`` when nothing listens). Closing the
    client closes its own pool, never ``inner``.

    ``verify_connection``: the listener check, called with the socket of every new
    ``http://`` connection before a byte is written (it may return an awaitable). The
    client is then pinned to verified connections: the host is resolved once, each address
    connected and checked in turn, and the request (a secret) goes only on the connection
    that passed; ``ListenerUnverifiedError`` when none did."""
    owned = inner is None
    if inner is not None:
        transport: httpx.AsyncBaseTransport = inner
    elif verify_connection is not None:
        transport = _VerifiedHttpTransport(verify_connection)
    else:
        transport = httpx.AsyncHTTPTransport(verify=True, retries=0)
    return httpx.AsyncClient(
        transport=_Translating(transport, owned=owned),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(timeout_seconds),
    )
