"""After a burst of large replies, an idle bridge gives their memory back: a reply's bytes
are freed once its line is written, not kept alive by a reference cycle (an exception or a
task holding its frame) until a cyclic collection that an idle bridge never runs.

A real bridge process against a scripted app: 200 replies of 512 KiB (100 MiB in all), read
by the client as they come; 2 s later the bridge's resident memory (``VmRSS``) must be well
below the burst's total. Before, it stayed at about the size of all the replies (104 MiB).

glibc's malloc raises its mmap threshold each time a large block that it mapped is freed,
after which blocks of that size come from the heap, whose free space is seldom given back:
that keeps RSS up (37 to 85 MiB here) with nothing alive. The bridge is run with the
threshold pinned at glibc's default (``MALLOC_MMAP_THRESHOLD_``), so what is measured is
what the bridge keeps alive, not the allocator's policy."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.helpers import NOTIF_INIT, init, request_line
from support.mcp_app import LAST_CHUNK, SSE_HEAD, McpApp, chunk, compact, json_reply, sse_event
from support.processes import status_kib
from support.scripted import Peer, Seen, serve

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024
REPLY_BYTES = 512 * 1024
COUNT = 200
BOUND_SECONDS = 120.0
"""Upper bound on every wait (never a speed assertion)."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.process
@pytest.mark.linux_only("reads /proc/PID/status")
@pytest.mark.parametrize("over", ["json", "sse"])
async def test_an_idle_bridge_keeps_little_of_a_burst_of_large_replies(tmp_path: Path, over: str) -> None:
    app = McpApp(stateless=True)
    pad = "x" * REPLY_BYTES

    async def answer(seen: Seen, peer: Peer) -> None:
        body = compact({"jsonrpc": "2.0", "id": seen.message()["id"], "result": {"pad": pad}})
        await peer.send(json_reply(body) if over == "json" else SSE_HEAD + chunk(sse_event(body)) + LAST_CHUNK)

    app.replies["tools/call"] = answer
    async with serve(app.wire) as server:
        stderr = open(tmp_path / "bridge.stderr", "wb")  # noqa: SIM115
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "--url", server.url(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}, limit=4 * MiB,
        )
        stderr.close()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(init(0) + NOTIF_INIT)
            assert json.loads(await asyncio.wait_for(proc.stdout.readline(), BOUND_SECONDS))["id"] == 0
            idle_kib = status_kib(proc.pid, "VmRSS")
            proc.stdin.write(b"".join(request_line(index, "tools/call", {"name": "big"}) for index in range(1, COUNT + 1)))
            replies = [json.loads(await asyncio.wait_for(proc.stdout.readline(), BOUND_SECONDS)) for _ in range(COUNT)]
            await asyncio.sleep(2.0)  # idle: nothing more is asked of it
            after_kib = status_kib(proc.pid, "VmRSS")
            proc.stdin.close()
            assert await asyncio.wait_for(proc.wait(), BOUND_SECONDS) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert sorted(reply["id"] for reply in replies) == list(range(1, COUNT + 1))
    kept_mib = (after_kib - idle_kib) / 1024
    print(f"{over}: 2 s after {COUNT} replies of {REPLY_BYTES // 1024} KiB the bridge keeps {kept_mib:.1f} MiB more than idle")
    assert kept_mib * MiB < COUNT * REPLY_BYTES / 3, f"{kept_mib:.1f} MiB kept"
