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
whether a lost session may be rebuilt, whether a header mismatch is recovered.

The driver is the lowest of the layers a request passes (CONTRIBUTING.md, "The request
stack"): the era router (``bridge/serve/translate.py``) and lazy launch
(``bridge/serve/lazy.py``) stand above it and call down into it; it never calls up. What
``EnsureRunning`` does for one request is handed to :meth:`Driver.forward` (``launch``): lazy
launch hands a hook that may answer from its catalog instead, and the :class:`Reply` says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from ..app.launcher import Launcher
from ..core.config import DEFAULT_APP_NAME, DEFAULT_MAX_MESSAGE_BYTES
from ..core.era import HeaderMap, filter_tools, is_header_mismatch
from ..core.errors import HTTPStatusError, SessionLostError, UpstreamError, UpstreamTimeoutError
from ..core.jsonrpc import INITIALIZED_BODY, PrivateIds, Request, encode_message
from ..core.legacymap import cancelled_notification
from ..core.methods import LIST_ITEMS, LISTS_THAT_CHANGE
from ..core.policy import (
    HEADER_MISMATCH_REPLY,
    SEND,
    Action,
    AttemptOutcome,
    EnsureRunning,
    Flow,
    RebuildSession,
    RefreshToken,
    RelistTools,
    Send,
    WaitThenSend,
    forward_flow,
    is_idempotent,
)
from ..core.quirks import MAX_LIST_PAGES, ListMerge
from ..streamable.headers import SSE_MEDIA_TYPE, StreamState, media_type
from ..streamable.upstream import Emit, Upstream, map_transport_errors
from ..system.cancelscope import current_time, move_on_after

__all__ = ["Driver", "Reply", "LaunchHook", "ReplayRefusedError", "drop", "named"]

log = logging.getLogger("bridge")

#: Bound on telling the app that a private page (``--merge-list-pages``) is abandoned (seconds).
PAGE_CANCEL_SECONDS = 1.0


class Reply(NamedTuple):
    """A request's stdout line, and whether it came from the lazy-launch catalog (then it
    proves nothing about the app: not that it runs, nor which era it speaks)."""

    line: bytes
    from_catalog: bool = False


class ReplayRefusedError(SessionLostError):
    """The app refused the replayed ``initialize`` of :meth:`Driver.open_session` and no
    session came of it: it may serve MCP 2026-07-28 only now (an update; the era router
    may then translate, ``bridge/serve/translate.py``)."""


#: What ``EnsureRunning`` does for one request instead of ``Launcher.ensure_running``:
#: start the app and return ``None``, or return the line that answers the request instead
#: (lazy launch's catalog, ``bridge/serve/lazy.py``).
LaunchHook = Callable[[], Awaitable[bytes | None]]


class Driver:
    """Forward messages to the app, recovering as ``policy.forward_flow`` allows.

    Takes its parts (``bridge/serve/parts.py`` builds them from a configuration: ``build_stack``).

    Args:
        upstream: the HTTP exchange and the MCP session.
        launcher: ``ensure_running`` for the app.
        private_ids: the ids of the bridge's own requests (one space for all the layers).
        app_name: how the app is named in messages.
        on_session_rebuilt: called (awaited) after every successful session rebuild.
        merge_list_pages: merge a list's pages into one reply (``BridgeConfig.merge_list_pages``;
            :meth:`forward`).
        max_message_bytes: the merged reply's cap (bytes, ``BridgeConfig.max_message_bytes``).
    """

    def __init__(
        self,
        upstream: Upstream,
        launcher: Launcher,
        *,
        private_ids: PrivateIds | None = None,
        app_name: str = DEFAULT_APP_NAME,
        on_session_rebuilt: Callable[[], Awaitable[None]] | None = None,
        merge_list_pages: bool = False,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._app = app_name
        self._upstream = upstream
        self._launcher = launcher
        self._ids = private_ids if private_ids is not None else PrivateIds()
        self._on_session_rebuilt = on_session_rebuilt
        self._initialize: Request | None = None
        self._rebuild_lock = asyncio.Lock()
        #: How many session rebuilds succeeded (logs and tests read it).
        self.rebuilds = 0
        self._tool_headers: dict[str, HeaderMap] = {}
        self._merge_list_pages = merge_list_pages
        self._max_message_bytes = max_message_bytes
        self._notices: set[asyncio.Task[None]] = set()  # cancellations of private pages, in flight
        # An MCP session opened before this driver existed (adopt_initialize): (request id, line, result, headers).
        self._adopted: tuple[Any, bytes, Any, Any] | None = None

    def forward(self, request: Request, emit: Emit, *, launch: LaunchHook | None = None) -> Awaitable[Reply]:
        """Forward a request as it is, in its own era; return its stdout line (the app's
        reply, or the one ``launch`` answered with instead of starting the app).

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
        # (a plain function: on every call, one coroutine fewer to create and resume)
        if request.method == "initialize" and request.era.may_rebuild:
            self._initialize = request  # what a session rebuild replays
            adopted, self._adopted = self._adopted, None
            if adopted is not None and type(adopted[0]) is type(request.id) and adopted[0] == request.id:
                return self._take_adopted(adopted[1:])
        if not self._merge_list_pages or request.method not in LIST_ITEMS:
            return self._forward_one(request, emit, launch)
        return self._forward_merged(request, emit, launch)

    def adopt_initialize(self, request_id: Any, line: bytes, result: Any, headers: Any) -> None:
        """Adopt the MCP session a client's ``initialize`` opened before this driver existed
        (the running-app start, ``bridge/serve/appstart.py``): the next :meth:`forward` of an
        ``initialize`` with ``request_id`` is not sent, but answered with ``line`` (the stdout
        line of the app's reply), and the session takes ``result`` (the reply's ``result``
        member) and ``headers`` (the HTTP response's fields, ``get(name)``: the
        ``Mcp-Session-Id``) as :meth:`McpSession.adopt` takes a reply's. The layers above see
        that ``initialize`` and its reply as any other (MCP basic/lifecycle)."""
        self._adopted = (request_id, line, result, headers)

    async def _take_adopted(self, adopted: tuple[bytes, Any, Any]) -> Reply:
        line, result, headers = adopted
        self._upstream.session.adopt(result, headers)
        return Reply(line)

    async def _forward_merged(self, request: Request, emit: Emit, launch: LaunchHook | None) -> Reply:
        deadline = current_time() + self._upstream.request_timeout_seconds
        reply = await self._forward_one(request, emit, launch)
        if reply.from_catalog or b'"nextCursor"' not in reply.line:
            return reply
        try:
            first = json.loads(reply.line)
        except ValueError:
            return reply
        merge = ListMerge.start(request.method, first, max_message_bytes=self._max_message_bytes)
        if merge is None:
            return reply
        await self._merge_pages(request, emit, merge, deadline)
        if merge.stopped is not None:
            log.warning(
                "%s: merged %d page(s) of %s's list, then stopped: %s; the reply keeps the nextCursor of the next page",
                request.method,
                merge.pages,
                self._app,
                merge.stopped,
            )
        return Reply(encode_message(merge.reply()))

    async def _forward_one(self, request: Request, emit: Emit, launch: LaunchHook | None) -> Reply:
        era, method = request.era, request.method
        # (the era's rules first, all together; the tool headers are read at each send: a
        # relist may change them)
        endless, relists, filters = era.endless(method), era.relists_on_mismatch(method), era.filters_tool_list(method)
        idempotent = is_idempotent(method)
        reply = await self._run(
            lambda: self._upstream.send_request(
                request, emit, modern_headers=era.headers(method, request.params, self._tool_headers), endless=endless
            ),
            can_rebuild=era.may_rebuild,
            relist=(lambda: self._relist_tools(request)) if relists else None,
            idempotent=idempotent,
            deadline=current_time() + self._upstream.request_timeout_seconds,
            launch=launch,
            launching=request,
        )
        return Reply(self._filter_tool_list(reply.line), reply.from_catalog) if filters else reply

    async def _launch_for(self, request: Request) -> None:
        """``EnsureRunning`` for ``request``: start the app, the log naming the request that needed it."""
        if self._launcher.configured:
            log.info("%s is not running; %s needs it: starting it", self._app, named(request))
        await self._launcher.ensure_running()

    async def _merge_pages(self, request: Request, emit: Emit, merge: ListMerge, deadline: float) -> None:
        """Ask the app for the pages after the first until ``merge`` is complete or stops,
        by ``deadline`` (loop time, seconds)."""
        while merge.next_cursor is not None and merge.stopped is None:
            page = merge.pages + 1
            left = deadline - current_time()
            if left <= 0:
                merge.stop(f"the request timeout ran out before page {page}")
                return
            private = self._ids.request("page", request.method, merge.page_params(request.params))
            scope = move_on_after(left)
            try:
                with scope:
                    line = (await self._forward_one(private, emit, None)).line
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

    async def send_private(self, kind: str, method: str, params: Any = None) -> bytes:
        """Send a request of the bridge's own (``mcp-app-bridge-<kind>-<n>``; its stream's
        messages go nowhere), with no session rebuild; return the app's reply line.

        Raises:
            UpstreamError: the error that ended the recovery flow.
        """
        request = self._ids.request(kind, method, params)
        headers = request.era.headers(method, params, self._tool_headers)
        send = lambda: self._upstream.send_request(request, drop, modern_headers=headers)  # noqa: E731
        return (await self._run(send, can_rebuild=False)).line

    async def open_session(self, told_version: Any) -> bytes:
        """Open the MCP session a client was promised while the app was down (lazy launch):
        replay its ``initialize``; return the app's reply line.

        Raises:
            ReplayRefusedError: the app refused the replay (no session came of it).
            UpstreamError: the replay failed otherwise, or the app now speaks another protocol
                version than ``told_version``, the one the client was told (``session_lost``).
        """
        session = self._upstream.session
        generation = session.generation
        try:
            with session.rebuilding():
                line = await self._replay_initialize(generation)
        except SessionLostError as exc:
            if session.generation != generation:
                raise
            raise ReplayRefusedError(exc.message, recoverable=False) from exc
        if session.protocol_version != told_version:
            raise SessionLostError(
                f"{self._app} now speaks protocol version {session.protocol_version}, not {told_version}; "
                "restart the AI client's connection.",
                recoverable=False,
            )
        return line

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
            for _ in range(MAX_LIST_PAGES):
                list_params: dict[str, Any] = {"_meta": meta}
                if cursor is not None:
                    list_params["cursor"] = cursor
                reply = json.loads(await self.send_private("relist", "tools/list", list_params))
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
        log.warning("tools/list: stopped after %d pages", MAX_LIST_PAGES)

    async def deliver(self, body: bytes, what: str) -> None:
        """Forward a notification or a client response (no reply is owed).

        Raises:
            UpstreamError: the error that ended the recovery flow (the caller logs it).
        """
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
        deadline: float | None = None,
        launch: LaunchHook | None = None,
        launching: Request | None = None,
    ) -> Reply:
        """Perform the actions of ``policy.forward_flow`` until it ends; return the line of
        the last ``Send``. ``relist``: how to list the tools again after a header mismatch
        (a 2026-07-28 ``tools/call``), else a mismatch is the answer. ``idempotent``: as
        ``forward_flow`` takes it. ``deadline``: when the request's timeout ends (loop time,
        seconds; ``None``: no ``Retry-After`` is waited for); ``forward_flow`` is told what
        is left of it. ``launch``: what ``EnsureRunning`` does instead of
        ``Launcher.ensure_running`` (lazy launch); a line it returns ends the flow as the
        reply, ``from_catalog``. ``launching``: the request whose ``EnsureRunning`` is
        logged as the one that needed the app.

        Every flow begins with a ``Send``, and a ``Send`` that succeeds ends it: that first
        ``Send`` is made before any flow exists, and the flow (a generator to make and drive)
        is made only when its outcome needs a decision, then told of it. Nearly every
        request takes that path.
        """
        flow: Flow | None = None
        action: Action = SEND
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
                    if launch is not None:
                        if (answer := await launch()) is not None:
                            assert flow is not None
                            flow.close()
                            return Reply(answer, from_catalog=True)
                    elif launching is not None:
                        await self._launch_for(launching)
                    else:
                        await self._launcher.ensure_running()
                elif isinstance(action, RebuildSession):
                    await self.rebuild_session(action.lost_generation)
                elif isinstance(action, RelistTools) and relist is not None:
                    await relist()
                elif isinstance(action, WaitThenSend):
                    log.info("%s asked to be retried after %.0f s (Retry-After); sending again then", self._app, action.delay_seconds)
                    await asyncio.sleep(action.delay_seconds)
            except UpstreamError as exc:
                outcome = exc
            if flow is None:
                if outcome is None:
                    return Reply(line)  # the first Send answered: where the flow would end too
                flow = forward_flow(
                    can_rebuild=can_rebuild and not replay,
                    can_relist=relist is not None,
                    idempotent=idempotent,
                    remaining_seconds=None if deadline is None else (lambda: deadline - current_time()),
                )
                next(flow)  # its first action: the Send just made
            try:
                action = flow.send(outcome)
            except StopIteration:
                return Reply(line)

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
        replay = self._ids.request("reinit", "initialize", self._initialize.params)
        # The old session stays until the replay succeeds (the replayed initialize carries
        # no session header): a request that read it just before the gate closed gets the
        # app's 404 and waits for this rebuild, where none would have got "missing session".
        session = self._upstream.session
        old = session.snapshot()
        try:
            line = (await self._run(lambda: self._upstream.send_request(replay, drop), replay=True)).line
            if session.generation == lost_generation:
                raise SessionLostError(f"{self._app} refused the replayed initialize.", recoverable=False)
            if old.protocol_version is not None and session.protocol_version != old.protocol_version:
                raise SessionLostError(
                    f"{self._app} now speaks protocol version {session.protocol_version}, not {old.protocol_version}; "
                    "restart the AI client's connection.",
                    recoverable=False,
                )
            await self._run(
                self._post_message(INITIALIZED_BODY, "notification notifications/initialized", during_rebuild=True), replay=True
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
        the first GET has its answer (open, refused) or failed."""
        await self._upstream.listen(emit, on_open=on_open)

    async def get_stream(self, emit: Emit, on_open: Callable[[], None] | None = None) -> None:
        """Relay one GET stream of the current MCP session (server-initiated messages) to
        ``emit`` until the app ends it; no reconnect, no read bound (the translation of
        ``bridge/serve/legacyapp.py`` keeps it). ``on_open`` is called once the stream is open.

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
        await self._upstream.aclose()

    @property
    def request_timeout_seconds(self) -> float:
        """The bound of one request (seconds, ``BridgeConfig.request_timeout_seconds``)."""
        return self._upstream.request_timeout_seconds

    async def ensure_running(self) -> None:
        """Start the app if it is not listening and wait until it is (``Launcher.ensure_running``).

        Raises:
            UpstreamError: ``app_launch_failed`` or ``app_unreachable``, as the launcher says.
        """
        await self._launcher.ensure_running()

    def list_changed_notifications(self) -> list[bytes]:
        """``notifications/<list>/list_changed`` lines for each list the server said may change."""
        lines = []
        for name in LISTS_THAT_CHANGE:
            capability = self._upstream.session.capabilities.get(name)
            if isinstance(capability, dict) and capability.get("listChanged") is True:
                lines.append(encode_message({"jsonrpc": "2.0", "method": f"notifications/{name}/list_changed"}))
        return lines


def named(request: Request) -> str:
    """A request as the log names it: its method and JSON-RPC id (never its params)."""
    return f"{request.method} (id {json.dumps(request.id)})"


async def drop(line: bytes, message: Any = None) -> None:
    """An ``Emit`` for the streams of the bridge's own requests (a replayed ``initialize``, a
    probe, a private list): their messages go nowhere (the client never asked for them)."""
    log.debug("dropped a message from a request of the bridge's own (%d bytes)", len(line))
