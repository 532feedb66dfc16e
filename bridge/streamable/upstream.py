"""The app side: MCP Streamable HTTP over one transport to the app.

This module owns the requests: the POSTs of requests and messages, the status handling, the
GET stream's opening and the session's DELETE; it adopts each ``initialize`` result into the
MCP session (``mcpsession.py``). Each request's URL and headers come from ``headers.py``,
its reply is read by ``replies.py``, a non-2xx status by ``failures.StatusCheck``, and the
GET stream's reconnects are ``listen.py``'s. The transport, the listener check and the auth
client are given by the composition root (``bridge/serve/parts.py``). Everything this
module returns to the loop is already a stdout line (UTF-8 bytes ending in ``\\n``).

Transport rules followed (MCP 2025-03-26 … 2025-11-25, basic/transports "Streamable HTTP"):

- every message is its own POST (headers: ``headers.py``);
- a request's reply is ``application/json`` or ``text/event-stream`` (``replies.py``); a
  stream that ends early is resumed by GET with ``Last-Event-ID`` (at most
  :data:`MAX_RESUME_ATTEMPTS` times) when the server gave event ids, otherwise the request
  gets reason ``stream_closed``;
- the optional GET stream (server-initiated messages) is opened by :meth:`Upstream.listen`;
  405 means the server offers none;
- no proxies from the environment, no redirects (the token must not travel), no cookies.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..app.discovery import Endpoint
from ..app.tokens import TokenContext
from ..app.tokenstore import TokenStore
from ..core.config import BridgeConfig
from ..core.errors import BadUpstreamResponseError, HTTPStatusError
from ..core.jsonrpc import Request
from ..system.cancelscope import move_on_after
from ..transport.base import HttpResponse, Transport
from .failures import TRANSPORT_ERRORS, StatusCheck, map_transport_errors
from .headers import JSON_MEDIA_TYPE, SSE_MEDIA_TYPE, AuthClientSource, RequestHeaders, StreamState, media_type
from .listen import listen
from .mcpsession import McpSession
from .replies import MAX_RESUME_ATTEMPTS, Emit, ReplyReader

if TYPE_CHECKING:
    from ..app.listener import ListenerCheck

__all__ = ["Upstream", "map_transport_errors", "TRANSPORT_ERRORS", "Emit", "MAX_RESUME_ATTEMPTS"]

log = logging.getLogger("bridge.upstream")



class AuthClient(AuthClientSource, Protocol):
    """The auth route's client, which the ``Upstream`` closes with itself."""

    async def aclose(self) -> None: ...


class Upstream:
    """One MCP connection to the app: requests over one transport, and the MCP session.

    Args:
        config: the run's configuration (headers, timeouts, caps, app name).
        endpoint: where the app listens (a fixed URL or its discovery file).
        tokens: the bearer token store (may hold no source: no authentication).
        transport: the transport to the app (``bridge.transport.byscheme.ByScheme``), which
            verifies each new connection where that applies; closed by :meth:`aclose`.
        listener_check: the listener check (``bridge/app/listener.py``), offered to token
            sources as a look at an address (the auth client checks its own connections), or
            ``None`` when it is off or there is no socket to check.
        auth_client: the client for token sources that talk to the app's auth route
            (``bridge.transport.AuthRouteClient``); closed by :meth:`aclose`.

    Attributes:
        session: the MCP session (``mcpsession.py``): its id, version, capabilities and
            generation, and the rebuild gate. This object adopts an ``initialize`` result
            into it and forgets it after the ``DELETE``.
        listener_check: as given.
    """

    def __init__(
        self,
        config: BridgeConfig,
        *,
        endpoint: Endpoint,
        tokens: TokenStore,
        transport: Transport,
        listener_check: ListenerCheck | None,
        auth_client: AuthClient,
    ) -> None:
        self._config = config
        self._endpoint = endpoint
        self._tokens = tokens
        self._app = config.app_name
        self._transport = transport
        self._auth_client = auth_client
        self.listener_check = listener_check
        timeout = config.request_timeout_seconds
        self._read_timeout_seconds: float | None = timeout
        self.session = McpSession()
        self._headers = RequestHeaders(
            config,
            endpoint=endpoint,
            tokens=tokens,
            session=self.session,
            auth_client=auth_client,
            verify_address=listener_check.verify_address if listener_check is not None else None,
        )
        self._replies = ReplyReader(config, prepare_get=self._headers.prepare_get, exchange=self._exchange)
        self._statuses = StatusCheck(
            config,
            read_body=self._replies.read_body,
            token_context=self._headers.token_context,
            token_source=tokens.source_description if tokens.has_source else None,
        )

    @property
    def app_name(self) -> str:
        """The app's name, for messages."""
        return self._app

    @property
    def session_id(self) -> str | None:
        """The current MCP session's id (``None`` before ``initialize``)."""
        return self.session.id

    async def aclose(self) -> None:
        """Close the connections this object's transport and auth client opened (an
        injected test transport stays open)."""
        await self._transport.aclose()
        await self._auth_client.aclose()

    async def refresh_token(self, used_generation: int | None) -> None:
        """Re-read the discovery file and replace the token rejected with a 401: the one of
        ``used_generation`` (``None``: the one current now).

        Raises:
            AuthRejectedError: (not recoverable) the token source failed.
        """
        self._endpoint.reload()
        generation = self._tokens.generation if used_generation is None else used_generation
        await self._tokens.refresh(self.token_context(), generation)

    def token_context(self) -> TokenContext:
        """What a token source gets: the current endpoint (if known) and the auth client."""
        return self._headers.token_context()

    def _exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes | None = None,
        *,
        endless: bool = False,
        bounded: bool = True,
    ) -> _OpenExchange:
        """One HTTP exchange, as ``async with``: the response once its head arrived; it is
        closed (its connection freed) on exit. Reads are bounded by the request timeout,
        or not at all when ``endless``."""
        return _OpenExchange(
            self._transport.request(
                method,
                url,
                headers.items(),
                content,
                read_timeout_seconds=None if endless else self._read_timeout_seconds,
                bounded=bounded,
            )
        )

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
            modern_headers: for a 2026-07-28 request, its headers (``bridge/core/era.py``); no
                session header is sent and a broken stream is not resumed.
            endless: no read timeout (``subscriptions/listen`` stays open for as long as
                the client listens).

        Returns:
            the response line (its id is the request's, same type and value).

        Raises:
            UpstreamError: one subclass per reason (docs/behaviour.md, "Errors"). Nothing is retried here.
        """
        initialize = request.method == "initialize"
        url, headers, sent = await self._headers.prepare_post(for_initialize=initialize, modern_headers=modern_headers)
        with map_transport_errors(self._app):
            async with self._exchange("POST", url, headers, request.body, endless=endless) as response:
                status = response.status_code
                if not 200 <= status < 300:
                    return await self._statuses.error_status(request, response, sent)
                kind = media_type(response)
                if status in (202, 204) or (kind is None and status == 200):
                    raise BadUpstreamResponseError(
                        f"{self._app} accepted the request (HTTP {status}) but sent no response for it."
                    )
                if kind == JSON_MEDIA_TYPE:
                    raw = await self._replies.read_body(
                        response,
                        self._config.max_message_bytes,
                        line_end=True,
                        timeout_seconds=None if endless else self._read_timeout_seconds,
                    )
                    extras: list[tuple[bytes, Any]] = []
                    line, message = self._replies.answer_from_json(request, raw, extras)
                    for extra, item in extras:
                        await emit(extra, item)
                elif kind == SSE_MEDIA_TYPE:
                    line, message = await self._replies.answer_from_sse(
                        request, response, emit, resumable=request.era.resumable,
                        idle_seconds=None if endless else self._config.request_timeout_seconds,
                    )
                else:
                    raise BadUpstreamResponseError(
                        f"{self._app} answered with content type {kind!r}, "
                        "which is neither application/json nor text/event-stream."
                    )
                if initialize:
                    self.session.adopt(message.get("result"), response.headers)
                return line

    async def send_message(self, body: bytes, what: str, *, during_rebuild: bool = False) -> None:
        """POST a notification or a client response; any 2xx is success (usually 202).

        ``during_rebuild``: the rebuild's own ``notifications/initialized`` (it must not
        wait for the rebuild it belongs to).

        Raises:
            UpstreamError: on a non-2xx status or a transport failure. The caller logs it;
                nothing is ever written to stdout for these messages.
        """
        url, headers, sent = await self._headers.prepare_post(during_rebuild=during_rebuild)
        with map_transport_errors(self._app):
            # Not bounded by the pool: a notifications/cancelled must not wait for a
            # connection held by the very call it cancels.
            async with self._exchange("POST", url, headers, body, bounded=False) as response:
                if 200 <= response.status_code < 300:
                    return
                await self._statuses.check_status(response, sent)
        raise HTTPStatusError(f"{self._app} refused the {what} (HTTP {response.status_code}).", response.status_code)

    # -- GET stream and DELETE -----------------------------------------------------------

    async def listen(self, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
        """Relay the server's GET stream (server-initiated messages) until cancelled; never
        raises for upstream failures (``listen.py``: its reconnects and backoff). ``on_open``
        is called once, when the first GET has its answer (open, refused) or failed."""
        await listen(self, emit, on_open=on_open)

    @contextlib.asynccontextmanager
    async def open_get(self, state: StreamState) -> AsyncIterator[HttpResponse]:
        """GET the server's stream (``listen.GetStream``); no read bound: the stream is idle
        for as long as the server has nothing to say."""
        url, headers, _ = await self._headers.prepare_get(state)
        async with self._exchange("GET", url, headers, endless=True) as response:
            yield response

    async def relay_events(
        self, response: HttpResponse, state: StreamState, relay: Callable[[bytes, dict[str, Any]], Awaitable[bool]]
    ) -> bool:
        """Relay an SSE stream's messages to ``relay`` (``ReplyReader.relay_events``)."""
        return await self._replies.relay_events(response, state, relay)

    async def terminate_session(self, timeout_seconds: float | None = None) -> None:
        """Best-effort ``DELETE`` of the MCP session, bounded by ``delete_timeout_seconds``
        or ``timeout_seconds`` (seconds), whichever is shorter; 0 or less: no ``DELETE``.
        A 405 or any failure is ignored (MCP basic/transports, "Session Management": the server
        may answer 405)."""
        bound = self._config.delete_timeout_seconds
        if timeout_seconds is not None:
            bound = min(bound, timeout_seconds)
        if self.session.id is None:
            return
        if bound <= 0:
            log.debug("no DELETE of the MCP session: no time left before the exit")
            self.session.forget()
            return
        with move_on_after(bound) as scope:
            try:
                url, headers, _ = await self._headers.prepare()
                async with self._exchange("DELETE", url, headers) as response:
                    log.debug("DELETE of the MCP session: HTTP %d", response.status_code)
            except Exception as exc:  # best effort: nothing may stop the exit
                log.debug("DELETE of the MCP session failed: %s", str(exc) or type(exc).__name__)
        if scope.cancelled_caught:
            log.debug("DELETE of the MCP session given up after %.3g s (the exit comes first)", bound)
        self.session.forget()


class _OpenExchange:
    """``async with`` around one ``Transport.request``: the response on entry, closed on
    exit. (A class, not ``@contextlib.asynccontextmanager``: it wraps every request, and
    an async generator context manager costs a few µs each time.)"""

    __slots__ = ("_sending", "_response")

    def __init__(self, sending: Awaitable[HttpResponse]) -> None:
        self._sending = sending
        self._response: HttpResponse | None = None

    async def __aenter__(self) -> HttpResponse:
        self._response = await self._sending
        return self._response

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._response is not None
        await self._response.aclose()
