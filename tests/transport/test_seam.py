"""The transport seam: one table from every transport failure to the bridge's errors, the
httpx adapter as the one place httpx's exceptions are caught, and MemoryTransport."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import httpx
import pytest

import bridge.transport.base as base
from bridge.core.config import DEFAULT_APP_NAME
from bridge.core.errors import (
    AppUnreachableError,
    BadUpstreamResponseError,
    BridgeInternalError,
    StreamClosedError,
    TlsFailedError,
    UpstreamTimeoutError,
)
from bridge.streamable.upstream import TRANSPORT_ERRORS, map_transport_errors
from bridge.transport import make_transport
from bridge.transport.httpx_adapter import HTTPX_ERRORS, HttpxTransport, translate_httpx_errors
from bridge.transport.memory import MemoryRequest, MemoryResponse, MemoryTransport
from bridge.transport.pool import Http11Pool

PACKAGE = Path(__file__).resolve().parents[2] / "bridge"
SECRET = "sk-live-0a1b2c3d4e5f"


def transport_error_classes() -> list[type[base.TransportError]]:
    return [
        value
        for value in vars(base).values()
        if inspect.isclass(value) and issubclass(value, base.TransportError)
    ]


def test_every_transport_error_class_is_mapped_on_purpose() -> None:
    """As httpx's test_httpcore_all_exceptions_mapped: a new class must enter the table."""
    assert set(transport_error_classes()) == set(TRANSPORT_ERRORS)


def test_every_httpx_exception_is_translated_on_purpose() -> None:
    httpx_classes = {
        value
        for value in vars(httpx).values()
        if inspect.isclass(value) and issubclass(value, httpx.HTTPError) and value is not httpx.HTTPStatusError
    }
    # HTTPStatusError is raised by Response.raise_for_status only, which the bridge never calls.
    assert httpx_classes == set(HTTPX_ERRORS)
    for cls in httpx_classes:
        assert issubclass(HTTPX_ERRORS[cls], base.TransportError)


@pytest.mark.parametrize(
    ("failure", "expected", "reason"),
    [
        (base.ConnectFailed("refused"), AppUnreachableError, "app_unreachable"),
        (base.TlsFailed("certificate verify failed"), TlsFailedError, "tls_failed"),
        (base.ConnectTimeout("slow"), UpstreamTimeoutError, "timeout"),
        (base.PoolTimeout("busy"), UpstreamTimeoutError, "timeout"),
        (base.ReadTimeout("silent"), UpstreamTimeoutError, "timeout"),
        (base.WriteTimeout("stuck"), UpstreamTimeoutError, "timeout"),
        (base.ConnectionBroken("reset"), StreamClosedError, "stream_closed"),
        (base.ProtocolViolation("garbage"), BadUpstreamResponseError, "bad_upstream_response"),
        (base.LocalProtocolError("bad field"), BridgeInternalError, "bridge_error"),
        (base.TransportError("other"), BadUpstreamResponseError, "bad_upstream_response"),
    ],
)
def test_each_transport_failure_becomes_one_bridge_error_naming_the_app(
    failure: base.TransportError, expected: type[Exception], reason: str
) -> None:
    with pytest.raises(expected) as caught, map_transport_errors("Acme"):
        raise failure
    assert caught.value.reason == reason  # type: ignore[attr-defined]
    assert caught.value.__cause__ is failure
    assert "Acme" in caught.value.message  # type: ignore[attr-defined]


@pytest.mark.parametrize("failure", [cls("x") for cls in TRANSPORT_ERRORS])
def test_the_default_app_name_reads_as_a_sentence(failure: base.TransportError) -> None:
    """Without --app-name the app is "The app" at a sentence's start and "the app" inside
    one ("The TLS handshake with the app failed", never "… with The app …")."""
    with pytest.raises(Exception) as caught, map_transport_errors(DEFAULT_APP_NAME):
        raise failure
    message = caught.value.message  # type: ignore[attr-defined]
    assert "The app" in message or "the app" in message
    assert " The app" not in message, message


def test_the_most_specific_class_wins_for_a_subclass_of_a_mapped_class() -> None:
    class Refined(base.ConnectionBroken):
        pass

    with pytest.raises(StreamClosedError), map_transport_errors("Acme"):
        raise Refined("reset")


@pytest.mark.parametrize("passing", [AppUnreachableError("already ours"), ValueError("a bug")])
def test_bridge_errors_and_other_exceptions_pass_through_unchanged(passing: Exception) -> None:
    with pytest.raises(type(passing)) as caught, map_transport_errors("Acme"):
        raise passing
    assert caught.value is passing


def test_httpx_local_protocol_error_never_quotes_the_header() -> None:
    with pytest.raises(base.LocalProtocolError) as caught, translate_httpx_errors():
        raise httpx.LocalProtocolError(f"Illegal header value b'Bearer {SECRET}\\r\\n'")
    assert SECRET not in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx.LocalProtocolError)


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (httpx.ConnectError("refused"), base.ConnectFailed),
        (httpx.ConnectTimeout("slow"), base.ConnectTimeout),
        (httpx.ReadTimeout("silent"), base.ReadTimeout),
        (httpx.RemoteProtocolError("peer closed"), base.ConnectionBroken),
        (httpx.ReadError("reset"), base.ConnectionBroken),
    ],
)
def test_httpx_failures_are_translated_to_the_most_specific_transport_error(
    raised: Exception, expected: type[Exception]
) -> None:
    with pytest.raises(expected), translate_httpx_errors():
        raise raised


def test_only_the_httpx_adapter_imports_httpx_outside_type_checking() -> None:
    allowed = {"transport/httpx_adapter.py"}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for node in ast.walk(block)
        }
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "httpx" for a in node.names):
                offenders.append(name)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("httpx", "httpx_sse"):
                offenders.append(name)
    assert set(offenders) == allowed, offenders  # the adapter does import it: the walk works


def test_the_factory_picks_the_transport_once_by_scheme() -> None:
    limits: dict[str, Any] = {"max_connections": 4, "connect_timeout_seconds": 1.0, "pool_timeout_seconds": 1.0}
    assert isinstance(make_transport("http://127.0.0.1:1/mcp", **limits), Http11Pool)
    assert isinstance(make_transport("https://127.0.0.1:1/mcp", **limits), HttpxTransport)
    mock = httpx.MockTransport(lambda request: httpx.Response(200))
    assert isinstance(make_transport("http://127.0.0.1:1/mcp", injected=mock, **limits), HttpxTransport)
    memory = MemoryTransport(lambda request: MemoryResponse())
    assert make_transport("http://127.0.0.1:1/mcp", injected=memory, **limits) is memory


@pytest.mark.anyio
async def test_memory_transport_answers_with_its_handler_and_keeps_the_requests() -> None:
    async def handler(request: MemoryRequest) -> MemoryResponse:
        return MemoryResponse(200, [("Content-Type", "application/json")], b'{"ok":1}')

    transport = MemoryTransport(handler)
    response = await transport.request(
        "POST", "http://app/mcp", [("Accept", "application/json")], b"{}", read_timeout_seconds=1.0
    )
    assert response.status_code == 200 and response.headers.get("content-type") == "application/json"
    assert await response.read_whole(100, b"\n") == b'{"ok":1}\n'
    assert await response.read_whole(3) is None  # over the limit: the caller streams it
    assert [chunk async for chunk in response.aiter_bytes()] == [b'{"ok":1}']
    assert transport.requests[0].body == b"{}" and transport.requests[0].headers == [("Accept", "application/json")]




_SERVE_ONE_HTTP_EXCHANGE = r"""
import asyncio, sys
from bridge.core.config import BridgeConfig
from bridge.core.jsonrpc import Request
from bridge.serve.parts import build_parts

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'
REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'

async def main():
    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(len(REQUEST))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 36\r\n\r\n" + BODY)
        await writer.drain()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = "http://127.0.0.1:%d/mcp" % server.sockets[0].getsockname()[1]
    upstream = build_parts(BridgeConfig(url=url)).upstream
    async def emit(line):
        pass
    line = await upstream.send_request(Request(1, "ping", None, REQUEST), emit)
    await upstream.aclose()
    server.close()
    print(line == BODY + b"\n", "httpx" in sys.modules)

asyncio.run(main())
"""


@pytest.mark.process
def test_an_http_exchange_over_the_own_pool_never_imports_httpx() -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", _SERVE_ONE_HTTP_EXCHANGE], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split() == ["True", "False"], result.stderr
