"""A 2025-era client (``initialize``, an MCP session) with an app that serves only MCP
2026-07-28: the bridge answers ``initialize`` from the app's ``server/discover`` and sends
every later request in the 2026-07-28 form.

The rules, and the table of what maps, are pure (``bridge/core/modernmap.py``); this module
performs them for one :class:`~bridge.serve.driver.Driver` (docs/behaviour.md, "Protocol eras").

- **Detection.** With ``--protocol-era auto`` the client's ``initialize`` goes to the app as
  it is (unless the lazy-launch catalog records that the app refuses it: then the probe
  comes first, and the catalog answers it while the app is down); when the app refuses it (a JSON-RPC error such as -32022, or an HTTP 4xx), the
  bridge sends ``server/discover`` (2026-07-28 schema: ``DiscoverRequest``) with the client's info and
  capabilities, and if that names 2026-07-28 the translation is on and ``initialize`` is
  answered from it. Otherwise the client gets the app's refusal of its ``initialize``.
  With ``--protocol-era modern`` the ``initialize`` is never sent: the probe comes first.
- **Requests** are sent with the 2026-07-28 ``_meta`` (basic/index, "Per-request protocol
  fields") and so with that era's headers and rules (``bridge/core/era.py``: ``Mcp-Method``,
  ``Mcp-Name``, ``Mcp-Param-*``, no session, cancellation by closing the exchange).
  ``logging/setLevel`` is answered ``{}`` here and its level goes on every later request;
  ``ping`` (none in 2026-07-28) is a ``server/discover``, answered ``{}``.
- **Server requests.** An ``input_required`` result (2026-07-28, SEP-2322,
  multi round-trip requests) becomes one request to the client per entry of ``inputRequests``
  (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) under the bridge's
  own ids; once the client answered them all, the original request is sent again with
  ``inputResponses`` and ``requestState``, up to :data:`MAX_INPUT_ROUNDS` times. An error
  from the client ends the request with that error. A round is checked first
  (:func:`~bridge.core.modernmap.input_round_problem`): a question that is not one of those
  three, one whose capability the client did not declare, a malformed one, or more than
  :data:`~bridge.core.legacymap.MAX_INPUT_REQUESTS` questions end the request at once with
  ``bad_upstream_response``, and nothing is put to the client. Each wait for the client is bounded by
  the request timeout; a cancelled request cancels its open questions to the client.
- **Notifications.** Once the client sent ``notifications/initialized``, the app's
  ``subscriptions/listen`` is opened (2026-07-28, SEP-2575) for each list
  whose capability says ``listChanged`` and for the resources the client subscribed to;
  its notifications reach the client as a legacy app's GET stream would send them.
  ``resources/subscribe`` and ``unsubscribe`` reopen it with the new set and are answered
  once the app acknowledged it. A listen stream that ends is reopened (1 s, doubling, at
  most 30 s: ``policy.SUBSCRIPTIONS_LISTEN_BACKOFF``). The client's notifications are not sent: the
  2026-07-28 app has no session for them, and ``notifications/cancelled`` is carried out by
  closing the request's exchange (``bridge/serve/dispatch.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    BadUpstreamResponseError,
    HTTPStatusError,
    ProtocolEraError,
    UpstreamError,
    UpstreamTimeoutError,
    error_object,
)
from ..core.jsonrpc import PrivateIds, Request, bridge_error_line, encode_message, error_line, result_line
from ..core.modernmap import (
    ClientContext,
    discover_params,
    initialize_result,
    input_requests,
    input_round_problem,
    legacy_notification,
    listen_filter,
    modern_params,
    retry_params,
    speaks_modern,
    untranslated,
)
from ..core.policy import INPUT_POLL_BACKOFF, SUBSCRIPTIONS_LISTEN_BACKOFF
from ..streamable.upstream import Emit
from ..system.cancelscope import fail_after, move_on_after
from .driver import drop

if TYPE_CHECKING:
    from .lazy import LazyLaunch

__all__ = ["ModernAppEras", "MAX_INPUT_ROUNDS", "ACKNOWLEDGE_SECONDS"]

log = logging.getLogger("bridge")

#: How many ``input_required`` rounds one request may take (the official SDKs' default).
MAX_INPUT_ROUNDS = 10
#: How long ``resources/subscribe`` waits for the app to acknowledge the new stream (seconds).
ACKNOWLEDGE_SECONDS = 10.0


class ModernAppEras:
    """The translation state of one driver: whether the app proved 2026-07-28-only, what the
    client said in ``initialize``, its subscriptions and its open questions.

    Args:
        below: where requests go (the lazy-launch layer, ``bridge/serve/lazy.py``).
        always: ``--protocol-era modern``: translate every legacy client, never sending
            its ``initialize`` (else only once the app refused it).
        app_name: how the app is named in messages and in a serverInfo it did not give.
        answer_timeout_seconds: bound on each wait for the client's answers.
        private_ids: the ids of the bridge's own requests.
    """

    def __init__(
        self, below: LazyLaunch, *, always: bool, app_name: str, answer_timeout_seconds: float, private_ids: PrivateIds | None = None
    ) -> None:
        self._below = below
        self._ids = private_ids if private_ids is not None else PrivateIds()
        self._always = always
        self._app = app_name
        self._answer_timeout_seconds = answer_timeout_seconds
        #: Whether the translation is on (the app proved 2026-07-28-only).
        self.active = False
        self._client = ClientContext()
        self._discover: dict[str, Any] = {}
        self._asked: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._uris: list[str] = []
        self._reopen = asyncio.Event()
        self._acknowledged = asyncio.Event()

    async def request(self, request: Request, emit: Emit) -> bytes:
        """Answer or forward a legacy request; return its stdout line.

        Raises:
            UpstreamError: as ``Driver.forward``.
        """
        method = request.method
        if method == "initialize":
            return await self.initialize(request, emit)
        if method == "logging/setLevel":
            level = request.params.get("level") if isinstance(request.params, dict) else None
            if not isinstance(level, str):
                return bridge_error_line(request.id, INVALID_PARAMS, "logging/setLevel needs a level (a string).")
            self._client = self._client._replace(log_level=level)
            return result_line(request.id, {})
        if method == "ping":
            line = await self._probe(emit)
            reply = json.loads(line)
            if speaks_modern(reply) is None:
                return error_line(request.id, BadUpstreamResponseError(f"{self._app} did not answer server/discover (the bridge's ping)."))
            return result_line(request.id, {})
        if method in ("resources/subscribe", "resources/unsubscribe"):
            return await self._subscribe(request)
        error = untranslated(method, request.params)
        if error is not None:
            return error_line(request.id, error)
        return await self._send(request, emit)

    # -- initialize ----------------------------------------------------------------------

    async def initialize(self, request: Request, emit: Emit, *, refusal: bytes | HTTPStatusError | None = None) -> bytes:
        """Answer a legacy ``initialize`` in the 2026-07-28 form: ``server/discover``, its
        result made an ``initialize`` result; return its stdout line.

        ``refusal``: how the app refused the ``initialize`` sent to it as it is (its error
        reply line, or the HTTP 4xx), which the era router sends first under
        ``--protocol-era auto`` until the translation is on (``bridge/serve/translate.py``);
        ``None`` when it was not sent: the translation is on, ``--protocol-era modern``, or
        the catalog records that the app refuses ``initialize`` (lazy launch: then
        ``server/discover`` goes first, which the catalog answers while the app is down,
        and ``initialize`` after it when the app does not answer it).

        Raises:
            UpstreamError: as ``Driver.forward``.
        """
        client = ClientContext.from_initialize(request.params)
        asked = request.params.get("protocolVersion") if isinstance(request.params, dict) else None
        hinted = refusal is None and not (self.active or self._always)
        self._client = client._replace(log_level=self._client.log_level)
        try:
            discovered = speaks_modern(json.loads(await self._probe(drop)))
        except UpstreamError as exc:
            if refusal is None and not hinted:
                raise
            log.info("server/discover after the app refused initialize failed too: %s", exc.message)
            discovered = None
        if discovered is None and hinted:
            log.info("%s did not answer server/discover as its catalog said it would; sending initialize", self._app)
            return (await self._below.forward(request, emit)).line
        if discovered is None:
            if isinstance(refusal, bytes):
                return refusal
            if refusal is not None:
                raise refusal
            return error_line(
                request.id,
                ProtocolEraError(
                    f"{self._app} does not answer server/discover with 2026-07-28, so the bridge cannot speak "
                    "MCP 2026-07-28 to it (--protocol-era modern); try --protocol-era auto."
                ),
            )
        if refusal is not None:
            self._below.mark_catalog("refusesInitialize", True)
        if not self.active:
            log.info("%s serves only MCP 2026-07-28; translating for this %s client", self._app, asked or "legacy")
        self.active = True
        self._discover = discovered
        return result_line(request.id, initialize_result(discovered, asked, self._app))

    async def _probe(self, emit: Emit) -> bytes:
        """A ``server/discover`` with the client's ``_meta``; its reply line."""
        probe = self._ids.request("discover", "server/discover", discover_params(self._client))
        return (await self._below.forward(probe, emit, legacy_client=True)).line

    # -- requests ------------------------------------------------------------------------

    async def _send(self, request: Request, emit: Emit) -> bytes:
        """Send ``request`` in the 2026-07-28 form; answer its ``input_required`` rounds."""
        params: Any = request.params
        for rounds in range(MAX_INPUT_ROUNDS + 1):
            modern = modern_params(params, self._client)
            body = encode_message({"jsonrpc": "2.0", "id": request.id, "method": request.method, "params": modern})[:-1]
            line = (await self._below.forward(Request(request.id, request.method, modern, body), emit, legacy_client=True)).line
            if b'"input_required"' not in line:
                return line
            reply = json.loads(line)
            asked = input_requests(reply)
            if asked is None:
                return line
            problem = input_round_problem(reply, self._client.capabilities)
            if problem is not None:  # nothing is put to the client: the request ends here
                log.warning("%s asked for input the client cannot be asked: %s", self._app, problem)
                return error_line(request.id, BadUpstreamResponseError(f"{self._app} asked for input the bridge does not put to the client: {problem}."))
            if rounds == MAX_INPUT_ROUNDS:
                break
            if not asked.requests:  # state alone: the app is not done yet (as the official SDKs, wait a little)
                await asyncio.sleep(INPUT_POLL_BACKOFF.seconds(rounds))
            answers = await self._ask_client(asked.requests, emit)
            if "error" in answers:
                return error_line(request.id, answers["error"])
            params = retry_params(params, answers["responses"], asked.state)
        return error_line(
            request.id, BadUpstreamResponseError(f"{self._app} still asked for input after {MAX_INPUT_ROUNDS} rounds; the bridge gave up.")
        )

    async def _ask_client(self, requests: dict[str, dict[str, Any]], emit: Emit) -> dict[str, Any]:
        """Send each of the app's input requests to the client as a server request, wait
        for every answer (each wait bounded); ``{"responses": {key: result}}``, or
        ``{"error": …}`` for the first error or a timeout."""
        loop = asyncio.get_running_loop()
        waiting: dict[str, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        for key, asked in requests.items():
            request_id = self._ids.next_id("input")
            future: asyncio.Future[dict[str, Any]] = loop.create_future()
            self._asked[request_id] = future
            waiting[key] = (request_id, future)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": asked["method"]}
            if asked.get("params") is not None:
                message["params"] = asked["params"]
            await emit(encode_message(message), message)
        try:
            with fail_after(self._answer_timeout_seconds):
                responses: dict[str, Any] = {}
                for key, (_, future) in waiting.items():
                    answer = await future
                    if isinstance(answer.get("error"), dict):
                        return {"error": answer["error"]}
                    responses[key] = answer.get("result")
                return {"responses": responses}
        except TimeoutError:
            methods = ", ".join(sorted({str(asked.get("method")) for asked in requests.values()}))
            return {"error": error_object(UpstreamTimeoutError(f"The client did not answer {methods} within {self._answer_timeout_seconds:g} s."))}
        finally:
            for request_id, future in waiting.values():
                self._asked.pop(request_id, None)
                if future.cancelled() or not future.done():  # cancelled or timed out: the client may stop asking its user
                    notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
                    try:
                        await emit(encode_message(notice), notice)
                    except Exception:  # (stdout gone: nothing to tell)
                        log.debug("could not tell the client that %s is cancelled", request_id)

    async def deliver(self, body: bytes, what: str) -> None:
        """A client's notification or response: an answer to one of the bridge's questions
        is kept for its request; nothing is sent to the app (no session there)."""
        try:
            message = json.loads(body)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if "method" not in message:
            future = self._asked.get(message.get("id"))
            if future is not None and not future.done():
                future.set_result(message)
            else:
                log.info("dropped a response from the client to no open question (id %r)", message.get("id"))
            return
        log.debug("%s not sent: the 2026-07-28 app has no session for it", what)

    # -- subscriptions -------------------------------------------------------------------

    async def _subscribe(self, request: Request) -> bytes:
        uri = request.params.get("uri") if isinstance(request.params, dict) else None
        if not isinstance(uri, str):
            return bridge_error_line(request.id, INVALID_PARAMS, f"{request.method} needs a uri (a string).")
        resources = self._discover.get("capabilities", {}).get("resources")
        if not (isinstance(resources, dict) and resources.get("subscribe") is True):
            return bridge_error_line(request.id, METHOD_NOT_FOUND, f"{self._app} does not offer resource subscriptions.")
        if request.method == "resources/subscribe" and uri not in self._uris:
            self._uris.append(uri)
        elif request.method == "resources/unsubscribe" and uri in self._uris:
            self._uris.remove(uri)
        else:
            return result_line(request.id, {})
        if self._acknowledged.is_set():  # (else another change waits for the same new stream)
            self._acknowledged = asyncio.Event()
        self._reopen.set()
        with move_on_after(ACKNOWLEDGE_SECONDS) as waiting:
            await self._acknowledged.wait()
        if waiting.cancelled_caught:
            return error_line(
                request.id,
                UpstreamTimeoutError(f"{self._app} did not acknowledge the subscriptions/listen stream within {ACKNOWLEDGE_SECONDS:g} s."),
            )
        return result_line(request.id, {})

    async def listen(self, emit: Emit, *, on_open: Callable[[], None] | None = None) -> None:
        """Keep the app's ``subscriptions/listen`` open for what the client wants to hear,
        relaying its notifications to ``emit``, until cancelled; never raises for upstream
        failures. ``on_open`` is called once the first stream was acknowledged, failed, or
        when there is nothing to listen for."""
        step = 0
        while True:
            self._reopen.clear()
            wanted = listen_filter(self._discover.get("capabilities"), self._uris)
            if not wanted:
                if on_open is not None:
                    on_open()
                    on_open = None
                self._acknowledged.set()
                await self._reopen.wait()
                continue
            stream = asyncio.ensure_future(self._listen_once(wanted, emit, on_open))
            on_open = None
            reopen = asyncio.ensure_future(self._reopen.wait())
            try:
                await asyncio.wait([stream, reopen], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (stream, reopen):
                    task.cancel()
                await asyncio.gather(stream, reopen, return_exceptions=True)
            if self._reopen.is_set():
                step = 0
                continue
            with move_on_after(SUBSCRIPTIONS_LISTEN_BACKOFF.seconds(step)):
                await self._reopen.wait()
            step += 1

    async def _listen_once(self, wanted: dict[str, Any], emit: Emit, on_open: Callable[[], None] | None) -> None:
        listen = self._ids.request("listen", "subscriptions/listen", modern_params({"notifications": wanted}, self._client))
        acknowledged = self._acknowledged

        async def relay(line: bytes, message: Any = None) -> None:
            if message is None:
                try:
                    message = json.loads(line)
                except ValueError:
                    return
            if isinstance(message, dict) and message.get("method") == "notifications/subscriptions/acknowledged":
                acknowledged.set()
                if on_open is not None:
                    on_open()
                return
            legacy = legacy_notification(message)
            if legacy is not None:
                await emit(encode_message(legacy), legacy)

        try:
            line = (await self._below.forward(listen, relay, legacy_client=True)).line
            log.info("%s ended the subscriptions/listen stream: %s", self._app, line[:200].decode("utf-8", "replace").strip())
        except UpstreamError as exc:
            log.warning("subscriptions/listen for the 2025-era client failed: %s", exc.message)
        finally:
            if on_open is not None and not acknowledged.is_set():
                on_open()
