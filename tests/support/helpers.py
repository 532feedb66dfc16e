"""In-process harness: the bridge with fake stdin/stdout and an httpx client backed by respx."""

from __future__ import annotations

import collections
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx
import respx

from bridge.core.config import BridgeConfig
from bridge.serve.loop import Bridge


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The app's URL in the in-process tests: a port nothing listened on when the tests started
#: (never a fixed one: a developer may run the example app on 8765 beside the suite).
URL = f"http://127.0.0.1:{_free_port()}/mcp"
TOKEN = "tok-PLACEHOLDER-0123456789"


def init(request_id: Any = 0) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test-client", "version": "0"}},
        },
        separators=(",", ":"),
    ).encode() + b"\n"


NOTIF_INIT = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def request_line(request_id: Any, method: str = "ping", params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


def echo_ok(request: httpx.Request) -> httpx.Response:
    """The "echo-ok upstream" of HAZARDS.md: result {} for requests, 202 for the rest."""
    if request.method != "POST":
        return httpx.Response(405)
    message = json.loads(request.content)
    if "method" in message and "id" in message:
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {}})
    return httpx.Response(202)


def sse(*events: str | bytes, delay_seconds: float = 0.0, error: Exception | None = None) -> httpx.Response:
    """A streamed ``text/event-stream`` response sending ``events`` one by one."""

    async def body() -> AsyncIterator[bytes]:
        for event in events:
            if delay_seconds:
                await anyio.sleep(delay_seconds)
            yield event.encode() if isinstance(event, str) else event
        if error is not None:
            raise error

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def event(message: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: message\ndata: {json.dumps(message)}\n\n"


class FakeStdin:
    """A stdin the test writes to; ``close()`` is EOF."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes](1000)

    def feed(self, data: bytes) -> None:
        self._send.send_nowait(data)

    def close(self) -> None:
        self._send.close()

    async def receive(self) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            return b""


class FakeStdout:
    """Collects what the bridge writes; each ``send`` must be exactly one whole line."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.closed = False
        self._changed = anyio.Event()

    async def send(self, data: bytes) -> None:
        if self.closed:
            raise BrokenPipeError(32, "Broken pipe")
        assert data.endswith(b"\n") and data.count(b"\n") == 1, data[:200]
        self.lines.append(data)
        self._changed.set()
        self._changed = anyio.Event()

    def messages(self) -> list[Any]:
        return [json.loads(line) for line in self.lines]

    async def wait_for(self, count: int, timeout_seconds: float = 5.0) -> list[Any]:
        with anyio.fail_after(timeout_seconds):
            while len(self.lines) < count:
                await self._changed.wait()
        return self.messages()


class Harness:
    def __init__(self, router: respx.MockRouter, stdin: FakeStdin, stdout: FakeStdout, bridge: Bridge) -> None:
        self.router = router
        self.stdin = stdin
        self.stdout = stdout
        self.bridge = bridge
        self.exit_status: int | None = None

    def posts(self) -> list[httpx.Request]:
        return [call.request for call in self.router.calls if call.request.method == "POST"]

    def posted_bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.posts()]

    async def handshake(self) -> None:
        """Send INIT(0) and NOTIF_INIT; wait for the initialize reply."""
        self.stdin.feed(init(0) + NOTIF_INIT)
        await self.stdout.wait_for(1)


async def app_down(url: str) -> bool:
    """The default probe: nothing real listens in these tests."""
    return False


#: What the ``run_bridge`` fixture gives: :func:`running_bridge` with the test's wire.
RunBridge = Callable[..., AbstractAsyncContextManager["Harness"]]


@asynccontextmanager
async def running_bridge(
    handler: Callable[[httpx.Request], Any],
    *,
    app_probe: Callable[[str], Any] = app_down,
    wire: str = "httpx",
    **config: Any,
) -> AsyncIterator[Harness]:
    """Run a bridge whose app is ``handler`` (a respx side effect for every request to URL).

    ``config`` goes to ``BridgeConfig`` (``url`` defaults to URL). On exit stdin is closed
    and the bridge must finish within 5 s. ``wire``: ``"httpx"`` (respx through the httpx
    adapter) or ``"pool"`` (the handler served on 127.0.0.1 by a scripted server and the
    bridge on its own pool, no transport injected). Tests get it through the ``run_bridge``
    fixture (``conftest.py``), which follows the ``wire`` fixture where a test asks for it.
    """
    router = respx.MockRouter(assert_all_called=False)
    router.route(host="127.0.0.1").mock(side_effect=handler)
    async with AsyncExitStack() as stack:
        transport: httpx.AsyncBaseTransport | None = None
        if wire == "pool":
            from support.scripted import pool_app

            url = await stack.enter_async_context(pool_app(handler, router, URL.removesuffix("/mcp")))
        else:
            transport = await stack.enter_async_context(httpx.MockTransport(router.async_handler))
            url = URL
        stdin, stdout = FakeStdin(), FakeStdout()
        config.setdefault("url", url)
        bridge = Bridge(BridgeConfig(**config), stdin=stdin, stdout=stdout, http_transport=transport, app_probe=app_probe)
        harness = Harness(router, stdin, stdout, bridge)
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                harness.exit_status = await bridge.run()

            tg.start_soon(run)
            try:
                yield harness
            finally:
                stdin.close()
                with anyio.fail_after(5):
                    while harness.exit_status is None:
                        await anyio.sleep(0.01)


#: Bound on waiting for the in-process bridge's reader to pause (seconds).
SETTLE_BOUND_SECONDS = 10.0


class CountingStdin:
    """A stdin of queued chunks that counts what the bridge took and knows whether the
    bridge is waiting in ``receive`` right now."""

    def __init__(self) -> None:
        self.chunks: collections.deque[bytes] = collections.deque()
        self.taken = 0
        self.receiving = False
        self.closed = False
        self._more = anyio.Event()

    def feed(self, data: bytes) -> None:
        self.chunks.append(data)
        self._more.set()

    def close(self) -> None:
        self.closed = True
        self._more.set()

    async def receive(self) -> bytes:
        self.receiving = True
        try:
            while not self.chunks:
                if self.closed:
                    return b""
                self._more = anyio.Event()
                await self._more.wait()
            self.taken += 1
            return self.chunks.popleft()
        finally:
            self.receiving = False


async def settled(stdin: CountingStdin) -> None:
    """Wait until the reader stopped taking chunks although some are left (it paused)."""
    with anyio.fail_after(SETTLE_BOUND_SECONDS):
        stable = 0
        last = -1
        while stable < 5:
            await anyio.sleep(0.05)
            paused = bool(stdin.chunks) and not stdin.receiving and stdin.taken == last
            stable = stable + 1 if paused else 0
            last = stdin.taken
