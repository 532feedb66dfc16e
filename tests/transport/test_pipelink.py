"""The own pool over a Windows named pipe (``npipe://``, bridge/transport/pipelink.py), on
every OS: the client's ``CreateFileW`` with a stand-in ``kernel32`` (its flags, a busy pipe,
no pipe, another user's pipe), and the pool's road to a pipe with the pipe's opening played
by a Unix socket whose transport looks like asyncio's pipe transport (no socket, a
``pipe`` with a ``handle``): the server check runs on it before the first byte, and a
refused server gets no byte. The real pipe is opened in tests/transport/test_pipe_windows.py,
on Windows."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.core.errors import ListenerUnverifiedError
from bridge.transport import pipelink
from bridge.transport import pipelink as pipelink_module
from bridge.transport.base import ConnectFailed
from bridge.transport.pipelink import PIPE_OPEN_FLAGS, SECURITY_SQOS_PRESENT, connect_pipe, open_pipe_handle
from bridge.transport.pool import Http11Pool
from bridge.transport.unixlink import verify_by_family

pytestmark = pytest.mark.anyio

PIPE = "\\\\.\\pipe\\mcp-app-bridge-1-0123456789abcdef"
URL = "npipe://./pipe/mcp-app-bridge-1-0123456789abcdef/mcp"
BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'


class FakeKernel32:
    """``CreateFileW`` answering with the given errors in turn, then a handle."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.error = 0
        self.calls: list[tuple[Any, ...]] = []

    def CreateFileW(self, *args: Any) -> int:  # noqa: N802 (the Win32 name)
        self.calls.append(args)
        if self.errors:
            self.error = self.errors.pop(0)
            return -1  # INVALID_HANDLE_VALUE
        return 321

    def last_error(self) -> int:
        return self.error


async def test_the_pipe_is_opened_read_write_overlapped_and_its_server_may_not_impersonate() -> None:
    kernel32 = FakeKernel32()
    assert await open_pipe_handle(kernel32, PIPE, last_error=kernel32.last_error) == 321
    (path, access, share, attributes, disposition, flags, template), = kernel32.calls
    assert path == PIPE and access == 0xC0000000 and share == 0 and disposition == 3  # OPEN_EXISTING
    assert flags == PIPE_OPEN_FLAGS and flags & 0x40000000  # FILE_FLAG_OVERLAPPED
    assert flags & SECURITY_SQOS_PRESENT and not flags & 0x00030000, "SECURITY_ANONYMOUS: the server cannot act as this user"


async def test_a_busy_pipe_is_tried_again() -> None:
    kernel32 = FakeKernel32(231, 231)  # ERROR_PIPE_BUSY twice
    assert await open_pipe_handle(kernel32, PIPE, last_error=kernel32.last_error) == 321
    assert len(kernel32.calls) == 3


async def test_no_pipe_means_the_app_is_not_running() -> None:
    kernel32 = FakeKernel32(2)  # ERROR_FILE_NOT_FOUND
    with pytest.raises(ConnectFailed, match="not running"):
        await open_pipe_handle(kernel32, PIPE, last_error=kernel32.last_error)


async def test_a_pipe_that_shuts_this_user_out_is_refused_not_launched_around() -> None:
    kernel32 = FakeKernel32(5)  # ERROR_ACCESS_DENIED: another user's pipe
    with pytest.raises(ListenerUnverifiedError, match="access list does not admit"):
        await open_pipe_handle(kernel32, PIPE, last_error=kernel32.last_error)


async def test_another_failure_names_its_code() -> None:
    kernel32 = FakeKernel32(1450)
    with pytest.raises(ConnectFailed, match="Windows error 1450"):
        await open_pipe_handle(kernel32, PIPE, last_error=kernel32.last_error)


@pytest.mark.posix_only("off Windows there is no pipe to open")
async def test_off_windows_a_pipe_is_a_connection_failure() -> None:
    with pytest.raises(ConnectFailed, match="Windows"):
        await connect_pipe(PIPE, asyncio.Protocol)


class FakePipe:
    """What asyncio's pipe transport gives as ``get_extra_info("pipe")``: a ``PipeHandle``."""

    def __init__(self, path: str) -> None:
        self.handle = 777
        self.path = path


class PipeLikeTransport(asyncio.Transport):
    """A real connection's transport that answers as a proactor pipe transport does."""

    def __init__(self, inner: asyncio.Transport, path: str) -> None:
        super().__init__()
        self._inner, self._pipe = inner, FakePipe(path)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._pipe if name == "pipe" else None if name == "socket" else self._inner.get_extra_info(name, default)

    def write(self, data: Any) -> None:
        self._inner.write(data)

    def close(self) -> None:
        self._inner.close()

    def abort(self) -> None:
        self._inner.abort()

    def is_closing(self) -> bool:
        return self._inner.is_closing()

    def pause_reading(self) -> None:
        self._inner.pause_reading()

    def resume_reading(self) -> None:
        self._inner.resume_reading()


class RecordingApp:
    def __init__(self) -> None:
        self.received = bytearray()
        self.connections = 0
        self.ended = asyncio.Event()  # a connection's handler is done (the client closed it)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.received += head
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                self.received += await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.ended.set()


@pytest.fixture
async def pipe_played_by_a_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[RecordingApp, list[str]]]:
    """``connect_pipe`` of the pool replaced: the 'pipe' is a Unix socket (TCP on Windows)
    whose transport answers as a pipe's. Yields the app and the pipe paths opened."""
    app = RecordingApp()
    opened: list[str] = []
    if hasattr(socket, "AF_UNIX") and sys.platform != "win32":
        path = tmp_path / "s"
        server = await asyncio.start_unix_server(app.handle, str(path))

        async def open_inner(factory: Callable[[], Any]) -> tuple[Any, Any]:
            return await asyncio.get_running_loop().create_unix_connection(factory, str(path))
    else:
        server = await asyncio.start_server(app.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def open_inner(factory: Callable[[], Any]) -> tuple[Any, Any]:
            return await asyncio.get_running_loop().create_connection(factory, "127.0.0.1", port)

    async def fake_connect_pipe(address: str, factory: Callable[[], Any]) -> tuple[Any, Any]:
        opened.append(address)
        holder: dict[str, Any] = {}

        def made() -> Any:
            protocol = factory()
            holder["protocol"] = protocol
            original = protocol.connection_made
            protocol.connection_made = lambda transport: original(PipeLikeTransport(transport, address))
            return protocol

        _transport, protocol = await open_inner(made)
        return protocol.transport, protocol

    monkeypatch.setattr(pipelink_module, "connect_pipe", fake_connect_pipe)  # pool.py imports it at the call
    async with server:
        yield app, opened


def make_pool(verify: Any) -> Http11Pool:
    return Http11Pool(max_connections=4, connect_timeout_seconds=5, pool_timeout_seconds=5, verify_connection=verify)


async def post(transport: Http11Pool) -> tuple[int, bytes]:
    response = await transport.request("POST", URL, [("content-type", "application/json")], b"{}", read_timeout_seconds=5)
    try:
        return response.status_code, await response.aread()
    finally:
        await response.aclose()


async def test_requests_go_over_the_pipe_with_host_localhost_after_the_server_check(
    pipe_played_by_a_socket: tuple[RecordingApp, list[str]],
) -> None:
    app, opened = pipe_played_by_a_socket
    checked: list[tuple[int, str]] = []
    transport = make_pool(verify_by_family(None, None, lambda pipe: checked.append((pipe.handle, pipe.path))))
    try:
        assert await post(transport) == (200, BODY)
        assert await post(transport) == (200, BODY)
    finally:
        await transport.aclose()
    assert opened == [PIPE] and checked == [(777, PIPE)], "one pipe, checked once, on the kept-alive connection"
    assert bytes(app.received).startswith(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")


async def test_a_refused_pipe_server_gets_no_byte(pipe_played_by_a_socket: tuple[RecordingApp, list[str]]) -> None:
    app, _opened = pipe_played_by_a_socket

    def refuse(pipe: Any) -> None:
        raise ListenerUnverifiedError("the pipe is served by pid 9, not by pid 8")

    transport = make_pool(verify_by_family(lambda sock: None, lambda sock: None, refuse))
    try:
        with pytest.raises(ListenerUnverifiedError, match="pid 9"):
            await post(transport)
    finally:
        await transport.aclose()
    await asyncio.wait_for(app.ended.wait(), 10)  # the refused connection, read to its end by the app
    assert app.connections == 1 and bytes(app.received) == b"", "nothing may be written before the server check passes"


def test_verify_by_family_sends_a_pipe_to_the_pipe_check_and_sockets_elsewhere() -> None:
    seen: list[str] = []
    verify = verify_by_family(lambda s: seen.append("tcp"), lambda s: seen.append("unix"), lambda p: seen.append("pipe"))
    assert verify is not None
    verify(FakePipe(PIPE))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
        verify(tcp)
    assert seen == ["pipe", "tcp"]
    assert verify_by_family(None, None, None) is None
    only_pipe = verify_by_family(None, None, lambda p: seen.append("pipe only"))
    assert only_pipe is not None and only_pipe(FakePipe(PIPE)) is None and seen[-1] == "pipe only"


def test_the_module_opens_nothing_at_import() -> None:
    assert pipelink.ERROR_PIPE_BUSY == 231 and pipelink.ERROR_FILE_NOT_FOUND == 2
