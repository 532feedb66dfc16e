"""Reading the app's replies: JSON bodies, SSE streams, error bodies (MCP Streamable HTTP).

This module owns what the bridge does with the bytes of a reply once its HTTP response is
open; ``upstream.py`` owns the requests. The SSE resume loop is here too: it is the reading
of one reply that spans GETs; it opens them with the ``prepare_get`` and ``exchange`` it is
given and maps each try's transport failures with the one table (``failures.py``). Log
records use the ``bridge.upstream`` logger, as ``upstream.py``'s do.

Rules followed (MCP 2025-03-26 … 2025-11-25, basic/transports "Streamable HTTP"):

- an ``application/json`` reply is one message, or a 2025-03-26 batch array; only JSON-RPC
  2.0 objects may go on to stdout;
- a ``text/event-stream`` reply's events are relayed as they arrive until the response;
  comments, empty priming events and non-``message`` events are skipped, ``id``/``retry``
  are kept (:class:`StreamState`) for a resume by GET with ``Last-Event-ID``;
- bodies and events are capped while they arrive, and bounded in time.

:class:`ReplyReader` holds what the reading needs: the configuration and the SSE end-wait
state of one ``Upstream``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..core import sse
from ..core.config import BridgeConfig
from ..core.errors import (
    AppUnreachableError,
    BadUpstreamResponseError,
    MessageTooLargeError,
    StreamClosedError,
    UpstreamTimeoutError,
)
from ..core.jsonrpc import Request, to_wire_line
from ..core.policy import GET_STREAM_BACKOFF, LISTEN_RETRY_MAX_SECONDS, MAX_RESUME_ATTEMPTS
from ..system.cancelscope import CancelScope, current_time, move_on_after
from ..transport.base import HttpResponse
from .answers import answer_from_event, answer_from_json, parse_reply
from .failures import map_transport_errors
from .headers import SSE_MEDIA_TYPE, StreamState, media_type
from .jsonparse import expect

__all__ = [
    "ReplyReader",
    "Emit",
    "MAX_RESUME_ATTEMPTS",
]

log = logging.getLogger("bridge.upstream")

#: Hands one message from the app that is not the awaited response to the session:
#: ``emit(line, message)``, the stdout line and its parsed value (the session's reply ledger
#: validates it and decides whether it reaches stdout).
Emit = Callable[[bytes, Any], Awaitable[None]]


#: After the response on an SSE stream, how long the bridge waits for the stream's end, so
#: that the connection can serve the next request: the official SDK's server ends it about
#: 0.1 ms after the response, and a new connection per call costs more
#: (docs/benchmarks.md). After a wait in vain the next 1, 2, 4 … (at most :data:`SSE_END_SKIPS`)
#: replies are not waited for, so a server that keeps its streams open costs little.
SSE_END_WAIT_SECONDS = 0.002
SSE_END_SKIPS = 64


class ReplyReader:
    """Reads one ``Upstream``'s replies: ``config`` gives the app's name, the message cap
    and the request timeout; the SSE end-wait state (see :data:`SSE_END_WAIT_SECONDS`)
    lives here, one per ``Upstream``."""

    def __init__(
        self,
        config: BridgeConfig,
        *,
        prepare_get: Callable[[StreamState], Awaitable[tuple[str, dict[str, str], Any]]],
        exchange: Callable[..., AbstractAsyncContextManager[HttpResponse]],
    ) -> None:
        self._config = config
        self._prepare_get = prepare_get  # the resume GET's URL and headers
        self._exchange = exchange  # one HTTP exchange, its response closed on exit
        self._app = config.app_name
        self._sse_end_skips = 0  # SSE replies left whose stream's end is not waited for
        self._sse_end_misses = 0  # waits in vain in a row

    def parse(self, raw: bytes) -> tuple[Any, bool]:
        """:func:`~bridge.streamable.answers.parse_reply` for this app."""
        return parse_reply(self._app, raw)

    def answer_from_json(
        self, request: Request, raw: bytes, extras: list[tuple[bytes, Any]]
    ) -> tuple[bytes, dict[str, Any]]:
        """:func:`~bridge.streamable.answers.answer_from_json` for this app."""
        return answer_from_json(self._app, request, raw, extras)

    async def read_body(
        self,
        response: HttpResponse,
        limit: int,
        *,
        truncate: bool = False,
        line_end: bool = False,
        timeout_seconds: float | None,
    ) -> bytes:
        """The body, at most ``limit`` bytes (more: ``MessageTooLargeError``, or cut with
        ``truncate``), complete within ``timeout_seconds`` (``None``: no bound). With ``line_end`` a newline follows it in the same buffer: a one-line
        reply then goes to stdout as this very object (a 16 MiB copy costs milliseconds)."""
        if line_end:  # a message to parse: a large one's parser is made ready while it arrives
            expect(response.headers.get("content-length"))
        whole = await response.read_whole(limit, b"\n" if line_end else b"")
        if whole is not None:
            return whole
        chunks: list[bytes] = []
        size = 0
        # Streamed (chunked, or no fast path): the body as a whole gets the request timeout
        # too, as read_whole has, so a body dripped a byte at a time cannot hold the request.
        with move_on_after(timeout_seconds) as scope:
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

    async def relay_events(
        self,
        response: HttpResponse,
        state: StreamState,
        handle: Callable[[bytes, dict[str, Any]], Awaitable[bool]],
        idle_seconds: float | None = None,
    ) -> bool:
        """Hand each SSE event that carries a JSON-RPC message to ``handle(line, message)``
        (the stdout line and its value), in order, until ``handle`` returns ``True`` (it
        took the awaited response) or the stream ends.

        The body's chunks (``aiter_bytes``) go through :class:`bridge.core.sse.SSEDecoder`, which
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
        with CancelScope() as scope:
            try:
                while True:
                    if restart and idle_seconds is not None:
                        scope.deadline = current_time() + idle_seconds
                        restart = False
                    decoder.receive_data(await anext(chunks, b""))
                    while (event := decoder.next_event()) is not sse.NEED_DATA:
                        if event is sse.EOF:
                            self.note_retry(state, decoder.retry_ms)  # a retry in a last, unfinished event
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
                        self.note_retry(state, event.retry_ms)
                        raw = event.data_with_newline
                        if event.event_type != "message" or not raw or raw.isspace():
                            continue  # priming events, event types MCP does not define
                        message, twice = self.parse(raw)
                        if not isinstance(message, dict):
                            raise BadUpstreamResponseError(
                                f"{self._app} sent an SSE event that is not one JSON-RPC message."
                            )
                        scope.deadline = math.inf  # stdout's pace is not the app's silence
                        if await handle(to_wire_line(raw, message, twice=twice), message):
                            if self._sse_end_skips:
                                self._sse_end_skips -= 1
                                return True
                            answered, restart = True, False
                            scope.deadline = current_time() + SSE_END_WAIT_SECONDS
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

    def note_retry(self, state: StreamState, retry_ms: int | None) -> None:
        if retry_ms is not None:
            # Honoured, but bounded: a server cannot park a request for an hour, nor for
            # longer than the silence a request may wait (--request-timeout).
            state.retry_seconds = min(retry_ms / 1000, LISTEN_RETRY_MAX_SECONDS, self._config.request_timeout_seconds)

    async def answer_from_sse(
        self,
        request: Request,
        response: HttpResponse,
        emit: Emit,
        *,
        resumable: bool = True,
        idle_seconds: float | None = None,
    ) -> tuple[bytes, dict[str, Any]]:
        state = StreamState()
        answer: list[tuple[bytes, dict[str, Any]]] = []

        async def take(line: bytes, message: dict[str, Any]) -> bool:
            found = answer_from_event(request, line, message)
            if found is not None:
                answer.append(found)
                return True
            await emit(line, message)
            return False

        async def relay(stream: HttpResponse) -> bool:
            """Relay one stream; ``True``: it carried the response; ``False``: it ended
            first, and may be resumed."""
            try:
                with map_transport_errors(self._app):
                    return await self.relay_events(stream, state, take, idle_seconds)
            except StreamClosedError:
                if state.last_event_id is None or not resumable:
                    raise
            return False

        if await relay(response):
            return answer[0]
        if state.last_event_id is not None and resumable:
            # (the streams of the resumes, closed together: an exit stack only on this path)
            async with contextlib.AsyncExitStack() as streams:
                for attempt in range(1, MAX_RESUME_ATTEMPTS + 1):
                    await asyncio.sleep(state.retry_seconds if state.retry_seconds is not None else GET_STREAM_BACKOFF.first_seconds)
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
                    if stream.status_code != 200 or media_type(stream) != SSE_MEDIA_TYPE:
                        break
                    if await relay(stream):
                        return answer[0]
                    if state.last_event_id is None:
                        break  # no event ids (MCP basic/transports, "Resumability"): it cannot be resumed
        raise StreamClosedError(f"{self._app} closed the response stream before sending the response.")

