"""Backpressure on stdin (bridge/core/admission.py), through a real Bridge against a scripted app
that stalls: reading pauses while the open requests' lines fill the byte budget, resumes as
replies go out, and every request still gets exactly one reply; notifications reach the app
while requests queue."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from support.helpers import CountingStdin, FakeStdout, request_line, settled
from support.mcp_app import McpApp, json_reply
from support.scripted import Peer, Seen, serve

from bridge.core.admission import MAX_HELD_BYTES, REQUEST_BOOKKEEPING_BYTES, Admission
from bridge.core.config import BridgeConfig
from bridge.core.errors import ShuttingDownError
from bridge.core.ledger import Ledger
from bridge.serve.loop import Bridge

pytestmark = pytest.mark.anyio

BOUND_SECONDS = 120.0
"""Upper bound on every wait (never a speed assertion)."""




def test_the_byte_budget_pauses_reading_and_resumes_below_three_quarters() -> None:
    ledger = Ledger()
    admission = Admission(ledger, max_held_bytes=10_000)
    assert not admission.reading_paused()
    slots = [ledger.open([i], batch=False, held_bytes=1_000).pending for i in range(10)]
    assert admission.reading_paused()
    for pending in slots[:2]:
        ledger.answer(pending.slots[0], b"{}\n")  # type: ignore[union-attr]
    assert admission.reading_paused()  # 8,000 bytes held: above the resume mark
    for pending in slots[2:3]:
        ledger.answer(pending.slots[0], b"{}\n")  # type: ignore[union-attr]
    assert not admission.reading_paused()  # 7,000: reading resumes
    ledger.close_all(ShuttingDownError("bye"))


def test_requests_beyond_the_started_budget_wait_in_order() -> None:
    ledger = Ledger()
    admission = Admission(ledger, max_started_requests=2)
    admission.started = 2
    assert not admission.may_start()
    for i in range(3):
        admission.wait(ledger.open([i], batch=False).pending, b"line %d" % i, i)  # type: ignore[arg-type]
    assert list(admission.ready()) == []
    admission.started = 0
    started = []
    for _, _, context in admission.ready():
        admission.started += 1  # (the caller starts it)
        started.append(context)
    assert started == [0, 1] and admission.waiting == 1


@pytest.mark.slow
async def test_a_flood_against_a_stalled_app_pauses_reading_and_every_request_gets_one_reply() -> None:
    padding = "p" * 10_000
    count = 2 * MAX_HELD_BYTES // (10_100 + REQUEST_BOOKKEEPING_BYTES)  # twice what the budget holds
    release = anyio.Event()
    app = McpApp(stateless=True)

    async def stall(seen: Seen, peer: Peer) -> None:
        await release.wait()
        message = seen.message()
        await peer.send(json_reply(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}).encode()))

    app.replies["tools/call"] = stall
    stdin, stdout = CountingStdin(), FakeStdout()
    async with serve(app.wire) as server:
        bridge = Bridge(BridgeConfig(url=server.url(), max_concurrent_requests=4), stdin=stdin, stdout=stdout)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.run)
            for i in range(count):
                stdin.feed(request_line(i, "tools/call", {"name": "x", "arguments": {"pad": padding}}))
            await settled(stdin)
            assert 0 < stdin.taken < count * 3 // 4  # paused, with about half the lines unread
            held_at_pause = stdin.taken
            release.set()
            with anyio.fail_after(BOUND_SECONDS):
                while len(stdout.lines) < count:
                    await anyio.sleep(0.05)
            assert stdin.taken == count > held_at_pause  # reading resumed as replies went out
            ids = [json.loads(line)["id"] for line in stdout.lines]
            assert sorted(ids) == list(range(count))  # exactly one reply each
            stdin.close()


async def test_a_cancellation_reaches_the_app_while_requests_queue_behind_a_stalled_call() -> None:
    app = McpApp(stateless=True)
    cancelled = anyio.Event()

    async def stall(seen: Seen, peer: Peer) -> None:
        await peer.hold()

    app.replies["tools/call"] = stall
    plain = app.wire

    async def handle(seen: Seen, peer: Peer) -> None:
        if seen.rpc_method == "notifications/cancelled":
            cancelled.set()
        await plain(seen, peer)

    stdin, stdout = CountingStdin(), FakeStdout()
    async with serve(handle) as server:
        bridge = Bridge(BridgeConfig(url=server.url(), max_concurrent_requests=1), stdin=stdin, stdout=stdout)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.run)
            stdin.feed(b"".join(request_line(i, "tools/call", {"name": "x"}) for i in range(2000)))
            await server.wait_for(lambda: len(server.posts("tools/call")) == 1)
            stdin.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}\n')
            with anyio.fail_after(BOUND_SECONDS):
                await cancelled.wait()  # while 1,999 requests wait for the one slot
            bridge.stop("the test is over")  # (EOF would wait for the 1,999 stalled calls)
        replies: list[Any] = [json.loads(line) for line in stdout.lines]
        assert all(reply["id"] != 0 for reply in replies)  # none for the cancelled one
