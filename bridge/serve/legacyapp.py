"""A 2026-07-28 client with a legacy-only app: the bridge answers ``server/discover`` from
the app's ``initialize``, and sends the client's requests within that legacy session.

The rules, and the table of what maps, are pure (``bridge/core/legacymap.py``); this module
performs them for one :class:`~bridge.serve.driver.Driver` (docs/behaviour.md, "Protocol eras").

- **The probe.** The first 2026-07-28 request probes: a ``server/discover`` goes to the app
  (for a client that pinned its version and sends something else first, the bridge sends
  its own ``server/discover`` first, with that request's ``_meta``). When the app refuses
  it as a legacy app does (:func:`~bridge.core.legacymap.is_legacy_refusal`, or an HTTP 4xx
  status), the bridge sends ``initialize`` itself (under a private id whose reply never
  reaches stdout), POSTs ``notifications/initialized``, opens the session's GET stream and
  answers the probe from that result. If the app refuses the ``initialize`` too, the client
  gets the app's first refusal, as before. Requests that come while the probe is being
  answered wait for its outcome. Once the app answered a probe as a 2026-07-28 app does,
  requests go straight to it.
- **Requests.** From then on every 2026-07-28 request is sent as a legacy one: its era's
  ``_meta`` keys dropped, re-encoded, with the session's headers; a lost session is rebuilt
  as for a legacy client. Its request's log level (``_meta``) becomes the session's
  ``logging/setLevel`` when it changes (the app declared ``logging``), and the request's
  ``notifications/message`` below that level, or all of them when it names none, are
  dropped (2026-07-28: no log messages for a request without a level).
- **Input required** (2026-07-28 multi-round-trip requests). An ``elicitation/create``,
  ``sampling/createMessage`` or ``roots/list`` the app sends during a ``tools/call``,
  ``prompts/get`` or ``resources/read`` (on that request's stream, or on the GET stream
  while that is the only such request in flight) ends the client's request with an
  ``input_required`` result; the app's exchange stays open. The client's retry (a new
  request with ``requestState`` and ``inputResponses``) sends each answer to the app as the
  JSON-RPC response to its request, and gets the real result (or the next
  ``input_required``). A retry that does not come within the request timeout: the app's
  requests get an error, the app gets ``notifications/cancelled`` and the exchange ends.
  Any other server→client request is answered with an error naming it (``ping`` with
  ``{}``); so is one of those three whose capability the client's request did not declare
  (its ``_meta`` ``clientCapabilities``), a malformed one, and each beyond
  :data:`~bridge.core.legacymap.MAX_INPUT_REQUESTS` in one round
  (:func:`~bridge.core.legacymap.input_request_problem`).
- **Cancellation.** The 2026-07-28 client cancels by closing (the dispatcher stops the
  request's task); the legacy app hears of it by ``notifications/cancelled`` with the
  legacy request id, POSTed within :data:`CANCEL_NOTICE_SECONDS`. So does a request the
  bridge gave up on after its timeout.
- **subscriptions/listen.** ``resources/subscribe`` for each URI the client lists (when the
  app declared resources; a URI it refuses is not honored), the acknowledgment with what is honored
  (:func:`~bridge.core.legacymap.honored_filter`), then the app's ``notifications/*/list_changed``
  and ``notifications/resources/updated`` (from the GET stream, or from any translated
  request's stream) as the listen stream's events, stamped with its id. The request stays
  open, with no read timeout, until the client closes it or it is lost (then
  ``resources/unsubscribe`` for URIs no other listen holds). When the GET stream ends or breaks, or the session is
  lost (rebuilt, or the GET stream answered 404: the session is rebuilt at once), every
  open listen gets an error at once, and the client listens again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from .._version import __version__
from ..core.era import CANCEL_NOTICE_SECONDS
from ..core.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    HTTPStatusError,
    ProtocolEraError,
    StreamClosedError,
    UpstreamError,
    UpstreamTimeoutError,
)
from ..core.jsonrpc import INITIALIZED_BODY, PrivateIds, Request, bridge_error_line, encode_message
from ..core.legacymap import (
    INPUT_REQUEST_METHODS,
    MAX_INPUT_REQUESTS,
    cancelled_notification,
    capabilities_of,
    discover_result,
    honored_filter,
    initialize_params,
    input_request_problem,
    input_required_result,
    is_legacy_refusal,
    legacy_params,
    listen_acknowledged,
    listen_event,
    listen_lost,
    log_admitted,
    log_level_of,
    modern_result,
    retry_of,
    unmapped_server_request,
    without_retry,
)
from ..core.methods import INPUT_CAPABLE_METHODS
from ..core.policy import GET_STREAM_BACKOFF, MAX_LISTEN_FAILURES
from ..streamable.upstream import Emit
from ..system.cancelscope import move_on_after
from .driver import drop

if TYPE_CHECKING:
    from .lazy import LazyLaunch

__all__ = ["LegacyAppEras"]

log = logging.getLogger("bridge")

#: How long :meth:`LegacyAppEras.aclose` waits for its tasks to end (seconds).
_CLOSE_SECONDS = 0.05


class _Call:
    """The legacy exchange of one translated ``tools/call``, ``prompts/get`` or
    ``resources/read``, which may outlive the client's request (``input_required``)."""

    def __init__(self, legacy_id: Any, level: str | None, progress_token: Any, capabilities: dict[str, Any]) -> None:
        self.legacy_id = legacy_id
        self.level = level
        self.capabilities = capabilities  # the client's, from its request's _meta
        self.first_token = progress_token
        self.progress_token = progress_token
        self.asked: dict[str, dict[str, Any]] = {}  # the app's requests not yet put to the client
        self.waiting: dict[str, dict[str, Any]] = {}  # put to the client, answered by its retry
        self.final: bytes | UpstreamError | None = None
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self.keys = itertools.count(1)

    def ask(self, message: dict[str, Any]) -> str | None:
        """Keep the app's request for input for the client's next round; or, when it may
        not be put to the client, say why (it is then the app's to answer)."""
        problem = input_request_problem(message["method"], message.get("params"), self.capabilities)
        if problem is None and len(self.asked) >= MAX_INPUT_REQUESTS:
            problem = f"the app asked more than {MAX_INPUT_REQUESTS} questions in one round"
        if problem is None:
            self.asked[f"{message['method']}#{next(self.keys)}"] = message
            self.changed.set()
        return problem


class _Listen:
    """One open translated ``subscriptions/listen``."""

    def __init__(self, listen_id: Any, honored: dict[str, Any], emit: Emit, generation: int) -> None:
        self.id = listen_id
        self.honored = honored
        self.emit = emit
        self.generation = generation  # driver.rebuilds when it opened
        #: Resolved with the error that ends it (the session or its GET stream is gone).
        self.lost: asyncio.Future[UpstreamError] = asyncio.get_running_loop().create_future()


class LegacyAppEras:
    """The translation state of one driver: whether the app proved legacy-only, the
    ``initialize`` result the probe is answered from, and what lives beyond one request
    (parked ``input_required`` exchanges, open listens, the GET stream)."""

    def __init__(self, below: LazyLaunch, *, ask_app: bool = True, private_ids: PrivateIds | None = None) -> None:
        self._below = below
        #: Whether the probe goes to the app first (``False``: ``--protocol-era legacy``, the
        #: legacy session is opened at once, whatever the app would answer).
        self._ask_app = ask_app
        #: The legacy app's ``initialize`` result once the translation is on, else ``None``.
        self.initialize_result: dict[str, Any] | None = None
        #: Whether the app answered a probe as a 2026-07-28 app does (nothing to translate).
        self._modern = False
        self._probing: asyncio.Lock = asyncio.Lock()
        self._ids = private_ids if private_ids is not None else PrivateIds()
        self._tasks: set[asyncio.Task[None]] = set()
        self._relay: Emit | None = None  # where messages for no request go (stdout)
        self._calls: set[_Call] = set()  # input-capable exchanges not finished
        self._parked: dict[str, _Call] = {}  # requestState → exchange awaiting the client's retry
        self._listens: dict[str, _Listen] = {}
        self._subscribed: dict[str, int] = {}  # URI → how many open listens hold it
        self._get_task: asyncio.Task[None] | None = None
        self._level: tuple[int, str] | None = None  # (driver.rebuilds, the session's log level)
        self._level_lock = asyncio.Lock()
        self._rebuilds_seen = 0
        #: Under ``--protocol-era legacy``: (driver.rebuilds, the error) once the app refused
        #: the bridge's ``initialize``; every 2026-07-28 request gets that error until the
        #: session is rebuilt (the app may have been replaced), never passed on untranslated.
        self._legacy_refused: tuple[int, ProtocolEraError] | None = None
        #: Why the last :meth:`_open_session` failed, when it failed without the app's refusal.
        self._session_failure: UpstreamError | None = None

    @property
    def translating(self) -> bool:
        """Whether the app proved legacy-only and the client's requests are translated."""
        return self.initialize_result is not None

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
            UpstreamError: as ``Driver.forward``; ``StreamClosedError`` for a listen whose
                stream ended.
        """
        self._relay = emit
        if self.initialize_result is None and not self._modern:
            async with self._probing:
                if self.initialize_result is None and not self._modern:
                    if self._legacy_refused is not None and self._legacy_refused[0] == self._below.rebuilds:
                        raise self._legacy_refused[1]
                    if request.method == "server/discover":
                        return await self._probe(request, emit)
                    try:
                        await self._probe(self._discover_like(request), drop)
                    except UpstreamError as exc:
                        if not self._ask_app:  # legacy: a request the bridge cannot translate is not sent as is
                            raise
                        log.info("the bridge's server/discover probe failed: %s", exc.message)  # the request says why
        if self.initialize_result is None:
            return (await self._below.forward(request, emit)).line  # a 2026-07-28 app, or the probe failed
        if request.method == "server/discover":
            return self._discover_line(request)
        self._notice_rebuilds()
        if request.method == "subscriptions/listen":
            return await self._listen(request, emit)
        level = log_level_of(request.params)
        await self._set_level(level)
        retry = retry_of(request.params)
        if retry is not None and request.method in INPUT_CAPABLE_METHODS:
            return await self._retry(request, *retry)
        legacy = _legacy_request(request.id, request.method, without_retry(legacy_params(request.params)))
        if request.method in INPUT_CAPABLE_METHODS:
            call = _Call(request.id, level, _progress_token(request.params), capabilities_of(request.params))
            self._start(call, legacy)
            return await self._outcome(call, request)
        try:
            line = (await self._below.forward(legacy, self._request_emit(level))).line
        except UpstreamTimeoutError:
            self._tell_cancelled(request.id, "The bridge timed out waiting for the response.")
            raise
        except asyncio.CancelledError:
            self._tell_cancelled(request.id, "The client cancelled the request.")
            raise
        finally:
            self._notice_rebuilds()
        return self._modern_line(request, line)

    async def aclose(self) -> None:
        """Stop the GET stream and the exchanges still running (the run is over)."""
        for listen in self._listens.values():
            if not listen.lost.done():
                listen.lost.set_result(StreamClosedError("the bridge is closing"))
        for call in self._parked.values():
            if call.expiry is not None:
                call.expiry.cancel()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CLOSE_SECONDS)

    # -- the probe -----------------------------------------------------------------------------

    @property
    def _app_version(self) -> str | None:
        version = self.initialize_result.get("protocolVersion") if self.initialize_result else None
        return version if isinstance(version, str) else None

    @property
    def _capabilities(self) -> dict[str, Any]:
        capabilities = self.initialize_result.get("capabilities") if self.initialize_result else None
        return capabilities if isinstance(capabilities, dict) else {}

    def _discover_line(self, request: Request) -> bytes:
        assert self.initialize_result is not None and request.era.version is not None
        result = discover_result(self.initialize_result, request.era.version)
        return encode_message({"jsonrpc": "2.0", "id": request.id, "result": result})

    def _modern_line(self, request: Request, line: bytes) -> bytes:
        """The app's reply ``line`` as the 2026-07-28 reply to ``request``: its result with
        what the era requires, and ``request``'s id (a retry's reply comes to the first
        request's legacy id)."""
        reply = json.loads(line)
        if not isinstance(reply, dict):
            return line
        if isinstance(reply.get("result"), dict):
            reply = {**reply, "result": modern_result(request.method, reply["result"])}
        elif reply.get("id") == request.id:
            return line
        return encode_message({**reply, "id": request.id})

    async def _probe(self, request: Request, emit: Emit) -> bytes:
        """Send the probe; on a legacy refusal open a legacy session and answer from it."""
        if not self._ask_app:
            result = await self._open_session(request)
            if result is None:
                if self._session_failure is not None:  # the app was not reached: its own reason
                    raise self._session_failure
                refused = ProtocolEraError(
                    "The app refused the bridge's initialize (--protocol-era legacy): it may serve MCP 2026-07-28 "
                    "only; try --protocol-era auto."
                )
                self._legacy_refused = (self._below.rebuilds, refused)
                raise refused
            return self._session_opened(request, result)
        try:
            line = (await self._below.forward(request, emit)).line
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
        return self._session_opened(request, result)

    def _discover_like(self, request: Request) -> Request:
        """The bridge's own ``server/discover`` probe, with ``request``'s ``_meta`` (its
        version, client info and capabilities)."""
        meta = request.params.get("_meta") if isinstance(request.params, dict) else None
        return self._ids.request("era-probe", "server/discover", {"_meta": meta if isinstance(meta, dict) else {}})

    def _session_opened(self, probe: Request, result: dict[str, Any]) -> bytes:
        """Keep the app's ``initialize`` result, keep its GET stream open (the listens'
        source), and answer the probe from it."""
        self.initialize_result = result
        self._rebuilds_seen = self._below.rebuilds
        self.start_get_stream()
        return self._discover_line(probe)

    async def _open_session(self, probe: Request) -> dict[str, Any] | None:
        """``initialize`` + ``notifications/initialized``; the result, or ``None`` (logged)."""
        self._session_failure = None
        initialize = self._ids.request("era-init", "initialize", initialize_params(probe.params, __version__))
        try:
            reply = json.loads((await self._below.forward(initialize, drop)).line)
            result = reply.get("result") if isinstance(reply, dict) else None
            if not isinstance(result, dict):
                log.warning("the app refused the bridge's initialize for a 2026-07-28 client: %s", _error_text(reply))
                return None
            await self._below.deliver(INITIALIZED_BODY, "notification notifications/initialized")
        except Exception as exc:  # an UpstreamError, or an unusable reply: the probe's refusal stands
            log.warning("opening a legacy session for a 2026-07-28 client failed: %s", getattr(exc, "message", exc))
            if isinstance(exc, UpstreamError) and not (isinstance(exc, HTTPStatusError) and 400 <= exc.http_status < 500):
                self._session_failure = exc  # not a refusal (a 4xx is one): unreachable, a timeout, a 5xx
            return None
        return result

    # -- what the app sends on a translated request's stream -----------------------------------

    def _request_emit(self, level: str | None, call: _Call | None = None) -> Emit:
        """The ``emit`` of one translated request's legacy exchange: the app's server→client
        requests go to ``call`` (``input_required``) or are answered here, change
        notifications go to the open listens, log messages are filtered by ``level``,
        progress carries the client's current token."""

        async def emit(line: bytes, message: Any = None) -> None:
            if message is None:
                message = _parse(line)
            if not isinstance(message, dict):
                return
            if "id" in message and isinstance(message.get("method"), str):
                if call is not None and message["method"] in INPUT_REQUEST_METHODS:
                    if (problem := call.ask(message)) is not None:
                        self._answer_unmapped(message, problem)
                else:
                    self._answer_unmapped(message, "it asks for input only within a tools/call, prompts/get or resources/read")
                return
            if await self._to_listens(message):
                return
            if not log_admitted(message, call.level if call is not None else level):
                return
            if call is not None and message.get("method") == "notifications/progress":
                message, line = _progress_for(message, line, call)
            await self._emit_out(line, message)

        return emit

    async def _emit_out(self, line: bytes, message: Any) -> None:
        if self._relay is not None:
            await self._relay(line, message)

    def _answer_unmapped(self, message: dict[str, Any], why: str) -> None:
        """Answer a server→client request the client cannot be asked (``ping``: ``{}``)."""
        if message["method"] == "ping":
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        else:
            log.warning("the app sent %s, which a 2026-07-28 client cannot be asked; answered with an error", message["method"])
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": unmapped_server_request(message["method"], why)}
        self._spawn(self._post(reply, f"response to the app's {message['method']}"))

    async def _post(self, message: dict[str, Any], what: str, bound_seconds: float | None = None) -> None:
        """POST a notification or a response to the app (failures logged)."""
        try:
            with move_on_after(self._below.request_timeout_seconds if bound_seconds is None else bound_seconds):
                await self._below.deliver(encode_message(message)[:-1], what)
        except UpstreamError as exc:
            log.warning("%s not delivered: %s", what, exc.message)

    def _tell_cancelled(self, legacy_id: Any, reason: str) -> None:
        """The legacy ``notifications/cancelled`` for ``legacy_id`` (its own task: the
        request's task is being cancelled)."""
        log.info("telling the app that request %r is cancelled", legacy_id)
        notice = cancelled_notification(legacy_id, reason)
        self._spawn(self._post(notice, "notification notifications/cancelled", CANCEL_NOTICE_SECONDS))

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a task failed inside the bridge's era translation", exc_info=exc)

    # -- logging -----------------------------------------------------------------------------

    async def _set_level(self, level: str | None) -> None:
        """``logging/setLevel`` on the session when the request's level differs from the one
        set (the app declared ``logging``); a failure is logged (the bridge still filters)."""
        if level is None or "logging" not in self._capabilities:
            return
        async with self._level_lock:
            generation = self._below.rebuilds
            if self._level == (generation, level):
                return
            params = {"level": level}
            request = self._ids.request("era-level", "logging/setLevel", params)
            try:
                reply = json.loads((await self._below.forward(request, drop)).line)
            except UpstreamError as exc:
                log.warning("logging/setLevel %s failed: %s", level, exc.message)
                return
            if isinstance(reply, dict) and "result" in reply:
                self._level = (self._below.rebuilds, level)
            else:
                log.warning("the app refused logging/setLevel %s: %s", level, str(reply)[:200])

    # -- input_required ------------------------------------------------------------------------

    def _start(self, call: _Call, legacy: Request) -> None:
        self._calls.add(call)

        async def run() -> None:
            try:
                line = (await self._below.forward(legacy, self._request_emit(call.level, call))).line
            except UpstreamError as exc:
                if isinstance(exc, UpstreamTimeoutError):
                    self._tell_cancelled(call.legacy_id, "The bridge timed out waiting for the response.")
                call.final = exc
            else:
                call.final = line
            finally:
                self._calls.discard(call)
                call.changed.set()

        call.task = self._spawn(run())

    async def _outcome(self, call: _Call, request: Request) -> bytes:
        """Wait for the exchange's result or its next requests for input; return the line
        for ``request`` (the client's first request or its retry)."""
        try:
            while True:
                if call.final is None and call.asked:
                    await asyncio.sleep(0)  # requests sent together are asked together
                if isinstance(call.final, UpstreamError):
                    raise call.final
                if call.final is not None:
                    return self._modern_line(request, call.final)
                if call.asked:
                    return self._park(call, request)
                call.changed.clear()
                await call.changed.wait()
        except asyncio.CancelledError:
            self._cancel_call(call, "The client cancelled the request.")
            raise
        finally:
            self._notice_rebuilds()

    def _park(self, call: _Call, request: Request) -> bytes:
        # 128 random bits (os.urandom: `secrets` would load OpenSSL's hashes into every start)
        state = os.urandom(16).hex()
        call.waiting = dict(call.asked)
        call.asked.clear()
        self._parked[state] = call
        loop = asyncio.get_running_loop()
        call.expiry = loop.call_later(self._below.request_timeout_seconds, self._expire, state)
        log.info("request %r: the app asks for input (%s); the client answers in its retry", request.id, ", ".join(call.waiting))
        result = input_required_result(call.waiting, state)
        return encode_message({"jsonrpc": "2.0", "id": request.id, "result": result})

    async def _retry(self, request: Request, state: str, responses: dict[str, Any]) -> bytes:
        call = self._parked.pop(state, None)
        if call is None:
            message = (
                f"{request.method}: the requestState is not one mcp-app-bridge gave out, or it expired "
                f"({self._below.request_timeout_seconds:g} s after the input_required result); send the request again without it."
            )
            return bridge_error_line(request.id, INVALID_PARAMS, message)
        if call.expiry is not None:
            call.expiry.cancel()
        call.level = log_level_of(request.params)
        call.capabilities = capabilities_of(request.params)
        call.progress_token = _progress_token(request.params)
        for key, asked in call.waiting.items():
            answer = responses.get(key)
            if isinstance(answer, dict):
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": asked["id"], "result": answer}
            else:
                why = f"the client's retry carries no answer for {key}"
                reply = {"jsonrpc": "2.0", "id": asked["id"], "error": {"code": INTERNAL_ERROR, "message": why, "data": {"source": "bridge"}}}
            self._spawn(self._post(reply, f"response to the app's {asked['method']}"))
        call.waiting = {}
        return await self._outcome(call, request)

    def _expire(self, state: str) -> None:
        """No retry came within the request timeout: the app's requests get an error and
        the exchange is cancelled."""
        call = self._parked.pop(state, None)
        if call is None:
            return
        seconds = self._below.request_timeout_seconds
        log.warning("the client did not answer the app's requests for input within %g s; cancelling request %r", seconds, call.legacy_id)
        for asked in call.waiting.values():
            why = f"the client did not answer within {seconds:g} s (mcp-app-bridge, --request-timeout)"
            error = {"code": INTERNAL_ERROR, "message": why, "data": {"source": "bridge", "reason": "timeout"}}
            self._spawn(self._post({"jsonrpc": "2.0", "id": asked["id"], "error": error}, f"response to the app's {asked['method']}"))
        call.waiting = {}
        self._cancel_call(call, "The client did not answer the server's requests for input in time.")

    def _cancel_call(self, call: _Call, reason: str) -> None:
        if call.final is not None:
            return
        if call.task is not None:
            call.task.cancel()
        self._calls.discard(call)
        self._tell_cancelled(call.legacy_id, reason)

    # -- subscriptions/listen ------------------------------------------------------------------

    async def _listen(self, request: Request, emit: Emit) -> bytes:
        """Serve a translated ``subscriptions/listen`` until the client closes it (the task
        is cancelled) or it is lost (raises ``StreamClosedError``)."""
        params = request.params if isinstance(request.params, dict) else {}
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            wanted = {}
        uris = [uri for uri in wanted.get("resourceSubscriptions") or [] if isinstance(uri, str)]
        subscribed: list[str] = []
        try:
            if uris and isinstance(self._capabilities.get("resources"), dict):
                for uri in dict.fromkeys(uris):
                    if await self._subscribe(uri):
                        subscribed.append(uri)
            elif uris:
                log.info("subscriptions/listen: the app declares no resources; resource subscriptions not honored")
            honored = honored_filter(wanted, self._capabilities, subscribed)
            listen = _Listen(request.id, honored, emit, self._below.rebuilds)
            key = json.dumps(request.id)
            self._listens[key] = listen
            self.start_get_stream()
            try:
                await emit(encode_message(listen_acknowledged(request.id, honored)), None)
                raise await listen.lost
            finally:
                if self._listens.get(key) is listen:
                    del self._listens[key]
        finally:
            for uri in subscribed:
                self._release(uri)

    async def _subscribe(self, uri: str) -> bool:
        """``resources/subscribe`` for ``uri`` (once for all listens); whether it holds."""
        if self._subscribed.get(uri, 0) == 0:
            request = self._ids.request("era-subscribe", "resources/subscribe", {"uri": uri})
            try:
                reply = json.loads((await self._below.forward(request, drop)).line)
            except UpstreamError as exc:
                log.warning("resources/subscribe %s failed: %s", uri, exc.message)
                return False
            if not isinstance(reply, dict) or "result" not in reply:
                log.info("the app refused resources/subscribe %s: %s", uri, str(reply)[:200])
                return False
        self._subscribed[uri] = self._subscribed.get(uri, 0) + 1
        return True

    def _release(self, uri: str) -> None:
        """A listen that held ``uri`` ended: ``resources/unsubscribe`` once none holds it."""
        held = self._subscribed.get(uri, 0) - 1
        if held > 0:
            self._subscribed[uri] = held
            return
        self._subscribed.pop(uri, None)
        request = self._ids.request("era-unsubscribe", "resources/unsubscribe", {"uri": uri})

        async def unsubscribe() -> None:
            with move_on_after(self._below.request_timeout_seconds):
                try:
                    await self._below.forward(request, drop)
                except UpstreamError as exc:
                    log.info("resources/unsubscribe %s failed: %s", uri, exc.message)

        self._spawn(unsubscribe())

    async def _to_listens(self, message: dict[str, Any]) -> bool:
        """Hand a change notification to the open listens that honor it; whether it was one
        (a change notification reaches the client only on a listen stream in 2026-07-28)."""
        method = message.get("method")
        if not isinstance(method, str) or not (method.endswith("/list_changed") or method == "notifications/resources/updated"):
            return False
        if method == "notifications/roots/list_changed":
            return False
        self._notice_rebuilds()
        for listen in list(self._listens.values()):
            event = listen_event(message, listen.id, listen.honored)
            if event is not None and not listen.lost.done():
                await listen.emit(encode_message(event), event)
        return True

    def _lose_listens(self, why: str, *, before_generation: int | None = None) -> None:
        """End the open listens (all, or those opened before ``before_generation``) with an error."""
        for listen in list(self._listens.values()):
            if listen.lost.done() or (before_generation is not None and listen.generation >= before_generation):
                continue
            log.info("subscriptions/listen %r: %s", listen.id, why)
            listen.lost.set_result(StreamClosedError(f"subscriptions/listen: {listen_lost(self._app_version)} ({why})."))

    def _notice_rebuilds(self) -> None:
        """After a session rebuild, the listens of the old session are lost."""
        rebuilds = self._below.rebuilds
        if rebuilds != self._rebuilds_seen:
            self._rebuilds_seen = rebuilds
            self._lose_listens("the app's MCP session was lost and rebuilt", before_generation=rebuilds)

    # -- the GET stream ------------------------------------------------------------------------

    def start_get_stream(self, relay: Emit | None = None) -> None:
        """Keep the session's GET stream open (if not already): its change notifications go
        to the listens, its requests to the one input-capable exchange in flight. ``relay``:
        where its other messages go (stdout)."""
        if relay is not None:
            self._relay = relay
        if self.initialize_result is None or (self._get_task is not None and not self._get_task.done()):
            return
        self._get_task = self._spawn(self._keep_get_stream())

    async def _keep_get_stream(self) -> None:
        """Open the GET stream again after it ends, with a growing delay while it fails. The
        first 404 of a run of failures rebuilds the session at once (the app restarted);
        405 (none offered) or :data:`MAX_LISTEN_FAILURES` failures in a row stop it (a later
        listen, or a rebuild, starts it again). Each end loses the open listens."""
        failures = 0
        while True:
            generation = self._below.rebuilds
            opened = False

            def on_open() -> None:
                nonlocal opened
                opened = True

            why = "the app ended its GET stream"
            try:
                await self._below.get_stream(self._from_get, on_open)
            except HTTPStatusError as exc:
                if exc.http_status == 405:
                    log.info("the app offers no GET stream (HTTP 405): listen events come from request streams only")
                    return
                why = f"its GET stream was refused (HTTP {exc.http_status})"
                if exc.http_status == 404 and failures == 0:
                    self._lose_listens("the app no longer knows the MCP session")
                    failures += 1
                    if self._below.rebuilds == generation:
                        try:
                            await self._below.rebuild_session(None)
                        except UpstreamError as rebuild_failed:
                            log.warning("GET stream: %s", rebuild_failed.message)
                            return
                    self._notice_rebuilds()
                    continue
            except UpstreamError as exc:
                why = f"its GET stream broke ({exc.message})"
            self._lose_listens(why)
            failures = 0 if opened else failures + 1
            if failures >= MAX_LISTEN_FAILURES:
                log.warning("GET stream: giving up after %d tries in a row that failed", failures)
                return
            await asyncio.sleep(GET_STREAM_BACKOFF.seconds(failures))

    async def _from_get(self, line: bytes, message: Any) -> None:
        if message is None:
            message = _parse(line)
        if not isinstance(message, dict):
            return
        if "id" in message and isinstance(message.get("method"), str):
            calls = [call for call in self._calls if call.final is None]
            if message["method"] in INPUT_REQUEST_METHODS and len(calls) == 1:
                log.info("the app sent %s on its GET stream while one request awaits it: asking its client", message["method"])
                calls[0].ask(message)
            else:
                self._answer_unmapped(
                    message,
                    "it was sent outside a request (on the GET stream) "
                    f"while {len(calls)} tools/call, prompts/get or resources/read were in flight, not exactly one",
                )
            return
        if await self._to_listens(message):
            return
        await self._emit_out(line, message)


def _legacy_request(request_id: Any, method: str, params: Any) -> Request:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return Request(request_id, method, params, encode_message(message)[:-1])


def _progress_token(params: Any) -> Any:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None


def _progress_for(message: dict[str, Any], line: bytes, call: _Call) -> tuple[dict[str, Any], bytes]:
    """A progress notification of ``call``'s first request, with its retry's token."""
    params = message.get("params")
    if call.progress_token is None or call.progress_token == call.first_token or not isinstance(params, dict):
        return message, line
    if params.get("progressToken") != call.first_token:
        return message, line
    message = {**message, "params": {**params, "progressToken": call.progress_token}}
    return message, encode_message(message)


def _parse(line: bytes) -> Any:
    with contextlib.suppress(ValueError):
        return json.loads(line)
    return None


def _error_text(reply: Any) -> str:
    """An app's refusal in a log line: its JSON-RPC error code and message (200 characters at
    most), not the raw reply."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if isinstance(error, dict):
        return f"JSON-RPC error {error.get('code')}: {str(error.get('message'))[:200]}"
    return "a reply with no result"
