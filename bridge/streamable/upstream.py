"""The app side: MCP Streamable HTTP over long-lived keep-alive connections.

One :class:`~bridge.transport.base.Transport`, chosen once by URL scheme
(:func:`bridge.transport.make_transport`): the bridge's own HTTP/1.1 pool for ``http://``
endpoints, which is how desktop apps listen on loopback, httpx for ``https://`` ones, or
the transport a test injects (``exchange.py``). Transport exceptions become the bridge's
errors in one table (:func:`map_transport_errors`, ``upstream_errors.py``, re-exported
here). Everything this module returns to the session loop is already a stdout line (UTF-8
bytes ending in ``\\n``).

Split by noun (issue 11): this module owns the requests (construction, headers, POSTs,
status handling) and the MCP session's state with its rebuild gate; ``replies.py`` reads
the replies (JSON, SSE with its resume, bodies); ``listen.py`` runs the GET stream;
``exchange.py`` holds the transport and its swap by scheme.

Transport rules followed (MCP 2025-03-26 … 2025-11-25, basic/transports "Streamable HTTP";
SPEC-CHECKLIST items 28–55):

- every message is its own POST with ``Content-Type: application/json`` and
  ``Accept: application/json, text/event-stream``; ``Mcp-Session-Id`` once the server
  assigned one on a successful ``initialize``; ``MCP-Protocol-Version`` once negotiated
  (left off ``initialize`` itself); ``Authorization: Bearer`` when a token is configured;
- a request's reply is ``application/json`` or ``text/event-stream`` (``replies.py``); a
  stream that ends early is resumed by GET with ``Last-Event-ID`` (at most
  :data:`MAX_RESUME_ATTEMPTS` times) when the server gave event ids, otherwise the request
  gets reason ``stream_closed``;
- the optional GET stream (server-initiated messages) is opened by :meth:`Upstream.listen`;
  405 means the server offers none;
- no proxies from the environment, no redirects (the token must not travel), no cookies.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from .._version import __version__
from ..app.discovery import DiscoveryError, Endpoint
from ..app.tokens import TokenContext
from ..app.tokenstore import TokenStore
from ..core.config import BridgeConfig
from ..core.errors import AppUnreachableError, BadUpstreamResponseError, HTTPStatusError
from ..core.jsonrpc import Request
from ..transport.byscheme import AppTransport
from .failures import TRANSPORT_ERRORS, StatusCheck, map_transport_errors
from .listen import listen
from .mcpsession import McpSession
from .replies import _JSON, _SSE, MAX_RESUME_ATTEMPTS, Emit, ReplyReader, _media_type, _StreamState

if TYPE_CHECKING:
    import httpx

    from ..app.listener import ListenerCheck

__all__ = ["Upstream", "map_transport_errors", "TRANSPORT_ERRORS", "Emit", "MAX_RESUME_ATTEMPTS"]

log = logging.getLogger("bridge.upstream")

_USER_AGENT = f"mcp-app-bridge/{__version__}"


@dataclass
class _Sent:
    """What one HTTP request carried, for deciding a recovery (see ``policy.py``)."""

    token_generation: int
    had_token: bool = False
    session_generation: int | None = None


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
        session: the MCP session (``bridge/mcpsession.py``): its id, version, capabilities
            and generation, and the rebuild gate. This object adopts an ``initialize``
            result into it and forgets it after the ``DELETE``.
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
            from ..app.listener import ListenerCheck

            self.listener_check = ListenerCheck(endpoint.listener_pid, app_name=config.app_name)
        if verify_connection is None and self.listener_check is not None:
            self._verify_connection = self.listener_check.verify_socket
        # The one transport to the app (exchange.py), its exchange bound once here: the
        # per-request path calls it as it called this class's own method.
        self._transport = AppTransport(
            config, injected=transport, verify_connection=self._verify_connection, timeout=self._timeout
        )
        self._exchange = self._transport.exchange
        self._client: httpx.AsyncClient | None = None
        self.session = McpSession()
        # Reading replies (replies.py): its methods bound once here, so that the per-request
        # path calls them as it called this class's own, with the same arguments.
        reader = ReplyReader(config, prepare_get=self._prepare_get, exchange=self._exchange)
        self._read_body = reader.read_body
        self._answer_from_json = reader.answer_from_json
        self._answer_from_sse = reader.answer_from_sse
        self._relay_events = reader.relay_events
        statuses = StatusCheck(config, read_body=self._read_body, token_context=self.token_context)
        self._check_status = statuses.check_status
        self._error_status = statuses.error_status

    @property
    def client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` for token sources that talk to the app (its auth route):
        no proxies from the environment, no redirects; its failures arrive as the bridge's
        ``TransportError`` subclasses. Built (and httpx imported) on first use."""
        if self._client is None:
            from ..transport.httpx_adapter import auth_client

            inner = self._injected if hasattr(self._injected, "handle_async_request") else None
            self._client = auth_client(inner, timeout_seconds=self._config.token_timeout_seconds)
        return self._client

    async def aclose(self) -> None:
        """Close the connections this object opened (an injected transport stays open)."""
        await self._transport.aclose()
        if self._client is not None:
            await self._client.aclose()

    async def refresh_token(self, used_generation: int | None) -> None:
        """Re-read the discovery file and replace the token rejected with a 401: the one of
        ``used_generation`` (``None``: the one current now).

        Raises:
            AuthRejectedError: (not recoverable) the token source failed.
        """
        self._endpoint.reload()
        generation = self._tokens.generation if used_generation is None else used_generation
        await self._tokens.refresh(self.token_context(), generation)

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
        ``McpSession.rebuilding``); nothing awaits between that check and the headers below,
        so the id, version and generation it sends are one consistent snapshot."""
        while True:
            try:
                url = self._endpoint.url()
            except DiscoveryError as exc:
                if exc.missing:
                    raise AppUnreachableError(f"{self._app} is not running ({exc}).") from None
                raise AppUnreachableError(f"{self._app} cannot be reached: {exc}.", recoverable=False) from None
            token, token_generation = await self._tokens.current(TokenContext(base_url=url, http_client_factory=lambda: self.client, verify_listener=self._verify_address))
            if for_initialize or modern_headers is not None or during_rebuild or self.session.ready:
                break
            await self.session.wait_ready()  # then read the endpoint and token again: they may have changed
        headers = dict(self._config.headers)
        headers["User-Agent"] = _USER_AGENT
        headers["Accept"] = accept
        if token:
            headers["Authorization"] = f"Bearer {token}"
        sent = _Sent(token_generation=token_generation, had_token=bool(token))
        if modern_headers is not None:
            headers.update(modern_headers)
        elif not for_initialize:
            session = self.session
            if session.id is not None:
                headers["Mcp-Session-Id"] = session.id
                sent.session_generation = session.generation
            if session.protocol_version is not None:
                headers["MCP-Protocol-Version"] = session.protocol_version
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
            modern_headers: for a 2026-07-28 request, its headers (``era.py``); no
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
                        request, response, emit, resumable=request.era.resumable,
                        idle_seconds=None if endless else self._config.request_timeout_seconds,
                    )
                else:
                    raise BadUpstreamResponseError(
                        f"{self._app} answered with content type {media_type!r}, "
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
        url, headers, sent = await self._prepare_post(during_rebuild=during_rebuild)
        with map_transport_errors(self._app):
            # Not bounded by the pool: a notifications/cancelled must not wait for a
            # connection held by the very call it cancels.
            async with self._exchange("POST", url, headers, body, bounded=False) as response:
                if 200 <= response.status_code < 300:
                    return
                await self._check_status(response, sent)
        raise HTTPStatusError(f"{self._app} refused the {what} (HTTP {response.status_code}).", response.status_code)

    async def _prepare_get(self, state: _StreamState) -> tuple[str, dict[str, str], _Sent]:
        url, headers, sent = await self._prepare(accept=_SSE)
        if state.last_event_id is not None:
            headers["Last-Event-ID"] = state.last_event_id
        return url, headers, sent

    # -- GET stream and DELETE -----------------------------------------------------------

    async def listen(self, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
        """Relay the server's GET stream (server-initiated messages) until cancelled; never
        raises for upstream failures (``listen.py``: its reconnects and backoff). ``on_open``
        is called once, when the first GET has its answer (open, refused) or failed."""
        await listen(self, emit, on_open=on_open)

    def _listen_timeout(self) -> dict[str, float | None]:
        # The GET stream is idle for as long as the server has nothing to say: no read bound.
        return {**self._timeout, "read": None}

    async def terminate_session(self) -> None:
        """Best-effort ``DELETE`` of the MCP session, bounded by ``delete_timeout_seconds``.
        A 405 or any failure is ignored (SPEC-CHECKLIST item 47)."""
        if self.session.id is None or self._config.delete_timeout_seconds <= 0:
            return
        with anyio.move_on_after(self._config.delete_timeout_seconds):
            try:
                url, headers, _ = await self._prepare()
                async with self._exchange("DELETE", url, headers) as response:
                    log.debug("DELETE of the MCP session: HTTP %d", response.status_code)
            except Exception as exc:  # best effort: nothing may stop the exit
                log.debug("DELETE of the MCP session failed: %s", str(exc) or type(exc).__name__)
        self.session.forget()
