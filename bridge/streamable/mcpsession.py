"""The MCP session's state: what the last successful ``initialize`` gave, and the rebuild gate.

Owned by :class:`~bridge.streamable.upstream.Upstream` (``upstream.session``), which reads it for
every request's headers; changed only through :meth:`McpSession.adopt` (a successful
``initialize``), :meth:`~McpSession.forget` (the ``DELETE`` at exit),
:meth:`~McpSession.restore` (a failed rebuild puts the old session back) and
:meth:`~McpSession.rebuilding` (the gate).

Why a class of its own: the id, the version and the generation must change together
(a request sends one consistent snapshot of them), and once they were public fields of
the upstream, written from the driver as well. Here the rules sit in one place:

- the **generation** only grows, by one per adopted ``initialize``. A failed request
  carries the generation it sent (``SessionLostError.session_generation``), so many
  requests failing together cause one rebuild, and a restore never brings an old
  generation back (a stale failure could otherwise trigger a second rebuild);
- the **gate** is closed while a rebuild runs (docs/discovery.md, "App restarts"). A request that carries the
  session waits at it right before it reads the id and version, so it never goes out with
  no session id (the app's "missing session" -32600, which no recovery can repair) nor
  with a new session whose ``notifications/initialized`` has not been sent yet. The old
  session stays in place until the replayed ``initialize`` succeeds: a request that read
  it just before the gate closed gets the app's 404 and waits for that rebuild
  (``tests/serve/test_restart_race.py``).
- values from the app are kept only when safe to send back as a header: a session id or a
  version that is not visible ASCII is dropped (MCP 2025-11-25, basic/transports, "Session
  Management": the client handles the id securely; logs show it shortened, never whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

__all__ = ["McpSession", "SessionSnapshot"]

log = logging.getLogger("bridge.upstream")


class _Fields(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...


class SessionSnapshot(NamedTuple):
    """A session's id, version and capabilities, to put back with :meth:`McpSession.restore`."""

    id: str | None
    protocol_version: str | None
    capabilities: dict[str, Any]


class McpSession:
    """One MCP session (Streamable HTTP, 2025-03-26 … 2025-11-25), as the bridge knows it.

    Attributes (read-only):
        id: the ``Mcp-Session-Id`` from the last adopted ``initialize``, or ``None``.
        protocol_version: the version the server chose in that result, or ``None``.
        capabilities: the ``capabilities`` of that result (``{}`` when none).
        generation: how many ``initialize`` results were adopted.
        ready: whether no rebuild runs (the gate is open).
    """

    __slots__ = ("_id", "_protocol_version", "_capabilities", "_generation", "_ready")

    def __init__(self) -> None:
        self._id: str | None = None
        self._protocol_version: str | None = None
        self._capabilities: dict[str, Any] = {}
        self._generation = 0
        self._ready = asyncio.Event()
        self._ready.set()

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def protocol_version(self) -> str | None:
        return self._protocol_version

    @property
    def capabilities(self) -> dict[str, Any]:
        return self._capabilities

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def adopt(self, result: Any, headers: _Fields) -> bool:
        """Take the session an ``initialize`` reply opened; return whether it did.

        Args:
            result: the reply's ``result`` member (``None`` for an error reply: the
                handshake failed and the old state, if any, stays).
            headers: the HTTP response's header fields (``mcp-session-id``).
        """
        if not isinstance(result, dict):
            return False
        session_id = headers.get("mcp-session-id")
        if session_id is not None and not _is_visible_ascii(session_id):
            log.warning("ignoring an Mcp-Session-Id that is not visible ASCII")
            session_id = None
        self._id = session_id
        version = result.get("protocolVersion")
        self._protocol_version = version if isinstance(version, str) and _is_visible_ascii(version) else None
        capabilities = result.get("capabilities")
        self._capabilities = capabilities if isinstance(capabilities, dict) else {}
        self._generation += 1
        log.info(
            "MCP session %s, protocol version %s",
            _short(session_id) if session_id else "(none)",
            self._protocol_version or "(unknown)",
        )
        return True

    def forget(self) -> None:
        """The session was ended (``DELETE``): no id is sent from now on."""
        self._id = None

    def snapshot(self) -> SessionSnapshot:
        """The id, version and capabilities now (the generation is not part of it)."""
        return SessionSnapshot(self._id, self._protocol_version, self._capabilities)

    def restore(self, snapshot: SessionSnapshot) -> None:
        """Put back a snapshot's id, version and capabilities; the generation keeps growing."""
        self._id, self._protocol_version, self._capabilities = snapshot.id, snapshot.protocol_version, snapshot.capabilities

    async def wait_ready(self) -> None:
        """Wait until no rebuild runs (returns at once when none does)."""
        await self._ready.wait()

    @contextlib.contextmanager
    def rebuilding(self) -> Iterator[None]:
        """Close the gate while a rebuild runs; open it again however the rebuild ends."""
        self._ready = asyncio.Event()
        try:
            yield
        finally:
            self._ready.set()


def _is_visible_ascii(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(ch) <= 0x7E for ch in value)


def _short(session_id: str) -> str:
    """A session id shortened for logs: never log it whole."""
    return session_id[:4] + "…" if len(session_id) > 4 else "…"
