"""Progress heartbeats (bridge/serve/heartbeat.py): their values, their timer, their end."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from bridge.core.jsonrpc import Request, encode_message
from bridge.serve.heartbeat import Heartbeats, progress_token_of

pytestmark = pytest.mark.anyio


def call(token: Any) -> Request:
    params = {"name": "slow", "_meta": {"progressToken": token}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return Request(1, "tools/call", params, encode_message(message)[:-1])


def test_the_progress_token_is_a_string_or_an_integer() -> None:
    assert progress_token_of(call("a")) == "a" and progress_token_of(call(3)) == 3
    assert progress_token_of(call(True)) is None and progress_token_of(call(1.5)) is None


async def test_heartbeats_increase_stay_under_the_apps_values_and_stop_with_the_call() -> None:
    sent: list[dict[str, Any]] = []

    async def send(line: bytes) -> None:
        sent.append(json.loads(line)["params"])

    beats = Heartbeats(0.05, send, app_name="App")

    async def work() -> bytes:
        await asyncio.sleep(0.18)
        beats.heard({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 0, "total": 2}})
        await asyncio.sleep(0.18)
        return b"reply"

    assert await beats.watch(call("t"), work()) == b"reply"
    count = len(sent)
    await asyncio.sleep(0.15)
    assert len(sent) == count  # none after the reply
    values = [p["progress"] for p in sent]
    before = [v for v in values if v < 0]
    after = [v for v in values if v > 0]
    assert before and after and len(before) + len(after) == len(values)  # none at the app's own 0
    assert before == sorted(before) and after == sorted(after)
    assert all(v < 1e-6 for v in after)  # just above the app's 0: below any next value it sends
    assert all(p["progressToken"] == "t" and p["message"] == "waiting for App to answer" for p in sent)


async def test_no_heartbeat_without_a_token_or_when_off() -> None:
    sent: list[bytes] = []

    async def send(line: bytes) -> None:
        sent.append(line)

    params: dict[str, Any] = {"name": "slow"}
    plain = Request(1, "tools/call", params, b"{}")
    assert await Heartbeats(0.02, send, app_name="App").watch(plain, asyncio.sleep(0.1, b"r")) == b"r"
    assert await Heartbeats(0, send, app_name="App").watch(call("t"), asyncio.sleep(0.1, b"r")) == b"r"
    assert sent == []
