"""SSE events of a response, parsed by httpx-sse (imported only when an SSE reply arrives).

httpx-sse reads an ``httpx.Response``; a response of the bridge's own HTTP/1.1 client
(``bridge.http11``) is handed to it as one, its body streamed as it arrives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent

from .http11 import Http11Response

__all__ = ["server_sent_events"]


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: Http11Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_bytes():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


def server_sent_events(response: Any) -> AsyncIterator[ServerSentEvent]:
    """The SSE events of ``response`` (an ``httpx.Response`` or an ``Http11Response``), as
    they arrive (WHATWG HTML "Server-sent events", as MCP's Streamable HTTP uses them)."""
    if isinstance(response, Http11Response):
        response = httpx.Response(response.status_code, headers=response.headers.raw, stream=_Body(response))
    return EventSource(response).aiter_sse()
