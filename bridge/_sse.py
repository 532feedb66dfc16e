"""SSE events of a response, parsed by httpx-sse (imported only when an SSE reply arrives).

httpx-sse reads an ``httpx.Response``; a transport's response (``bridge.transport``) is
handed to it as one, its body streamed as it arrives. The bridge
imports this module when the first bytes of an SSE body arrive, not when the stream opens:
an idle GET stream then costs no httpx import (about 5 MB resident and 20 ms).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent

from .transport.base import Response

__all__ = ["server_sent_events"]


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: Response, first: bytes, rest: AsyncIterator[bytes]) -> None:
        self._response = response
        self._first = first
        self._rest = rest

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._first
        async for chunk in self._rest:
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


def server_sent_events(response: Any, first: bytes = b"", rest: AsyncIterator[bytes] | None = None) -> AsyncIterator[ServerSentEvent]:
    """The SSE events of ``response`` (a transport's ``Response``), as they arrive (WHATWG
    HTML "Server-sent events", as MCP's Streamable HTTP uses them).

    ``first`` is the body's first chunk, already read, and ``rest`` the iterator that goes
    on from it (httpx-sse reads the content type, which the bridge checked already)."""
    body = _Body(response, first, rest if rest is not None else response.aiter_bytes())
    wrapped = httpx.Response(response.status_code, headers={"content-type": "text/event-stream"}, stream=body)
    return EventSource(wrapped).aiter_sse()
