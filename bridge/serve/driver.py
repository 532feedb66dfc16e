"""The flow driver: performs what the recovery policy asks for, for every message.

``policy.forward_flow`` decides (send, refresh the token, start the app, rebuild the
session, list the tools again, give up); this module does it, with the parts that own
each resource, given to it by the composition root (``bridge/serve/parts.py``):

- :class:`~bridge.app.discovery.Endpoint` — where the app listens;
- :class:`~bridge.app.tokenstore.TokenStore` — the bearer token, refreshed single-flight;
- :class:`~bridge.app.launcher.Launcher` — ``ensure_running``, single-flight across bridges;
- :class:`~bridge.streamable.upstream.Upstream` — the HTTP exchange and the MCP session;
- the session rebuild itself (MCP basic/transports, "Session Management": a 404 means start
  a new session; docs/discovery.md, "App restarts"): replay the
  client's stored ``initialize`` under a private id whose reply never reaches stdout, POST
  ``notifications/initialized``, then let the session loop reopen the GET stream and tell
  the client its lists may have changed. Many requests failing together cause one rebuild;
  while it runs, other requests wait for it instead of going out without a session.

Each request's era (``request.era``, ``bridge/core/era.py``) says which rules apply: its headers,
whether a lost session may be rebuilt, whether a header mismatch is recovered. The session
loop and ``check`` use this class's public methods, never the parts behind it.

**Lazy launch** (docs/behaviour.md, "Lazy launch"; the rules are ``bridge/core/lazylaunch.py``).
With a :class:`~bridge.app.servedcatalog.ServedCatalog`, a request the catalog may answer
(``initialize``, ``server/discover``, the four lists, ``ping``) whose connection is refused
is answered from it at the moment the recovery policy would start the app. A legacy client
so answered has no MCP session yet: its later notifications are not sent, its GET stream
waits, and the first request the catalog cannot answer starts the app, replays the
client's ``initialize`` (the client never sees that reply), lists again what the client was
served and announces each list that differs, then goes out. Every catalog method's reply
from the app updates the catalog. Across eras: a 2025-era client translated for a
2026-07-28-only app (the catalog's ``refusesInitialize``, ``bridge/serve/modernapp.py``)
is answered from the cached ``server/discover``; its first request the catalog cannot
answer starts the app, lists again in the 2026-07-28 form and announces what changed
(there is no session to open). A ``server/discover`` for an app marked ``refusesDiscover``
gets the app's refusal from the catalog, and so does a list the app refused while
declaring no capability for it (Codex asks ``resources/list`` of a tools-only app at every
start). The log line that starts the app names the request that needed it. A catalog's
answer never counts as proof of the app's era (``--protocol-era auto``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..app.discovery import Endpoint
from ..app.launcher import Launcher
from ..app.tokenstore import TokenStore
from ..core.config import DEFAULT_APP_NAME, DEFAULT_MAX_MESSAGE_BYTES
from ..core.era import LEGACY, HeaderMap, filter_tools, is_header_mismatch
from ..core.eramap import cancelled_notification, is_legacy_refusal
from ..core.errors import HTTPStatusError, SessionLostError, UpstreamError, UpstreamTimeoutError
from ..core.jsonrpc import Request, encode_message
from ..core.ledger import id_key
from ..core.policy import (
    HEADER_MISMATCH_REPLY,
    MAX_TOOL_PAGES,
    AttemptOutcome,
    EnsureRunning,
    RebuildSession,
    RefreshToken,
    RelistTools,
    Send,
    WaitThenSend,
    forward_flow,
    is_idempotent,
)
from ..core.quirks import LIST_ITEMS, ListMerge
from ..streamable.headers import SSE_MEDIA_TYPE, StreamState, media_type
from ..streamable.upstream import Emit, Upstream, map_transport_errors
from ..system.cancelscope import current_time, move_on_after
from .eras import LegacyAppEras
from .modernapp import ModernAppEras

if TYPE_CHECKING:
    from ..app.listener import ListenerCheck
    from ..app.servedcatalog import ServedCatalog

__all__ = ["Driver"]

log = logging.getLogger("bridge")

_INITIALIZED = encode_message({"jsonrpc": "2.0", "method": "notifications/initialized"})[:-1]
#: The lists a client caches; after a rebuild it is told they may have changed.
_LISTS = ("tools", "prompts", "resources")
#: Bound on listing again, after a lazy launch, what the client was served (seconds).
RELIST_AFTER_LAUNCH_SECONDS = 10.0
#: At most this many replies are remembered as the catalog's until the trace asks (bounded memory).
MAX_CATALOG_MARKS = 1024
#: Bound on telling the app that a private page (``--merge-list-pages``) is abandoned (seconds).
PAGE_CANCEL_SECONDS = 1.0


class _FromCatalog(Exception):
    """Raised through ``_run`` instead of starting the app: the catalog answers (``reply``:
    ``{"result": …}``, or ``{"error": …}`` for the refusal it records)."""

    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__("answered from the catalog")
        self.reply = reply


class Driver:
    """Forward messages to the app, recovering as ``policy.forward_flow`` allows.

    Takes its parts (``bridge/serve/parts.py`` builds them from a configuration: ``build_driver``).

    Args:
        upstream: the HTTP exchange and the MCP session.
        tokens: the bearer token store the upstream uses.
        launcher: ``ensure_running`` for the app.
        endpoint: where the app listens (the one the upstream and the launcher use).
        app_name: how the app is named in messages.
        on_session_rebuilt: called (awaited) after every successful session rebuild.
        protocol_era: ``auto``, ``legacy`` or ``modern`` (``BridgeConfig.protocol_era``): which
            era translations may run (``bridge/serve/eras.py`` for a 2026-07-28 client with a
            legacy-only app, ``bridge/serve/modernapp.py`` for a 2025-era client with a
            2026-07-28-only app).
        catalog: what the app last served, for lazy launch (``None``: no lazy launch).
        launch_policy: ``on-call``, ``on-start`` or ``never`` (``BridgeConfig.launch_policy``).
        merge_list_pages: merge a list's pages into one reply (``BridgeConfig.merge_list_pages``;
            :meth:`request`).
        max_message_bytes: the merged reply's cap (bytes, ``BridgeConfig.max_message_bytes``).
    """

    def __init__(
        self,
        upstream: Upstream,
        tokens: TokenStore,
        launcher: Launcher,
        endpoint: Endpoint,
        *,
        app_name: str = DEFAULT_APP_NAME,
        on_session_rebuilt: Callable[[], Awaitable[None]] | None = None,
        protocol_era: str = "auto",
        catalog: ServedCatalog | None = None,
        launch_policy: str = "on-call",
        merge_list_pages: bool = False,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._app = app_name
        #: Where the app listens (read by ``check``).
        self.endpoint = endpoint
        self._tokens = tokens
        self._upstream = upstream
        self._launcher = launcher
        self._on_session_rebuilt = on_session_rebuilt
        self._initialize: Request | None = None
        self._rebuild_lock = asyncio.Lock()
        #: How many session rebuilds succeeded (logs and tests read it).
        self.rebuilds = 0
        self._replays = 0
        #: The client's era: that of its last 2026-07-28 request or ``initialize`` (what a
        #: message that names no request, a cancellation of an unknown id, goes by).
        self.client_era = LEGACY
        self._tool_headers: dict[str, HeaderMap] = {}
        self._protocol_era = protocol_era
        #: A 2026-07-28 client with a legacy-only app (``bridge/serve/eras.py``).
        self.eras = LegacyAppEras(self, ask_app=protocol_era == "auto") if protocol_era != "modern" else None
        #: A 2025-era client with a 2026-07-28-only app (``bridge/serve/modernapp.py``).
        self.modern_app = (
            ModernAppEras(
                self, always=protocol_era == "modern", app_name=app_name, answer_timeout_seconds=upstream.request_timeout_seconds
            )
            if protocol_era != "legacy"
            else None
        )
        #: What the app last served (lazy launch), or ``None``.
        self.catalog = catalog
        self._launch_policy = launch_policy
        # The catalog entry a legacy client's initialize was answered from while no MCP
        # session is open (the app not started yet); ``None`` once one is, or never.
        self._deferred: dict[str, Any] | None = None
        self._deferred_version: Any = None  # the protocolVersion the catalog told that client
        # The catalog entry a 2026-07-28-form request (a translated legacy client's, or a
        # 2026-07-28 client's) was answered from while the app was down; ``None`` once the
        # app was needed (its lists then listed again), or never.
        self._stateless_served: dict[str, Any] | None = None
        # The 2026-07-28 requests in flight under ``auto`` whose reply says which era the app
        # speaks (id → whether the catalog answered it instead: then it says nothing).
        self._catalog_answered: dict[Any, bool] = {}
        self._opened = asyncio.Event()  # set once a deferred session is open
        self._app_reached = asyncio.Event()  # set once a request of this bridge reached the app
        self._open_lock = asyncio.Lock()
        self._merge_list_pages = merge_list_pages
        self._max_message_bytes = max_message_bytes
        self._pages = 0  # private page requests sent (their ids)
        self._notices: set[asyncio.Task[None]] = set()  # cancellations of private pages, in flight
        self._from_catalog: dict[Any, bool] = {}  # ids whose reply came from the catalog, until asked

    async def request(self, request: Request, emit: Emit) -> bytes:
        """Forward a request; return its stdout line (the app's reply, or the catalog's).

        With ``merge_list_pages``, a ``tools/list``, ``prompts/list``, ``resources/list`` or
        ``resources/templates/list`` whose reply has a ``nextCursor`` is answered with the
        app's pages merged into one list (docs/behaviour.md, "Quirks smoothed"; the rules:
        :class:`~bridge.core.quirks.ListMerge`). The next pages go out under private ids
        (``mcp-app-bridge-page-N``) the client never sees, each a copy of the client's
        request with ``cursor`` set; all of them within the client's request timeout,
        counted from now. A page that fails, or a bound (``MAX_LIST_PAGES`` pages,
        ``max_message_bytes``, the timeout, a repeated cursor), ends the merge: the reply
        then holds the pages merged so far and the ``nextCursor`` of the first page not
        merged, and one warning is logged. A failing first page is answered as without
        the option. A page the timeout cut off is cancelled at the app
        (``notifications/cancelled``, before 2026-07-28; closing its exchange says it since).

        Raises:
            UpstreamError: the error that ended the recovery flow (of the first page).
        """
        if not self._merge_list_pages or request.method not in LIST_ITEMS:
            return await self._request_one(request, emit)
        deadline = current_time() + self._upstream.request_timeout_seconds
        line = await self._request_one(request, emit)
        if b'"nextCursor"' not in line:
            return line
        try:
            first = json.loads(line)
        except ValueError:
            return line
        merge = ListMerge.start(request.method, first, max_message_bytes=self._max_message_bytes)
        if merge is None:
            return line
        await self._merge_pages(request, emit, merge, deadline)
        merged = encode_message(merge.reply())
        if merge.stopped is not None:
            log.warning(
                "%s: merged %d page(s) of %s's list, then stopped: %s; the reply keeps the nextCursor of the next page",
                request.method,
                merge.pages,
                self._app,
                merge.stopped,
            )
        elif self.catalog is not None:  # the whole list: what lazy launch may serve
            self._remember(request.method, request.params, merged)
        return merged

    async def _merge_pages(self, request: Request, emit: Emit, merge: ListMerge, deadline: float) -> None:
        """Ask the app for the pages after the first until ``merge`` is complete or stops,
        by ``deadline`` (loop time, seconds)."""
        while merge.next_cursor is not None and merge.stopped is None:
            page = merge.pages + 1
            left = deadline - current_time()
            if left <= 0:
                merge.stop(f"the request timeout ran out before page {page}")
                return
            self._pages += 1
            params = merge.page_params(request.params)
            message = {"jsonrpc": "2.0", "id": f"mcp-app-bridge-page-{self._pages}", "method": request.method, "params": params}
            private = Request(message["id"], request.method, params, encode_message(message)[:-1])
            scope = move_on_after(left)
            try:
                with scope:
                    line = await self._request_one(private, emit)
            except UpstreamError as exc:
                if isinstance(exc, UpstreamTimeoutError):
                    self._cancel_page(private)
                merge.stop(f"page {page} failed: {exc.message}")
                return
            except asyncio.CancelledError:  # the client cancelled its request, or the bridge stops
                self._cancel_page(private)
                raise
            if scope.cancelled_caught:
                self._cancel_page(private)
                merge.stop(f"the request timeout ran out while page {page} was read")
                return
            try:
                reply = json.loads(line)
            except ValueError:
                merge.stop(f"page {page} is not JSON")
                return
            merge.add(reply)

    def _cancel_page(self, page: Request) -> None:
        """Tell the app a private page is abandoned, in its own task, bounded (before
        2026-07-28: ``notifications/cancelled``; since, the closed exchange said it)."""
        if not page.era.sends_timeout_cancellation:
            return
        body = encode_message(cancelled_notification(page.id, "The bridge stopped waiting for this page."))[:-1]

        async def notify() -> None:
            try:
                with move_on_after(PAGE_CANCEL_SECONDS):
                    await self.deliver(body, "notification notifications/cancelled")
            except UpstreamError as exc:
                log.info("the cancellation of %s not delivered: %s", page.id, exc.message)

        task = asyncio.get_running_loop().create_task(notify())
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def _request_one(self, request: Request, emit: Emit) -> bytes:
        """Forward one request (its era translated as needed); return its stdout line. A
        2026-07-28 request to an app that proved legacy-only is translated
        (``bridge/serve/eras.py``), and so is a legacy request to an app that proved
        2026-07-28-only (``bridge/serve/modernapp.py``), as ``--protocol-era`` allows.

        Raises:
            UpstreamError: the error that ended the recovery flow.
        """
        if request.era.stateless:
            eras = self.eras
            if eras is not None and eras.handles(request):
                if self._protocol_era == "auto" and eras.initialize_result is None:
                    # auto: the request goes as it is. A client's own probe gets the app's
                    # refusal (a client that probes falls back to initialize by itself, losing
                    # nothing); a request refused for want of a session, from a client that
                    # never probes, is translated (docs/behaviour.md, "Protocol eras").
                    self._catalog_answered[request.id] = False
                    from_catalog = False
                    try:
                        try:
                            line = await self.forward(request, emit)
                        finally:
                            from_catalog = self._catalog_answered.pop(request.id, False)
                    except HTTPStatusError as exc:
                        if request.method == "server/discover" and 400 <= exc.http_status < 500:
                            self.mark_catalog("refusesDiscover", True)
                        if request.method == "server/discover" or not 400 <= exc.http_status < 500 or exc.http_status == 404:
                            raise
                    else:
                        reply = json.loads(line)
                        refused = is_legacy_refusal(reply)
                        if from_catalog:
                            return line  # the catalog's answer, not the app's: it proves nothing
                        if not refused:
                            self.eras = None  # the app speaks 2026-07-28: nothing to translate
                        elif request.method == "server/discover":
                            self.mark_catalog("refusesDiscover", _error_of(reply))
                        if request.method == "server/discover" or not (refused and _wants_a_session(line)):
                            return line
                    log.info("%s refused a 2026-07-28 %s as a legacy-only app does; translating", self._app, request.method)
                return await eras.request(request, emit)
        elif self.modern_app is not None and self.modern_app.handles(request):
            return await self.modern_app.request(request, emit)
        return await self.forward(request, emit)

    async def forward(self, request: Request, emit: Emit) -> bytes:
        """Forward a request as it is, in its own era; return its stdout line (the app's
        reply, or the catalog's).

        Raises:
            UpstreamError: the error that ended the recovery flow.
        """
        era = request.era
        if request.method == "initialize" or era.stateless:
            self.client_era = era
        if request.method == "initialize" and era.may_rebuild:
            self._initialize = request  # what a session rebuild replays
            self._deferred = None
        if self._deferred is not None and not era.stateless:  # no MCP session yet (lazy launch)
            from ..core.lazylaunch import catalog_answer

            answer = catalog_answer(request.method, request.params, self._deferred, modern=False)
            if answer is not None:
                return self._catalog_reply(request, answer)
            if await self._open_deferred_session(request, emit):  # the app now serves 2026-07-28 only
                assert self.modern_app is not None
                return await self.modern_app.request(request, emit)
        elif self._stateless_served is not None and era.stateless and self._translating_for_legacy() and self._needs_the_app(request):
            await self._announce_after_launch(request, emit)
        relist = functools.partial(self._relist_tools, request) if era.relists_on_mismatch(request.method) else None
        launch: Callable[[], Awaitable[None]] | None = functools.partial(self._launch_for, request)
        if self.catalog is not None and self._may_answer_from_catalog(request.method):
            launch = functools.partial(self._launch_unless_cataloged, request)
        elif self.catalog is not None and request.method == "subscriptions/listen" and self._launch_policy != "on-start":
            launch = self._hold_listen_until_the_app_is_needed
        try:
            line = await self._run(
                lambda: self._upstream.send_request(
                    request,
                    emit,
                    modern_headers=era.headers(request.method, request.params, self._tool_headers),
                    endless=era.endless(request.method),
                ),
                can_rebuild=era.may_rebuild,
                relist=relist,
                idempotent=is_idempotent(request.method),
                remaining_seconds=_time_left(self._upstream.request_timeout_seconds),
                launch=launch,
            )
        except _FromCatalog as answer:
            if request.method == "initialize" and era.may_rebuild:
                self._deferred = self.catalog.entry() if self.catalog is not None else None
                self._deferred_version = answer.reply.get("result", {}).get("protocolVersion")
                log.info("%s is not running; initialize answered from its catalog (it starts on the first call)", self._app)
            elif era.stateless and self._stateless_served is None and not self._app_reached.is_set() and self.catalog is not None:
                self._stateless_served = self.catalog.entry()
            if request.id in self._catalog_answered:
                self._catalog_answered[request.id] = True
            return self._catalog_reply(request, answer.reply)
        self._app_reached.set()
        if self.catalog is not None:
            self._remember(request.method, request.params, line)
        return self._filter_tool_list(line) if era.filters_tool_list(request.method) else line

    # -- lazy launch ---------------------------------------------------------------------

    def _may_answer_from_catalog(self, method: str) -> bool:
        # (imported here: a run without a launcher, so without a catalog, never loads it)
        from ..core.lazylaunch import answers_from_catalog

        return answers_from_catalog(self._launch_policy, method)

    async def _launch_unless_cataloged(self, request: Request) -> None:
        """The flow's ``EnsureRunning`` for a request the catalog may answer: raise
        :class:`_FromCatalog` when it does, else start the app."""
        from ..core.lazylaunch import catalog_answer, discover_refusal, why_not_answered

        assert self.catalog is not None
        entry = self.catalog.entry()
        if request.method == "server/discover" and self._protocol_era == "auto":
            refusal = discover_refusal(entry)
            if refusal is not None:
                log.info("%s is not running; server/discover refused from its catalog (the app serves the 2025 era only)", self._app)
                raise _FromCatalog({"error": refusal})
        answer = catalog_answer(request.method, request.params, entry, modern=request.era.stateless)
        if answer is not None:
            raise _FromCatalog(answer)
        if entry is not None:
            log.info(
                "%s is not running and its catalog does not answer %s: %s; starting it",
                self._app, _named(request), why_not_answered(request.method, request.params, entry),
            )
        elif self._launcher.configured:
            log.info("%s is not running and has no catalog yet; %s needs it: starting it", self._app, _named(request))
        await self._launcher.ensure_running()

    async def _launch_for(self, request: Request) -> None:
        """The flow's ``EnsureRunning`` for ``request``: start the app, the log naming the
        request that needed it."""
        if self._launcher.configured:
            log.info("%s is not running; %s needs it: starting it", self._app, _named(request))
        await self._launcher.ensure_running()

    async def _hold_listen_until_the_app_is_needed(self) -> None:
        """The flow's ``EnsureRunning`` for a 2026-07-28 ``subscriptions/listen`` that found
        the app down while a catalog answers the client's start-up: the stream is held, and
        the app is not started for it (Claude Code opens one at every start, ``claude mcp
        list`` included). It goes out once another request of this bridge reached the app
        (the first call starts it). Once the app was reached, a listen that finds it down
        starts it, as without a catalog."""
        assert self.catalog is not None
        if self._app_reached.is_set() or self.catalog.entry() is None:
            await self._launcher.ensure_running()
            return
        log.info("%s is not running; subscriptions/listen waits for the first request that needs it", self._app)
        await self._app_reached.wait()

    def answered_from_catalog(self, request_id: Any) -> bool:
        """Whether the last reply :meth:`request` returned for ``request_id`` came from the
        catalog (the trace's "answered by"); asked once per reply, which forgets it."""
        return self._from_catalog.pop(id_key(request_id), False)

    def _catalog_reply(self, request: Request, answer: dict[str, Any]) -> bytes:
        if len(self._from_catalog) >= MAX_CATALOG_MARKS:  # (a private request's mark is never asked for)
            self._from_catalog.clear()
        self._from_catalog[id_key(request.id)] = True
        reply = encode_message({"jsonrpc": "2.0", "id": request.id, **answer})
        return self._filter_tool_list(reply) if request.era.filters_tool_list(request.method) else reply

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

    def _translating_for_legacy(self) -> bool:
        return self.modern_app is not None and self.modern_app.active

    def _needs_the_app(self, request: Request) -> bool:
        """Whether a 2026-07-28-form request is one the catalog never answers (a held
        ``subscriptions/listen`` is not: it waits for one that is)."""
        from ..core.lazylaunch import CATALOG_METHODS

        return request.method not in CATALOG_METHODS and request.method != "subscriptions/listen"

    async def _announce_after_launch(self, request: Request, emit: Emit) -> None:
        """A translated legacy client's first request the catalog cannot answer, after others
        were answered from it (a 2026-07-28-only app, ``bridge/serve/modernapp.py``): start
        the app (if no bridge did), list again what the catalog held, in the 2026-07-28
        form of ``request``, and tell the client (``emit``) which lists changed, as
        :meth:`_open_deferred_session` does for a legacy session.

        Raises:
            UpstreamError: the app could not be started (the next request tries again).
        """
        async with self._open_lock:
            cached = self._stateless_served
            if cached is None:
                return  # (another request did it meanwhile)
            log.info("%s is needed now, for %s: starting it", self._app, _named(request))
            await self._launcher.ensure_running()  # (on failure, the next request tries again)
            self._stateless_served = None
        from ..core.lazylaunch import changed_list_notifications

        meta = request.params.get("_meta") if isinstance(request.params, dict) else None
        meta = {key: value for key, value in meta.items() if key != "progressToken"} if isinstance(meta, dict) else None
        owed: list[str] = []
        with move_on_after(RELIST_AFTER_LAUNCH_SECONDS):
            served = await self._list_privately(list((cached.get("lists") or {}).keys()), meta=meta)
            owed = changed_list_notifications(cached, served)
        for method in owed:
            log.info("%s serves other lists than its catalog had: %s", self._app, method)
            notification = {"jsonrpc": "2.0", "method": method}
            await emit(encode_message(notification), notification)

    def _remember(self, method: str, params: Any, line: bytes) -> None:
        """Keep what the app served for a catalog method (``line``: its reply) in the catalog."""
        from ..core.lazylaunch import CATALOG_METHODS, record, record_refusal

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

    async def _open_deferred_session(self, request: Request, emit: Emit) -> bool:
        """Start the app (if no bridge did) for ``request``, the first the catalog does not
        answer, replay the client's ``initialize`` to open the MCP session it was promised,
        list again what it was served and tell it (``emit``) which lists changed. Returns
        ``True`` when the app refused the replay because it now serves 2026-07-28 only (an
        update since the catalog was written): the client is then translated
        (``modern_app``) from this request on, and no session is opened.

        Raises:
            UpstreamError: the app could not be started, or refused the replay (and is no
                2026-07-28-only app), or now speaks another protocol version than the
                client was told (``session_lost``).
        """
        async with self._open_lock:
            cached = self._deferred
            if cached is None:
                return self.modern_app is not None and self.modern_app.active  # (another request opened it meanwhile)
            log.info("%s is needed now, for %s: starting it", self._app, _named(request))
            await self._launcher.ensure_running()
            session = self._upstream.session
            generation = session.generation
            try:
                with session.rebuilding():
                    line = await self._replay_initialize(generation)
            except SessionLostError:
                # No session came of it (a refusal, not another version): is it 2026-07-28 only now?
                if session.generation != generation or not await self._translate_after_update():
                    raise
                self._stateless_served = cached  # its first translated call lists again and tells what changed
                return True
            told = self._deferred_version
            if session.protocol_version != told:
                raise SessionLostError(
                    f"{self._app} now speaks protocol version {session.protocol_version}, not {told}; "
                    "restart the AI client's connection.",
                    recoverable=False,
                )
            self._deferred = None
            self._opened.set()
            self._remember("initialize", self._initialize.params if self._initialize else None, line)
        from ..core.lazylaunch import changed_list_notifications

        owed: list[str] = []
        with move_on_after(RELIST_AFTER_LAUNCH_SECONDS):
            served = await self._list_privately(list((cached.get("lists") or {}).keys()))
            owed = changed_list_notifications(cached, served)
        for method in owed:
            log.info("%s serves other lists than its catalog had: %s", self._app, method)
            notification = {"jsonrpc": "2.0", "method": method}
            await emit(encode_message(notification), notification)
        return False

    async def _translate_after_update(self) -> bool:
        """After the app refused the replayed ``initialize``: whether it now serves
        2026-07-28 only (``modern_app`` sent the client's ``initialize`` and then
        ``server/discover``, as for a live client, and marked the catalog). Then the
        deferred session is over: requests go through the translation."""
        if self.modern_app is None or self._initialize is None:
            return False
        deferred = self._deferred  # (the initialize sent below clears it)
        try:
            await self.modern_app.request(self._initialize, _drop)  # (the client had its answer from the catalog)
        except UpstreamError as exc:
            log.info("%s refused the replayed initialize, and server/discover failed: %s", self._app, exc.message)
        if not self.modern_app.active:
            self._deferred = deferred  # as before: the next request tries again
            return False
        self._deferred = None
        self._opened.set()
        log.info("%s now serves MCP 2026-07-28 only (updated since its catalog was written); translating from here on", self._app)
        return True

    async def _list_privately(self, methods: list[str], *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """List ``methods`` (first pages) under private ids; keep each result in the catalog.
        ``meta``: the 2026-07-28 request ``_meta`` to send them with (``None``: in the
        session, 2025 era). A list that fails is left out (logged)."""
        served: dict[str, Any] = {}
        for method in methods:
            self._replays += 1
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": f"mcp-app-bridge-list-{self._replays}", "method": method}
            params = {"_meta": meta} if meta is not None else None
            if params is not None:
                message["params"] = params
            listing = Request(message["id"], method, params, encode_message(message)[:-1])
            headers = listing.era.headers(method, params, self._tool_headers)
            try:
                line = await self._run(
                    functools.partial(self._upstream.send_request, listing, _drop, modern_headers=headers), can_rebuild=False
                )
                reply = json.loads(line)
            except (UpstreamError, ValueError) as exc:
                log.info("listing %s after the launch failed: %s", method, getattr(exc, "message", exc))
                continue
            if isinstance(reply, dict) and isinstance(reply.get("result"), dict):
                served[method] = reply["result"]
                self._remember(method, params, line)
        return served

    def _filter_tool_list(self, line: bytes) -> bytes:
        """Drop tools whose ``x-mcp-header`` annotations are invalid (the client MUST not
        see them) and remember the others' annotations for their calls."""
        reply = json.loads(line)
        if not isinstance(reply, dict) or "result" not in reply:
            return line
        result, dropped = filter_tools(reply["result"], self._tool_headers)
        for name, reason in dropped:
            log.warning("tools/list: hiding tool %r from the client: %s", name, reason)
        return encode_message({**reply, "result": result}) if dropped else line

    async def _relist_tools(self, call: Request) -> None:
        """List the tools again, privately, after the app said a call's headers do not match
        its tool schemas (2026-07-28's ``x-mcp-header``), to learn their annotations anew.

        Raises:
            UpstreamError: the listing failed (logged; the client gets the app's reply).
        """
        log.info("tools/call %r: the app reports a header mismatch; listing its tools again", call.id)
        meta = {key: value for key, value in call.params["_meta"].items() if key != "progressToken"}
        cursor: Any = None
        try:
            for _ in range(MAX_TOOL_PAGES):
                self._replays += 1
                list_params: dict[str, Any] = {"_meta": meta}
                if cursor is not None:
                    list_params["cursor"] = cursor
                message = {"jsonrpc": "2.0", "id": f"mcp-app-bridge-relist-{self._replays}", "method": "tools/list", "params": list_params}
                listing = Request(message["id"], "tools/list", list_params, encode_message(message)[:-1])
                headers = listing.era.headers("tools/list", list_params, self._tool_headers)
                send = functools.partial(self._upstream.send_request, listing, _drop, modern_headers=headers)
                reply = json.loads(await self._run(send, can_rebuild=False))
                result = reply.get("result") if isinstance(reply, dict) else None
                if not isinstance(result, dict):
                    return
                filter_tools(result, self._tool_headers)
                cursor = result.get("nextCursor")
                if cursor is None:
                    return
        except UpstreamError as exc:
            log.warning("listing the tools again failed: %s", exc.message)
            raise
        log.warning("tools/list: stopped after %d pages", MAX_TOOL_PAGES)

    async def deliver(self, body: bytes, what: str) -> None:
        """Forward a notification or a client response (no reply is owed).

        While a lazily answered client has no MCP session yet, nothing is sent (the app is
        not running; the replayed ``initialize`` sends its own ``notifications/initialized``).

        Raises:
            UpstreamError: the error that ended the recovery flow (the caller logs it).
        """
        if self._deferred is not None:
            log.debug("%s not sent: %s is not started yet", what, self._app)
            return
        if self.modern_app is not None and self.modern_app.active:
            await self.modern_app.deliver(body, what)
            return
        await self._run(self._post_message(body, what))

    def _post_message(self, body: bytes, what: str, *, during_rebuild: bool = False) -> Callable[[], Awaitable[bytes]]:
        """A ``Send`` for a message that is owed no reply (its "line" is empty)."""

        async def send() -> bytes:
            await self._upstream.send_message(body, what, during_rebuild=during_rebuild)
            return b""

        return send

    async def _run(
        self,
        send: Callable[[], Awaitable[bytes]],
        *,
        replay: bool = False,
        can_rebuild: bool = True,
        relist: Callable[[], Awaitable[None]] | None = None,
        idempotent: bool = False,
        remaining_seconds: Callable[[], float] | None = None,
        launch: Callable[[], Awaitable[None]] | None = None,
    ) -> bytes:
        """Perform the actions of ``policy.forward_flow`` until it ends; return the line of
        the last ``Send``. ``relist``: how to list the tools again after a header mismatch
        (a 2026-07-28 ``tools/call``), else a mismatch is the answer. ``idempotent`` and
        ``remaining_seconds``: as ``forward_flow`` takes them. ``launch``: what
        ``EnsureRunning`` does instead of ``Launcher.ensure_running`` (lazy launch)."""
        flow = forward_flow(
            can_rebuild=can_rebuild and not replay,
            can_relist=relist is not None,
            idempotent=idempotent,
            remaining_seconds=remaining_seconds,
        )
        action = next(flow)
        line = b""
        while True:
            outcome: AttemptOutcome = None
            try:
                if isinstance(action, Send):
                    # A message that carries the session waits inside the upstream while a
                    # rebuild runs (McpSession.rebuilding), right before it reads the session.
                    line = await send()
                    if relist is not None and is_header_mismatch(line):
                        outcome = HEADER_MISMATCH_REPLY
                elif isinstance(action, RefreshToken):
                    await self._upstream.refresh_token(action.used_generation)
                elif isinstance(action, EnsureRunning):
                    await (launch or self._launcher.ensure_running)()
                elif isinstance(action, RebuildSession):
                    await self.rebuild_session(action.lost_generation)
                elif isinstance(action, RelistTools) and relist is not None:
                    await relist()
                elif isinstance(action, WaitThenSend):
                    log.info("%s asked to be retried after %.0f s (Retry-After); sending again then", self._app, action.delay_seconds)
                    await asyncio.sleep(action.delay_seconds)
            except UpstreamError as exc:
                outcome = exc
            try:
                action = flow.send(outcome)
            except StopIteration:
                return line

    async def rebuild_session(self, lost_generation: int | None) -> None:
        """Get a new MCP session after the app forgot the one of ``lost_generation``
        (``None``: the one current now).

        Single-flight: a caller whose session was already replaced returns at once.

        Raises:
            SessionLostError: (not recoverable) no ``initialize`` to replay, or the replay
                failed; the old session state is kept so the next request tries again.
        """
        session = self._upstream.session
        if lost_generation is None:
            lost_generation = session.generation
        async with self._rebuild_lock:
            if session.generation != lost_generation:
                return
            if self._initialize is None:
                raise SessionLostError(
                    f"{self._app} no longer knows this MCP session and the bridge has no initialize to replay.",
                    recoverable=False,
                )
            with session.rebuilding():
                await self._replay_initialize(lost_generation)
        self.rebuilds += 1
        log.info("%s was restarted; the MCP session was rebuilt", self._app)
        if self._on_session_rebuilt is not None:
            await self._on_session_rebuilt()

    async def _replay_initialize(self, lost_generation: int) -> bytes:
        assert self._initialize is not None
        self._replays += 1
        replay_id = f"mcp-app-bridge-reinit-{self._replays}"
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": replay_id, "method": "initialize"}
        if self._initialize.params is not None:
            message["params"] = self._initialize.params
        replay = Request(replay_id, "initialize", self._initialize.params, encode_message(message)[:-1])
        # The old session stays until the replay succeeds (the replayed initialize carries
        # no session header): a request that read it just before the gate closed gets the
        # app's 404 and waits for this rebuild, where none would have got "missing session".
        session = self._upstream.session
        old = session.snapshot()
        try:
            line = await self._run(lambda: self._upstream.send_request(replay, _drop), replay=True)
            if session.generation == lost_generation:
                raise SessionLostError(f"{self._app} refused the replayed initialize.", recoverable=False)
            if old.protocol_version is not None and session.protocol_version != old.protocol_version:
                raise SessionLostError(
                    f"{self._app} now speaks protocol version {session.protocol_version}, not {old.protocol_version}; "
                    "restart the AI client's connection.",
                    recoverable=False,
                )
            await self._run(
                self._post_message(_INITIALIZED, "notification notifications/initialized", during_rebuild=True), replay=True
            )
            return line
        except UpstreamError as exc:
            session.restore(old)
            raise SessionLostError(
                f"{self._app} was restarted and the MCP session could not be rebuilt: {exc.message}", recoverable=False
            ) from exc

    # -- what the session loop and check ask of the app side -----------------------------

    async def listen(self, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
        """Relay the app's GET stream (server-initiated messages) until cancelled; never
        raises for upstream failures (``Upstream.listen``). ``on_open`` is called once, when
        the first GET has its answer (open, refused) or failed. While a lazily answered
        client has no MCP session, ``on_open`` is called at once and the GET waits for one.
        For a translated 2026-07-28 client the translation keeps the GET stream
        (``bridge/serve/eras.py``): this starts it if needed and returns."""
        if self.eras is not None and self.eras.translating:
            self.eras.start_get_stream(emit)
            if on_open is not None:
                on_open()
            return
        if self._deferred is not None:
            if on_open is not None:
                on_open()
                on_open = None
            await self._opened.wait()
        if self.modern_app is not None and self.modern_app.active:
            await self.modern_app.listen(emit, on_open=on_open)
            return
        await self._upstream.listen(emit, on_open=on_open)

    async def get_stream(self, emit: Emit, on_open: Callable[[], None] | None = None) -> None:
        """Relay one GET stream of the current MCP session (server-initiated messages) to
        ``emit`` until the app ends it; no reconnect, no read bound (the translation of
        ``bridge/serve/eras.py`` keeps it). ``on_open`` is called once the stream is open.

        Raises:
            HTTPStatusError: the app refused it (405: it offers none; 404: it no longer
                knows the session).
            UpstreamError: the stream broke, or the connection failed.
        """
        state = StreamState()

        async def relay(line: bytes, message: dict[str, Any]) -> bool:
            await emit(line, message)
            return False  # the GET stream carries no response to wait for

        with map_transport_errors(self._app):
            async with self._upstream.open_get(state) as response:
                if response.status_code != 200 or media_type(response) != SSE_MEDIA_TYPE:
                    raise HTTPStatusError(f"GET stream refused (HTTP {response.status_code})", response.status_code)
                if on_open is not None:
                    on_open()
                await self._upstream.relay_events(response, state, relay)

    async def terminate_session(self, timeout_seconds: float | None = None) -> None:
        """Best-effort, bounded ``DELETE`` of the MCP session (``Upstream.terminate_session``;
        ``timeout_seconds`` shortens its bound)."""
        await self._upstream.terminate_session(timeout_seconds)

    async def aclose(self) -> None:
        """Close the connections the bridge opened."""
        for task in list(self._notices):
            task.cancel()
        if self.eras is not None:
            await self.eras.aclose()
        await self._upstream.aclose()

    @property
    def request_timeout_seconds(self) -> float:
        """The bound of one request (seconds, ``BridgeConfig.request_timeout_seconds``)."""
        return self._upstream.request_timeout_seconds

    @property
    def can_launch(self) -> bool:
        """Whether a launch command or ``ensure_running`` hook is configured."""
        return self._launcher.configured

    async def ensure_running(self) -> None:
        """Start the app if it is not listening and wait until it is (``Launcher.ensure_running``).

        Raises:
            UpstreamError: ``app_launch_failed`` or ``app_unreachable``, as the launcher says.
        """
        await self._launcher.ensure_running()

    @property
    def launched_pid(self) -> int | None:
        """The pid of the app this bridge started, while it runs (``Launcher.started_pid``)."""
        return self._launcher.started_pid

    def stop_unready_child(self) -> int | None:
        """Stop and reap the app process this bridge launched if it is still running
        (``Launcher.stop_unready_child``): for ``check --launch`` after a failed launch.
        Returns its pid, or ``None``."""
        return self._launcher.stop_unready_child()

    def launch_failure_cause(self) -> str | None:
        """Why the last launch failed, without the retry and without what the bridge leaves
        running (``Launcher.failure_cause``); ``None`` if it did not fail."""
        return self._launcher.failure_cause

    @property
    def listener_check(self) -> ListenerCheck | None:
        """The check made on every new ``http://`` connection (``bridge/app/listener.py``), or
        ``None`` when it is off (``--no-verify-listener``, or a test's injected transport)."""
        return self._upstream.listener_check

    @property
    def token_source_description(self) -> str:
        """How the token source is named in messages ("no token source" when none)."""
        return self._tokens.source_description

    async def current_token(self) -> str | None:
        """The token the next request would carry (fetched on first use), or ``None``.

        Raises:
            AuthRejectedError: (not recoverable) the source failed or timed out.
            AppUnreachableError: the source needs the app, which is not running.
        """
        token, _ = await self._tokens.current(self._upstream.token_context())
        return token

    def list_changed_notifications(self) -> list[bytes]:
        """``notifications/<list>/list_changed`` lines for each list the server said may change
        (none for a translated 2026-07-28 client: its listens end instead, ``eras.py``)."""
        if self.eras is not None and self.eras.translating:
            return []
        lines = []
        for name in _LISTS:
            capability = self._upstream.session.capabilities.get(name)
            if isinstance(capability, dict) and capability.get("listChanged") is True:
                lines.append(encode_message({"jsonrpc": "2.0", "method": f"notifications/{name}/list_changed"}))
        return lines


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


def _named(request: Request) -> str:
    """A request as the log names it: its method and JSON-RPC id (never its params)."""
    return f"{request.method} (id {json.dumps(request.id)})"


def _time_left(timeout_seconds: float) -> Callable[[], float]:
    """What is left, when asked, of ``timeout_seconds`` from now (the event loop's clock)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    return lambda: deadline - loop.time()


async def _drop(line: bytes, message: Any = None) -> None:
    """Where messages on the replayed initialize's stream go: nowhere (the client never
    asked for that exchange)."""
    log.debug("dropped a message from the replayed initialize (%d bytes)", len(line))

