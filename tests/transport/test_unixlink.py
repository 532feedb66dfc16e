"""The own pool over a Unix domain socket (``http+unix://``, bridge/transport/unixlink.py):
the socket file is checked before connecting, the peer before the first byte, and a
refused or stale socket is a connection failure the launcher may act on."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.core.errors import ListenerUnverifiedError
from bridge.core.unixurl import unix_url
from bridge.transport.base import ConnectFailed
from bridge.transport.byscheme import ByScheme
from bridge.transport.pool import Http11Pool
from bridge.transport.socketfile import check_socket_file
from bridge.transport.unixlink import verify_by_family
from bridge.transport.verifiedconnect import verified_probe

# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip("Unix sockets", allow_module_level=True)

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(not hasattr(socket, "AF_UNIX") or sys.platform == "win32", reason="Unix sockets")]

BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'


class RecordingApp:
    """An HTTP/1.1 server on a Unix socket that records every byte it gets."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.received += head
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                self.received += await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    return private


@pytest.fixture
async def served(folder: Path) -> AsyncIterator[tuple[RecordingApp, Path]]:
    app = RecordingApp()
    path = folder / "app.sock"
    server = await asyncio.start_unix_server(app.handle, str(path))
    async with server:
        yield app, path


def pool(verify: Any = None) -> Http11Pool:
    return Http11Pool(max_connections=4, connect_timeout_seconds=5, pool_timeout_seconds=5, verify_connection=verify)


async def post(transport: Any, url: str) -> tuple[int, bytes]:
    response = await transport.request("POST", url, [("content-type", "application/json")], b"{}", read_timeout_seconds=5)
    try:
        return response.status_code, await response.aread()
    finally:
        await response.aclose()


async def test_requests_go_over_the_socket_with_host_localhost_and_the_connection_is_kept(served: tuple[RecordingApp, Path]) -> None:
    app, path = served
    seen: list[int] = []
    transport = pool(verify_by_family(None, lambda sock: seen.append(sock.family)))
    try:
        url = unix_url(path, "/mcp")
        assert await post(transport, url) == (200, BODY)
        assert await post(transport, url) == (200, BODY)
    finally:
        await transport.aclose()
    assert bytes(app.received).startswith(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
    assert app.connections == 1 and seen == [socket.AF_UNIX], "verified once, on the one kept-alive connection"


async def test_a_refused_peer_gets_no_byte(served: tuple[RecordingApp, Path]) -> None:
    app, path = served

    def refuse(sock: Any) -> None:
        raise ListenerUnverifiedError("not the app")

    transport = pool(verify_by_family(None, refuse))
    try:
        with pytest.raises(ListenerUnverifiedError, match="not the app"):
            await post(transport, unix_url(path, "/mcp"))
        assert transport.open_connections == 0
    finally:
        await transport.aclose()
    await asyncio.sleep(0.05)  # let the server read whatever might have come
    assert app.received == b"" and app.connections == 1


async def test_a_symbolic_link_to_the_socket_is_refused_before_connecting(served: tuple[RecordingApp, Path], folder: Path) -> None:
    app, path = served
    link = folder / "link.sock"
    link.symlink_to(path)
    transport = pool(verify_by_family(None, lambda sock: None))
    try:
        with pytest.raises(ListenerUnverifiedError, match="symbolic link"):
            await post(transport, unix_url(link, "/mcp"))
    finally:
        await transport.aclose()
    assert app.connections == 0 and app.received == b""


def test_the_socket_file_and_its_folder_are_checked(folder: Path, tmp_path: Path) -> None:
    plain = folder / "plain"
    plain.write_bytes(b"")
    with pytest.raises(ListenerUnverifiedError, match="not a socket"):
        check_socket_file(str(plain))
    with pytest.raises(ConnectFailed, match="not running"):
        check_socket_file(str(folder / "missing.sock"))
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "bound.sock"))
        check_socket_file(str(folder / "bound.sock"))
        with pytest.raises(ListenerUnverifiedError, match=f"belongs to uid {os.geteuid()}, not to the user running the bridge"):
            check_socket_file(str(folder / "bound.sock"), euid=os.geteuid() + 1)
        folder.chmod(0o777)
        with pytest.raises(ListenerUnverifiedError, match=r"mode 0777: group or others may write to it \(chmod go-w "):
            check_socket_file(str(folder / "bound.sock"))
        folder.chmod(0o720)  # the group alone: named as such, with the fix that is not --no-verify-listener
        with pytest.raises(ListenerUnverifiedError, match=r"mode 0720: group or others may write to it \(chmod go-w "):
            check_socket_file(str(folder / "bound.sock"))
    finally:
        folder.chmod(0o700)
        sock.close()


@pytest.mark.parametrize("owner", ["open", pytest.param("another user", marks=pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="needs root"))])
def test_every_folder_above_the_socket_is_checked(tmp_path: Path, owner: str) -> None:
    """Issue 41, 8: another user who owns (or may write to) a folder above the socket's own
    folder can swap that folder's content; the bridge then refused its own app now and then
    (424 of 752 requests). The whole chain is checked, as OpenSSH does: a steady refusal
    that names the folder."""
    above = tmp_path / "above"
    above.mkdir()
    mine = above / "mine"
    mine.mkdir(mode=0o700)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(mine / "app.sock"))
        check_socket_file(str(mine / "app.sock"))  # a safe chain
        if owner == "open":
            above.chmod(0o777)
            why = "mode 0777: group or others may write to it"
        else:
            os.chown(above, 54_321, 54_321)
            why = "owned by uid 54321"
        with pytest.raises(ListenerUnverifiedError, match=f"bad ownership or modes for directory {above} \\({why}"):
            check_socket_file(str(mine / "app.sock"))
        above.chmod(0o1777)  # sticky, as /tmp: nobody else may rename our folder
        if owner == "open":
            check_socket_file(str(mine / "app.sock"))
    finally:
        above.chmod(0o755)
        sock.close()


async def test_a_stale_socket_is_a_connection_failure_and_the_probe_says_no(folder: Path) -> None:
    stale = folder / "stale.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(stale))  # bound, never listening: what a dead run leaves behind
    sock.close()
    transport = pool(verify_by_family(None, lambda sock: None))
    try:
        with pytest.raises(ConnectFailed, match="Connection refused"):
            await post(transport, unix_url(stale, "/mcp"))
    finally:
        await transport.aclose()

    assert await verified_probe(lambda sock: None)(unix_url(stale, "/mcp")) is False


async def test_the_probe_counts_only_a_peer_that_passes(served: tuple[RecordingApp, Path]) -> None:
    _app, path = served

    def refuse(sock: Any) -> None:
        raise ListenerUnverifiedError("another user's")

    assert await verified_probe(lambda sock: None)(unix_url(path, "/mcp")) is True
    assert await verified_probe(refuse)(unix_url(path, "/mcp")) is False
    assert await verified_probe(None)(unix_url(path, "/mcp")) is True


async def test_by_scheme_keeps_one_pool_for_http_and_http_unix(served: tuple[RecordingApp, Path]) -> None:
    _app, path = served
    transport = ByScheme(None, max_connections=4, connect_timeout_seconds=5, pool_timeout_seconds=5, write_timeout_seconds=5)
    try:
        first = transport._transport
        assert await post(transport, unix_url(path, "/mcp")) == (200, BODY)
        assert transport._transport is first and transport._stale == []
    finally:
        await transport.aclose()
