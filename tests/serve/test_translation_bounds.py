"""The waits of the 2026-07-28 translation (bridge/serve/modernapp.py) hold in a task that
already carries a cancel request: a library caller's clean-up after ^C, or any task that
caught a cancellation and went on. Each wait is the project's cancel scope
(bridge/system/cancelscope.py), not a bare ``asyncio.timeout``, whose own cancellation
escaped there as ``CancelledError`` on Python 3.11.0-3.11.2 (python/cpython#102780): the
client's request then got no reply at all, and the listen loop ended.

The app is played by a stand-in for the layer below (``forward``); no HTTP, no process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from bridge.core.jsonrpc import Request, encode_message
from bridge.core.policy import Backoff
from bridge.serve import modernapp
from bridge.serve.driver import Reply
from bridge.serve.modernapp import ModernAppEras
from bridge.system.cancelscope import move_on_after

MODERN = "2026-07-28"
T = TypeVar("T")


class _Below:
    """The lazy-launch layer as ``ModernAppEras`` uses it: an app that refuses
    ``initialize``, serves 2026-07-28 with resource subscriptions, asks for input on every
    ``tools/call``, and ends each ``subscriptions/listen`` at once (counted)."""

    def __init__(self) -> None:
        self.listens = 0
        self.on_listen: Callable[[], object] = lambda: None

    def catalog_refuses(self, method: str) -> bool:
        return False

    def mark_catalog(self, key: str, value: Any) -> None:
        pass

    async def forward(self, request: Request, emit: Any, *, legacy_client: bool = False) -> Reply:
        if request.method == "initialize":
            error = {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": [MODERN]}}
            return Reply(encode_message({"jsonrpc": "2.0", "id": request.id, "error": error}))
        if request.method == "server/discover":
            result = {"resultType": "complete", "supportedVersions": [MODERN],
                      "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True}}}
        elif request.method == "tools/call":
            asked = {"who": {"method": "elicitation/create", "params": {"message": "Your name?", "requestedSchema": {"type": "object"}}}}
            result = {"resultType": "input_required", "inputRequests": asked, "requestState": "1"}
        elif request.method == "subscriptions/listen":
            self.listens += 1
            self.on_listen()
            result = {"resultType": "complete"}  # the stream ended: the loop waits, then opens it again
        else:
            raise AssertionError(request.method)
        return Reply(encode_message({"jsonrpc": "2.0", "id": request.id, "result": result}))


def _request(request_id: int, method: str, params: dict[str, Any]) -> Request:
    return Request(request_id, method, params, json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())


async def _ignore(line: bytes, message: Any = None) -> None:
    pass


async def _translating(below: _Below) -> ModernAppEras:
    eras = ModernAppEras(below, always=False, app_name="MyApp", answer_timeout_seconds=0.05)  # type: ignore[arg-type]
    init = {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "c", "version": "0"}}
    await eras.request(_request(0, "initialize", init), _ignore)
    assert eras.active
    return eras


def _in_a_task_carrying_a_cancel_request(work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` in a task that was cancelled once and went on (the request stays
    counted: ``Task.cancelling() == 1``), as a clean-up after ^C does."""

    async def carried_on() -> T:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 1
        return await work()

    async def main() -> T:
        task = asyncio.get_running_loop().create_task(carried_on())
        await asyncio.sleep(0)
        task.cancel()
        return await asyncio.wait_for(task, 10)

    return asyncio.run(main())


def test_an_unanswered_question_to_the_client_still_ends_the_request_with_a_timeout() -> None:
    below = _Below()

    async def call() -> Any:
        eras = await _translating(below)
        return json.loads(await eras.request(_request(1, "tools/call", {"name": "ask", "arguments": {}}), _ignore))

    reply = _in_a_task_carrying_a_cancel_request(call)
    assert reply["id"] == 1 and "did not answer elicitation/create within 0.05 s" in reply["error"]["message"], reply


def test_an_unacknowledged_subscription_still_gets_its_timeout_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modernapp, "ACKNOWLEDGE_SECONDS", 0.05)
    below = _Below()

    async def subscribe() -> Any:
        eras = await _translating(below)  # (no listen runs: nothing acknowledges)
        return json.loads(await eras.request(_request(1, "resources/subscribe", {"uri": "file:///a"}), _ignore))

    reply = _in_a_task_carrying_a_cancel_request(subscribe)
    assert reply["id"] == 1 and "did not acknowledge the subscriptions/listen stream within 0.05 s" in reply["error"]["message"], reply


def test_a_listen_stream_that_ended_is_still_opened_again_after_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modernapp, "SUBSCRIPTIONS_LISTEN_BACKOFF", Backoff(0.01, 1.0, 0.01))
    below = _Below()

    async def listen() -> tuple[int, bool]:
        eras = await _translating(below)
        with move_on_after(10) as listening:  # (a bound on the test; the third stream ends it)
            below.on_listen = lambda: listening.cancel() if below.listens == 3 else None
            await eras.listen(_ignore)
        return below.listens, listening.cancel_called

    assert _in_a_task_carrying_a_cancel_request(listen) == (3, True)
