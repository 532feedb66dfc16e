"""The optional GET stream: server-initiated messages, relayed until the session ends.

The stream's reconnect loop and its backoff. It works through a :class:`GetStream`
(``Upstream`` is one): the GET itself, the SSE relay and the session's id, so this module
never imports ``upstream.py``. Its log records use the ``bridge.upstream`` logger, as ``upstream.py``'s do.

MCP 2025-03-26 … 2025-11-25, basic/transports "Listening for Messages from the Server": the
client may GET the endpoint with ``Accept: text/event-stream``; 405 means the server offers
no such stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ..core.errors import HTTPStatusError, UpstreamError
from ..core.policy import GET_STREAM_BACKOFF, MAX_LISTEN_FAILURES  # the bound lives in the policy's table of retries
from ..transport.base import HttpResponse
from .failures import map_transport_errors
from .headers import SSE_MEDIA_TYPE, StreamState, media_type
from .replies import Emit

__all__ = ["GetStream", "listen", "MAX_LISTEN_FAILURES"]

log = logging.getLogger("bridge.upstream")


class GetStream(Protocol):
    """What :func:`listen` needs of the MCP connection (``Upstream`` provides it)."""

    @property
    def app_name(self) -> str:
        """The app's name, for messages."""
        ...

    @property
    def session_id(self) -> str | None:
        """The current MCP session's id: event ids belong to one session."""
        ...

    def open_get(self, state: StreamState) -> AbstractAsyncContextManager[HttpResponse]:
        """GET the endpoint for the server's stream (``Last-Event-ID`` from ``state``), with
        no read bound; the response is closed on exit. Raises ``TransportError`` or
        ``UpstreamError``."""
        ...

    def relay_events(
        self, response: HttpResponse, state: StreamState, relay: Callable[[bytes, dict[str, Any]], Awaitable[bool]]
    ) -> Awaitable[Any]:
        """Relay the stream's messages to ``relay`` until it ends (``ReplyReader.relay_events``)."""
        ...


async def listen(stream: GetStream, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
    """Relay the server's GET stream (server-initiated messages) until cancelled.

    Reconnects with ``Last-Event-ID`` after the server's ``retry`` delay (default 1 s,
    growing ×1.5 up to 30 s while tries fail); gives up quietly on 405 (no stream
    offered) or after :data:`MAX_LISTEN_FAILURES` tries in a row that delivered nothing.
    Never raises for upstream failures: nothing about this stream goes to stdout.
    ``on_open`` is called once, when the first GET has its status (open or refused) or failed.
    """
    state = StreamState()
    failures = 0
    session = stream.session_id
    delivered = False

    async def relay(line: bytes, message: dict[str, Any]) -> bool:
        nonlocal delivered
        delivered = True
        await emit(line, message)
        return False  # the GET stream carries no response to wait for

    while True:
        delivered = False
        if stream.session_id != session:  # event ids belong to a session: a new one starts afresh
            state, session = StreamState(), stream.session_id
        try:
            with map_transport_errors(stream.app_name):
                async with stream.open_get(state) as response:
                    if on_open is not None:
                        on_open()
                        on_open = None
                    if response.status_code == 405:
                        log.debug("the app offers no GET stream (HTTP 405)")
                        return
                    if response.status_code != 200 or media_type(response) != SSE_MEDIA_TYPE:
                        raise HTTPStatusError(
                            f"GET stream refused (HTTP {response.status_code})", response.status_code
                        )
                    log.debug("GET stream open")
                    await stream.relay_events(response, state, relay)
        except UpstreamError as exc:
            log.info("GET stream: %s", exc.message)
            if on_open is not None:
                on_open()
                on_open = None
        except Exception:  # never let the optional stream take the connection down
            log.exception("GET stream failed inside the bridge")
        failures = 0 if delivered else failures + 1
        if failures >= MAX_LISTEN_FAILURES:
            log.warning("GET stream: giving up after %d tries that delivered nothing", failures)
            return
        delay = GET_STREAM_BACKOFF.seconds(failures)
        await asyncio.sleep(state.retry_seconds if state.retry_seconds is not None else delay)
