"""The scripted MCP app of the tests: one Streamable HTTP app, served through respx or on the wire.

``McpApp`` is a respx side effect (``await app(request)``: an ``httpx.Request`` in, an
``httpx.Response`` out), so ``running_bridge(app)`` runs it through respx or, with
``wire="pool"``, served on 127.0.0.1. ``app.wire`` is the same app as a
:class:`~support.scripted.ScriptedServer` handler, for tests that script raw bytes: there
``replies[method]`` and ``on_get`` answer with whatever bytes the test chose, after the app's
own rules (token, session) have let the request through.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from support.helpers import json_response
from support.scripted import Peer, Seen, send_response

OLD_TOKEN = "tok-old-7c1d2e3f4a5b6c7d"
NEW_TOKEN = "tok-new-9a8b7c6d5e4f3a2b"

VERSION = "2025-06-18"
"""The protocol version the app answers ``initialize`` with (the one ``helpers.init`` asks for)."""
MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
"""The ``_meta`` key that marks a request of the 2026-07-28 era (no ``initialize``, no session)."""

WireReply = Callable[[Seen, Peer], Awaitable[None]]
"""A raw reply on the wire: write bytes on ``peer`` for the request ``seen``."""
OnRequest = Callable[[dict[str, Any], httpx.Request], Any]
"""``(message, request) -> httpx.Response`` (or an awaitable of one): the answer to a request."""


def compact(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


class McpApp:
    """A Streamable HTTP MCP app whose rules a test can switch.

    For every request, in order:

    - ``up`` false: the connection fails (``httpx.ConnectError``; on the wire, a reset);
    - ``token`` set and no ``Authorization: Bearer <token>``: 401 with
      ``WWW-Authenticate: Bearer error="invalid_token"``;
    - GET: ``get_status`` (405), or on the wire ``on_get`` when set; DELETE: 200;
    - a message of the 2026-07-28 era (``params._meta`` names its version): it must carry
      ``Mcp-Method`` and ``MCP-Protocol-Version`` matching its body and no session id (an
      ``AssertionError`` otherwise, as a strict server refuses it); the era has no sessions;
    - ``initialize``: a JSON result (``VERSION``, ``capabilities``, ``serverInfo``
      ``{server_name, <instance>}``), its body kept in ``init_replies``, with
      ``Mcp-Session-Id``: ``session_id`` or ``sess-<n>`` (n counts every initialize);
    - a session id the app did not issue (unless ``stateless``): ``unknown_session_status``,
      404 "Session not found" or 400 "No valid session ID provided";
    - notifications and client responses: 202;
    - a request: on the wire ``replies[method]`` if set; else ``on_request(message,
      request)`` if set; else for ``tools/call`` while ``header_mismatches_left`` > 0 the
      era's 400 -32020 "Header mismatch"; else ``{"tools": tools}`` for ``tools/list`` when
      ``tools`` is set; else ``result`` (default ``{"instance": <instance>}``), as JSON or,
      with ``sse``, as one ``text/event-stream`` event on a stream that ends after it.

    ``restart()`` forgets every session, as an app started again; ``requests`` keeps every
    request it received, ``bodies`` every JSON-RPC message posted past the token check.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        stateless: bool = False,
        session_id: str | None = None,
        capabilities: dict[str, Any] | None = None,
        server_name: str = "scripted",
        result: dict[str, Any] | None = None,
        sse: bool = False,
        tools: list[dict[str, Any]] | None = None,
        get_status: int = 405,
        on_request: OnRequest | None = None,
    ) -> None:
        self.token = token
        self.stateless = stateless
        self.session_id = session_id
        self.capabilities = capabilities or {}
        self.server_name = server_name
        self.result = result
        self.sse = sse
        self.tools = tools
        self.get_status = get_status
        self.on_request = on_request
        self.up = True
        self.instance = 1
        self.issued = 0
        self.sessions: set[str] = set()
        self.unknown_session_status = 404
        self.header_mismatches_left = 0
        self.replies: dict[str, WireReply] = {}
        self.on_get: WireReply | None = None
        self.requests: list[httpx.Request] = []
        self.bodies: list[dict[str, Any]] = []
        self.init_replies: list[bytes] = []

    @property
    def posts(self) -> list[httpx.Request]:
        """Every POST received."""
        return [r for r in self.requests if r.method == "POST"]

    @property
    def other(self) -> list[httpx.Request]:
        """Every request received that was not a POST (GET streams, DELETEs)."""
        return [r for r in self.requests if r.method != "POST"]

    def restart(self, *, token: str | None = None) -> None:
        """Forget every session (and take ``token`` if given), as an app started again."""
        self.instance += 1
        self.sessions.clear()
        if token is not None:
            self.token = token

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        outcome = await self._answer(request, on_wire=False)
        assert isinstance(outcome, httpx.Response)
        return outcome

    async def wire(self, seen: Seen, peer: Peer) -> None:
        """The app as a :class:`~support.scripted.ScriptedServer` handler."""
        try:
            outcome = await self._answer(seen.as_request(peer.server.url("")), on_wire=True)
        except httpx.TransportError:
            peer.reset()
            return
        if isinstance(outcome, httpx.Response):
            await send_response(outcome, peer)
        else:
            await outcome(seen, peer)

    async def _answer(self, request: httpx.Request, *, on_wire: bool) -> httpx.Response | WireReply:
        if not self.up:
            raise httpx.ConnectError("All connection attempts failed")
        self.requests.append(request)
        if self.token is not None and request.headers.get("authorization") != f"Bearer {self.token}":
            return json_response({"error": "invalid_token"}, 401, {"www-authenticate": 'Bearer error="invalid_token"'})
        if request.method == "GET":
            if on_wire and self.on_get is not None:
                return self.on_get
            return httpx.Response(self.get_status)
        if request.method == "DELETE":
            return httpx.Response(200)
        message = json.loads(request.content)
        self.bodies.append(message)
        method = message.get("method")
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        era = meta.get(META_VERSION) if isinstance(meta, dict) else None
        if isinstance(era, str) and era:
            assert request.headers["mcp-method"] == method
            assert request.headers["mcp-protocol-version"] == era
            assert "mcp-session-id" not in request.headers
        elif method == "initialize":
            self.issued += 1
            session = self.session_id or f"sess-{self.issued}"
            self.sessions.add(session)
            info = {"name": self.server_name, "version": str(self.instance)}
            body = compact({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": VERSION, "capabilities": self.capabilities, "serverInfo": info}})
            self.init_replies.append(body)
            return httpx.Response(200, content=body, headers={"content-type": "application/json", "mcp-session-id": session})
        elif not self.stateless and request.headers.get("mcp-session-id") not in self.sessions:
            if self.unknown_session_status == 400:
                return json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}}, 400)
            return json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}, 404)
        if "id" not in message or method is None:
            return httpx.Response(202)
        if on_wire and method in self.replies:
            return self.replies[method]
        if self.on_request is not None:
            outcome = self.on_request(message, request)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return outcome  # type: ignore[no-any-return]
        if method == "tools/call" and self.header_mismatches_left:
            self.header_mismatches_left -= 1
            return json_response({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32020, "message": "Header mismatch"}}, 400)
        if method == "tools/list" and self.tools is not None:
            return json_response({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": self.tools}})
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"instance": self.instance} if self.result is None else self.result}
        if not self.sse:
            return json_response(reply)
        event = b"event: message\r\ndata: " + compact(reply) + b"\r\n\r\n"

        async def stream() -> AsyncIterator[bytes]:
            yield event

        return httpx.Response(200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"}, content=stream())


# -- the bytes a scripted reply writes ----------------------------------------------------------------------------

_STATUS_TEXT = {200: "OK", 202: "Accepted", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


def response(status: int, body: bytes = b"", *fields: str) -> bytes:
    """A whole response with a ``Content-Length`` body and any extra ``Name: value`` fields."""
    head = f"HTTP/1.1 {status} {_STATUS_TEXT.get(status, 'Status')}\r\n" + "".join(f"{f}\r\n" for f in fields)
    return head.encode("latin-1") + b"Content-Length: %d\r\n\r\n" % len(body) + body


def json_reply(body: bytes, *fields: str, status: int = 200) -> bytes:
    return response(status, body, "Content-Type: application/json", *fields)


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_event(data: bytes, event_id: str | None = None, retry_ms: int | None = None) -> bytes:
    head = (f"id: {event_id}\n" if event_id else "") + (f"retry: {retry_ms}\n" if retry_ms is not None else "")
    return head.encode() + b"event: message\ndata: " + data + b"\n\n"


def progress(token: str, value: int) -> bytes:
    return compact({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": value}})


# -- scripted replies (``app.replies[method] = ...``) ------------------------------


def send(data: bytes) -> WireReply:
    """A reply: write ``data`` and keep the connection."""

    async def script(seen: Seen, peer: Peer) -> None:
        await peer.send(data)

    return script


def send_then_close(data: bytes) -> WireReply:
    """A reply: write ``data``, then close the connection."""

    async def script(seen: Seen, peer: Peer) -> None:
        await peer.send(data)
        peer.close()

    return script


def send_then_hold(data: bytes) -> WireReply:
    """A reply: write ``data`` (maybe nothing), then go silent until the client gives up."""

    async def script(seen: Seen, peer: Peer) -> None:
        if data:
            await peer.send(data)
        await peer.hold()

    return script


def assert_bridge_error(message: dict[str, Any], request_id: Any, expected_reason: str) -> None:
    assert message["id"] == request_id and type(message["id"]) is type(request_id)
    assert message["error"]["code"] == -32603
    assert message["error"]["data"] == {"source": "bridge", "reason": expected_reason}


class Starter:
    """A library ``ensure_running`` that brings a fake app (one with an ``up`` flag, such as
    :class:`McpApp`) up, counting its calls; ``probe`` says whether it is up."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        self.app.up = True

    async def probe(self, url: str) -> bool:
        return bool(self.app.up)
