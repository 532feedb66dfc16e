"""The quirks of real clients and servers the bridge smooths, each named by its public
report (docs/behaviour.md, "Quirks smoothed"), through a running bridge."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from support.helpers import RunBridge, json_response, request_line

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("wire")]


def result_for(request: httpx.Request) -> httpx.Response:
    message = json.loads(request.content)
    return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"seen": message.get("params")}})


class Refusing:
    """An app that answers the first ``refusals`` POSTs with ``status`` (and ``headers``),
    then replies."""

    def __init__(self, status: int, headers: dict[str, str], refusals: int = 1) -> None:
        self.status, self.headers, self.refusals = status, headers, refusals
        self.posts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.posts += 1
        if self.posts <= self.refusals:
            return httpx.Response(self.status, headers=self.headers, text="slow down")
        return result_for(request)


# -- modelcontextprotocol/typescript-sdk#2012: tools/call with "arguments": null -----------------


async def test_null_arguments_reach_the_app_as_an_empty_object(run_bridge: RunBridge) -> None:
    """typescript-sdk#2012: a server on the official TypeScript SDK answers -32603 to
    ``"arguments": null``; the bridge sends ``{}``, and only that member changes."""
    async with run_bridge(result_for) as h:
        h.stdin.feed(request_line(1, "tools/call", {"name": "now", "arguments": None, "_meta": {"progressToken": 7}}))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["result"]["seen"] == {"name": "now", "arguments": {}, "_meta": {"progressToken": 7}}
    assert json.loads(h.posts()[0].content)["params"]["arguments"] == {}


async def test_other_requests_are_forwarded_byte_for_byte(run_bridge: RunBridge) -> None:
    """Only that quirk re-encodes: a call with arguments (null inside them included), or
    with none, goes out as the client wrote it."""
    lines = [
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "arguments": {"a": null}}}\n',
        b'{ "id":2,"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"} }\n',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"arguments":null}}\n',
    ]
    async with run_bridge(result_for) as h:
        h.stdin.feed(b"".join(lines))
        await h.stdout.wait_for(3)
    assert sorted(request.content for request in h.posts()) == sorted(line[:-1] for line in lines)


# -- 429/503 with Retry-After: basicmachines-co/basic-memory#1378 ---------------------------------


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_in_seconds_is_waited_and_the_request_sent_once_more(run_bridge: RunBridge, status: int) -> None:
    """basic-memory#1378: a 429 with ``Retry-After`` became the model's failure where one
    retry after the delay would have succeeded. Any method: the app did not act on it."""
    app = Refusing(status, {"retry-after": "0"})
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(5, "tools/call", {"name": "write", "arguments": {}}))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["id"] == 5 and "result" in reply and app.posts == 2


async def test_retry_after_as_an_http_date_is_honoured(run_bridge: RunBridge) -> None:
    past = format_datetime(datetime(2020, 1, 1, tzinfo=UTC), usegmt=True)
    app = Refusing(503, {"retry-after": past})
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert "result" in reply and app.posts == 2


async def test_a_second_refusal_is_answered_after_exactly_one_retry(run_bridge: RunBridge) -> None:
    app = Refusing(429, {"retry-after": "0"}, refusals=5)
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["error"]["data"]["httpStatus"] == 429 and app.posts == 2
    assert "Retry-After: 0" in reply["error"]["message"]


async def test_a_retry_after_beyond_60_seconds_is_answered_at_once(run_bridge: RunBridge) -> None:
    """agentmail-to/agentmail-mcp#57: sleeping through a long Retry-After turned the
    app's clear 429 into a timeout; the bridge answers it at once, naming the delay."""
    app = Refusing(429, {"retry-after": "120"})
    async with run_bridge(app, request_timeout_seconds=3600) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    message = reply["error"]["message"]
    assert app.posts == 1 and reply["error"]["data"]["httpStatus"] == 429
    assert "Retry-After: 120" in message and "60 s" in message


@pytest.mark.parametrize("digits", [309, 4301, 6000])
async def test_a_retry_after_of_any_length_gets_the_http_status_answer(run_bridge: RunBridge, digits: int) -> None:
    """Issue 41, 2: 309 digits overflowed a float, 4,301 broke int(); both were a
    bridge_error with a traceback. More than ten significant digits read as 2**31 s."""
    app = Refusing(429, {"retry-after": "0" + "9" * (digits - 1)})
    async with run_bridge(app, request_timeout_seconds=3600) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert app.posts == 1 and reply["error"]["data"]["httpStatus"] == 429, reply
    assert "60 s" in reply["error"]["message"] and "wait 2147483648 s" in reply["error"]["message"]


async def test_a_retry_after_beyond_the_request_timeout_is_answered_at_once(run_bridge: RunBridge) -> None:
    app = Refusing(503, {"retry-after": "30"})
    async with run_bridge(app, request_timeout_seconds=10) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert app.posts == 1 and "Retry-After: 30" in reply["error"]["message"]
    assert "request timeout" in reply["error"]["message"]


async def test_429_without_retry_after_is_final(run_bridge: RunBridge) -> None:
    app = Refusing(429, {})
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(1, "tools/list"))
        (reply,) = await h.stdout.wait_for(1)
    assert app.posts == 1 and reply["error"]["data"]["httpStatus"] == 429


# -- after a failure that may have reached the app: apify/apify-client-python#990 ---------------


class BreaksOnce:
    """An app whose first POST breaks the connection after the request arrived."""

    def __init__(self) -> None:
        self.posts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.posts += 1
        if self.posts == 1:
            raise httpx.ReadError("connection reset by peer")
        return result_for(request)


@pytest.mark.parametrize("method", ["tools/list", "resources/read", "prompts/get", "ping", "completion/complete"])
async def test_a_read_whose_connection_broke_is_sent_once_more(run_bridge: RunBridge, method: str) -> None:
    app = BreaksOnce()
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(1, method, {}))
        (reply,) = await h.stdout.wait_for(1)
    assert "result" in reply and app.posts == 2


@pytest.mark.parametrize("method", ["tools/call", "initialize", "logging/setLevel"])
async def test_a_call_whose_connection_broke_is_never_sent_twice(run_bridge: RunBridge, method: str) -> None:
    """apify-client-python#990: a POST that committed in the app and lost its answer was
    sent again, and did its work twice. A ``tools/call`` may have run: the client is told."""
    app = BreaksOnce()
    params: Any = {"name": "send_mail", "arguments": {}} if method == "tools/call" else {}
    async with run_bridge(app) as h:
        h.stdin.feed(request_line(1, method, params))
        (reply,) = await h.stdout.wait_for(1)
    assert reply["error"]["data"]["reason"] == "stream_closed" and app.posts == 1
