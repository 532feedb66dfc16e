"""The one table from the transport's failures to the bridge's errors.

Split out of ``upstream.py`` (issue 11), which re-exports both names: every part of the
exchange with the app (``upstream.py``'s POSTs, ``replies.py``'s SSE resume loop,
``listen.py``'s GET stream) maps transport exceptions with it, so it sits below all three
and none of them imports another's module in a cycle. It is still the only place that
turns a ``TransportError`` into a ``BridgeError`` (ARCHITECTURE §5: one dict).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from .errors import (
    AppUnreachableError,
    BadUpstreamResponseError,
    BridgeError,
    BridgeInternalError,
    StreamClosedError,
    UpstreamTimeoutError,
)
from .transport.base import (
    ConnectFailed,
    ConnectionBroken,
    ConnectTimeout,
    LocalProtocolError,
    PoolTimeout,
    ProtocolViolation,
    ReadTimeout,
    TransportError,
    WriteTimeout,
)

__all__ = ["TRANSPORT_ERRORS", "map_transport_errors"]

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
