"""A client that stops reading stdout (bridge/stdio/outbox.py, bridge/serve/dispatch.py): the replies
waiting for it stay within a fixed byte budget, the bridge stops reading from the app and
from stdin, and once the client reads again every reply arrives exactly once.

In process: a Bridge whose stdout stalls, against a scripted app (reading pauses on both
sides). As a process: 600 replies of 512 KiB to a client that does not read for a while;
the bridge's peak RSS is measured (not timed) before the client reads them all.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.helpers import NOTIF_INIT, CountingStdin, init, request_line, settled
from support.mcp_app import McpApp, compact, json_reply
from support.processes import bridge_command, python_pid, status_kib
from support.scripted import Peer, Seen, serve

import bridge.stdio.outbox
from bridge.core.config import BridgeConfig
from bridge.serve.loop import Bridge
from bridge.stdio.outbox import OUTPUT_BUDGET_BYTES

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024
REPLY_BYTES = 512 * 1024
BOUND_SECONDS = 120.0
"""Upper bound on every wait (never a speed assertion)."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def big_replies(app: McpApp, reply_bytes: int = REPLY_BYTES) -> list[Any]:
    """``tools/call`` answers with a ``reply_bytes`` result; returns the list of the ids served."""
    served: list[Any] = []
    pad = "x" * reply_bytes

    async def answer(seen: Seen, peer: Peer) -> None:
        message = seen.message()
        served.append(message["id"])
        await peer.send(json_reply(compact({"jsonrpc": "2.0", "id": message["id"], "result": {"pad": pad}})))

    app.replies["tools/call"] = answer
    return served


class StalledStdout:
    """A client's stdout that is not read until ``reading`` is set."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.reading = anyio.Event()

    async def send(self, data: bytes) -> None:
        await self.reading.wait()
        self.lines.append(data)


@pytest.mark.slow
async def test_a_client_that_stops_reading_stops_the_bridge_reading_stdin_and_the_app(monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 4 * MiB
    monkeypatch.setattr(bridge.stdio.outbox, "OUTPUT_BUDGET_BYTES", budget)
    count = 200
    app = McpApp(stateless=True)
    served = big_replies(app)
    stdin, stdout = CountingStdin(), StalledStdout()
    async with serve(app.wire) as server:
        run = Bridge(BridgeConfig(url=server.url(), max_concurrent_requests=4), stdin=stdin, stdout=stdout)
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.run)
            outbox = run._outbox
            for index in range(20):
                stdin.feed(request_line(index, "tools/call", {"name": "big"}))
            with anyio.fail_after(BOUND_SECONDS):
                while outbox.has_room:  # the client reads nothing: the budget fills
                    await anyio.sleep(0.01)
            taken_when_full = stdin.taken
            for index in range(20, count):
                stdin.feed(request_line(index, "tools/call", {"name": "big"}))
            await settled(stdin)  # the reader stopped although lines are left
            held_served = len(served)
            assert stdin.taken <= taken_when_full + 1 < count  # (one line may have been taken already)
            # The app was asked for about the budget's worth of replies, plus the requests in
            # flight when it filled: not for everything that was read.
            assert held_served <= budget // REPLY_BYTES + 4 + 2, held_served
            assert budget <= outbox.held_bytes <= budget + REPLY_BYTES + 1024
            stdout.reading.set()
            with anyio.fail_after(BOUND_SECONDS):
                while len(stdout.lines) < count:
                    await anyio.sleep(0.05)
            stdin.close()
    ids = [json.loads(line)["id"] for line in stdout.lines]
    assert sorted(ids) == list(range(count)), "exactly one reply each"
    assert sorted(served) == list(range(count))


@pytest.mark.process
@pytest.mark.frozen_relevant
@pytest.mark.linux_only("reads /proc/PID/status")
async def test_600_replies_of_512_kib_to_a_client_that_does_not_read_stay_in_budget_then_all_arrive_once(tmp_path: Path) -> None:
    count = 600
    app = McpApp(stateless=True)
    served = big_replies(app)
    async with serve(app.wire) as server:
        stderr = open(tmp_path / "bridge.stderr", "wb")  # noqa: SIM115
        proc = await asyncio.create_subprocess_exec(
            *bridge_command(), "--url", server.url(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, limit=4 * MiB,
        )
        stderr.close()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(init(0) + NOTIF_INIT)
            first = json.loads(await asyncio.wait_for(proc.stdout.readline(), BOUND_SECONDS))
            assert first["id"] == 0
            measured = python_pid(proc.pid)  # (a frozen file's Python runs in a child)
            idle_kib = status_kib(measured, "VmHWM")
            proc.stdin.write(b"".join(request_line(index, "tools/call", {"name": "big"}) for index in range(1, count + 1)))
            await asyncio.wait_for(proc.stdin.drain(), BOUND_SECONDS)
            # The client does not read: wait until the bridge stops asking the app for more.
            deadline = time.monotonic() + BOUND_SECONDS
            last, stable_since = -1, time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - stable_since < 2.0:
                await asyncio.sleep(0.1)
                if len(served) != last:
                    last, stable_since = len(served), time.monotonic()
            held_served = len(served)
            held_peak_kib = status_kib(measured, "VmHWM")
            replies = [json.loads(await asyncio.wait_for(proc.stdout.readline(), BOUND_SECONDS)) for _ in range(count)]
            proc.stdin.close()
            assert await asyncio.wait_for(proc.wait(), BOUND_SECONDS) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    growth_mib = (held_peak_kib - idle_kib) / 1024
    print(
        f"served {held_served} of {count} replies while the client did not read; "
        f"peak RSS grew {growth_mib:.1f} MiB (idle peak {idle_kib / 1024:.1f} MiB)"
    )
    ids = [reply["id"] for reply in replies]
    assert sorted(ids) == list(range(1, count + 1)), "every reply exactly once"
    assert all(len(reply["result"]["pad"]) == REPLY_BYTES for reply in replies)
    assert held_served < count, "the bridge kept reading from the app for a client that did not read"
    # The budget, plus the replies of the requests in flight when it filled (32 at most by
    # default, each held about twice: read, then framed as a line), plus the allocator's slack.
    assert growth_mib * MiB < OUTPUT_BUDGET_BYTES + 32 * 2 * REPLY_BYTES + 48 * MiB
