"""The app side: MCP Streamable HTTP over long-lived keep-alive connections.

One :class:`~bridge.transport.base.Transport`, chosen once by URL scheme
(:func:`bridge.transport.make_transport`): the bridge's own HTTP/1.1 pool for ``http://``
endpoints, which is how desktop apps listen on loopback, httpx for ``https://`` ones, or
the transport a test injects. This module is the only place that turns transport
exceptions into the bridge's errors (:func:`map_transport_errors`, one table). Everything
it returns to the session loop is already a stdout line (UTF-8 bytes ending in ``\\n``).

Transport rules followed (MCP 2025-03-26 … 2025-11-25, basic/transports "Streamable HTTP";
SPEC-CHECKLIST items 28–55):

- every message is its own POST with ``Content-Type: application/json`` and
  ``Accept: application/json, text/event-stream``; ``Mcp-Session-Id`` once the server
  assigned one on a successful ``initialize``; ``MCP-Protocol-Version`` once negotiated
  (left off ``initialize`` itself); ``Authorization: Bearer`` when a token is configured;
- a request's reply is ``application/json`` (one message, or a 2025-03-26 batch array) or
  ``text/event-stream``, whose events are relayed as they arrive until the response;
  comments, empty priming events and non-``message`` events are skipped, ``id``/``retry``
  are kept; a stream that ends early is resumed by GET with ``Last-Event-ID`` (at most
  :data:`MAX_RESUME_ATTEMPTS` times) when the server gave event ids, otherwise the request
  gets reason ``stream_closed``;
- the optional GET stream (server-initiated messages) is opened by :meth:`Upstream.listen`;
  405 means the server offers none;
- no proxies from the environment, no redirects (the token must not travel), no cookies.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from . import sse
from ._version import __version__
from .config import BridgeConfig
from .discovery import DiscoveryError, Endpoint
from .errors import (
    AppUnreachableError,
    AuthRejectedError,
    BadUpstreamResponseError,
    BridgeError,
    BridgeInternalError,
    HTTPStatusError,
    MessageTooLargeError,
    SessionLostError,
    StreamClosedError,
    UpstreamError,
    UpstreamTimeoutError,
)
from .jsonrpc import Request, encode_message, is_valid_id, loads_strict, message_problem, to_wire_line
from .tokens import TokenContext, TokenStore
from .transport import make_transport
from .transport.base import (
    ConnectFailed,
    ConnectionBroken,
    ConnectTimeout,
    LocalProtocolError,
    PoolTimeout,
    ProtocolViolation,
    ReadTimeout,
    Response,
    Transport,
    TransportError,
    WriteTimeout,
)

if TYPE_CHECKING:
    import httpx

    from .listener import ListenerCheck

__all__ = ["Upstream", "map_transport_errors", "Emit", "MAX_RESUME_ATTEMPTS"]

log = logging.getLogger("bridge.upstream")

#: Hands one message from the app that is not the awaited response to the session:
#: ``emit(line, message)``, the stdout line and its parsed value (the session's reply ledger
#: validates it and decides whether it reaches stdout).
Emit = Callable[[bytes, Any], Awaitable[None]]

#: Tries to resume a broken SSE stream by GET + ``Last-Event-ID`` (both official SDKs use 2).
MAX_RESUME_ATTEMPTS = 2
#: Wait before reconnecting when the server sent no ``retry`` (both official SDKs: 1 s).
DEFAULT_RETRY_SECONDS = 1.0
#: Upper bound on the GET stream's reconnect delay, and how many empty tries in a row it gets.
MAX_LISTEN_DELAY_SECONDS = 30.0
MAX_LISTEN_FAILURES = 5
#: Error bodies are read only this far: they are for finding a JSON-RPC error, not for relaying.
MAX_ERROR_BODY_BYTES = 1024 * 1024
#: After the response on an SSE stream, how long the bridge waits for the stream's end, so
#: that the connection can serve the next request: the official SDK's server ends it about
#: 0.1 ms after the response, and a new connection per call costs more (README,
#: Benchmarks). After a wait in vain the next 1, 2, 4 … (at most :data:`SSE_END_SKIPS`)
#: replies are not waited for, so a server that keeps its streams open costs little.
SSE_END_WAIT_SECONDS = 0.002
SSE_END_SKIPS = 64

_USER_AGENT = f"mcp-app-bridge/{__version__}"
_JSON = "application/json"
_SSE = "text/event-stream"


#: Each transport failure, and the bridge's error and sentence for it (``{app}``: the app's
#: name, ``{detail}``: the transport's message, which never holds a header value). The most
#: specific class wins; ``tests/test_transport.py`` proves every ``TransportError`` class
#: is listed on purpose.
TRANSPORT_ERRORS: dict[type[TransportError], tuple[type[BridgeError], str]] = {
    ConnectFailed: (AppUnreachableError, "{app} is not running or not reachable: {detail}."),
    ConnectTimeout: (UpstreamTimeoutError, "{app} did not accept the connection in time."),
    PoolTimeout: (UpstreamTimeoutError, "No connection to {app} became free within the request timeout."),
    ReadTimeout: (UpstreamTimeoutError, "{app} did not answer within the request timeout ({detail}); the request was abandoned."),
    WriteTimeout: (UpstreamTimeoutError, "{app} did not take the request within the request timeout; it was abandoned."),
    ConnectionBroken: (StreamClosedError, "The connection to {app} broke before the response arrived: {detail}."),
    ProtocolViolation: (BadUpstreamResponseError, "{app} sent a reply that is not valid HTTP: {detail}."),
    LocalProtocolError: (BridgeInternalError, "The bridge could not encode its request to {app}: {detail}."),
    TransportError: (BadUpstreamResponseError, "The exchange with {app} failed: {detail}."),
}


@contextlib.contextmanager
def map_transport_errors(app: str) -> Iterator[None]:
    """Translate a ``TransportError`` raised inside the block into the bridge's error for
    it (:data:`TRANSPORT_ERRORS`, ``raise … from``). The message names the app, never a
    header value. A ``BridgeError`` and anything else pass through unchanged.
    """
    try:
        yield
    except TransportError as exc:
        for cls in type(exc).__mro__:
            entry = TRANSPORT_ERRORS.get(cls)
            if entry is not None:
                break
        else:  # pragma: no cover - TransportError itself is in the table
            raise
        error, text = entry
        raise error(text.format(app=app, detail=str(exc) or type(exc).__name__)) from exc


@dataclass
class _Sent:
    """What one HTTP request carried, for deciding a recovery (see ``policy.py``)."""

    token_generation: int
    had_token: bool = False
    session_generation: int | None = None


@dataclass
class _StreamState:
    """What an SSE stream told us about resuming it."""

    last_event_id: str | None = None
    retry_seconds: float | None = None


class Upstream:
    """One MCP connection to the app: the HTTP client plus the MCP session's state.

    Args:
        config: the run's configuration (headers, timeouts, caps, app name).
        endpoint: where the app listens (a fixed URL or its discovery file).
        tokens: the bearer token store (may hold no source: no authentication).
        transport: a test's transport for every exchange instead of the bridge's own: an
            ``httpx.AsyncBaseTransport`` (``httpx.MockTransport`` backed by respx) or a bridge
            ``Transport`` (``bridge.transport.memory.MemoryTransport``). The caller keeps
            ownership of it. Without one, the transport is chosen by the URL's scheme
            (:func:`bridge.transport.make_transport`).
        verify_connection: passed to the own pool: called with every new connection's
            socket before a byte is written (see ``Http11Pool``); by default the listener
            check (``bridge/listener.py``) when ``config.verify_listener`` is on.

    Attributes:
        session_id: the ``Mcp-Session-Id`` from the last successful ``initialize``, or ``None``.
        protocol_version: the version the server chose in that ``initialize`` result.
        server_capabilities: the ``capabilities`` of that result.
        session_generation: increases with every successful ``initialize``; a
            ``SessionLostError`` carries the generation the failed request used, so that
            many requests failing together cause one rebuild.
    """

    def __init__(
        self,
        config: BridgeConfig,
        *,
        endpoint: Endpoint,
        tokens: TokenStore,
        transport: Any = None,
        verify_connection: Callable[[socket.socket], None] | None = None,
    ) -> None:
        self._config = config
        self._endpoint = endpoint
        self._tokens = tokens
        self._app = config.app_name
        self._injected = transport
        self._verify_connection = verify_connection
        timeout = config.request_timeout_seconds
        self._timeout: dict[str, float | None] = {
            "connect": config.connect_timeout_seconds, "read": timeout, "write": timeout, "pool": timeout
        }
        #: The listener check (``bridge/listener.py``), once per new ``http://`` connection
        #: (an injected transport is a test's stand-in: no socket to check).
        self.listener_check: ListenerCheck | None = None
        if config.verify_listener and transport is None:
            from .listener import ListenerCheck

            self.listener_check = ListenerCheck(endpoint.listener_pid, app_name=config.app_name)
        if verify_connection is None and self.listener_check is not None:
            self._verify_connection = self.listener_check.verify_socket
        # Chosen once by scheme; a discovery file read later names the scheme only then (the
        # transport is swapped if it is not the one guessed, which an app never changes).
        self._scheme = "https:" if (config.url or "").startswith("https:") else "http:"
        self._transport: Transport = self._make_transport(self._scheme)
        self._stale: list[Transport] = []
        self._client: httpx.AsyncClient | None = None
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.session_generation = 0
        #: Set while no session rebuild runs (``session_rebuild``).
        self.session_ready = anyio.Event()
        self.session_ready.set()
        self._sse_end_skips = 0  # SSE replies left whose stream's end is not waited for
        self._sse_end_misses = 0  # waits in vain in a row

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

    @property
    def client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` for token sources that talk to the app (its auth route):
        no proxies from the environment, no redirects; its failures arrive as the bridge's
        ``TransportError`` subclasses. Built (and httpx imported) on first use."""
        if self._client is None:
            from .transport.httpx_adapter import auth_client

            inner = self._injected if hasattr(self._injected, "handle_async_request") else None
            self._client = auth_client(inner, timeout_seconds=self._config.token_timeout_seconds)
        return self._client

    async def aclose(self) -> None:
        """Close the connections this object opened (an injected transport stays open)."""
        for transport in [*self._stale, self._transport]:
            await transport.aclose()
        if self._client is not None:
            await self._client.aclose()

    @contextlib.asynccontextmanager
    async def _exchange(
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

    @contextlib.contextmanager
    def session_rebuild(self) -> Iterator[None]:
        """Close the session gate while a rebuild runs; open it again however it ends.

        While the gate is closed, a request waits before it reads the session's id and
        version, so it never goes out with no session id (the app's "missing session"
        -32600, which no recovery rule can repair) or with a new session whose
        ``notifications/initialized`` has not been sent yet. The old session stays in place
        until the replayed ``initialize`` succeeds: a request that read it just before the
        gate closed gets the app's 404 and waits for this rebuild (``SessionLostError``)."""
        self.session_ready = anyio.Event()
        try:
            yield
        finally:
            self.session_ready.set()

    async def refresh_token(self, used_generation: int) -> None:
        """Re-read the discovery file and replace the token rejected with a 401.

        Raises:
            AuthRejectedError: (not recoverable) the token source failed.
        """
        self._endpoint.reload()
        await self._tokens.refresh(self.token_context(), used_generation)

    # -- headers -------------------------------------------------------------------------

    def token_context(self) -> TokenContext:
        """What a token source gets: the current endpoint (if known) and an HTTP client."""
        try:
            base_url = self._endpoint.url()
        except DiscoveryError:
            base_url = ""
        return TokenContext(base_url=base_url, http_client_factory=lambda: self.client, verify_listener=self._verify_address)

    def _verify_address(self, host: str, port: int) -> None:
        """The listener check for a token source about to send a secret to ``host:port``."""
        if self.listener_check is not None:
            self.listener_check.verify_address(host, port)

    async def _prepare(
        self,
        *,
        for_initialize: bool = False,
        accept: str = f"{_JSON}, {_SSE}",
        modern_headers: dict[str, str] | None = None,
        during_rebuild: bool = False,
    ) -> tuple[str, dict[str, str], _Sent]:
        """The URL, the headers and what they carried, for one HTTP request.

        ``modern_headers`` (a 2026-07-28 request) replace the session's id and version.
        ``during_rebuild``: a message of the rebuild itself, which must not wait for it.
        Any other message that carries the session waits while a rebuild runs (see
        ``session_rebuild``); nothing awaits between that check and the headers below,
        so the id, version and generation it sends are one consistent snapshot."""
        while True:
            try:
                url = self._endpoint.url()
            except DiscoveryError as exc:
                if exc.missing:
                    raise AppUnreachableError(f"{self._app} is not running ({exc}).") from None
                raise AppUnreachableError(f"{self._app} cannot be reached: {exc}.", recoverable=False) from None
            token, token_generation = await self._tokens.current(TokenContext(base_url=url, http_client_factory=lambda: self.client, verify_listener=self._verify_address))
            if for_initialize or modern_headers is not None or during_rebuild or self.session_ready.is_set():
                break
            await self.session_ready.wait()  # then read the endpoint and token again: they may have changed
        headers = dict(self._config.headers)
        headers["User-Agent"] = _USER_AGENT
        headers["Accept"] = accept
        if token:
            headers["Authorization"] = f"Bearer {token}"
        sent = _Sent(token_generation=token_generation, had_token=bool(token))
        if modern_headers is not None:
            headers.update(modern_headers)
        elif not for_initialize:
            if self.session_id is not None:
                headers["Mcp-Session-Id"] = self.session_id
                sent.session_generation = self.session_generation
            if self.protocol_version is not None:
                headers["MCP-Protocol-Version"] = self.protocol_version
        return url, headers, sent

    async def _prepare_post(
        self, *, for_initialize: bool = False, modern_headers: dict[str, str] | None = None, during_rebuild: bool = False
    ) -> tuple[str, dict[str, str], _Sent]:
        url, headers, sent = await self._prepare(
            for_initialize=for_initialize, modern_headers=modern_headers, during_rebuild=during_rebuild
        )
        headers["Content-Type"] = _JSON
        return url, headers, sent

    # -- POST ----------------------------------------------------------------------------

    async def send_request(
        self, request: Request, emit: Emit, *, modern_headers: dict[str, str] | None = None, endless: bool = False
    ) -> bytes:
        """POST a request and return the stdout line answering it.

        Messages that arrive before the response on an SSE stream (progress, logging,
        server→client requests) are passed to ``emit`` as they arrive, in order.

        Args:
            request: the client's request, sent as its bytes were received.
            emit: where messages other than the response go.
            modern_headers: for a 2026-07-28 request, its headers (``modern.py``); no
                session header is sent and a broken stream is not resumed.
            endless: no read timeout (``subscriptions/listen`` stays open for as long as
                the client listens).

        Returns:
            the response line (its id is the request's, same type and value).

        Raises:
            UpstreamError: one subclass per reason (DESIGN.md §3). Nothing is retried here.
        """
        initialize = request.method == "initialize"
        url, headers, sent = await self._prepare_post(for_initialize=initialize, modern_headers=modern_headers)
        timeout = self._listen_timeout() if endless else None
        with map_transport_errors(self._app):
            async with self._exchange("POST", url, headers, request.body, timeout) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    return await self._error_status(request, response, sent)
                media_type = _media_type(response)
                if status in (202, 204) or (media_type is None and status == 200):
                    raise BadUpstreamResponseError(
                        f"{self._app} accepted the request (HTTP {status}) but sent no response for it."
                    )
                if media_type == _JSON:
                    raw = await self._read_body(
                        response, self._config.max_message_bytes, line_end=True, timeout_seconds=(timeout or self._timeout)["read"]
                    )
                    extras: list[tuple[bytes, Any]] = []
                    line, message = self._answer_from_json(request, raw, extras)
                    for extra, item in extras:
                        await emit(extra, item)
                elif media_type == _SSE:
                    line, message = await self._answer_from_sse(
                        request, response, emit, resumable=modern_headers is None,
                        idle_seconds=None if endless else self._config.request_timeout_seconds,
                    )
                else:
                    raise BadUpstreamResponseError(
                        f"{self._app} answered with content type {media_type!r}, "
                        "which is neither application/json nor text/event-stream."
                    )
                if initialize:
                    self._remember_session(response, message)
                return line

    async def send_message(self, body: bytes, what: str, *, during_rebuild: bool = False) -> None:
        """POST a notification or a client response; any 2xx is success (usually 202).

        ``during_rebuild``: the rebuild's own ``notifications/initialized`` (it must not
        wait for the rebuild it belongs to).

        Raises:
            UpstreamError: on a non-2xx status or a transport failure. The caller logs it;
                nothing is ever written to stdout for these messages.
        """
        url, headers, sent = await self._prepare_post(during_rebuild=during_rebuild)
        with map_transport_errors(self._app):
            # Not bounded by the pool: a notifications/cancelled must not wait for a
            # connection held by the very call it cancels.
            async with self._exchange("POST", url, headers, body, bounded=False) as response:
                if 200 <= response.status_code < 300:
                    return
                await self._check_status(response, sent)
        raise HTTPStatusError(f"{self._app} refused the {what} (HTTP {response.status_code}).", response.status_code)

    async def _check_status(self, response: Response, sent: _Sent) -> bytes:
        """Raise for the statuses the recovery policy acts on; else return the (capped) body.

        401 → ``AuthRejectedError`` (refresh the token). 404 on a request that carried a
        session id → ``SessionLostError`` (rebuild the session), and so is a 400 whose body
        talks about the session, when ``session_400_heuristic`` is on (SPEC-CHECKLIST D4:
        some servers answer an unknown session id with 400, not 404).
        """
        status = response.status_code
        if status == 401:
            if sent.had_token:
                text = f"{self._app} rejected the bridge's token (HTTP 401); check the token source."
            else:
                text = f"{self._app} requires a token (HTTP 401) and the bridge had none to send; configure a token source."
            error = AuthRejectedError(text)
            error.token_generation = sent.token_generation
            raise error
        raw = await self._read_body(
            response, MAX_ERROR_BODY_BYTES, truncate=True, timeout_seconds=self._config.request_timeout_seconds
        )
        if sent.session_generation is not None and (
            status == 404 or (status == 400 and self._config.session_400_heuristic and _says_session_unknown(raw))
        ):
            lost = SessionLostError(
                f"{self._app} no longer knows this MCP session (HTTP {status}); it was probably restarted."
            )
            lost.session_generation = sent.session_generation
            raise lost
        return raw

    async def _error_status(self, request: Request, response: Response, sent: _Sent) -> bytes:
        status = response.status_code
        raw = await self._check_status(response, sent)
        error = _jsonrpc_error_in(raw)
        if error is not None:
            # The app's own JSON-RPC error passes through unchanged, with the request's id.
            return encode_message({"jsonrpc": "2.0", "id": request.id, "error": error})
        if status == 404:  # nothing at that path: most often a --url without the endpoint's path
            url = self.token_context().base_url or "the configured URL"
            raise HTTPStatusError(
                f"{self._app} answered HTTP 404 (Not Found) at {url}, so that is not its MCP endpoint. "
                "Check --url or the discovery file: the endpoint's path is often /mcp.",
                status,
            )
        raise HTTPStatusError(f"{self._app} answered the request with HTTP status {status}.", status)

    async def _read_body(
        self,
        response: Response,
        limit: int,
        *,
        truncate: bool = False,
        line_end: bool = False,
        timeout_seconds: float | None,
    ) -> bytes:
        """The body, at most ``limit`` bytes (more: ``MessageTooLargeError``, or cut with
        ``truncate``), complete within ``timeout_seconds`` (``None``: no bound). With ``line_end`` a newline follows it in the same buffer: a one-line
        reply then goes to stdout as this very object (a 16 MiB copy costs milliseconds)."""
        whole = await response.read_whole(limit, b"\n" if line_end else b"")
        if whole is not None:
            return whole
        chunks: list[bytes] = []
        size = 0
        # Streamed (chunked, or no fast path): the body as a whole gets the request timeout
        # too, as read_whole has, so a body dripped a byte at a time cannot hold the request.
        with anyio.move_on_after(timeout_seconds) as scope:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    if truncate:
                        break
                    raise MessageTooLargeError(
                        f"{self._app} sent a reply larger than the {limit}-byte limit (--max-message-bytes)."
                    )
        if scope.cancelled_caught:
            raise UpstreamTimeoutError(
                f"{self._app} did not send the whole reply within the request timeout; the request was abandoned."
            )
        if line_end:
            chunks.append(b"\n")
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)  # one copy at most

    def _remember_session(self, response: Response, message: dict[str, Any]) -> None:
        result = message.get("result")
        if not isinstance(result, dict):
            return  # an error: the handshake failed, the old state (if any) stays
        session_id = response.headers.get("mcp-session-id")
        if session_id is not None and not _is_visible_ascii(session_id):
            log.warning("ignoring an Mcp-Session-Id that is not visible ASCII")
            session_id = None
        self.session_id = session_id
        version = result.get("protocolVersion")
        self.protocol_version = version if isinstance(version, str) and _is_visible_ascii(version) else None
        capabilities = result.get("capabilities")
        self.server_capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.session_generation += 1
        log.info(
            "MCP session %s, protocol version %s",
            _short(session_id) if session_id else "(none)",
            self.protocol_version or "(unknown)",
        )

    # -- reading replies -----------------------------------------------------------------

    def _answer_from_json(
        self, request: Request, raw: bytes, extras: list[tuple[bytes, Any]]
    ) -> tuple[bytes, dict[str, Any]]:
        value = self._parse(raw)
        if isinstance(value, list):  # 2025-03-26 allowed a batch of responses
            answer: tuple[bytes, dict[str, Any]] | None = None
            for item in value:
                if answer is None and _is_response(item) and _id_matches(item, request.id):
                    answer = (encode_message(item), item)
                elif isinstance(item, dict):
                    extras.append((encode_message(item), item))
            if answer is None:
                raise BadUpstreamResponseError(f"{self._app} sent a batch without the response to this request.")
            return answer
        if not _is_response(value):
            raise BadUpstreamResponseError(f"{self._app} sent JSON that is not a JSON-RPC response.")
        if not _id_matches(value, request.id):
            # One POST, one JSON reply: it answers this request whatever id it carries
            # (servers answer errors with id null). Put the request's id back.
            value = {**value, "id": request.id}
            return encode_message(value), value
        return to_wire_line(raw, value), value

    async def _answer_from_sse(
        self,
        request: Request,
        response: Response,
        emit: Emit,
        *,
        resumable: bool = True,
        idle_seconds: float | None = None,
    ) -> tuple[bytes, dict[str, Any]]:
        state = _StreamState()
        answer: list[tuple[bytes, dict[str, Any]]] = []

        async def take(line: bytes, message: dict[str, Any]) -> bool:
            if _is_response(message) and (_id_matches(message, request.id) or message.get("id") is None):
                if not _id_matches(message, request.id):  # an error with id null
                    message = {**message, "id": request.id}
                    line = encode_message(message)
                answer.append((line, message))
                return True
            await emit(line, message)
            return False

        async with contextlib.AsyncExitStack() as streams:
            stream = response
            for attempt in range(MAX_RESUME_ATTEMPTS + 1):
                if attempt:
                    await anyio.sleep(state.retry_seconds if state.retry_seconds is not None else DEFAULT_RETRY_SECONDS)
                    log.info("resuming the response stream (try %d of %d)", attempt, MAX_RESUME_ATTEMPTS)
                    try:
                        with map_transport_errors(self._app):
                            url, headers, _ = await self._prepare_get(state)
                            stream = await streams.enter_async_context(self._exchange("GET", url, headers))
                    except AppUnreachableError as exc:
                        # The POST reached the app: nothing may relaunch it and send it again.
                        raise StreamClosedError(
                            f"{self._app} closed the response stream and could not be reached to resume it."
                        ) from exc
                    if stream.status_code != 200 or _media_type(stream) != _SSE:
                        break
                try:
                    with map_transport_errors(self._app):
                        if await self._relay_events(stream, state, take, idle_seconds):
                            return answer[0]
                except StreamClosedError:
                    if state.last_event_id is None or not resumable:
                        raise
                if state.last_event_id is None or not resumable:
                    break  # no event ids (or 2026-07-28): it cannot be resumed (SPEC-CHECKLIST items 41, 70)
        raise StreamClosedError(f"{self._app} closed the response stream before sending the response.")

    async def _prepare_get(self, state: _StreamState) -> tuple[str, dict[str, str], _Sent]:
        url, headers, sent = await self._prepare(accept=_SSE)
        if state.last_event_id is not None:
            headers["Last-Event-ID"] = state.last_event_id
        return url, headers, sent

    async def _relay_events(
        self,
        response: Response,
        state: _StreamState,
        handle: Callable[[bytes, dict[str, Any]], Awaitable[bool]],
        idle_seconds: float | None = None,
    ) -> bool:
        """Hand each SSE event that carries a JSON-RPC message to ``handle(line, message)``
        (the stdout line and its value), in order, until ``handle`` returns ``True`` (it
        took the awaited response) or the stream ends.

        The body's chunks (``aiter_bytes``) go through :class:`bridge.sse.SSEDecoder`, which
        refuses an event larger than ``max_message_bytes`` while it arrives. With
        ``idle_seconds``, a complete event or a comment (a keep-alive) must arrive within
        that many seconds of the stream opening or of the last one handled: bytes that
        complete neither do not count, so a drip cannot hold a request for ever, while a
        long call that sends progress or keep-alives is never cut off. The time ``handle``
        takes (stdout) does not count either.

        After the response the stream is read on to its end for at most
        :data:`SSE_END_WAIT_SECONDS`, so that its connection can be reused; what arrives
        then is not relayed (as when the stream is closed at once) and no failure of it
        counts. One cancel scope serves the whole stream (one per read cost ~10 µs).

        Returns:
            ``True`` once ``handle`` took the response, ``False`` when the stream ended first.

        Raises:
            MessageTooLargeError: an event's data passes ``max_message_bytes``.
            UpstreamTimeoutError: ``idle_seconds`` passed without an event or a comment.
            BadUpstreamResponseError: an event that is not one JSON-RPC message.
            The transport's exceptions, for the caller to map.
        """
        decoder = sse.SSEDecoder(self._config.max_message_bytes, state.last_event_id or "")
        chunks = response.aiter_bytes()
        answered = False
        restart = idle_seconds is not None  # start the idle timer before the next read
        with anyio.CancelScope() as scope:
            try:
                while True:
                    if restart and idle_seconds is not None:
                        scope.deadline = anyio.current_time() + idle_seconds
                        restart = False
                    decoder.receive_data(await anext(chunks, b""))
                    while (event := decoder.next_event()) is not sse.NEED_DATA:
                        if event is sse.EOF:
                            self._note_retry(state, decoder.retry_ms)  # a retry in a last, unfinished event
                            if answered:
                                self._sse_end_misses = 0
                            return answered
                        if answered:
                            if isinstance(event, sse.Event) and not event.data_with_newline.isspace():
                                log.debug("a message after the response on its SSE stream was not relayed")
                                return True
                            continue
                        restart = idle_seconds is not None  # an event or a keep-alive
                        if event is sse.COMMENT:
                            continue
                        assert isinstance(event, sse.Event)
                        state.last_event_id = event.id or None
                        self._note_retry(state, event.retry_ms)
                        raw = event.data_with_newline
                        if event.event_type != "message" or not raw or raw.isspace():
                            continue  # priming events, event types MCP does not define
                        message = self._parse(raw)
                        if not isinstance(message, dict):
                            raise BadUpstreamResponseError(
                                f"{self._app} sent an SSE event that is not one JSON-RPC message."
                            )
                        scope.deadline = math.inf  # stdout's pace is not the app's silence
                        if await handle(to_wire_line(raw, message), message):
                            if self._sse_end_skips:
                                self._sse_end_skips -= 1
                                return True
                            answered, restart = True, False
                            scope.deadline = anyio.current_time() + SSE_END_WAIT_SECONDS
            except sse.EventTooLarge:
                if answered:
                    return True
                raise MessageTooLargeError(
                    f"{self._app} sent a message larger than the "
                    f"{self._config.max_message_bytes}-byte limit (--max-message-bytes)."
                ) from None
            except Exception as exc:
                if not answered:
                    raise
                log.debug("the SSE stream failed after its response: %s", str(exc) or type(exc).__name__)
                return True
        if answered:  # the stream did not end in time: wait less often for a while
            self._sse_end_skips = min(2 ** min(self._sse_end_misses, 6), SSE_END_SKIPS)
            self._sse_end_misses += 1
            return True
        raise UpstreamTimeoutError(
            f"{self._app} sent no complete SSE event or keep-alive within the request timeout; "
            "the request was abandoned."
        )

    def _note_retry(self, state: _StreamState, retry_ms: int | None) -> None:
        if retry_ms is not None:
            # Honoured, but bounded: a server cannot park a request for an hour, nor for
            # longer than the silence a request may wait (--request-timeout).
            state.retry_seconds = min(retry_ms / 1000, MAX_LISTEN_DELAY_SECONDS, self._config.request_timeout_seconds)

    def _parse(self, raw: bytes) -> Any:
        """Parse what the app sent; only JSON-RPC 2.0 objects may go on to stdout."""
        try:
            text = raw.decode("utf-8")
            if text.lstrip(" \t\r\n").startswith("\ufeff"):
                text = text.lstrip(" \t\r\n")[1:]  # a byte order mark (RFC 8259 §8.1 lets parsers ignore it)
            value = loads_strict(text)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise BadUpstreamResponseError(f"{self._app} sent a reply that is not valid UTF-8 JSON.") from None
        for message in value if isinstance(value, list) else [value]:
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                raise BadUpstreamResponseError(f"{self._app} sent JSON that is not a JSON-RPC 2.0 message.")
        return value

    # -- GET stream and DELETE -----------------------------------------------------------

    async def listen(self, emit: Emit) -> None:
        """Relay the server's GET stream (server-initiated messages) until cancelled.

        Reconnects with ``Last-Event-ID`` after the server's ``retry`` delay (default 1 s,
        growing ×1.5 up to 30 s while tries fail); gives up quietly on 405 (no stream
        offered) or after :data:`MAX_LISTEN_FAILURES` tries in a row that delivered nothing.
        Never raises for upstream failures: nothing about this stream goes to stdout.
        """
        state = _StreamState()
        failures = 0
        delay = DEFAULT_RETRY_SECONDS
        session = self.session_id
        delivered = False

        async def relay(line: bytes, message: dict[str, Any]) -> bool:
            nonlocal delivered
            delivered = True
            await emit(line, message)
            return False  # the GET stream carries no response to wait for

        while True:
            delivered = False
            if self.session_id != session:  # event ids belong to a session: a new one starts afresh
                state, session = _StreamState(), self.session_id
            try:
                url, headers, _ = await self._prepare_get(state)
                with map_transport_errors(self._app):
                    async with self._exchange("GET", url, headers, timeout=self._listen_timeout()) as response:
                        if response.status_code == 405:
                            log.debug("the app offers no GET stream (HTTP 405)")
                            return
                        if response.status_code != 200 or _media_type(response) != _SSE:
                            raise HTTPStatusError(
                                f"GET stream refused (HTTP {response.status_code})", response.status_code
                            )
                        log.debug("GET stream open")
                        await self._relay_events(response, state, relay)
            except UpstreamError as exc:
                log.info("GET stream: %s", exc.message)
            except Exception:  # never let the optional stream take the connection down
                log.exception("GET stream failed inside the bridge")
            failures = 0 if delivered else failures + 1
            if failures >= MAX_LISTEN_FAILURES:
                log.warning("GET stream: giving up after %d tries that delivered nothing", failures)
                return
            delay = DEFAULT_RETRY_SECONDS if delivered else min(delay * 1.5, MAX_LISTEN_DELAY_SECONDS)
            await anyio.sleep(state.retry_seconds if state.retry_seconds is not None else delay)

    def _listen_timeout(self) -> dict[str, float | None]:
        # The GET stream is idle for as long as the server has nothing to say: no read bound.
        return {**self._timeout, "read": None}

    async def terminate_session(self) -> None:
        """Best-effort ``DELETE`` of the MCP session, bounded by ``delete_timeout_seconds``.
        A 405 or any failure is ignored (SPEC-CHECKLIST item 47)."""
        if self.session_id is None or self._config.delete_timeout_seconds <= 0:
            return
        with anyio.move_on_after(self._config.delete_timeout_seconds):
            try:
                url, headers, _ = await self._prepare()
                async with self._exchange("DELETE", url, headers) as response:
                    log.debug("DELETE of the MCP session: HTTP %d", response.status_code)
            except Exception as exc:  # best effort: nothing may stop the exit
                log.debug("DELETE of the MCP session failed: %s", str(exc) or type(exc).__name__)
        self.session_id = None


_SESSION_GONE_WORDS = (b"not found", b"no valid", b"invalid", b"unknown", b"expired", b"terminated", b"missing")


def _says_session_unknown(body: bytes) -> bool:
    """Whether a 400's body says the session is unknown (SPEC-CHECKLIST D4), as some
    servers answer instead of 404: "session" next to "not found", "invalid", "expired"…"""
    text = body.lower()
    return b"session" in text and any(word in text for word in _SESSION_GONE_WORDS)


def _media_type(response: Response) -> str | None:
    value = response.headers.get("content-type")
    if value is None:
        return None
    return value.partition(";")[0].strip().lower() or None


def _is_response(value: Any) -> bool:
    return isinstance(value, dict) and "method" not in value and message_problem(value) is None


def _id_matches(message: dict[str, Any], request_id: Any) -> bool:
    value = message.get("id")
    return is_valid_id(value) and type(value) is type(request_id) and value == request_id


def _jsonrpc_error_in(raw: bytes) -> dict[str, Any] | None:
    try:
        value = loads_strict(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return error
    return None


def _is_visible_ascii(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(ch) <= 0x7E for ch in value)


def _short(session_id: str) -> str:
    """A session id shortened for logs (SPEC-CHECKLIST item 49: never log it whole)."""
    return session_id[:4] + "…" if len(session_id) > 4 else "…"
