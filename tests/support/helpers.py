"""The in-process harness: the bridge with fake stdin/stdout, its app a respx-style handler
(through respx or served on the wire) or a real server by URL; and the messages tests send."""

from __future__ import annotations

import collections
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx
import respx

from bridge.app.tokens import TokenContext
from bridge.core.config import BridgeConfig
from bridge.serve.loop import Bridge
from support.scripted import WAIT, closed_port, serve, wire_app

#: The app's URL in the in-process tests: a port nothing listened on when the tests started
#: (never a fixed one: a developer may run the example app on 8765 beside the suite).
URL = f"http://127.0.0.1:{closed_port()}/mcp"
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
    """An "echo-ok" app: result {} for requests, 202 for the rest."""
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
    """A bridge running in-process: feed ``stdin``, read ``stdout``.

    ``router`` is the respx router that saw every request when the app is a respx-style
    handler (``None`` when the bridge talks to a real server by URL)."""

    def __init__(self, router: respx.MockRouter | None, stdin: FakeStdin, stdout: FakeStdout, bridge: Bridge) -> None:
        self.router = router
        self.stdin = stdin
        self.stdout = stdout
        self.bridge = bridge
        self.exit_status: int | None = None

    def requests(self, method: str | None = None) -> list[httpx.Request]:
        """The requests the app saw, in order; only ``method``'s when given."""
        assert self.router is not None, "requests() needs a handler: read a scripted server's requests instead"
        return [call.request for call in self.router.calls if method is None or call.request.method == method]

    def posts(self) -> list[httpx.Request]:
        return self.requests("POST")

    def posted_bodies(self) -> list[Any]:
        return [json.loads(request.content) for request in self.posts()]

    async def handshake(self, *, version: str = "2025-06-18") -> Any:
        """Send ``initialize`` (id 0, asking for ``2025-06-18``) and ``notifications/initialized``;
        wait (at most ``WAIT`` s) for the initialize result, check that the app chose
        ``version`` and return the result."""
        self.stdin.feed(init(0) + NOTIF_INIT)
        (reply,) = await self.stdout.wait_for(1, timeout_seconds=WAIT)
        assert reply["result"]["protocolVersion"] == version, reply
        return reply

    async def replies(self, count: int) -> list[Any]:
        """Every stdout message once there are ``count`` (waits at most ``WAIT`` s)."""
        return await self.stdout.wait_for(count, timeout_seconds=WAIT)


async def app_down(url: str) -> bool:
    """The default probe when the app is a handler: nothing real listens in these tests."""
    return False


#: What the ``run_bridge`` fixture gives: :func:`running_bridge` with the test's wire.
RunBridge = Callable[..., AbstractAsyncContextManager["Harness"]]


@asynccontextmanager
async def running_bridge(
    handler: Callable[[httpx.Request], Any] | None = None,
    *,
    app_probe: Callable[[str], Any] | None = None,
    wire: str = "httpx",
    **config: Any,
) -> AsyncIterator[Harness]:
    """Run a bridge in-process with fake stdin/stdout; yields its :class:`Harness`.

    The one in-process harness, in two shapes:

    - ``handler`` given (an ``httpx.Request`` in, an ``httpx.Response`` out, sync or async:
      a respx side effect): every request to ``URL`` goes to it, over ``wire``: ``"httpx"``
      (respx through the httpx adapter) or ``"pool"`` (the handler served on 127.0.0.1 by
      a scripted server, and the bridge on its own pool with no transport injected). The
      app probe defaults to :func:`app_down`. Tests get this through the ``run_bridge``
      fixture (``conftest.py``), which follows the ``wire`` fixture where a test asks for it.
    - ``handler`` omitted: nothing is injected; ``url=`` (a :class:`ScriptedServer`'s, say)
      is reached through the bridge's own HTTP/1.1 client, with the bridge's own probe.

    ``config`` goes to ``BridgeConfig`` (``url`` defaults to ``URL`` or the pool's server).
    On exit stdin is closed and the bridge must finish within ``WAIT`` seconds.
    """
    router: respx.MockRouter | None = None
    async with AsyncExitStack() as stack:
        transport: httpx.AsyncBaseTransport | None = None
        if handler is not None:
            router = respx.MockRouter(assert_all_called=False)
            router.route(host="127.0.0.1").mock(side_effect=handler)
            if app_probe is None:
                app_probe = app_down
            if wire == "pool":
                server = await stack.enter_async_context(serve(wire_app(router.async_handler, base_url=URL.removesuffix("/mcp"))))
                config.setdefault("url", server.url())
            else:
                transport = await stack.enter_async_context(httpx.MockTransport(router.async_handler))
                config.setdefault("url", URL)
        stdin, stdout = FakeStdin(), FakeStdout()
        bridge = Bridge(BridgeConfig(**config), stdin=stdin, stdout=stdout, http_transport=transport, app_probe=app_probe)
        harness = Harness(router, stdin, stdout, bridge)
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                harness.exit_status = await bridge.run()

            tg.start_soon(run)
            try:
                yield harness
            finally:
                # The end of the test, not an EOF: at EOF the bridge would wait for the
                # requests a test left open (each up to its request timeout). stop() ends
                # the run as a SIGINT does (0.2 s grace, then shutting_down); a test of
                # the EOF itself closes stdin in its body.
                bridge.stop("stdin closed")
                with anyio.fail_after(WAIT):
                    while harness.exit_status is None:
                        await anyio.sleep(0.01)


class CountingSource:
    """A token source handing out ``tokens`` in order (the last one again once they run
    out), each after ``delay_seconds``; ``fetches`` counts the calls."""

    description = "test token source"

    def __init__(self, *tokens: str, delay_seconds: float = 0.0) -> None:
        self.tokens = list(tokens)
        self.fetches = 0
        self.delay_seconds = delay_seconds

    async def fetch(self, context: TokenContext) -> str | None:
        self.fetches += 1
        await anyio.sleep(self.delay_seconds)
        return self.tokens[min(self.fetches, len(self.tokens)) - 1]


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
