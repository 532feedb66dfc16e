"""The optional GET stream: server-initiated messages, relayed until the session ends.

Split out of ``upstream.py`` (issue 11): the stream's reconnect loop and its backoff. It
uses ``Upstream``'s own request machinery (headers, the exchange, the error table, the SSE
relay), so it is a function of an ``Upstream``, which ``Upstream.listen`` calls (once per
session). Its log records keep the ``bridge.upstream`` logger's name, as before the split.

MCP 2025-03-26 … 2025-11-25, basic/transports "Listening for Messages from the Server": the
client may GET the endpoint with ``Accept: text/event-stream``; 405 means the server offers
no such stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from ..core.errors import HTTPStatusError, UpstreamError
from ..core.policy import MAX_LISTEN_FAILURES  # the bound lives in the policy's table of retries
from .failures import map_transport_errors
from .replies import _SSE, DEFAULT_RETRY_SECONDS, MAX_LISTEN_DELAY_SECONDS, Emit, _media_type, _StreamState

if TYPE_CHECKING:
    from .upstream import Upstream

__all__ = ["listen", "MAX_LISTEN_FAILURES"]

log = logging.getLogger("bridge.upstream")


async def listen(upstream: Upstream, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
    """Relay the server's GET stream (server-initiated messages) until cancelled.

    Reconnects with ``Last-Event-ID`` after the server's ``retry`` delay (default 1 s,
    growing ×1.5 up to 30 s while tries fail); gives up quietly on 405 (no stream
    offered) or after :data:`MAX_LISTEN_FAILURES` tries in a row that delivered nothing.
    Never raises for upstream failures: nothing about this stream goes to stdout.
    ``on_open`` is called once, when the first GET has its status (open or refused) or failed.
    """
    state = _StreamState()
    failures = 0
    delay = DEFAULT_RETRY_SECONDS
    session = upstream.session.id
    delivered = False

    async def relay(line: bytes, message: dict[str, Any]) -> bool:
        nonlocal delivered
        delivered = True
        await emit(line, message)
        return False  # the GET stream carries no response to wait for

    while True:
        delivered = False
        if upstream.session.id != session:  # event ids belong to a session: a new one starts afresh
            state, session = _StreamState(), upstream.session.id
        try:
            url, headers, _ = await upstream._prepare_get(state)
            with map_transport_errors(upstream._app):
                async with upstream._exchange("GET", url, headers, timeout=upstream._listen_timeout()) as response:
                    if on_open is not None:
                        on_open()
                        on_open = None
                    if response.status_code == 405:
                        log.debug("the app offers no GET stream (HTTP 405)")
                        return
                    if response.status_code != 200 or _media_type(response) != _SSE:
                        raise HTTPStatusError(
                            f"GET stream refused (HTTP {response.status_code})", response.status_code
                        )
                    log.debug("GET stream open")
                    await upstream._relay_events(response, state, relay)
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
        delay = DEFAULT_RETRY_SECONDS if delivered else min(delay * 1.5, MAX_LISTEN_DELAY_SECONDS)
        await anyio.sleep(state.retry_seconds if state.retry_seconds is not None else delay)
