"""Lazy launch: answer a client's start-up from the app's catalog while the app is down,
and start the app at the first request the catalog cannot answer (docs/behaviour.md,
"Lazy launch"; the rules are ``bridge/core/lazylaunch.py``).

This layer stands between the era router (``bridge/serve/translate.py``) and the
:class:`~bridge.serve.driver.Driver`, and calls only the driver. It hands the driver the
``EnsureRunning`` hook for each request: for a request the catalog may answer (``initialize``,
``server/discover``, the four lists, ``ping``) whose connection is refused, the hook returns
the catalog's answer instead of starting the app, and the driver's
:class:`~bridge.serve.driver.Reply` says the line came from the catalog.

A legacy client so answered has no MCP session yet: its later notifications are not sent,
its GET stream waits, and the first request the catalog cannot answer starts the app,
replays the client's ``initialize`` (the client never sees that reply), lists again what
the client was served and announces each list that differs, then goes out. Every catalog
method's reply from the app updates the catalog. Across eras: a 2025-era client translated
for a 2026-07-28-only app (the catalog's ``refusesInitialize``, ``bridge/serve/modernapp.py``)
is answered from the cached ``server/discover``; its first request the catalog cannot answer
starts the app, lists again in the 2026-07-28 form and announces what changed (there is no
session to open). A ``server/discover`` for an app marked ``refusesDiscover`` gets the
app's refusal from the catalog. A catalog's answer never counts as proof of the app's era
(``--protocol-era auto``): the :class:`~bridge.serve.driver.Reply` carries that.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..core.config import DEFAULT_APP_NAME
from ..core.errors import UpstreamError
from ..core.jsonrpc import Request, encode_message, error_line
from ..core.ledger import id_key
from ..core.methods import CATALOG_METHODS
from ..streamable.upstream import Emit
from ..system.cancelscope import move_on_after
from .driver import Driver, LaunchHook, ReplayRefusedError, Reply, named

if TYPE_CHECKING:
    from ..app.servedcatalog import ServedCatalog

__all__ = ["LazyLaunch", "RELIST_AFTER_LAUNCH_SECONDS"]

log = logging.getLogger("bridge")

#: Bound on listing again, after a lazy launch, what the client was served (seconds).
RELIST_AFTER_LAUNCH_SECONDS = 10.0
#: At most this many replies are remembered as the catalog's until the trace asks (bounded memory).
MAX_CATALOG_MARKS = 1024


class LazyLaunch:
    """The lazy-launch layer over one :class:`~bridge.serve.driver.Driver`; with no catalog it
    passes every call through.

    Args:
        driver: the layer below.
        catalog: what the app last served (``None``: no lazy launch).
        launch_policy: ``on-call``, ``on-start`` or ``never`` (``BridgeConfig.launch_policy``).
        protocol_era: ``auto``, ``legacy`` or ``modern``: under ``auto`` a ``server/discover``
            for an app the catalog marks ``refusesDiscover`` gets the recorded refusal.
        app_name: how the app is named in messages.
    """

    def __init__(
        self,
        driver: Driver,
        *,
        catalog: ServedCatalog | None = None,
        launch_policy: str = "on-call",
        protocol_era: str = "auto",
        app_name: str = DEFAULT_APP_NAME,
    ) -> None:
        self._driver = driver
        #: What the app last served, or ``None``.
        self.catalog = catalog
        self._launch_policy = launch_policy
        self._protocol_era = protocol_era
        self._app = app_name
        self._initialize_params: Any = None  # the client's initialize params (what the replay sends)
        # The catalog entry a legacy client's initialize was answered from while no MCP
        # session is open (the app not started yet); ``None`` once one is, or never.
        self._deferred: dict[str, Any] | None = None
        self._deferred_version: Any = None  # the protocolVersion the catalog told that client
        # The catalog entry a 2026-07-28-form request of a translated legacy client was
        # answered from while the app was down; ``None`` once the app was needed (its lists
        # then listed again), or never.
        self._stateless_served: dict[str, Any] | None = None
        self._opened = asyncio.Event()  # set once a deferred session is open
        self._app_reached = asyncio.Event()  # set once a request of this bridge reached the app
        self._open_lock = asyncio.Lock()
        # Set once the app refused the replay because it now serves 2026-07-28 only: the
        # deferred session is over and the client is translated (:meth:`translate_after_refusal`).
        self._translated_after_update = False
        self._from_catalog: dict[Any, bool] = {}  # ids whose reply came from the catalog, until asked (the trace)

    def forward(self, request: Request, emit: Emit, *, legacy_client: bool = False) -> Awaitable[Reply]:
        """Forward a request as it is, in its own era; return its stdout line, and whether
        the catalog answered it. ``legacy_client``: a 2026-07-28-form request made for a
        translated 2025-era client (``bridge/serve/modernapp.py``), which is told of the
        lists that changed once the app is started for it.

        Raises:
            UpstreamError: the error that ended the recovery flow.
        """
        if self.catalog is None:  # no lazy launch: the driver's own (no coroutine of this layer's)
            return self._driver.forward(request, emit)
        return self._forward(request, emit, legacy_client)

    async def _forward(self, request: Request, emit: Emit, legacy_client: bool) -> Reply:
        era = request.era
        if request.method == "initialize" and era.may_rebuild:
            self._initialize_params = request.params
            self._deferred = None
        if self._deferred is not None and not era.stateless:  # no MCP session yet (lazy launch)
            from ..core.lazylaunch import catalog_answer

            answer = catalog_answer(request.method, request.params, self._deferred, modern=False)
            if answer is not None:
                self._mark(request)
                return Reply(encode_message({"jsonrpc": "2.0", "id": request.id, **answer}), from_catalog=True)
            await self._open_deferred_session(request, emit)
        elif self._stateless_served is not None and era.stateless and legacy_client and self._needs_the_app(request):
            await self._announce_after_launch(request, emit)
        if request.method == "subscriptions/listen" and era.stateless:
            emit = _AcknowledgedOnce(emit)
        reply = await self._driver.forward(request, emit, launch=self._launch_hook(request, emit))
        if reply.from_catalog:
            if request.method == "initialize" and era.may_rebuild:
                self._deferred = self.catalog.entry() if self.catalog is not None else None
                result = json.loads(reply.line).get("result")
                self._deferred_version = result.get("protocolVersion") if isinstance(result, dict) else None
                log.info("%s is not running; initialize answered from its catalog (it starts on the first call)", self._app)
            elif era.stateless and self._stateless_served is None and not self._app_reached.is_set() and self.catalog is not None:
                self._stateless_served = self.catalog.entry()
            self._mark(request)
            return reply
        self._app_reached.set()
        if self.catalog is not None:
            self._remember(request.method, request.params, reply.line)
        return reply

    def answered_from_catalog(self, request_id: Any) -> bool:
        """Whether the last reply returned for ``request_id`` came from the catalog (the
        trace's "answered by"); asked once per reply, which forgets it."""
        return bool(self._from_catalog) and self._from_catalog.pop(id_key(request_id), False)

    def _mark(self, request: Request) -> None:
        if len(self._from_catalog) >= MAX_CATALOG_MARKS:  # (a private request's mark is never asked for)
            self._from_catalog.clear()
        self._from_catalog[id_key(request.id)] = True

    def _launch_hook(self, request: Request, emit: Emit) -> LaunchHook | None:
        """What the driver's ``EnsureRunning`` does for ``request`` (``None``: start the app)."""
        if self.catalog is None:
            return None
        from ..core.lazylaunch import answers_from_catalog

        if answers_from_catalog(self._launch_policy, request.method):
            return lambda: self._launch_unless_cataloged(request)
        if request.method == "subscriptions/listen" and self._launch_policy != "on-start":
            return lambda: self._hold_listen_until_the_app_is_needed(request, emit)
        return None

    async def _launch_unless_cataloged(self, request: Request) -> bytes | None:
        """The flow's ``EnsureRunning`` for a request the catalog may answer: its answer
        from the catalog, else start the app (``None``)."""
        from ..core.lazylaunch import catalog_answer, discover_refusal, why_not_answered

        assert self.catalog is not None
        entry = self.catalog.entry()
        if request.method == "server/discover" and self._protocol_era == "auto":
            refusal = discover_refusal(entry)
            if refusal is not None:
                log.info("%s is not running; server/discover refused from its catalog (the app serves the 2025 era only)", self._app)
                return error_line(request.id, refusal)
        answer = catalog_answer(request.method, request.params, entry, modern=request.era.stateless)
        if answer is not None:
            return encode_message({"jsonrpc": "2.0", "id": request.id, **answer})
        if entry is not None:
            log.info(
                "%s is not running and its catalog does not answer %s: %s; starting it",
                self._app, named(request), why_not_answered(request.method, request.params, entry),
            )
        else:
            log.info("%s is not running and has no catalog yet; %s needs it: starting it", self._app, named(request))
        await self._driver.ensure_running()
        return None

    async def _hold_listen_until_the_app_is_needed(self, request: Request, emit: Emit) -> bytes | None:
        """The flow's ``EnsureRunning`` for a 2026-07-28 ``subscriptions/listen`` that found
        the app down while a catalog answers the client's start-up: the stream is held, and
        the app is not started for it (Claude Code opens one at every start, ``claude mcp
        list`` included). It is acknowledged at once from the catalog when the catalog can
        say what the app honors (:func:`~bridge.core.lazylaunch.listen_acknowledgment`; the
        app's own acknowledgment is then not passed on: ``emit`` is an
        :class:`_AcknowledgedOnce`), and goes out once another request of this bridge
        reached the app (the first call starts it). Once the app was reached, a listen that
        finds it down starts it, as without a catalog."""
        assert self.catalog is not None
        entry = self.catalog.entry()
        if self._app_reached.is_set() or entry is None:
            await self._driver.ensure_running()
            return None
        from ..core.lazylaunch import listen_acknowledgment

        log.info("%s is not running; subscriptions/listen waits for the first request that needs it", self._app)
        acknowledgment = listen_acknowledgment(request.id, request.params, entry)
        if acknowledgment is not None and isinstance(emit, _AcknowledgedOnce) and not emit.acknowledged:
            emit.acknowledged = True
            await emit.send(encode_message(acknowledgment), acknowledgment)
        await self._app_reached.wait()
        return None

    def catalog_refuses(self, method: str) -> bool:
        """Whether the catalog records that the app refuses ``method`` (``initialize``: it
        serves 2026-07-28 only; ``server/discover``: the 2025 era only)."""
        if self.catalog is None or self._launch_policy == "on-start":
            return False
        from ..core.lazylaunch import refuses

        return refuses(self.catalog.entry(), method)

    def mark_catalog(self, key: str, value: Any) -> None:
        """Record in the catalog that the app refused one era's handshake (``key``:
        ``refusesInitialize`` or ``refusesDiscover``, ``bridge/core/lazylaunch.py``)."""
        if self.catalog is None:
            return
        from ..core.lazylaunch import mark

        updated = mark(
            self.catalog.entry(), key, value, app=self.catalog.app_name, endpoint=self.catalog.endpoint_identity, now_seconds=time.time()
        )
        if updated is not None:
            self.catalog.replace(updated)

    def _needs_the_app(self, request: Request) -> bool:
        """Whether a 2026-07-28-form request is one the catalog never answers (a held
        ``subscriptions/listen`` is not: it waits for one that is)."""
        return request.method not in CATALOG_METHODS and request.method != "subscriptions/listen"

    def _remember(self, method: str, params: Any, line: bytes) -> None:
        """Keep what the app served for a catalog method (``line``: its reply) in the catalog."""
        from ..core.lazylaunch import record, record_refusal

        if self.catalog is None or method not in CATALOG_METHODS or method == "ping":
            return
        try:
            reply = json.loads(line)
        except ValueError:
            return
        if not isinstance(reply, dict):
            return
        app, endpoint, now = self.catalog.app_name, self.catalog.endpoint_identity, time.time()
        if "error" in reply:  # a list the app refuses (lazylaunch.record_refusal keeps only an undeclared one's)
            updated = record_refusal(self.catalog.entry(), method, reply["error"], app=app, endpoint=endpoint, now_seconds=now)
        elif isinstance(reply.get("result"), dict):
            updated = record(self.catalog.entry(), method, params, reply["result"], app=app, endpoint=endpoint, now_seconds=now)
        else:
            return
        if updated is not None:
            self.catalog.replace(updated)

    async def _open_deferred_session(self, request: Request, emit: Emit) -> None:
        """Start the app (if no bridge did), replay the client's ``initialize`` to open the
        MCP session it was promised, then :meth:`_relist_and_announce`.

        Raises:
            UpstreamError: the app could not be started, or refused the replay, or now
                speaks another protocol version than the client was told (``session_lost``).
        """
        async with self._open_lock:
            cached = self._deferred
            if cached is None:
                if self._translated_after_update:  # (another request found the app updated meanwhile)
                    raise ReplayRefusedError(f"{self._app} now serves MCP 2026-07-28 only.", recoverable=False)
                return  # (another request opened it meanwhile)
            log.info("%s is needed now, for %s: starting it", self._app, named(request))
            await self._driver.ensure_running()
            # (a refusal, ReplayRefusedError, keeps the deferred session: the layer above may
            # find the app now serves 2026-07-28 only, translate_after_refusal)
            line = await self._driver.open_session(self._deferred_version)
            self._deferred = None
            self._opened.set()
            self._remember("initialize", self._initialize_params, line)
        await self._relist_and_announce(cached, emit, meta=None)

    async def translate_after_refusal(self, translate: Callable[[], Awaitable[bool]]) -> bool:
        """After the app refused the replayed ``initialize`` of the deferred session: run
        ``translate`` (the era router sends the client's ``initialize``, then
        ``server/discover``, as for a live client) and say whether the app now serves
        2026-07-28 only (an update since the catalog was written). Then the deferred session
        is over: the client's requests are translated, and its first one that needs the app
        lists again what it was served and tells it what changed. Else the deferred session
        stays (the next request tries again)."""
        async with self._open_lock:
            if self._translated_after_update:
                return True
            cached = self._deferred
            if cached is None:
                return False
            translated = await translate()  # (the initialize it sends ends the deferred session: restored below)
            if not translated:
                self._deferred = cached
                return False
            self._deferred = None
            self._opened.set()
            self._stateless_served = cached
            self._translated_after_update = True
        log.info("%s now serves MCP 2026-07-28 only (updated since its catalog was written); translating from here on", self._app)
        return True

    async def _announce_after_launch(self, request: Request, emit: Emit) -> None:
        """A translated legacy client's first request the catalog cannot answer, after others
        were answered from it (a 2026-07-28-only app, ``bridge/serve/modernapp.py``): start
        the app (if no bridge did), then :meth:`_relist_and_announce` in the 2026-07-28 form
        of ``request`` (there is no session to open).

        Raises:
            UpstreamError: the app could not be started (the next request tries again).
        """
        async with self._open_lock:
            cached = self._stateless_served
            if cached is None:
                return  # (another request did it meanwhile)
            log.info("%s is needed now, for %s: starting it", self._app, named(request))
            await self._driver.ensure_running()  # (on failure, the next request tries again)
            self._stateless_served = None
        meta = request.params.get("_meta") if isinstance(request.params, dict) else None
        meta = {key: value for key, value in meta.items() if key != "progressToken"} if isinstance(meta, dict) else None
        await self._relist_and_announce(cached, emit, meta=meta)

    async def _relist_and_announce(self, cached: dict[str, Any], emit: Emit, *, meta: dict[str, Any] | None) -> None:
        """List again, privately, the lists the client was served from ``cached`` (first pages;
        each result kept in the catalog; ``meta``: the 2026-07-28 request ``_meta`` to send
        them with, ``None``: in the session, 2025 era), all within
        :data:`RELIST_AFTER_LAUNCH_SECONDS`, and tell the client (``emit``) which lists changed.
        A list that fails is left out (logged)."""
        from ..core.lazylaunch import changed_list_notifications

        served: dict[str, Any] = {}
        owed: list[str] = []
        with move_on_after(RELIST_AFTER_LAUNCH_SECONDS):
            for method in (cached.get("lists") or {}).keys():
                params = {"_meta": meta} if meta is not None else None
                try:
                    line = await self._driver.send_private("list", method, params)
                    reply = json.loads(line)
                except (UpstreamError, ValueError) as exc:
                    log.info("listing %s after the launch failed: %s", method, getattr(exc, "message", exc))
                    continue
                if isinstance(reply, dict) and isinstance(reply.get("result"), dict):
                    served[method] = reply["result"]
                    self._remember(method, params, line)
            owed = changed_list_notifications(cached, served)
        for method in owed:
            log.info("%s serves other lists than its catalog had: %s", self._app, method)
            notification = {"jsonrpc": "2.0", "method": method}
            await emit(encode_message(notification), notification)

    # -- what the layers above ask of the app side -----------------------------------------

    async def deliver(self, body: bytes, what: str) -> None:
        """Forward a notification or a client response (no reply is owed). While a lazily
        answered client has no MCP session yet, nothing is sent (the app is not running; the
        replayed ``initialize`` sends its own ``notifications/initialized``).

        Raises:
            UpstreamError: the error that ended the recovery flow (the caller logs it).
        """
        if self._deferred is not None:
            log.debug("%s not sent: %s is not started yet", what, self._app)
            return
        await self._driver.deliver(body, what)

    async def listen(self, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
        """Relay the app's GET stream until cancelled (``Driver.listen``). While a lazily
        answered client has no MCP session, ``on_open`` is called at once and the GET waits
        for one."""
        if self._deferred is not None:
            if on_open is not None:
                on_open()
                on_open = None
            await self._opened.wait()
        await self._driver.listen(emit, on_open=on_open)

    async def get_stream(self, emit: Emit, on_open: Callable[[], None] | None = None) -> None:
        """One GET stream of the MCP session (``Driver.get_stream``)."""
        await self._driver.get_stream(emit, on_open)

    async def rebuild_session(self, lost_generation: int | None) -> None:
        """Rebuild the MCP session (``Driver.rebuild_session``)."""
        await self._driver.rebuild_session(lost_generation)

    @property
    def rebuilds(self) -> int:
        """How many session rebuilds succeeded (``Driver.rebuilds``)."""
        return self._driver.rebuilds

    @property
    def request_timeout_seconds(self) -> float:
        """The bound of one request (seconds)."""
        return self._driver.request_timeout_seconds

    def list_changed_notifications(self) -> list[bytes]:
        """``Driver.list_changed_notifications``."""
        return self._driver.list_changed_notifications()

    async def terminate_session(self, timeout_seconds: float | None = None) -> None:
        """``Driver.terminate_session``."""
        await self._driver.terminate_session(timeout_seconds)

    async def aclose(self) -> None:
        """``Driver.aclose``."""
        await self._driver.aclose()


class _AcknowledgedOnce:
    """A 2026-07-28 listen stream's ``emit`` that passes on one
    ``notifications/subscriptions/acknowledged`` at most: once the bridge acknowledged the
    stream from the catalog (:meth:`send`, ``acknowledged``), the app's own, when the held
    stream reaches it, is dropped (the client was told already; a second one would be a
    second stream opening)."""

    __slots__ = ("_emit", "acknowledged")

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self.acknowledged = False

    async def send(self, line: bytes, message: Any) -> None:
        await self._emit(line, message)

    async def __call__(self, line: bytes, message: Any) -> None:
        if self.acknowledged and _is_acknowledgment(line, message):
            self.acknowledged = False  # (one dropped: a later one is a reopened stream's, passed on)
            return
        await self._emit(line, message)


def _is_acknowledgment(line: bytes, message: Any) -> bool:
    if message is None and b"notifications/subscriptions/acknowledged" in line:
        try:
            message = json.loads(line)
        except ValueError:
            return False
    return isinstance(message, dict) and message.get("method") == "notifications/subscriptions/acknowledged"

