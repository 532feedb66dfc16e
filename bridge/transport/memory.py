"""An in-memory transport for tests, at the bridge's transport seam (as httpx's ``MockTransport``).

``MemoryTransport(handler)`` calls ``handler(MemoryRequest) -> MemoryResponse`` (or an
awaitable of one) for every request; nothing touches a socket. The handler may raise any
:class:`~bridge.transport.base.TransportError` to play a failure; a ``MemoryResponse``
body may be ``bytes`` or an async iterator of ``bytes`` (a stream, which may raise too).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .base import HttpResponse

__all__ = ["MemoryTransport", "MemoryRequest", "MemoryResponse"]


@dataclass
class MemoryRequest:
    """One request as the transport was asked to send it."""

    method: str
    url: str
    headers: list[tuple[str, str]]
    body: bytes | None
    read_timeout_seconds: float | None
    bounded: bool


class _Fields:
    def __init__(self, fields: Iterable[tuple[str, str]]) -> None:
        self._by_name: dict[str, str] = {}
        for name, value in fields:
            key = name.lower()
            self._by_name[key] = f"{self._by_name[key]}, {value}" if key in self._by_name else value

    def get(self, name: str, default: Any = None) -> Any:
        return self._by_name.get(name.lower(), default)


@dataclass
class MemoryResponse:
    """A response: ``status_code``, ``fields`` (``(name, value)`` pairs) and ``body``."""

    status_code: int = 200
    fields: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | AsyncIterator[bytes] = b""
    closed: bool = False

    @property
    def headers(self) -> _Fields:
        return _Fields(self.fields)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        if isinstance(self.body, bytes):
            if self.body:
                yield self.body
            return
        async for chunk in self.body:
            yield chunk

    async def read_whole(self, limit: int, suffix: bytes = b"") -> bytes | None:
        if isinstance(self.body, bytes) and len(self.body) <= limit:
            return self.body + suffix
        return None

    async def aclose(self) -> None:
        self.closed = True


Handler = Callable[[MemoryRequest], "MemoryResponse | Awaitable[MemoryResponse]"]


class MemoryTransport:
    """A ``Transport`` answering every request with ``handler``; keeps ``requests``."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self.requests: list[MemoryRequest] = []

    async def request(
        self,
        method: str,
        url: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None = None,
        *,
        read_timeout_seconds: float | None,
        bounded: bool = True,
    ) -> HttpResponse:
        request = MemoryRequest(method, url, list(headers), body, read_timeout_seconds, bounded)
        self.requests.append(request)
        outcome = self._handler(request)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        assert isinstance(outcome, MemoryResponse)
        return outcome

    async def aclose(self) -> None:
        return None
