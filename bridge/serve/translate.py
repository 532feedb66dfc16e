"""Era routing: which translation, if any, a request of the AI client goes through
(docs/behaviour.md, "Protocol eras").

The top of the request stack (CONTRIBUTING.md, "The request stack"): the dispatcher
calls this layer, which calls only lazy launch (``bridge/serve/lazy.py``) below it. Its two
strategies, one per direction, call the same layer below, never back up:

- :class:`~bridge.serve.legacyapp.LegacyAppEras`: a 2026-07-28 client with an app that serves
  the 2025 era only;
- :class:`~bridge.serve.modernapp.ModernAppEras`: a 2025-era client with an app that serves
  2026-07-28 only.

Under ``--protocol-era auto`` a 2026-07-28 request goes to the app as it is until the app
proves which era it speaks: a client's own ``server/discover`` gets the app's refusal (a
client that probes falls back to ``initialize`` by itself, losing nothing); a request
refused for want of a session, from a client that never probes, is translated. An answer
from the lazy-launch catalog proves nothing (:class:`~bridge.serve.driver.Reply`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.config import DEFAULT_APP_NAME
from ..core.era import LEGACY, Era
from ..core.errors import HTTPStatusError, UpstreamError
from ..core.jsonrpc import PrivateIds, Request
from ..core.legacymap import is_legacy_refusal
from ..streamable.upstream import Emit
from .driver import ReplayRefusedError, drop
from .lazy import LazyLaunch

if TYPE_CHECKING:
    from .legacyapp import LegacyAppEras
    from .modernapp import ModernAppEras

__all__ = ["EraRouter"]

log = logging.getLogger("bridge")


class EraRouter:
    """Route each request of the client to the translation its era and the app's need.

    Args:
        below: the lazy-launch layer (and through it the driver).
        protocol_era: ``auto``, ``legacy`` or ``modern`` (``BridgeConfig.protocol_era``): which
            translations may run.
        private_ids: the ids of the bridge's own requests (shared with the layers below).
        app_name: how the app is named in messages.
    """

    def __init__(
        self, below: LazyLaunch, *, protocol_era: str = "auto", private_ids: PrivateIds | None = None, app_name: str = DEFAULT_APP_NAME
    ) -> None:
        self._below = below
        self._protocol_era = protocol_era
        self._app = app_name
        self._ids = private_ids if private_ids is not None else PrivateIds()
        #: The client's era: that of its last 2026-07-28 request or ``initialize`` (what a
        #: message that names no request, a cancellation of an unknown id, goes by).
        self.client_era: Era = LEGACY
        self._initialize: Request | None = None  # the 2025-era client's initialize, for a translation after an update
        # The two translations are built, and their modules loaded, when a request first
        # needs one: a client and an app of the same era never load them (bench/README.md,
        # "Start-up").
        #: A 2026-07-28 client with a legacy-only app (``bridge/serve/legacyapp.py``); ``None``
        #: before the first 2026-07-28 request, and again once the app proved it speaks 2026-07-28.
        self.eras: LegacyAppEras | None = None
        self._eras_possible = protocol_era != "modern"
        #: A 2025-era client with a 2026-07-28-only app (``bridge/serve/modernapp.py``); ``None``
        #: until an ``initialize`` needs it.
        self._modern_app: ModernAppEras | None = None

    @property
    def translating_for_legacy_client(self) -> bool:
        """Whether a 2025-era client's requests are translated for a 2026-07-28-only app."""
        return self._modern_app is not None and self._modern_app.active

    def _modern(self) -> ModernAppEras:
        """The translation for a 2025-era client with a 2026-07-28-only app, built on first use."""
        if self._modern_app is None:
            from .modernapp import ModernAppEras

            self._modern_app = ModernAppEras(
                self._below,
                always=self._protocol_era == "modern",
                app_name=self._app,
                answer_timeout_seconds=self._below.request_timeout_seconds,
                private_ids=self._ids,
            )
        return self._modern_app

    async def request(self, request: Request, emit: Emit) -> bytes:
        """Forward one request (its era translated as needed); return its stdout line. A
        2026-07-28 request to an app that proved legacy-only is translated
        (``bridge/serve/legacyapp.py``), and so is a legacy request to an app that proved
        2026-07-28-only (``bridge/serve/modernapp.py``), as ``--protocol-era`` allows.

        Raises:
            UpstreamError: the error that ended the recovery flow.
        """
        era = request.era
        if era.stateless:
            self.client_era = era
            if self.eras is None and self._eras_possible:
                from .legacyapp import LegacyAppEras

                self.eras = LegacyAppEras(self._below, ask_app=self._protocol_era == "auto", private_ids=self._ids)
            eras = self.eras
            if eras is not None and eras.handles(request):
                if self._protocol_era == "auto" and eras.initialize_result is None:
                    line = await self._try_as_it_is(request, emit)
                    if line is not None:
                        return line
                    log.info("%s refused a 2026-07-28 %s as a legacy-only app does; translating", self._app, request.method)
                return await eras.request(request, emit)
        elif self._protocol_era != "legacy":
            if request.method == "initialize":
                self.client_era = era
                self._initialize = request
                return await self._legacy_initialize(request, emit)
            if self.translating_for_legacy_client:
                return await self._modern().request(request, emit)
            try:
                return (await self._below.forward(request, emit)).line
            except ReplayRefusedError:  # answered from the catalog, and now the app refused the replay
                if not await self._below.translate_after_refusal(self._speaks_modern_now):
                    raise
                return await self._modern().request(request, emit)
        elif request.method == "initialize":
            self.client_era = era
            self._initialize = request
        return (await self._below.forward(request, emit)).line

    async def _legacy_initialize(self, request: Request, emit: Emit) -> bytes:
        """A 2025-era ``initialize`` when a translation may run: under ``auto``, before the
        app proved 2026-07-28-only and unless its catalog records that it refuses
        ``initialize``, it goes to the app as it is, and only a refusal (an error reply, an
        HTTP 4xx) goes on to the translation (``ModernAppEras.initialize``), which asks
        ``server/discover``.

        Raises:
            UpstreamError: as the layer below (an HTTP 4xx excepted: the translation's).
        """
        if self._protocol_era == "auto" and not self.translating_for_legacy_client and not self._below.catalog_refuses("initialize"):
            try:
                line = (await self._below.forward(request, emit)).line
            except HTTPStatusError as exc:
                if not 400 <= exc.http_status < 500:
                    raise
                return await self._modern().initialize(request, emit, refusal=exc)
            reply = json.loads(line)
            if not isinstance(reply, dict) or "error" not in reply:
                return line  # the app speaks the client's era: nothing to translate
            return await self._modern().initialize(request, emit, refusal=line)
        return await self._modern().initialize(request, emit)

    async def _speaks_modern_now(self) -> bool:
        """Whether the app, which refused the replayed ``initialize`` of a client answered
        from the catalog, serves 2026-07-28 only now: the client's ``initialize`` goes to
        the translation as a live client's would (its answer goes nowhere: the client had
        one from the catalog)."""
        if self._initialize is None:
            return False
        try:
            await self._legacy_initialize(self._initialize, drop)
        except UpstreamError as exc:
            log.info("%s refused the replayed initialize, and server/discover failed: %s", self._app, exc.message)
        return self.translating_for_legacy_client

    async def _try_as_it_is(self, request: Request, emit: Emit) -> bytes | None:
        """Under ``auto``, before the app proved its era: send a 2026-07-28 request as it is;
        its line, or ``None`` when the app refused it for want of a session (translate it).

        Raises:
            UpstreamError: as the layer below (an HTTP 4xx refusal of a request other than
                ``server/discover`` or a 404 excepted: ``None``).
        """
        assert self.eras is not None
        try:
            reply = await self._below.forward(request, emit)
        except HTTPStatusError as exc:
            if request.method == "server/discover" and 400 <= exc.http_status < 500:
                self._below.mark_catalog("refusesDiscover", True)
            if request.method == "server/discover" or not 400 <= exc.http_status < 500 or exc.http_status == 404:
                raise
            return None
        if reply.from_catalog:
            return reply.line  # the catalog's answer, not the app's: it proves nothing
        refused = is_legacy_refusal(json.loads(reply.line))
        if not refused:
            self.eras = None  # the app speaks 2026-07-28: nothing to translate
            self._eras_possible = False
        elif request.method == "server/discover":
            self._below.mark_catalog("refusesDiscover", _error_of(json.loads(reply.line)))
        if request.method == "server/discover" or not (refused and _wants_a_session(reply.line)):
            return reply.line
        return None

    def answered_from_catalog(self, request_id: Any) -> bool:
        """Whether the last reply returned for ``request_id`` came from the lazy-launch
        catalog (the trace's "answered by"); asked once per reply."""
        return self._below.answered_from_catalog(request_id)

    async def deliver(self, body: bytes, what: str) -> None:
        """Forward a notification or a client response (no reply is owed); a translated
        2025-era client's go to its translation (``bridge/serve/modernapp.py``).

        Raises:
            UpstreamError: the error that ended the recovery flow (the caller logs it).
        """
        if self._modern_app is not None and self._modern_app.active:
            await self._modern_app.deliver(body, what)
            return
        await self._below.deliver(body, what)

    async def listen(self, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
        """Relay the app's server-initiated messages until cancelled; never raises for
        upstream failures. ``on_open`` is called once, when the first GET has its answer
        (open, refused) or failed. For a translated 2026-07-28 client the translation keeps
        the GET stream (``bridge/serve/legacyapp.py``): this starts it if needed and returns; for a
        translated 2025-era client, the app's ``subscriptions/listen`` stands for it
        (``bridge/serve/modernapp.py``)."""
        if self.eras is not None and self.eras.translating:
            self.eras.start_get_stream(emit)
            if on_open is not None:
                on_open()
            return
        if self._modern_app is not None and self._modern_app.active:
            await self._modern_app.listen(emit, on_open=on_open)
            return
        await self._below.listen(emit, on_open=on_open)

    def list_changed_notifications(self) -> list[bytes]:
        """``notifications/<list>/list_changed`` lines for each list the server said may change
        (none for a translated 2026-07-28 client: its listens end instead, ``legacyapp.py``)."""
        if self.eras is not None and self.eras.translating:
            return []
        return self._below.list_changed_notifications()

    async def terminate_session(self, timeout_seconds: float | None = None) -> None:
        """Best-effort, bounded ``DELETE`` of the MCP session (``timeout_seconds`` shortens its bound)."""
        await self._below.terminate_session(timeout_seconds)

    async def aclose(self) -> None:
        """Stop the translations' tasks and close the connections the bridge opened."""
        if self.eras is not None:
            await self.eras.aclose()
        await self._below.aclose()


def _error_of(reply: Any) -> Any:
    """The JSON-RPC ``error`` object of a parsed reply when it is a well-formed one, else ``True``."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return {"code": error["code"], "message": error["message"]}
    return True


def _wants_a_session(line: bytes) -> bool:
    """Whether an error reply says the request needed an MCP session (or ``initialize``)
    first, as a legacy-only app answers a 2026-07-28 request: the app did not act on it."""
    text = line.lower()
    return b'"error"' in text and (b"session" in text or b"initializ" in text)
