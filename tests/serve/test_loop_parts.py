"""``Bridge.run``'s two parts, the stdin reader and the stdout writer: a failure inside one
of them (a bug) is logged and ends the run through the ordinary shutdown, so every open
request still gets its one reply, and the run returns."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from support.helpers import URL, FakeStdout, app_down, request_line
from support.scripted import WAIT

from bridge import BridgeConfig
from bridge.serve.loop import Bridge

pytestmark = pytest.mark.anyio


class _StdinThatBreaks:
    """Gives one request line, then fails as a bug in the reading would."""

    def __init__(self) -> None:
        self.calls = 0
        self.app_has_it = asyncio.Event()

    async def receive(self) -> bytes:
        self.calls += 1
        if self.calls == 1:
            return request_line(1, "tools/list")
        await self.app_has_it.wait()
        raise RuntimeError("a bug in the reader")


async def test_a_failure_in_the_reader_ends_the_run_and_the_open_request_is_answered(caplog: pytest.LogCaptureFixture) -> None:
    stdin, stdout = _StdinThatBreaks(), FakeStdout()

    async def app_that_never_answers(request: httpx.Request) -> httpx.Response:
        stdin.app_has_it.set()
        await asyncio.sleep(60)
        raise AssertionError("not reached")

    bridge = Bridge(
        BridgeConfig(url=URL, verify_listener=False),
        stdin=stdin,
        stdout=stdout,
        http_transport=httpx.MockTransport(app_that_never_answers),
        app_probe=app_down,
    )
    status = await asyncio.wait_for(bridge.run(), WAIT)
    assert status == 0
    (reply,) = stdout.messages()
    assert reply["id"] == 1 and reply["error"]["data"]["reason"] == "shutting_down"
    assert "a failure inside the bridge" in reply["error"]["message"]
    (failure,) = [record for record in caplog.records if record.getMessage() == "the bridge failed; shutting down"]
    assert failure.levelno == logging.ERROR and failure.exc_info is not None
