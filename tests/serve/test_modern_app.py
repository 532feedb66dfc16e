"""A 2025-era client with an app that serves only MCP 2026-07-28 (issue: "every client with
every app"): the bridge answers ``initialize`` from ``server/discover`` and sends every
request in the 2026-07-28 form (docs/behaviour.md, "Protocol eras"). Each test fails on the
bridge before this translation, where the client got the app's -32022 for its
``initialize`` and nothing else worked."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from support.helpers import NOTIF_INIT, RunBridge, event, json_response, request_line, sse

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]
MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "modern-app", "version": "2.0"}
ELICIT = {"method": "elicitation/create", "params": {"message": "Your name?", "requestedSchema": {"type": "object"}}}


class ModernOnlyApp:
    """A stateless app of 2026-07-28 alone: ``initialize`` (any request without the era's
    ``_meta``) gets 400 with -32022; every request must carry the era's headers and no
    session id. ``ask`` answers ``input_required`` until it gets ``inputResponses``;
    ``subscriptions/listen`` acknowledges, then sends ``listen_events``."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.requests: list[httpx.Request] = []
        self.other: list[str] = []
        self.listen_events: list[dict[str, Any]] = [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        self.capabilities: dict[str, Any] = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
        self.asked: Any = {"who": ELICIT}  # the inputRequests of ``ask``

    def methods(self) -> list[str]:
        return [str(body.get("method")) for body in self.bodies]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            self.other.append(request.method)
            return httpx.Response(405)
        message = json.loads(request.content)
        self.bodies.append(message)
        self.requests.append(request)
        if "id" not in message:
            return httpx.Response(202)
        meta = (message.get("params") or {}).get("_meta") or {}
        if meta.get(VERSION_KEY) != MODERN:
            error = {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": [MODERN], "requested": "2025-06-18"}}
            return json_response({"jsonrpc": "2.0", "id": message["id"], "error": error}, 400)
        assert request.headers["mcp-protocol-version"] == MODERN and request.headers["mcp-method"] == message["method"]
        assert "mcp-session-id" not in request.headers
        method, params = message["method"], message["params"]
        result: dict[str, Any]
        done: dict[str, Any] = {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
        if method == "server/discover":
            result = {**done, "supportedVersions": [MODERN], "capabilities": self.capabilities, "instructions": "modern only"}
        elif method == "tools/list":
            result = {**done, "tools": [{"name": "ask", "inputSchema": {"type": "object"}}], "ttlMs": 0, "cacheScope": "private"}
        elif method == "tools/call" and params["name"] == "ask" and "inputResponses" not in params:
            result = {"resultType": "input_required", "inputRequests": self.asked, "requestState": "round-1"}
        elif method == "tools/call" and params["name"] == "ask":
            name = params["inputResponses"]["who"]["content"]["name"]
            result = {**done, "content": [{"type": "text", "text": f"hello {name} ({params['requestState']})"}]}
        elif method == "tools/call" and params["name"] == "poll":  # state alone, twice, then done
            rounds = int(params.get("requestState") or 0)
            result = {**done, "content": []} if rounds == 2 else {"resultType": "input_required", "requestState": str(rounds + 1)}
        elif method == "tools/call" and params["name"] == "forever":
            result = {"resultType": "input_required", "requestState": "again"}
        elif method == "tools/call" and params["name"] == "slow":
            await anyio.sleep(30)
            result = done
        elif method == "subscriptions/listen":
            ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"notifications": params["notifications"], "_meta": {"io.modelcontextprotocol/subscriptionId": message["id"]}}}
            tagged = [{**item, "params": {**item.get("params", {}), "_meta": {"io.modelcontextprotocol/subscriptionId": message["id"]}}}
                      for item in self.listen_events]
            return sse(event(ack), *(event(item) for item in tagged), event({"jsonrpc": "2.0", "method": "notifications/progress"}),
                       delay_seconds=0.01, error=None)
        else:
            return json_response({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}}, 404)
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})


#: The client features a legacy client declares in its ``initialize``: the app's questions
#: are put to it only with these (MCP client/elicitation, client/sampling, client/roots).
ASKABLE: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}


def init_declaring(capabilities: dict[str, Any]) -> bytes:
    params = {"protocolVersion": "2025-06-18", "capabilities": capabilities, "clientInfo": {"name": "test-client", "version": "0"}}
    return request_line(0, "initialize", params)


async def handshake(h: Any, capabilities: dict[str, Any] = ASKABLE) -> dict[str, Any]:
    h.stdin.feed(init_declaring(capabilities))
    (reply,) = await h.stdout.wait_for(1)
    assert isinstance(reply, dict)
    return reply


async def test_initialize_is_answered_from_server_discover(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app) as h:
        reply = await handshake(h)
    assert reply["id"] == 0
    assert reply["result"] == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
        "serverInfo": SERVER_INFO,
        "instructions": "modern only",
    }
    assert app.methods() == ["initialize", "server/discover"]
    discover_meta = app.bodies[1]["params"]["_meta"]
    assert discover_meta["io.modelcontextprotocol/clientInfo"] == {"name": "test-client", "version": "0"}
    assert discover_meta["io.modelcontextprotocol/clientCapabilities"] == ASKABLE


async def test_requests_go_in_the_2026_form_with_the_clients_log_level(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}  # nothing to listen for
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(NOTIF_INIT)
        h.stdin.feed(request_line(1, "logging/setLevel", {"level": "debug"}))
        await h.stdout.wait_for(2)
        h.stdin.feed(request_line(2, "tools/list") + request_line(3, "ping"))
        replies = {m["id"]: m for m in await h.stdout.wait_for(4)}
        await anyio.sleep(0.05)
    assert replies[1]["result"] == {} and replies[3]["result"] == {}
    assert replies[2]["result"]["tools"][0]["name"] == "ask"
    (listing,) = [b for b in app.bodies if b.get("method") == "tools/list"]
    assert listing["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "debug"
    assert "notifications/initialized" not in app.methods() and "logging/setLevel" not in app.methods()
    assert "ping" not in app.methods()  # 2026-07-28 has none: a server/discover answers for it
    assert app.other == []  # no GET stream, no DELETE: no session


async def test_input_required_becomes_an_elicitation_request_and_the_answer_is_sent_back(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}}))
        (question,) = (await h.stdout.wait_for(2))[1:]
        assert question["method"] == "elicitation/create" and question["params"] == ELICIT["params"]
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        h.stdin.feed(json.dumps(answer).encode() + b"\n")
        reply = (await h.stdout.wait_for(3))[2]
    assert reply["id"] == 5 and reply["result"]["content"][0]["text"] == "hello Ada (round-1)"
    calls = [b for b in app.bodies if b.get("method") == "tools/call"]
    assert len(calls) == 2 and calls[1]["params"]["requestState"] == "round-1"
    assert calls[1]["params"]["inputResponses"] == {"who": {"action": "accept", "content": {"name": "Ada"}}}
    assert all(b.get("id") != question["id"] for b in app.bodies)  # the client's answer is not POSTed


async def test_an_error_from_the_client_ends_the_request_with_it(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}}))
        question = (await h.stdout.wait_for(2))[1]
        refusal = {"jsonrpc": "2.0", "id": question["id"], "error": {"code": -32601, "message": "no elicitation here"}}
        h.stdin.feed(json.dumps(refusal).encode() + b"\n")
        reply = (await h.stdout.wait_for(3))[2]
    assert reply == {"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "no elicitation here"}}


async def test_list_changes_come_from_subscriptions_listen(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(NOTIF_INIT)
        messages = await h.stdout.wait_for(2)
    assert messages[1] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    (listen,) = [b for b in app.bodies if b.get("method") == "subscriptions/listen"][:1]
    assert listen["params"]["notifications"] == {"toolsListChanged": True}


async def test_resource_subscriptions_reopen_the_listen_stream(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.listen_events = [{"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}}]
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(NOTIF_INIT)
        await h.stdout.wait_for(2)
        h.stdin.feed(request_line(7, "resources/subscribe", {"uri": "file:///a"}))
        messages = await h.stdout.wait_for(4)
    assert {"jsonrpc": "2.0", "id": 7, "result": {}} in messages
    assert {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}} in messages
    filters = [b["params"]["notifications"] for b in app.bodies if b.get("method") == "subscriptions/listen"]
    assert {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]} in filters


async def test_cancellation_closes_the_exchange_and_nothing_is_posted(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(9, "tools/call", {"name": "slow", "arguments": {}}))
        with anyio.fail_after(5):
            while "tools/call" not in app.methods():
                await anyio.sleep(0.01)
        h.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}\n')
        h.stdin.feed(request_line(10, "tools/list"))
        (reply,) = (await h.stdout.wait_for(2))[1:]  # the next request is answered; nothing for id 9
    assert reply["id"] == 10
    assert "notifications/cancelled" not in app.methods()


async def test_tasks_have_no_equivalent_and_the_error_names_them(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(4, "tasks/get", {"taskId": "t1"}))
        reply = (await h.stdout.wait_for(2))[1]
    assert reply["error"]["code"] == -32601 and reply["error"]["data"]["missing"] == "tasks"
    assert "tasks/get" not in app.methods()


async def test_a_task_augmented_call_gets_an_error_naming_what_is_missing(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}, "task": {"ttl": 1000}}))
        reply = (await h.stdout.wait_for(2))[1]
    assert reply["id"] == 5 and reply["error"]["code"] == -32601
    assert reply["error"]["data"]["missing"] == "task-augmented requests" and "2026-07-28" in reply["error"]["message"]
    assert "tools/call" not in app.methods()


async def test_roots_list_changed_is_dropped_with_a_debug_line_and_no_reply(
    run_bridge: RunBridge, caplog: pytest.LogCaptureFixture
) -> None:
    """2026-07-28 has no ``notifications/roots/list_changed`` (the app asks for roots in each
    ``input_required``): the client's is dropped, logged at debug, and never answered."""
    import logging

    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    with caplog.at_level(logging.DEBUG, logger="bridge"):
        async with run_bridge(app) as h:
            await handshake(h)
            h.stdin.feed(NOTIF_INIT + b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}\n' + request_line(6, "tools/list"))
            replies = (await h.stdout.wait_for(2))[1:]
    assert [reply.get("id") for reply in replies] == [6] and "result" in replies[0]
    assert "notifications/roots/list_changed" not in app.methods()
    assert any(r.levelno == logging.DEBUG and "roots/list_changed" in r.getMessage() for r in caplog.records), caplog.text


async def test_modern_never_sends_initialize_and_legacy_never_translates(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    async with run_bridge(app, protocol_era="modern") as h:
        reply = await handshake(h)
    assert reply["result"]["serverInfo"] == SERVER_INFO
    assert app.methods() == ["server/discover"]
    app = ModernOnlyApp()
    async with run_bridge(app, protocol_era="legacy") as h:
        reply = await handshake(h)
    assert reply["error"]["code"] == -32022
    assert app.methods() == ["initialize"]


async def test_modern_with_an_app_that_refuses_server_discover_names_the_option(run_bridge: RunBridge) -> None:
    """``--protocol-era modern`` with a legacy-only app: the client gets a -32603 whose
    ``data.reason`` says what failed (docs/behaviour.md, "Errors") and whose message names
    the fix, not the app's bare refusal."""

    def legacy_only(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        return json_response({"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": -32601, "message": "Method not found"}})

    async with run_bridge(legacy_only, protocol_era="modern") as h:
        reply = await handshake(h)
    assert reply["error"]["code"] == -32603
    assert reply["error"]["data"] == {"source": "bridge", "reason": "protocol_era"}
    assert "--protocol-era auto" in reply["error"]["message"]


async def test_an_app_that_answers_initialize_is_not_translated(run_bridge: RunBridge) -> None:
    async def dual(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content) if request.method == "POST" else {}
        if message.get("method") == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "dual", "version": "1"}}
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result}, headers={"mcp-session-id": "s1"})
        return httpx.Response(405)

    async with run_bridge(dual) as h:
        reply = await handshake(h)
    assert reply["result"]["serverInfo"]["name"] == "dual"


@pytest.mark.slow
async def test_state_only_rounds_are_retried_and_bounded(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(1, "tools/call", {"name": "poll", "arguments": {}}))
        h.stdin.feed(request_line(2, "tools/call", {"name": "forever", "arguments": {}}))
        replies = {m["id"]: m for m in await h.stdout.wait_for(3, timeout_seconds=15)}
    assert replies[1]["result"] == {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}, "content": []}
    assert "after 10 rounds" in replies[2]["error"]["message"]
    assert replies[2]["error"]["data"] == {"source": "bridge", "reason": "bad_upstream_response"}
    calls = [b["params"]["name"] for b in app.bodies if b.get("method") == "tools/call"]
    assert calls.count("poll") == 3 and calls.count("forever") == 11  # the first send and 10 rounds
    assert not any(m.get("method") for m in h.stdout.messages() if isinstance(m, dict) and "id" in m and "method" in m)


async def test_a_cancelled_request_withdraws_its_question_to_the_client(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    async with run_bridge(app) as h:
        await handshake(h)
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}}))
        question = (await h.stdout.wait_for(2))[1]
        h.stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}\n')
        withdrawn = (await h.stdout.wait_for(3))[2]
        h.stdin.feed(request_line(6, "tools/list"))
        after = (await h.stdout.wait_for(4))[3]
    assert withdrawn == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": question["id"]}}
    assert after["id"] == 6  # and nothing for the cancelled request
    assert sum(b.get("method") == "tools/call" for b in app.bodies) == 1


async def test_a_client_that_never_answers_gets_an_error_within_the_request_timeout(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    async with run_bridge(app, request_timeout_seconds=0.5) as h:
        await handshake(h)
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}}))
        messages = await h.stdout.wait_for(4)
    (reply,) = [m for m in messages if m.get("id") == 5]
    assert "did not answer elicitation/create within 0.5 s" in reply["error"]["message"]
    assert reply["error"]["code"] == -32603 and reply["error"]["data"] == {"source": "bridge", "reason": "timeout"}
    assert {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": messages[1]["id"]}} in messages


@pytest.mark.parametrize(
    ("asked", "declared", "why"),
    [
        ({"x": {"method": "initialize", "params": {"protocolVersion": "2025-06-18"}}}, ASKABLE, "initialize is not a request for input"),
        ({"x": {"method": "tools/call", "params": {"name": "t"}}}, ASKABLE, "tools/call is not a request for input"),
        ({"x": {"method": "ping"}}, ASKABLE, "ping is not a request for input"),
        ({"who": ELICIT}, {"roots": {}}, "did not declare the elicitation capability"),
        ({"x": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}}, {"elicitation": {}}, "did not declare the sampling capability"),
        ({"x": {"method": "roots/list"}}, {}, "did not declare the roots capability"),
        ({"x": {"method": "elicitation/create", "params": {"requestedSchema": {}}}}, ASKABLE, "lacks params.message"),
        ({"x": {"method": "elicitation/create", "params": "name?"}}, ASKABLE, "params that are not an object"),
        ({"x": "elicitation/create"}, ASKABLE, "it is not an object"),
        ({f"q{n}": ELICIT for n in range(5000)}, ASKABLE, "it asks 5000 questions in one round"),
        (["who"], ASKABLE, "inputRequests is not an object"),
    ],
)
async def test_questions_the_client_may_not_be_asked_end_the_request_at_once(
    run_bridge: RunBridge, asked: Any, declared: dict[str, Any], why: str
) -> None:
    """Issue 41, 3: every kind went to the client (``initialize`` and ``tools/call`` as
    requests), whatever it declared, and 5,000 questions in one round; a malformed one waited
    out the timeout. Only elicitation, sampling and roots go, each with its capability, at
    most 16 a round; anything else ends the request at once, and the client is asked nothing."""
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    app.asked = asked
    async with run_bridge(app, request_timeout_seconds=60) as h:
        await handshake(h, declared)
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}}))
        (reply,) = (await h.stdout.wait_for(2, timeout_seconds=10))[1:]
    assert reply["id"] == 5 and why in reply["error"]["message"], reply
    assert reply["error"]["data"] == {"source": "bridge", "reason": "bad_upstream_response"}
    assert sum(b.get("method") == "tools/call" for b in app.bodies) == 1


async def test_the_declared_kinds_go_to_the_client_and_sixteen_fit_one_round(run_bridge: RunBridge) -> None:
    app = ModernOnlyApp()
    app.capabilities = {"tools": {}}
    app.asked = {"who": ELICIT, **{f"r{n}": {"method": "roots/list"} for n in range(15)}}
    async with run_bridge(app) as h:
        await handshake(h, {"elicitation": {}, "roots": {}})
        h.stdin.feed(request_line(5, "tools/call", {"name": "ask", "arguments": {}}))
        questions = (await h.stdout.wait_for(17))[1:]
    assert sorted(q["method"] for q in questions) == ["elicitation/create"] + ["roots/list"] * 15
