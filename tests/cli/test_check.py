"""``check`` and the bridge report the same cause for the same failure: both connect by
``connect_first_verified`` with the same listener check, and map the failure with the same
table. Each case drives the bridge's driver (as the stdio bridge does) and ``run_check``
against one failing app, and compares the reason and the message."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from bridge.cli.check import FIXES, HOST_REFUSED_FIX, run_check
from bridge.core.config import BridgeConfig
from bridge.core.errors import UpstreamError
from bridge.core.jsonrpc import Request, encode_message
from bridge.serve.parts import build_stack

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("private_state_folder")]

linux = pytest.mark.linux_only("the listener check reads /proc")
as_root = pytest.mark.skipif(sys.platform == "win32" or os.geteuid() != 0, reason="needs root to run a process under a second uid")
#: The second user: a uid with no account (the kernel needs none to run a process).
OTHER_UID = 54_321


async def bridge_failure(config: BridgeConfig) -> UpstreamError:
    """What the bridge answers an ``initialize`` with (its driver, policy included)."""
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}

    async def ignore(line: bytes, message: Any = None) -> None:
        return None

    stack = build_stack(config)
    try:
        with pytest.raises(UpstreamError) as caught:
            await stack.top.request(Request(1, "initialize", params, encode_message(message)[:-1]), ignore)
    finally:
        await stack.top.aclose()
    return caught.value


async def check_report(config: BridgeConfig) -> list[str]:
    lines: list[str] = []
    assert await run_check(config, lines.append, lambda text, **style: text) is False
    return lines


async def assert_same_cause(config: BridgeConfig, reason: str, step: str) -> str:
    """The bridge fails with ``reason``; check's ✗ line is ``step`` with the bridge's very
    message, and its fix is the one for that reason. Returns the message."""
    error = await bridge_failure(config)
    assert error.reason == reason, error.message
    lines = await check_report(config)
    failed = [line for line in lines if line.startswith("✗")]
    assert len(failed) == 1, lines
    assert failed[0].split()[1] == step and error.message in failed[0], (error.message, lines)
    assert f"  fix: {FIXES[reason]}" in lines, lines
    return error.message


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def listener_of_another_user(host: str, port: int) -> Iterator[None]:
    """A process of another user listening on ``host:port``, accepting and closing."""
    code = textwrap.dedent(
        """
        import socket, sys
        s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
        print("LISTENING", flush=True)
        while True:
            s.accept()[0].close()
        """
    )
    process = subprocess.Popen(
        ["/usr/bin/python3", "-c", code, host, str(port)], stdout=subprocess.PIPE, cwd="/", user=OTHER_UID, group=OTHER_UID
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == b"LISTENING\n"
        yield
    finally:
        process.kill()
        process.wait()


async def test_nothing_listening() -> None:
    config = BridgeConfig(url=f"http://127.0.0.1:{free_port()}/mcp")
    message = await assert_same_cause(config, "app_unreachable", "connect")
    assert "is not running" in message


@pytest.mark.process
@linux
@as_root
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a Python that the second user may run")
async def test_another_users_listener_on_the_port() -> None:
    port = free_port()
    with listener_of_another_user("127.0.0.1", port):
        message = await assert_same_cause(BridgeConfig(url=f"http://127.0.0.1:{port}/mcp"), "listener_unverified", "listener")
    assert f"uid {OTHER_UID}" in message


@pytest.mark.process
@linux
@as_root
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a Python that the second user may run")
@pytest.mark.skipif(not socket.has_ipv6, reason="needs IPv6 loopback")
async def test_another_users_listener_on_ipv6_and_nothing_on_ipv4_is_the_app_not_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``localhost`` resolves to ::1 then 127.0.0.1; another user listens on [::1], nothing
    on 127.0.0.1. The app is not running (and ``--launch`` may start it there): the bridge
    says so, and so does check, naming the skipped address (it used to report the
    squatter's refusal instead)."""
    real = socket.getaddrinfo

    def localhost_both(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "localhost":
            return real("::1", port, *args, **kwargs) + real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", localhost_both)
    port = free_port()
    with listener_of_another_user("::1", port):
        await assert_same_cause(BridgeConfig(url=f"http://localhost:{port}/mcp"), "app_unreachable", "connect")


@asynccontextmanager
async def accepts_then_closes() -> AsyncIterator[int]:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_an_app_that_accepts_and_closes_every_connection() -> None:
    async with accepts_then_closes() as port:
        config = BridgeConfig(url=f"http://127.0.0.1:{port}/mcp")
        await assert_same_cause(config, "stream_closed", "initialize")


@pytest.mark.skipif(sys.platform == "win32", reason="the listener check's /proc and psutil paths are POSIX here")
async def test_the_connect_step_passes_only_on_a_verified_connection_and_says_who_listens() -> None:
    async with accepts_then_closes() as port:
        lines = await check_report(BridgeConfig(url=f"http://127.0.0.1:{port}/mcp"))
    assert any(line.startswith("✓ connect") for line in lines), lines
    assert any(line.startswith("✓ listener    a socket of this user's") for line in lines), lines


async def test_the_catalog_step_shows_the_cached_app_version_and_age() -> None:
    """With a launcher, ``check`` says what a client's start-up would be answered from while
    the app is down: the catalog's app version and age, or that none is cached."""
    from bridge.app.servedcatalog import ServedCatalog

    url = f"http://127.0.0.1:{free_port()}/mcp"
    config = BridgeConfig(url=url, app_name="Cat", ensure_running=lambda: None, launch_timeout_seconds=0.3)
    lines = await check_report(config)
    assert any(line.startswith("✓ catalog") and "none cached yet" in line for line in lines), lines
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "cat", "version": "4.2"}}
    ServedCatalog("Cat", url).replace({"format": 1, "app": "Cat", "endpoint": url, "savedAtSeconds": 0.0, "initialize": init, "lists": {}})
    lines = await check_report(config)
    (step,) = [line for line in lines if line.startswith("✓ catalog")]
    assert "app version 4.2" in step and " d ago" in step, step
    no_launcher = await check_report(BridgeConfig(url=url, app_name="Cat"))
    assert not any("catalog" in line for line in no_launcher)


@pytest.mark.process
async def test_a_launch_program_that_no_longer_exists_is_flagged(tmp_path: Any) -> None:
    """An app updated into another install folder leaves the entry's ``--launch`` pointing at
    nothing: ``check`` says so even while the app runs (here: nothing listens either)."""
    gone = tmp_path / "MyApp-1.2" / "myapp"
    url = f"http://127.0.0.1:{free_port()}/mcp"
    lines = await check_report(BridgeConfig(url=url, launch_command=(str(gone), "--serve"), launch_timeout_seconds=0.3))
    (flagged,) = [line for line in lines if line.startswith("✗ launch")]
    assert f"{gone} no longer exists" in flagged, lines
    present = tmp_path / "myapp"
    present.write_text("#!/bin/sh\nexit 1\n")
    present.chmod(0o700)
    lines = await check_report(BridgeConfig(url=url, launch_command=(str(present),), launch_timeout_seconds=0.3))
    assert any(line.startswith("✓ launch") for line in lines), lines


@asynccontextmanager
async def refuses_every_host() -> AsyncIterator[int]:
    """An app whose Host check refuses the bridge's Host header, as the official MCP Python
    SDK's DNS-rebinding protection does: ``421 Misdirected Request``, "Invalid Host header"."""

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # check's connect step: a connection closed unused
            writer.close()
            return
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        body = b"Invalid Host header"
        writer.write(b"HTTP/1.1 421 Misdirected Request\r\ncontent-type: text/plain\r\n"
                     b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_an_app_refusing_the_host_header_gets_the_host_fix() -> None:
    async with refuses_every_host() as port:
        config = BridgeConfig(url=f"http://127.0.0.1:{port}/mcp")
        error = await bridge_failure(config)
        lines = await check_report(config)
    assert error.reason == "http_status", error.message
    failed = [line for line in lines if line.startswith("✗")]
    assert len(failed) == 1 and failed[0].split()[1] == "initialize" and error.message in failed[0], lines
    assert f"  fix: {HOST_REFUSED_FIX}" in lines, lines
    assert "Host header" in HOST_REFUSED_FIX and "allowed_hosts" in HOST_REFUSED_FIX


async def test_an_app_that_pages_its_tools_is_named_with_the_clients_that_need_merge_list_pages() -> None:
    """Issue 41, point 12: ``check`` says when the app's ``tools/list`` has a ``nextCursor``,
    and which clients need ``--merge-list-pages`` (docs/clients.md, "Lists in pages")."""
    from support.helpers import json_response
    from support.mcp_app import McpApp
    from support.scripted import serve, wire_app

    def on_request(message: dict[str, Any], request: Any) -> Any:
        result: dict[str, Any] = {}
        if message["method"] == "tools/list" and "cursor" not in (message.get("params") or {}):
            result = {"tools": [{"name": "first", "inputSchema": {"type": "object"}}], "nextCursor": "2"}
        elif message["method"] == "tools/list":
            result = {"tools": [{"name": "second", "inputSchema": {"type": "object"}}]}
        return json_response({"jsonrpc": "2.0", "id": message["id"], "result": result})

    app = McpApp(on_request=on_request)
    async with serve(wire_app(app, base_url="http://127.0.0.1")) as server:
        lines: list[str] = []
        assert await run_check(BridgeConfig(url=server.url("/mcp")), lines.append, lambda text, **style: text) is True
    (paged,) = [line for line in lines if "nextCursor" in line]
    assert "Gemini CLI" in paged and "--merge-list-pages" in paged, lines
