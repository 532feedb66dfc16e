"""What one HTTP request to the app carries: its URL and headers, and what they said.

MCP Streamable HTTP (2025-03-26 … 2025-11-25, basic/transports, "Sending Messages to the Server"):
every POST carries ``Content-Type: application/json`` and
``Accept: application/json, text/event-stream``; ``Mcp-Session-Id`` once the server
assigned one on a successful ``initialize``; ``MCP-Protocol-Version`` once negotiated (left
off ``initialize`` itself); ``Authorization: Bearer`` when a token is configured. A GET
(the server's stream, or a resume) accepts ``text/event-stream`` and names the last event
id it saw (``Last-Event-ID``, WHATWG SSE "Last-Event-ID"). A 2026-07-28 request carries the
headers its era gives instead of the session's.

:class:`Sent` records what a request carried (which token, which session), so that the
recovery policy can tell a stale token or session from a current one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .._version import __version__
from ..app.discovery import DiscoveryError, Endpoint
from ..app.tokens import TokenContext
from ..core.config import BridgeConfig
from ..core.errors import AppUnreachableError
from ..transport.base import HttpResponse

if TYPE_CHECKING:  # (a start before the serving loop builds headers without asyncio: bridge/serve/appstart.py)
    from ..app.tokenstore import TokenStore
    from .mcpsession import McpSession

__all__ = [
    "JSON_MEDIA_TYPE",
    "SSE_MEDIA_TYPE",
    "USER_AGENT",
    "AuthClientSource",
    "RequestHeaders",
    "Sent",
    "StreamState",
    "media_type",
    "request_headers",
]

JSON_MEDIA_TYPE = "application/json"
SSE_MEDIA_TYPE = "text/event-stream"
USER_AGENT = f"mcp-app-bridge/{__version__}"


def media_type(response: HttpResponse) -> str | None:
    """The response's media type, lower case and without parameters; ``None`` if it has none."""
    value = response.headers.get("content-type")
    if value is None:
        return None
    return value.partition(";")[0].strip().lower() or None


def request_headers(config: BridgeConfig, token: str | None, *, accept: str = f"{JSON_MEDIA_TYPE}, {SSE_MEDIA_TYPE}") -> dict[str, str]:
    """The headers every request to the app starts with, in order: the configured extra
    ``headers``, ``User-Agent``, ``Accept`` and ``Authorization: Bearer`` when ``token`` is
    one (no session headers: :meth:`RequestHeaders.prepare` adds those)."""
    headers = dict(config.headers)
    headers["User-Agent"] = USER_AGENT
    headers["Accept"] = accept
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


class Sent:
    """What one HTTP request carried, for deciding a recovery (see ``core/policy.py``).
    (Plain classes here and below: one per request, and a dataclass costs 0.2-0.4 ms of
    every start.)"""

    __slots__ = ("token_generation", "had_token", "session_generation")

    def __init__(self, token_generation: int, had_token: bool = False, session_generation: int | None = None) -> None:
        self.token_generation = token_generation
        self.had_token = had_token
        self.session_generation = session_generation


class StreamState:
    """What an SSE stream told us about resuming it: the last event id and the server's
    ``retry`` (seconds), both ``None`` until the stream names them."""

    __slots__ = ("last_event_id", "retry_seconds")

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry_seconds: float | None = None


class AuthClientSource(Protocol):
    """POSTs JSON to the app's auth route (``bridge.transport.AuthRouteClient``), for
    ``TokenContext.post_json``."""

    async def post_json(self, url: str, body: object) -> tuple[int, bytes]: ...


class RequestHeaders:
    """Builds each request's URL and headers from the endpoint, the token store and the MCP
    session.

    Args:
        config: the run's configuration (extra headers, the app's name).
        endpoint: where the app listens; read for every request (a discovery file may change).
        tokens: the bearer token store (may hold no source: no ``Authorization``).
        session: the MCP session whose id and version go on every request after ``initialize``.
        auth_client: what token sources POST to the app's auth route through (it checks
            each of its ``http://`` connections itself before sending).
        verify_address: a look at who listens on ``(host, port)``, offered to token sources
            as ``TokenContext.verify_listener``; ``None`` when the check is off.
    """

    def __init__(
        self,
        config: BridgeConfig,
        *,
        endpoint: Endpoint,
        tokens: TokenStore,
        session: McpSession,
        auth_client: AuthClientSource,
        verify_address: Callable[[str, int], None] | None,
    ) -> None:
        self._config = config
        self._endpoint = endpoint
        self._tokens = tokens
        self._session = session
        self._auth_client = auth_client
        self._verify_address = verify_address
        self._app = config.app_name

    def token_context(self, base_url: str | None = None) -> TokenContext:
        """What a token source gets: the endpoint (``base_url``, else the current one if
        known) and the auth client's ``post_json``."""
        if base_url is None:
            try:
                base_url = self._endpoint.url()
            except DiscoveryError:
                base_url = ""
        return TokenContext(base_url=base_url, post_json=self._auth_client.post_json, verify_listener=self._verify_address)

    async def prepare(
        self,
        *,
        for_initialize: bool = False,
        accept: str = f"{JSON_MEDIA_TYPE}, {SSE_MEDIA_TYPE}",
        modern_headers: dict[str, str] | None = None,
        during_rebuild: bool = False,
    ) -> tuple[str, dict[str, str], Sent]:
        """The URL, the headers and what they carried, for one HTTP request.

        ``modern_headers`` (a 2026-07-28 request) replace the session's id and version.
        ``during_rebuild``: a message of the rebuild itself, which must not wait for it.
        Any other message that carries the session waits while a rebuild runs (see
        ``McpSession.rebuilding``); nothing awaits between that check and the headers below,
        so the id, version and generation it sends are one consistent snapshot.

        Raises:
            AppUnreachableError: the discovery file is missing (recoverable: the app may be
                started) or unusable (not recoverable).
            AuthRejectedError: the token source failed.
        """
        while True:
            try:
                url = self._endpoint.url()
            except DiscoveryError as exc:
                if exc.missing:
                    raise AppUnreachableError(f"{self._app} is not running ({exc}).") from None
                raise AppUnreachableError(f"{self._app} cannot be reached: {exc}.", recoverable=False) from None
            token, token_generation = await self._tokens.current(self.token_context(url))
            if for_initialize or modern_headers is not None or during_rebuild or self._session.ready:
                break
            await self._session.wait_ready()  # then read the endpoint and token again: they may have changed
        headers = request_headers(self._config, token, accept=accept)
        sent = Sent(token_generation=token_generation, had_token=bool(token))
        if modern_headers is not None:
            headers.update(modern_headers)
        elif not for_initialize:
            session = self._session
            if session.id is not None:
                headers["Mcp-Session-Id"] = session.id
                sent.session_generation = session.generation
            if session.protocol_version is not None:
                headers["MCP-Protocol-Version"] = session.protocol_version
        return url, headers, sent

    async def prepare_post(
        self, *, for_initialize: bool = False, modern_headers: dict[str, str] | None = None, during_rebuild: bool = False
    ) -> tuple[str, dict[str, str], Sent]:
        """:meth:`prepare` for a POST: adds ``Content-Type: application/json``."""
        url, headers, sent = await self.prepare(
            for_initialize=for_initialize, modern_headers=modern_headers, during_rebuild=during_rebuild
        )
        headers["Content-Type"] = JSON_MEDIA_TYPE
        return url, headers, sent

    async def prepare_get(self, state: StreamState) -> tuple[str, dict[str, str], Sent]:
        """:meth:`prepare` for a GET of the server's stream: ``Accept: text/event-stream`` and
        ``Last-Event-ID`` when ``state`` has one."""
        url, headers, sent = await self.prepare(accept=SSE_MEDIA_TYPE)
        if state.last_event_id is not None:
            headers["Last-Event-ID"] = state.last_event_id
        return url, headers, sent
