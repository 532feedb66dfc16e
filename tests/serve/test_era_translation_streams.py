"""A 2026-07-28 client with a legacy-only app, beyond single requests (docs/behaviour.md,
"Protocol eras"): ``subscriptions/listen`` from the session's GET stream and
``resources/subscribe``, ``input_required`` from the app's server→client requests, the
client's cancellation as the legacy ``notifications/cancelled``, and the per-request log
level as ``logging/setLevel``. Each test runs over respx and over the bridge's own pool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from support.helpers import RunBridge, json_response, request_line
from support.legacy_app import META, LegacyOnlyApp

from bridge.core.era import SUBSCRIPTION_ID_META_KEY
from bridge.core.legacymap import (
    cancelled_notification,
    honored_filter,
    input_required_result,
    listen_event,
    log_admitted,
    log_level_of,
    retry_of,
    without_retry,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]
WAIT = 5.0
ELICIT = {"mode": "form", "message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None, **meta: Any) -> bytes:
    return request_line(request_id, method, {**(params or {}), "_meta": {**META, **meta}})


def event_bytes(message: Any) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def sse_stream(body: AsyncIterator[bytes]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"}, content=body)


class StreamingLegacyApp(LegacyOnlyApp):
    """A legacy-only app with a GET stream (fed by ``push``, ended by ``end_get``), whose
    tools talk back: ``ask`` sends ``elicitation/create`` on its stream (``ask_on_get``: on
    the GET stream, as the official SDK's server sends ``roots/list`` without a related request)
    and answers with what it got; ``slow`` never answers; ``log`` logs at three levels."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capabilities = {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "logging": {},
        }
        self.gets: asyncio.Queue[Any] = asyncio.Queue()
        self.answers: dict[Any, asyncio.Future[Any]] = {}
        self.get_opened = asyncio.Event()
        self.on_request = self.answer_request

    def push(self, message: Any) -> None:
        self.gets.put_nowait(message)

    def end_get(self) -> None:
        self.gets.put_nowait(None)

    def answer_of(self, request_id: Any) -> asyncio.Future[Any]:
        return self.answers.setdefault(request_id, asyncio.get_running_loop().create_future())

    def posted(self, method: str) -> list[dict[str, Any]]:
        return [body for body in self.bodies if body.get("method") == method]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.requests.append(request)
            if request.headers.get("mcp-session-id") not in self.sessions:
                return json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}, 404)
            self.get_opened.set()

            async def stream() -> AsyncIterator[bytes]:
                yield b": open\n\n"
                while (message := await self.gets.get()) is not None:
                    yield event_bytes(message)

            return sse_stream(stream())
        if request.method == "POST":
            message = json.loads(request.content)
            if "id" in message and "method" not in message and request.headers.get("mcp-session-id") in self.sessions:
                self.bodies.append(message)
                if not self.answer_of(message["id"]).done():
                    self.answer_of(message["id"]).set_result(message)
                return httpx.Response(202)
        return await super().__call__(request)

    def answer_request(self, message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        method, request_id = message["method"], message["id"]
        name = message.get("params", {}).get("name")
        if method == "tools/call" and name in ("ask", "ask_on_get"):
            asked = {"jsonrpc": "2.0", "id": f"e-{request_id}", "method": "elicitation/create", "params": ELICIT}
            if name == "ask_on_get":
                self.push(asked)

            async def ask() -> AsyncIterator[bytes]:
                if name == "ask":
                    yield event_bytes(asked)
                else:
                    yield b": waiting\n\n"
                answer = await asyncio.wait_for(asyncio.shield(self.answer_of(asked["id"])), WAIT)
                text = json.dumps(answer.get("result") or answer.get("error"))
                yield event_bytes({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})

            return sse_stream(ask())
        if method == "tools/call" and name == "ask_many":  # 20 questions at once; done once the last is answered
            questions = [{"jsonrpc": "2.0", "id": f"e-{request_id}-{n}", "method": "elicitation/create", "params": ELICIT} for n in range(20)]

            async def ask_many() -> AsyncIterator[bytes]:
                yield b"".join(event_bytes(question) for question in questions)  # one read: one round
                answer = await asyncio.wait_for(asyncio.shield(self.answer_of(questions[-1]["id"])), WAIT)
                yield event_bytes({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": json.dumps(answer)}]}})

            return sse_stream(ask_many())
        if name == "slow":
            token = message["params"].get("_meta", {}).get("progressToken")

            async def slow() -> AsyncIterator[bytes]:
                yield event_bytes({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}})
                await asyncio.sleep(3600)
                yield b""

            return sse_stream(slow())
        if method == "tools/call" and name == "log":

            async def logs() -> AsyncIterator[bytes]:
                for level in ("debug", "info", "error"):
                    yield event_bytes({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": level}})
                yield event_bytes({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}})

            return sse_stream(logs())
        return json_response({"jsonrpc": "2.0", "id": request_id, "result": {}})


async def discovered(h: Any) -> None:
    h.stdin.feed(modern("d", "server/discover"))
    await h.stdout.wait_for(1)


def replies_to(messages: list[Any], request_id: Any) -> list[Any]:
    return [m for m in messages if m.get("id") == request_id and "method" not in m]


# -- subscriptions/listen -----------------------------------------------------------------------------------


async def test_listen_turns_the_sessions_notifications_into_its_events(run_bridge: RunBridge) -> None:
    """The acknowledgment names what is honored (no prompts: the app has none); the app's
    notifications become events stamped with the listen id; what was not asked for is
    dropped; the app ending its stream ends the listen with an error at once."""
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        await asyncio.wait_for(app.get_opened.wait(), WAIT)
        wanted = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["file:///a"]}
        h.stdin.feed(modern("L", "subscriptions/listen", {"notifications": wanted}))
        ack = (await h.stdout.wait_for(2))[-1]
        for message in (
            {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"},
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///b"}},
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}},
        ):
            app.push(message)
        events = (await h.stdout.wait_for(4))[2:]
        app.end_get()
        lost = (await h.stdout.wait_for(5))[-1]
        for _ in range(100):
            if app.posted("resources/unsubscribe"):
                break
            await asyncio.sleep(0.02)
    stamp = {SUBSCRIPTION_ID_META_KEY: "L"}
    assert ack == {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}, "_meta": stamp}}
    assert events == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": stamp}},
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a", "_meta": stamp}},
    ]
    assert lost["id"] == "L" and lost["error"]["data"]["reason"] == "stream_closed"
    assert "listen again" in lost["error"]["message"]
    assert [body["params"] for body in app.posted("resources/subscribe")] == [{"uri": "file:///a"}]
    assert [body["params"] for body in app.posted("resources/unsubscribe")] == [{"uri": "file:///a"}]
    assert all(r.headers.get("mcp-session-id") == "sess-1" for r in app.requests if r.method == "GET")


@pytest.mark.slow
async def test_a_lost_session_ends_the_listen_at_once_and_a_new_listen_works(run_bridge: RunBridge) -> None:
    """The app restarted: its GET stream ends, the listen gets an error at once, the GET
    answered 404 rebuilds the session, and the client's new listen is served in it."""
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        h.stdin.feed(modern("L1", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        await h.stdout.wait_for(2)
        app.restart()
        app.end_get()
        lost = (await h.stdout.wait_for(3))[-1]
        for _ in range(250):
            if len(app.posted("initialize")) == 2:
                break
            await asyncio.sleep(0.02)
        h.stdin.feed(modern("L2", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        ack = (await h.stdout.wait_for(4))[-1]
        app.push({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        event = (await h.stdout.wait_for(5))[-1]
    assert lost["id"] == "L1" and lost["error"]["data"]["reason"] == "stream_closed"
    assert len(app.posted("initialize")) == 2
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID_META_KEY: "L2"}
    assert event["params"]["_meta"] == {SUBSCRIPTION_ID_META_KEY: "L2"}


async def test_a_listen_outlives_the_request_timeout(run_bridge: RunBridge) -> None:
    """A listen is read with no timeout: quiet for longer than ``request_timeout_seconds``,
    it still carries the next event (and no error)."""
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy", request_timeout_seconds=0.2) as h:
        await discovered(h)
        h.stdin.feed(modern("L", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        await h.stdout.wait_for(2)
        await asyncio.sleep(0.6)  # three request timeouts with nothing on the listen
        app.push({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        messages = await h.stdout.wait_for(3)
    assert messages[2]["method"] == "notifications/tools/list_changed"  # an event, not the listen's error


@pytest.mark.slow
async def test_an_app_that_always_answers_the_get_with_404_is_not_rebuilt_in_a_loop(run_bridge: RunBridge) -> None:
    """A 404 to the GET stream rebuilds the session once; a 404 again right after is a
    failure like any other (a growing delay, then the bridge stops asking), never a loop
    of initialize requests."""
    app = StreamingLegacyApp()
    seen_gets: list[httpx.Request] = []

    async def no_get(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            seen_gets.append(request)
            return json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Not Found"}}, 404)
        return await app(request)

    async with run_bridge(no_get, protocol_era="legacy") as h:
        await discovered(h)
        for _ in range(300):
            if len(seen_gets) >= 3:
                break
            await asyncio.sleep(0.02)
        h.stdin.feed(modern(2, "ping"))
        await h.stdout.wait_for(2)
    assert len(seen_gets) >= 3
    assert len(app.posted("initialize")) == 2  # the first 404's rebuild, and no other


async def test_a_change_notification_on_a_request_stream_goes_to_the_listen(run_bridge: RunBridge) -> None:
    """A tool that changes the tool list may say so on its own call's stream: the client hears
    it on its listen, never as a bare notification (2026-07-28 has none)."""
    app = StreamingLegacyApp()

    def changes(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if message["method"] != "tools/call":
            return app.answer_request(message, request)

        async def body() -> AsyncIterator[bytes]:
            yield event_bytes({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            yield event_bytes({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})

        return sse_stream(body())

    app.on_request = changes
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        h.stdin.feed(modern("L", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        await h.stdout.wait_for(2)
        h.stdin.feed(modern(3, "tools/call", {"name": "add", "arguments": {}}))
        messages = (await h.stdout.wait_for(4))[2:]
    assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUBSCRIPTION_ID_META_KEY: "L"}}} in messages
    assert replies_to(messages, 3)[0]["result"]["resultType"] == "complete"


# -- input_required -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["ask", "ask_on_get"])
async def test_an_elicitation_becomes_input_required_and_the_retry_answers_the_app(run_bridge: RunBridge, tool: str) -> None:
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        await asyncio.wait_for(app.get_opened.wait(), WAIT)
        h.stdin.feed(modern(5, "tools/call", {"name": tool, "arguments": {}}, progressToken=5))
        first = (await h.stdout.wait_for(2))[-1]
        result = first["result"]
        (key,) = result["inputRequests"]
        answer = {"action": "accept", "content": {"name": "Ada"}}
        retry = {"name": tool, "arguments": {}, "inputResponses": {key: answer}, "requestState": result["requestState"]}
        h.stdin.feed(modern(6, "tools/call", retry, progressToken=6))
        final = (await h.stdout.wait_for(3))[-1]
    assert first["id"] == 5 and result["resultType"] == "input_required"
    assert result["inputRequests"][key] == {"method": "elicitation/create", "params": ELICIT}
    assert final["id"] == 6 and final["result"]["resultType"] == "complete"
    assert json.loads(final["result"]["content"][0]["text"]) == answer
    (response,) = [body for body in app.bodies if body.get("id") == "e-5" and "method" not in body]
    assert response == {"jsonrpc": "2.0", "id": "e-5", "result": answer}
    calls = app.posted("tools/call")
    assert len(calls) == 1 and "inputResponses" not in calls[0]["params"]  # the retry went nowhere but the answer


async def test_without_a_retry_the_apps_request_gets_an_error_and_the_call_is_cancelled(run_bridge: RunBridge) -> None:
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy", request_timeout_seconds=0.5) as h:
        await discovered(h)
        h.stdin.feed(modern(5, "tools/call", {"name": "ask", "arguments": {}}))
        first = (await h.stdout.wait_for(2))[-1]
        answer = await asyncio.wait_for(app.answer_of("e-5"), WAIT)
        for _ in range(100):
            if app.posted("notifications/cancelled"):
                break
            await asyncio.sleep(0.02)
        h.stdin.feed(modern(6, "tools/call", {"name": "ask", "requestState": first["result"]["requestState"], "inputResponses": {}}))
        late = (await h.stdout.wait_for(3))[-1]
    assert answer["error"]["data"]["reason"] == "timeout"
    assert [body["params"]["requestId"] for body in app.posted("notifications/cancelled")] == [5]
    assert late["id"] == 6 and late["error"]["code"] == -32602 and "requestState" in late["error"]["message"]


async def test_an_elicitation_the_client_did_not_declare_is_answered_to_the_app_as_an_error(run_bridge: RunBridge) -> None:
    """Issue 41, 3: only with the capability in the request's ``_meta`` is the client asked."""
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        h.stdin.feed(modern(5, "tools/call", {"name": "ask", "arguments": {}}, **{"io.modelcontextprotocol/clientCapabilities": {"roots": {}}}))
        reply = (await h.stdout.wait_for(2))[-1]
        answer = await asyncio.wait_for(app.answer_of("e-5"), WAIT)
    assert reply["id"] == 5 and reply["result"]["resultType"] == "complete"  # never input_required
    assert "did not declare the elicitation capability" in answer["error"]["message"]
    assert "did not declare the elicitation capability" in reply["result"]["content"][0]["text"]


async def test_at_most_sixteen_questions_a_round_go_to_the_client_the_rest_are_refused(run_bridge: RunBridge) -> None:
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        h.stdin.feed(modern(5, "tools/call", {"name": "ask_many", "arguments": {}}))
        first = (await h.stdout.wait_for(2))[-1]
        refused = [await asyncio.wait_for(app.answer_of(f"e-5-{n}"), WAIT) for n in range(16, 20)]
    assert first["result"]["resultType"] == "input_required" and len(first["result"]["inputRequests"]) == 16
    assert all("more than 16 questions in one round" in answer["error"]["message"] for answer in refused)


async def test_a_server_request_outside_any_call_is_refused_with_its_name(run_bridge: RunBridge) -> None:
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        await asyncio.wait_for(app.get_opened.wait(), WAIT)
        app.push({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"})
        app.push({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        refused = await asyncio.wait_for(app.answer_of("r1"), WAIT)
        pong = await asyncio.wait_for(app.answer_of("p1"), WAIT)
        messages = h.stdout.messages()
    assert refused["error"]["code"] == -32601 and "roots/list" in refused["error"]["message"]
    assert "2026-07-28" in refused["error"]["message"]
    assert pong == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    assert len(messages) == 1  # nothing reached the client but its discover reply


# -- cancellation and log levels ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["tools/call", "prompts/list"])
async def test_the_clients_cancellation_reaches_the_app_as_notifications_cancelled(run_bridge: RunBridge, method: str) -> None:
    """2026-07-28 cancels by closing; the legacy app is told with the legacy request id
    (with the old code nothing reached it, and its tool ran on). Both paths: a call that
    may ask for input, and any other request."""
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        h.stdin.feed(modern(8, method, {"name": "slow", "arguments": {}}, progressToken=8))
        await h.stdout.wait_for(2)  # its progress: the request is in flight
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8, "_meta": dict(META)}}
        h.stdin.feed(json.dumps(cancel).encode() + b"\n")
        for _ in range(150):
            if app.posted("notifications/cancelled"):
                break
            await asyncio.sleep(0.02)
        h.stdin.feed(modern(9, "ping"))
        messages = await h.stdout.wait_for(3)
    assert [body["params"]["requestId"] for body in app.posted("notifications/cancelled")] == [8]
    assert "_meta" not in app.posted("notifications/cancelled")[0]["params"]
    assert replies_to(messages, 8) == []  # the cancelled request gets no reply
    assert replies_to(messages, 9)[0]["result"]["resultType"] == "complete"


async def test_the_request_log_level_sets_the_session_level_and_filters_its_messages(run_bridge: RunBridge) -> None:
    app = StreamingLegacyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        await discovered(h)
        h.stdin.feed(modern(1, "tools/call", {"name": "log", "arguments": {}}, **{"io.modelcontextprotocol/logLevel": "info"}))
        first = (await h.stdout.wait_for(4))[1:]
        h.stdin.feed(modern(2, "tools/call", {"name": "log", "arguments": {}}, **{"io.modelcontextprotocol/logLevel": "info"}))
        second = (await h.stdout.wait_for(7))[4:]
        h.stdin.feed(modern(3, "tools/call", {"name": "log", "arguments": {}}, **{"io.modelcontextprotocol/logLevel": "error"}))
        third = (await h.stdout.wait_for(9))[7:]
        h.stdin.feed(modern(4, "tools/call", {"name": "log", "arguments": {}}))
        fourth = (await h.stdout.wait_for(10))[9:]
    assert [m["params"]["level"] for m in first + second if "method" in m] == ["info", "error", "info", "error"]
    assert [m["params"]["level"] for m in third if "method" in m] == ["error"]
    assert [m.get("id") for m in fourth] == [4]  # no level: no log messages for that request
    assert [body["params"] for body in app.posted("logging/setLevel")] == [{"level": "info"}, {"level": "error"}]
    assert all("io.modelcontextprotocol/logLevel" not in json.dumps(body) for body in app.posted("tools/call"))


# -- the pure rules -----------------------------------------------------------------------------------------


def test_log_levels() -> None:
    assert log_level_of({"_meta": {"io.modelcontextprotocol/logLevel": "warning"}}) == "warning"
    assert log_level_of({"_meta": {"io.modelcontextprotocol/logLevel": "loud"}}) is None
    log = {"method": "notifications/message", "params": {"level": "info"}}
    assert log_admitted(log, "debug") and log_admitted(log, "info") and not log_admitted(log, "warning")
    assert not log_admitted(log, None)
    assert log_admitted({"method": "notifications/progress"}, None)


def test_input_required_shapes() -> None:
    asked = {"jsonrpc": "2.0", "id": 3, "method": "roots/list"}
    assert input_required_result({"roots/list#1": asked}, "s") == {
        "resultType": "input_required", "inputRequests": {"roots/list#1": {"method": "roots/list"}}, "requestState": "s"}
    assert retry_of({"requestState": "s", "inputResponses": {"k": {"roots": []}}}) == ("s", {"k": {"roots": []}})
    assert retry_of({"name": "t"}) is None
    assert without_retry({"name": "t", "requestState": "s", "inputResponses": {}}) == {"name": "t"}
    assert cancelled_notification(4, "why")["params"] == {"requestId": 4, "reason": "why"}


def test_listen_filter_and_events() -> None:
    capabilities = {"tools": {"listChanged": False}, "resources": {}}
    honored = honored_filter({"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": False}, capabilities, ["r://x"])
    assert honored == {"toolsListChanged": True, "resourceSubscriptions": ["r://x"]}  # no prompts declared; resources not asked
    assert listen_event({"method": "notifications/prompts/list_changed"}, 1, honored) is None
    assert listen_event({"method": "notifications/resources/updated", "params": {"uri": "r://x/part"}}, 1, honored) == {
        "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "r://x/part", "_meta": {SUBSCRIPTION_ID_META_KEY: 1}}}
    assert listen_event({"method": "notifications/resources/updated", "params": {"uri": "r://xy"}}, 1, honored) is None
    assert listen_event({"method": "notifications/message"}, 1, honored) is None
