"""What the app's failures become: the one ``TransportError`` table, and HTTP error statuses.

Every part of the exchange with the app (``upstream.py``'s POSTs, ``replies.py``'s SSE
resume loop, ``listen.py``'s GET stream) maps transport exceptions with the one table
(:data:`TRANSPORT_ERRORS`), the only place that turns a ``TransportError`` into a
``BridgeError``. :class:`StatusCheck` reads a non-2xx reply: the statuses the recovery
policy acts on (401, a lost session), the app's own JSON-RPC error, else ``HTTPStatusError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..core.config import BridgeConfig, in_sentence
from ..core.errors import (
    AppUnreachableError,
    AuthRejectedError,
    BadUpstreamResponseError,
    BridgeError,
    BridgeInternalError,
    HTTPStatusError,
    SessionLostError,
    StreamClosedError,
    TlsFailedError,
    UpstreamTimeoutError,
)
from ..core.jsonrpc import Request, encode_message, loads_strict
from ..transport.base import (
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

if TYPE_CHECKING:
    from ..app.tokens import TokenContext
    from .headers import Sent

__all__ = ["TRANSPORT_ERRORS", "map_transport_errors", "StatusCheck", "MAX_ERROR_BODY_BYTES"]

#: Error bodies are read only this far: they are for finding a JSON-RPC error, not for relaying.
MAX_ERROR_BODY_BYTES = 1024 * 1024

#: Each transport failure, and the bridge's error and sentence for it (``{app}``: the app's
#: name at the start of a sentence, ``{the_app}`` in its middle ("the app" for the default
#: name), ``{detail}``: the transport's message, which never holds a header value). The most
#: specific class wins; ``tests/transport/test_seam.py`` proves every ``TransportError`` class
#: is listed on purpose.
TRANSPORT_ERRORS: dict[type[TransportError], tuple[type[BridgeError], str]] = {
    ConnectFailed: (AppUnreachableError, "{app} is not running or not reachable: {detail}."),
    TlsFailed: (
        TlsFailedError,
        "The TLS handshake with {the_app} failed ({detail}); nothing was sent. For an app with a "
        "certificate of its own, set SSL_CERT_FILE to that certificate in the client's entry.",
    ),
    ConnectTimeout: (UpstreamTimeoutError, "{app} did not accept the connection in time."),
    PoolTimeout: (UpstreamTimeoutError, "No connection to {the_app} became free within the request timeout."),
    ReadTimeout: (UpstreamTimeoutError, "{app} did not answer within the request timeout ({detail}); the request was abandoned."),
    WriteTimeout: (UpstreamTimeoutError, "{app} did not take the request within the request timeout; it was abandoned."),
    ConnectionBroken: (StreamClosedError, "The connection to {the_app} broke before the response arrived: {detail}."),
    ProtocolViolation: (BadUpstreamResponseError, "{app} sent a reply that is not valid HTTP: {detail}."),
    LocalProtocolError: (BridgeInternalError, "The bridge could not encode its request to {the_app}: {detail}."),
    TransportError: (BadUpstreamResponseError, "The exchange with {the_app} failed: {detail}."),
}


class map_transport_errors:  # noqa: N801 (used as a function: ``with map_transport_errors(app):``)
    """Translate a ``TransportError`` raised inside the block into the bridge's error for
    it (:data:`TRANSPORT_ERRORS`, ``raise … from``). The message names the app, never a
    header value. A ``BridgeError`` and anything else pass through unchanged.

    (A class, not ``@contextlib.contextmanager``: it wraps every request, and a generator
    context manager costs a few µs each time.)
    """

    __slots__ = ("_app",)

    def __init__(self, app: str) -> None:
        self._app = app

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not isinstance(exc, TransportError):
            return
        for cls in type(exc).__mro__:
            entry = TRANSPORT_ERRORS.get(cls)
            if entry is not None:
                break
        else:  # pragma: no cover - TransportError itself is in the table
            return
        error, text = entry
        detail = str(exc) or type(exc).__name__
        raise error(text.format(app=self._app, the_app=in_sentence(self._app), detail=detail)) from exc


class StatusCheck:
    """Reads one ``Upstream``'s non-2xx replies: ``config`` gives the app's name and the
    400 heuristic's switch, ``read_body`` reads the (capped) error body, ``token_context``
    gives the endpoint's URL for the 404 message, ``token_source`` names where the token
    comes from in the 401 message (``"environment variable MYAPP_TOKEN"``, ``"token
    command"``: never the token; ``None``: no source)."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        read_body: Callable[..., Awaitable[bytes]],
        token_context: Callable[[], TokenContext],
        token_source: str | None = None,
    ) -> None:
        self._config = config
        self._app = config.app_name
        self._read_body = read_body
        self.token_context = token_context
        self._token_source = token_source

    async def check_status(self, response: HttpResponse, sent: Sent) -> bytes:
        """Raise for the statuses the recovery policy acts on; else return the (capped) body.

        401 → ``AuthRejectedError`` (refresh the token). 404 on a request that carried a
        session id → ``SessionLostError`` (rebuild the session), and so is a 400 whose body
        talks about the session, when ``session_400_heuristic`` is on (some servers, the
        reference server-everything among them, answer an unknown session id with 400, not 404).
        """
        status = response.status_code
        if status == 401:
            source = self._token_source
            if sent.had_token:
                text = f"{self._app} rejected the bridge's token (HTTP 401); check the token source"
                text += f": the {source}." if source else "."
            elif source:
                text = f"{self._app} requires a token (HTTP 401) and the {source} gave none; check it."
            else:
                text = f"{self._app} requires a token (HTTP 401) and the bridge had none to send; configure a token source."
            raise AuthRejectedError(text, token_generation=sent.token_generation)
        raw = await self._read_body(
            response, MAX_ERROR_BODY_BYTES, truncate=True, timeout_seconds=self._config.request_timeout_seconds
        )
        if sent.session_generation is not None and (
            status == 404 or (status == 400 and self._config.session_400_heuristic and _says_session_unknown(raw))
        ):
            raise SessionLostError(
                f"{self._app} no longer knows this MCP session (HTTP {status}); it was probably restarted.",
                session_generation=sent.session_generation,
            )
        return raw

    async def error_status(self, request: Request, response: HttpResponse, sent: Sent) -> bytes:
        status = response.status_code
        raw = await self.check_status(response, sent)
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


_SESSION_GONE_WORDS = (b"not found", b"no valid", b"invalid", b"unknown", b"expired", b"terminated", b"missing")


def _says_session_unknown(body: bytes) -> bool:
    """Whether a 400's body says the session is unknown (see ``check_status``), as some
    servers answer instead of 404: "session" next to "not found", "invalid", "expired"…"""
    text = body.lower()
    return b"session" in text and any(word in text for word in _SESSION_GONE_WORDS)


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
