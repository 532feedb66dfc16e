"""A 2026-07-28 client with a legacy-only app: the bridge answers ``server/discover`` from
the app's ``initialize``, and sends the client's requests within that legacy session.

The rules, and the table of what maps, are pure (``bridge/core/eramap.py``); this module
performs them for one :class:`~bridge.serve.driver.Driver` (docs/behaviour.md, "Protocol eras").

- The first 2026-07-28 request probes: a ``server/discover`` goes to the app (for a client
  that pinned its version and sends something else first, the bridge sends its own
  ``server/discover`` first, with that request's ``_meta``). When the app refuses it as a legacy app
  does (:func:`~bridge.core.eramap.is_legacy_refusal`, or an HTTP 4xx status), the bridge
  sends ``initialize`` itself (under a private id whose reply never reaches stdout), POSTs
  ``notifications/initialized`` and answers the probe from that result. If the app refuses
  the ``initialize`` too, the client gets the app's first refusal, as before.
- From then on every 2026-07-28 request is sent as a legacy one: its era's ``_meta`` keys
  dropped, re-encoded, with the session's headers; a lost session is rebuilt as for a
  legacy client. A method with no legacy equivalent yet is answered with a JSON-RPC error
  naming what is missing (never a guess).
- Requests that come while the probe is being answered wait for its outcome. Once the app
  answered a probe as a 2026-07-28 app does, requests go straight to it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Protocol

from .._version import __version__
from ..core.eramap import (
    discover_result,
    initialize_params,
    is_legacy_refusal,
    legacy_params,
    modern_result,
    untranslated,
)
from ..core.errors import HTTPStatusError, UpstreamError
from ..core.jsonrpc import Request, encode_message
from ..streamable.upstream import Emit

__all__ = ["LegacyAppEras", "Forwarder"]

log = logging.getLogger("bridge")

_INITIALIZED = encode_message({"jsonrpc": "2.0", "method": "notifications/initialized"})[:-1]


class Forwarder(Protocol):
    """What the translation needs of the driver (``Driver`` is one)."""

    async def forward(self, request: Request, emit: Emit) -> bytes:
        """Forward a request as it is, in its own era; return its stdout line."""
        ...

    async def deliver(self, body: bytes, what: str) -> None:
        """Forward a notification (no reply is owed)."""
        ...


class LegacyAppEras:
    """The translation state of one driver: whether the app proved legacy-only, and the
    ``initialize`` result the probe is answered from."""

    def __init__(self, driver: Forwarder, *, ask_app: bool = True) -> None:
        self._driver = driver
        #: Whether the probe goes to the app first (``False``: ``--protocol-era legacy``, the
        #: legacy session is opened at once, whatever the app would answer).
        self._ask_app = ask_app
        #: The legacy app's ``initialize`` result once the translation is on, else ``None``.
        self.initialize_result: dict[str, Any] | None = None
        #: Whether the app answered a probe as a 2026-07-28 app does (nothing to translate).
        self._modern = False
        self._probing: asyncio.Lock = asyncio.Lock()
        self._opened = 0

    def handles(self, request: Request) -> bool:
        """Whether a 2026-07-28 ``request`` goes through :meth:`request`: all of them until
        the app answered a probe as a 2026-07-28 app does."""
        return not self._modern

    async def request(self, request: Request, emit: Emit) -> bytes:
        """Forward a 2026-07-28 request, translated when the app proved legacy-only; return
        its stdout line. The first one is the probe: the client's own ``server/discover``,
        or, for a client that pinned its version and never probes, one the bridge sends
        first (its reply goes nowhere).

        Raises:
            UpstreamError: as ``Driver.forward``.
        """
        if self.initialize_result is None and not self._modern:
            async with self._probing:
                if self.initialize_result is None and not self._modern:
                    if request.method == "server/discover":
                        return await self._probe(request, emit)
                    try:
                        await self._probe(_discover_like(request), _drop)
                    except UpstreamError as exc:  # the request itself then says what is wrong
                        log.info("the bridge's server/discover probe failed: %s", exc.message)
        if self.initialize_result is None:
            return await self._driver.forward(request, emit)  # a 2026-07-28 app, or the probe failed
        if request.method == "server/discover":
            return self._discover_line(request)
        error = untranslated(request.method, self._app_version)
        if error is not None:
            return encode_message({"jsonrpc": "2.0", "id": request.id, "error": error})
        params = legacy_params(request.params)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "method": request.method}
        if params is not None:
            message["params"] = params
        legacy = Request(request.id, request.method, params, encode_message(message)[:-1])
        line = await self._driver.forward(legacy, emit)
        reply = json.loads(line)
        if isinstance(reply, dict) and isinstance(reply.get("result"), dict):
            return encode_message({**reply, "result": modern_result(request.method, reply["result"])})
        return line

    @property
    def _app_version(self) -> str | None:
        version = self.initialize_result.get("protocolVersion") if self.initialize_result else None
        return version if isinstance(version, str) else None

    def _discover_line(self, request: Request) -> bytes:
        assert self.initialize_result is not None and request.era.version is not None
        result = discover_result(self.initialize_result, request.era.version)
        return encode_message({"jsonrpc": "2.0", "id": request.id, "result": result})

    async def _probe(self, request: Request, emit: Emit) -> bytes:
        """Send the probe; on a legacy refusal open a legacy session and answer from it."""
        if not self._ask_app:
            result = await self._open_session(request)
            if result is None:
                error = {"code": -32603, "message": "The app refused the bridge's initialize (--protocol-era legacy)."}
                return encode_message({"jsonrpc": "2.0", "id": request.id, "error": error})
            self.initialize_result = result
            return self._discover_line(request)
        try:
            line = await self._driver.forward(request, emit)
        except HTTPStatusError as exc:
            if not 400 <= exc.http_status < 500:
                raise
            refusal: BaseException | bytes = exc
        else:
            if not is_legacy_refusal(json.loads(line)):
                self._modern = True
                return line  # a 2026-07-28 app: nothing to translate
            refusal = line
        log.info("the app refused server/discover as a legacy-only app does; opening a legacy session for the client")
        result = await self._open_session(request)
        if result is None:
            if isinstance(refusal, bytes):
                return refusal
            raise refusal
        self.initialize_result = result
        return self._discover_line(request)

    async def _open_session(self, probe: Request) -> dict[str, Any] | None:
        """``initialize`` + ``notifications/initialized``; the result, or ``None`` (logged)."""
        self._opened += 1
        init_id = f"mcp-app-bridge-era-init-{self._opened}"
        params = initialize_params(probe.params, __version__)
        body = encode_message({"jsonrpc": "2.0", "id": init_id, "method": "initialize", "params": params})[:-1]
        try:
            reply = json.loads(await self._driver.forward(Request(init_id, "initialize", params, body), _drop))
            result = reply.get("result") if isinstance(reply, dict) else None
            if not isinstance(result, dict):
                log.warning("the app refused the bridge's initialize for a 2026-07-28 client: %s", str(reply)[:200])
                return None
            await self._driver.deliver(_INITIALIZED, "notification notifications/initialized")
        except Exception as exc:  # an UpstreamError, or an unusable reply: the probe's refusal stands
            log.warning("opening a legacy session for a 2026-07-28 client failed: %s", getattr(exc, "message", exc))
            return None
        return result


def _discover_like(request: Request) -> Request:
    """The bridge's own ``server/discover`` probe, with ``request``'s ``_meta`` (its
    version, client info and capabilities)."""
    meta = request.params.get("_meta") if isinstance(request.params, dict) else None
    params = {"_meta": meta if isinstance(meta, dict) else {}}
    probe_id = "mcp-app-bridge-era-probe"
    body = encode_message({"jsonrpc": "2.0", "id": probe_id, "method": "server/discover", "params": params})[:-1]
    return Request(probe_id, "server/discover", params, body)


async def _drop(line: bytes, message: Any = None) -> None:
    """Where messages on the bridge's own ``initialize`` stream go: nowhere."""
    log.debug("dropped a message from the bridge's initialize (%d bytes)", len(line))
