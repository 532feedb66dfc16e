"""Progress heartbeats: keep a client's tool-call timer alive while the app works in silence.

Several clients give a tool call a fixed budget, and reset it on every
``notifications/progress`` for the call's ``progressToken`` (docs/clients.md has each
client's figure). An app that works for minutes without a word would be cut off there,
though its connection is alive and its answer is coming. So, for a request that carries
``_meta.progressToken``, while it is being forwarded and the app has sent nothing for it
for ``progress_heartbeat_seconds``, the bridge sends the client a progress notification of
its own: the same token, a ``message`` saying it waits on the app. It stops when the
request ends: the app answered, its connection failed (the app died), the client
cancelled, or the bridge shuts down.

The app's own progress always passes through unchanged (``Dispatcher.relay``); it restarts
the silence timer, and it is the base of the heartbeats that follow it. The progress
value MUST increase with each notification (MCP basic/utilities/progress), across the
app's and the bridge's, and the bridge cannot know the app's next value. So a heartbeat
stays below every value an app is likely to send next:

- before the app's first progress, the k-th heartbeat is ``-1/(k+1)`` (-0.5, -0.333…,
  -0.25…): it counts up towards 0 from below, under any value an app starts with (0 or
  more);
- after the app's value ``v``, the k-th heartbeat is ``v + k·10⁻⁹·max(1, |v|)``: above
  ``v`` by far less than any step an app makes (it would have to report a step a billion
  times smaller than its value for its next one to come out lower).

A heartbeat has no ``total`` (it does not claim any share of the work).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.jsonrpc import Request, encode_message

__all__ = ["Heartbeats", "progress_token_of"]

log = logging.getLogger("bridge")

#: How far above the app's last value the k-th heartbeat goes, relative to that value.
_STEP_RELATIVE = 1e-9


def progress_token_of(request: Request) -> Any:
    """The request's ``_meta.progressToken`` (a ``str`` or an ``int``), or ``None``."""
    params = request.params
    if type(params) is not dict:
        return None
    meta = params.get("_meta")
    if type(meta) is not dict:
        return None
    token = meta.get("progressToken")
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        return None
    return token


class _Beat:
    """One request's heartbeat state."""

    __slots__ = ("token", "base", "count", "quiet_since")

    def __init__(self, token: Any, now: float) -> None:
        self.token = token
        self.base: float | None = None  # the app's last progress value, if any
        self.count = 0  # heartbeats sent since that value (or since the start)
        self.quiet_since = now

    def next_value(self) -> float:
        self.count += 1
        if self.base is None:
            return -1.0 / (self.count + 1)
        return self.base + self.count * _STEP_RELATIVE * max(1.0, abs(self.base))


class Heartbeats:
    """The heartbeats of every request in flight that asked for progress.

    Args:
        interval_seconds: the app's silence after which a heartbeat goes out (and between
            heartbeats); 0 turns them off.
        send: ``async (line) -> None``, writes a line to stdout.
        app_name: how the app is named in the heartbeat's message.
    """

    def __init__(self, interval_seconds: float, send: Callable[[bytes], Awaitable[None]], *, app_name: str) -> None:
        self._interval = interval_seconds
        self._send = send
        self._message = f"waiting for {app_name} to answer"
        self._beats: dict[Any, _Beat] = {}

    def heard(self, message: Any) -> None:
        """A message from the app is about to reach the client: a progress notification
        for a watched token restarts its silence timer and becomes the heartbeats' base."""
        if not self._beats or type(message) is not dict or message.get("method") != "notifications/progress":
            return
        params = message.get("params")
        if type(params) is not dict:
            return
        token = params.get("progressToken")
        if isinstance(token, bool) or not isinstance(token, (str, int)):
            return
        beat = self._beats.get(token)
        if beat is None:
            return
        value = params.get("progress")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if beat.base is None or value > beat.base:
                beat.base = float(value)
                beat.count = 0
        beat.quiet_since = asyncio.get_running_loop().time()

    def watch(self, request: Request, work: Awaitable[bytes]) -> Awaitable[bytes]:
        """``work`` (the request's forwarding), sending heartbeats for it meanwhile when it
        carries a progress token; they stop before ``work``'s outcome returns. (A plain
        function: a request with no token, the most, gets ``work`` itself back, with no
        coroutine of this one's around it.)"""
        token = progress_token_of(request)
        if not self._interval or token is None or token in self._beats:
            return work
        return self._watch(token, work)

    async def _watch(self, token: Any, work: Awaitable[bytes]) -> bytes:
        beat = _Beat(token, asyncio.get_running_loop().time())
        self._beats[token] = beat
        beating = asyncio.get_running_loop().create_task(self._beat(beat))
        try:
            return await work
        finally:
            del self._beats[token]
            beating.cancel()

    async def _beat(self, beat: _Beat) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = beat.quiet_since + self._interval
            if loop.time() < due:
                await asyncio.sleep(due - loop.time())
                continue
            params = {"progressToken": beat.token, "progress": beat.next_value(), "message": self._message}
            beat.quiet_since = loop.time()
            log.debug("progress heartbeat for token %r", beat.token)
            await self._send(encode_message({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
