"""Errors the bridge makes, and the one place they become JSON-RPC error objects.

Pure: imports only the standard library.

Hierarchy (every class says what happens after it is raised)::

    BridgeError
    ├── InboundError              what the AI client wrote on stdin was unusable
    │   ├── ParseError            -32700, id null
    │   ├── InvalidRequestError   -32600, the id if readable, else null
    │   └── LineTooLongError      -32600, the id if readable, else null
    ├── BridgeInternalError       -32603, reason "bridge_error": a failure inside the bridge
    ├── ShuttingDownError         -32603, reason "shutting_down": the bridge is exiting
    ├── NotConfiguredError        -32603, reason "not_configured": the bridge could not start
    ├── ToolFilteredError         -32602, reason "tool_filtered": the tool filter hides the tool
    └── UpstreamError             talking to the app failed: -32603, the request's id
        ├── AppUnreachableError       reason "app_unreachable"
        │   └── AppNotRunningError    the same, when nothing is configured to start the app
        ├── TlsFailedError            reason "tls_failed"
        ├── AppLaunchFailedError      reason "app_launch_failed"
        ├── AuthRejectedError         reason "auth_rejected"
        ├── UpstreamTimeoutError      reason "timeout"
        ├── HTTPStatusError           reason "http_status" (+ data.httpStatus)
        ├── BadUpstreamResponseError  reason "bad_upstream_response"
        ├── StreamClosedError         reason "stream_closed"
        ├── SessionLostError          reason "session_lost"
        ├── MessageTooLargeError      reason "message_too_large"
        ├── ListenerUnverifiedError   reason "listener_unverified"
        └── ProtocolEraError          reason "protocol_era"

Codes and the ``data`` shape are documented in docs/behaviour.md, "Errors". -32603 is used for every failure
between the bridge and the app because it is valid in every MCP revision: 2026-07-28 calls
-32000…-32019 legacy and reserves -32020…-32099 for the spec. Only JSON-RPC *requests* ever
get one of these as a reply; for a notification or a client response the error is logged
to stderr and nothing is written to stdout.

Messages are sentences a person can act on. They never contain a token, a secret or a full
session id: callers build them from the app's name, URL, HTTP status and timings only.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "REASONS",
    "BridgeError",
    "InboundError",
    "ParseError",
    "InvalidRequestError",
    "LineTooLongError",
    "UpstreamError",
    "AppUnreachableError",
    "AppNotRunningError",
    "AppLaunchFailedError",
    "AuthRejectedError",
    "UpstreamTimeoutError",
    "HTTPStatusError",
    "BadUpstreamResponseError",
    "StreamClosedError",
    "SessionLostError",
    "MessageTooLargeError",
    "ShuttingDownError",
    "NotConfiguredError",
    "ListenerUnverifiedError",
    "ProtocolEraError",
    "ToolFilteredError",
    "BridgeInternalError",
    "error_object",
    "error_response",
]

#: JSON-RPC 2.0: invalid JSON was received (or the line is not UTF-8).
PARSE_ERROR = -32700
#: JSON-RPC 2.0: the JSON sent is not a valid Request object.
INVALID_REQUEST = -32600
#: JSON-RPC 2.0: the method does not exist / is not available.
METHOD_NOT_FOUND = -32601
#: JSON-RPC 2.0: invalid method parameter(s); MCP's code for a ``tools/call`` of an unknown
#: tool (server/tools, "Error Handling").
INVALID_PARAMS = -32602
#: JSON-RPC 2.0: internal error. The bridge's code for every failure between it and the app.
INTERNAL_ERROR = -32603


class BridgeError(Exception):
    """Base class. Subclasses fix ``code`` and, for upstream errors, ``reason``.

    Args:
        message: the human sentence that becomes ``error.message`` on the wire.
    """

    #: JSON-RPC error code written on the wire.
    code: ClassVar[int] = INTERNAL_ERROR
    #: ``error.data.reason``; ``None`` for inbound errors, which carry no ``data``.
    reason: ClassVar[str | None] = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def data(self) -> dict[str, Any] | None:
        """Return ``error.data`` for the wire, or ``None`` for no ``data`` member."""
        if self.reason is None:
            return None
        return {"source": "bridge", "reason": self.reason}


class InboundError(BridgeError):
    """A stdin line could not be used. The bridge replies with ``request_id`` (``None`` when
    the id could not be read) and goes on with the next line.

    Args:
        message: the human sentence for ``error.message``.
        request_id: the line's ``id`` if it could be read, kept as sent; else ``None``.
    """

    def __init__(self, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class ParseError(InboundError):
    """The line is not UTF-8 or not JSON. Reply -32700 with ``id: null``; reading goes on."""

    code = PARSE_ERROR


class InvalidRequestError(InboundError):
    """The line is JSON but not a JSON-RPC 2.0 message (or is an empty batch). Reply -32600
    with the id if it could be read, else ``null``; reading goes on."""

    code = INVALID_REQUEST


class LineTooLongError(InboundError):
    """The line is longer than ``max_message_bytes``. It was discarded up to its newline
    without being buffered whole; reply -32600 with the id if it could be read from the
    start of the line, else ``null``; reading goes on."""

    code = INVALID_REQUEST


class UpstreamError(BridgeError):
    """The exchange with the app failed. A request gets -32603 with its own id; a
    notification or a client response only gets a log line. The bridge keeps serving.

    Args:
        message: the human sentence for ``error.message``.
        recoverable: whether the policy (``policy.py``) may try its recovery for this kind
            of error (refresh, relaunch, rebuild). ``False`` for an error raised by a
            recovery itself, or by a token source that failed: trying again cannot help.
    """

    reason = "upstream"

    def __init__(self, message: str, *, recoverable: bool = True) -> None:
        super().__init__(message)
        self.recoverable = recoverable


class AppUnreachableError(UpstreamError):
    """Nothing accepted the connection at the app's address (after any ensure_running)."""

    reason = "app_unreachable"


class AppNotRunningError(AppUnreachableError):
    """The app is not running and nothing is configured to start it (no ``--launch``, or
    a configuration that starts nothing, as ``check --client``'s tool listing): someone
    must start it. Not raised for an app that runs but could not be reached (a refused
    discovery file)."""


class TlsFailedError(UpstreamError):
    """The TLS handshake with an ``https://`` app failed (its certificate is not trusted,
    or not for this host); nothing was sent. Never recovered by starting the app."""

    reason = "tls_failed"


class AppLaunchFailedError(UpstreamError):
    """The app was not running and starting it failed or timed out."""

    reason = "app_launch_failed"


class AuthRejectedError(UpstreamError):
    """The app answered 401 and no fresh token made it accept the request, or no token
    could be obtained at all."""

    reason = "auth_rejected"

    def __init__(
        self, message: str, *, recoverable: bool = True, token_generation: int | None = None, reason_text: str = ""
    ) -> None:
        super().__init__(message, recoverable=recoverable)
        #: The token generation the rejected request used (see ``TokenStore``), if known.
        self.token_generation = token_generation
        #: For a token source that failed: why, without the surrounding sentence.
        self.reason_text = reason_text


class UpstreamTimeoutError(UpstreamError):
    """The app accepted nothing (connect) or sent nothing (read) within the configured bound.
    A request that may have reached the app is never re-sent."""

    reason = "timeout"


class HTTPStatusError(UpstreamError):
    """The app answered with an HTTP status the bridge cannot turn into a reply, and no
    JSON-RPC error in the body. ``data.httpStatus`` carries the status."""

    reason = "http_status"

    def __init__(self, message: str, http_status: int, *, retry_after_seconds: float | None = None) -> None:
        super().__init__(message, recoverable=False)
        self.http_status = http_status
        #: For a 429 or 503: the delay its ``Retry-After`` field asked for (seconds, RFC
        #: 9110 §10.2.3), or ``None`` when it sent none (``policy.forward_flow`` waits it, once).
        self.retry_after_seconds = retry_after_seconds

    def data(self) -> dict[str, Any]:
        return {"source": "bridge", "reason": self.reason, "httpStatus": self.http_status}


class BadUpstreamResponseError(UpstreamError):
    """The app's reply was not usable: wrong content type, not JSON, not JSON-RPC, or no
    response for the request (for example a 202 to a request)."""

    reason = "bad_upstream_response"


class StreamClosedError(UpstreamError):
    """The response stream broke or ended before the request's response arrived (and could
    not be resumed). Events already relayed stay relayed."""

    reason = "stream_closed"


class SessionLostError(UpstreamError):
    """The app no longer knows the MCP session (it was restarted) and it could not be
    rebuilt. The next request tries again."""

    reason = "session_lost"

    def __init__(self, message: str, *, recoverable: bool = True, session_generation: int | None = None) -> None:
        super().__init__(message, recoverable=recoverable)
        #: The session generation the failed request used (see ``McpSession``), if known.
        self.session_generation = session_generation


class MessageTooLargeError(UpstreamError):
    """A message from the app exceeds ``max_message_bytes``; it was not written to stdout."""

    reason = "message_too_large"


class ShuttingDownError(BridgeError):
    """The bridge is exiting (stdin closed or a signal) and the request had not completed
    within the grace period. Not an ``UpstreamError``: the app did nothing wrong, and no
    recovery applies. -32603 with the request's id."""

    reason = "shutting_down"


class NotConfiguredError(BridgeError):
    """The bridge's configuration is unusable (an option names an unset variable, say), and
    a client started it: every request is answered with the message instead of the bridge
    exiting at once, so the client shows why (``bridge/serve/startuperror.py``). -32603 with the
    request's id."""

    reason = "not_configured"


class ListenerUnverifiedError(UpstreamError):
    """The socket the bridge reached is not verified to be the app's (``bridge/app/listener.py``):
    another user's, not held by the discovery file's pid, or the OS would not say. The
    connection was closed before any byte (credential or request) was written. Not
    recoverable: starting the app cannot help while something else holds its port. The
    message says what listens there (uid or pid) and what was expected."""

    reason = "listener_unverified"
    #: Set for a check made before connecting (the auth route) that saw no listener at
    #: all: the app is most likely not running, which ``ensure_running`` may fix.
    nothing_listens: bool = False

    def __init__(self, message: str, *, recoverable: bool = False) -> None:
        super().__init__(message, recoverable=recoverable)


class ProtocolEraError(UpstreamError):
    """The app does not speak the MCP era the bridge needs from it (docs/behaviour.md,
    "Protocol eras"): under ``--protocol-era legacy`` it refused ``initialize``; under
    ``--protocol-era modern`` it refused ``server/discover``. Not recoverable: the next
    request meets the same app. The message names the option and the fix
    (``--protocol-era auto``)."""

    reason = "protocol_era"

    def __init__(self, message: str, *, recoverable: bool = False) -> None:
        super().__init__(message, recoverable=recoverable)


class ToolFilteredError(BridgeError):
    """A ``tools/call`` of a tool the tool filter hides (``--deny-tool``, ``--allow-tool``,
    ``--read-only``; ``bridge/core/toolfilter.py``): it is never sent to the app. -32602,
    MCP's code for an unknown tool (server/tools, "Error Handling"): the client was never
    shown it. ``data.option`` names the option that hid it.

    Args:
        message: the sentence for ``error.message`` (names the tool and the option).
        option: the option that hid the tool, as a user writes it.
    """

    code = INVALID_PARAMS
    reason = "tool_filtered"

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option

    def data(self) -> dict[str, Any]:
        return {"source": "bridge", "reason": self.reason, "option": self.option}


class BridgeInternalError(BridgeError):
    """A failure inside the bridge itself, not the app's: a bug, or a request the bridge
    cannot encode (one of its own header values). -32603 with the request's id; nothing is
    retried, the failure is logged, and the bridge goes on with the next message."""

    reason = "bridge_error"


def error_object(exc: BridgeError) -> dict[str, Any]:
    """Return the JSON-RPC ``error`` member for ``exc``: ``{"code", "message"[, "data"]}``."""
    obj: dict[str, Any] = {"code": exc.code, "message": exc.message}
    data = exc.data()
    if data is not None:
        obj["data"] = data
    return obj


def error_response(request_id: Any, exc: BridgeError) -> dict[str, Any]:
    """Return a whole JSON-RPC error response for ``request_id`` (kept as given: same JSON
    type and value; ``None`` for an unreadable id)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error_object(exc)}


#: Every ``data.reason`` the bridge can send (``bridge_error`` last), as docs/behaviour.md's
#: error table lists them.
_REASON_CLASSES: list[type[BridgeError]] = [
    *UpstreamError.__subclasses__(),
    ShuttingDownError,
    NotConfiguredError,
    ToolFilteredError,
    BridgeInternalError,
]
REASONS: tuple[str, ...] = tuple(str(cls.reason) for cls in _REASON_CLASSES)
