"""Named pipes for real (Windows only; the CI workflow's named-pipes job runs this file and
fails if it is skipped): the Win32 calls of bridge/system/namedpipe.py, the server half
serving an ASGI app on a pipe (bridge/appserver/pipeserver.py), and the bridge's own pool
reaching it through the pipe link and the server check (bridge/transport/pipelink.py,
bridge/app/pipepeer.py), a pid that is not the named one refused, a name held first
refused at the server's start, and no pipe at all a connection failure.

The server runs in a thread of this process, so the pipe's server pid is this process's.
Another user (a second account) is not available on the CI runner: that refusal is
unit-tested with stand-ins (tests/app/test_pipepeer.py, tests/system/test_namedpipe.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# mypy --platform reads this too: the rest of the module is Windows code.
if sys.platform != "win32":
    pytest.skip("named pipes: Windows only", allow_module_level=True)

from bridge.app.discovery import Discovery, Endpoint
from bridge.app.pipepeer import PipePeerCheck
from bridge.appserver import AppServer
from bridge.appserver.pipeserver import PipeListener, new_pipe_path, proactor_calls
from bridge.core.errors import ListenerUnverifiedError
from bridge.core.pipeurl import pipe_url
from bridge.system.namedpipe import PipeServerRefused, create_pipe_instance, process_user_sid, win32_pipe_api
from bridge.transport.base import ConnectFailed
from bridge.transport.pool import Http11Pool
from bridge.transport.unixlink import verify_by_family
from bridge.transport.verifiedconnect import open_verified_socket

BODY = b'{"ok":true}'


class RecordingApp:
    """An ASGI app answering every request with :data:`BODY`, counting the requests."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        self.requests.append(scope["path"])
        while (await receive()).get("more_body"):
            pass
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": BODY})


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[AppServer, RecordingApp, Path]]:
    """An AppServer on a named pipe, in a thread: the server, the app, the discovery file."""
    app = RecordingApp()
    discovery = tmp_path / "state" / "mcp-endpoint.json"
    listening = threading.Event()
    server = AppServer(app, link="npipe", discovery_file=discovery, on_listening=lambda _server: listening.set())
    thread = threading.Thread(target=server.run, name="pipe-app", daemon=True)
    thread.start()
    try:
        assert listening.wait(30), f"the server did not publish itself: {server.failure}"
        yield server, app, discovery
    finally:
        server.stop()
        thread.join(30)


def pool(check: PipePeerCheck) -> Http11Pool:
    verify = verify_by_family(None, None, check.verify_connection)
    return Http11Pool(max_connections=2, connect_timeout_seconds=10, pool_timeout_seconds=10, verify_connection=verify)


async def post(transport: Http11Pool, url: str, token: str | None) -> tuple[int, bytes]:
    headers = [("content-type", "application/json")] + ([("authorization", f"Bearer {token}")] if token else [])
    response = await transport.request("POST", url, headers, b"{}", read_timeout_seconds=10)
    try:
        return response.status_code, await response.aread()
    finally:
        await response.aclose()


def test_this_users_sid_is_read_from_the_process_token() -> None:
    kernel32, advapi32, last_error = win32_pipe_api()
    sid = process_user_sid(kernel32, advapi32, None, last_error=last_error)
    assert sid.startswith("S-1-5-"), sid
    assert process_user_sid(kernel32, advapi32, os.getpid(), last_error=last_error) == sid


def test_the_app_on_its_pipe_is_reached_through_the_server_check(served: tuple[AppServer, RecordingApp, Path]) -> None:
    server, app, discovery = served
    assert server.link == "npipe" and server.url is not None and server.url.startswith("npipe://./pipe/mcp-app-bridge-")
    endpoint = Endpoint(discovery_file=discovery)
    endpoint.reload()
    assert endpoint.url() == server.url
    check = PipePeerCheck(endpoint.discovery_for_pipe, refresh=endpoint.reload)

    async def run() -> None:
        transport = pool(check)
        try:
            assert await post(transport, server.url or "", server.token) == (200, BODY)
            status, _body = await post(transport, server.url or "", None)
            assert status == 401
        finally:
            await transport.aclose()
        end, address, skipped = await open_verified_socket(server.url or "", verify=check.verify_connection, timeout_seconds=10)
        end.close()
        assert address == server.pipe_path and skipped == ()

    asyncio.run(run())
    assert app.requests == ["/mcp"], "the token-less request was answered 401 by the token check, not by the app"


def test_a_server_that_is_not_the_named_pid_gets_no_request(served: tuple[AppServer, RecordingApp, Path]) -> None:
    server, app, _discovery = served
    assert server.url is not None and server.pipe_path is not None
    someone_else = Discovery(url=server.url, pid=os.getpid() + 4, token=None, pid_start_time=None, written_at=None)
    check = PipePeerCheck(lambda path: someone_else)

    async def run() -> None:
        transport = pool(check)
        try:
            with pytest.raises(ListenerUnverifiedError, match=f"served by pid {os.getpid()}"):
                await post(transport, server.url or "", server.token)
        finally:
            await transport.aclose()

    asyncio.run(run())
    assert app.requests == []


def test_a_pipe_name_held_first_fails_the_servers_start() -> None:
    path = new_pipe_path()
    kernel32, advapi32, last_error = win32_pipe_api()
    sid = process_user_sid(kernel32, advapi32, None, last_error=last_error)
    squatter = create_pipe_instance(kernel32, advapi32, path, user_sid=sid, first=True, last_error=last_error)
    try:
        with pytest.raises(PipeServerRefused, match="held by another process"):
            PipeListener(path, **proactor_calls(path))
    finally:
        kernel32.CloseHandle(squatter)
    listener = PipeListener(path, **proactor_calls(path))  # the name is free again
    listener.close()


def test_no_pipe_is_a_connection_failure_the_launcher_may_act_on() -> None:
    url = pipe_url(new_pipe_path())

    async def run() -> None:
        transport = pool(PipePeerCheck(lambda path: None))
        try:
            with pytest.raises(ConnectFailed, match="not running"):
                await post(transport, url, None)
        finally:
            await transport.aclose()

    asyncio.run(run())


def test_the_pipe_admits_only_this_user_and_local_clients(served: tuple[AppServer, RecordingApp, Path]) -> None:
    """Read back the pipe's security descriptor: owner this user, a protected DACL with one
    entry for this user (GetSecurityInfo, SE_KERNEL_OBJECT)."""
    import ctypes

    server, _app, _discovery = served
    assert server.pipe_path is not None
    kernel32, advapi32, last_error = win32_pipe_api()
    sid = process_user_sid(kernel32, advapi32, None, last_error=last_error)

    async def open_end() -> Any:
        end, _address, _skipped = await open_verified_socket(server.url or "", verify=None, timeout_seconds=10)
        return end

    end = asyncio.run(open_end())
    with contextlib.closing(end):
        get_security_info = ctypes.WinDLL("advapi32", use_last_error=True).GetSecurityInfo
        get_security_info.restype = ctypes.c_ulong
        get_security_info.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_ulong, *[ctypes.c_void_p] * 5]
        descriptor = ctypes.c_void_p()
        owner_and_dacl = 0x1 | 0x4  # OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION
        assert get_security_info(end.handle, 6, owner_and_dacl, None, None, None, None, ctypes.byref(descriptor)) == 0
        to_text = ctypes.WinDLL("advapi32", use_last_error=True).ConvertSecurityDescriptorToStringSecurityDescriptorW
        to_text.restype = ctypes.c_int
        to_text.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_void_p]
        text = ctypes.c_wchar_p()
        assert to_text(descriptor, 1, owner_and_dacl, ctypes.byref(text), None)
        sddl = text.value or ""
        kernel32.LocalFree(text)
        kernel32.LocalFree(descriptor)
    assert sddl.startswith(f"O:{sid}D:P"), sddl
    assert sddl.count("(") == 1 and sddl.endswith(f";;;{sid})"), f"one entry, for this user only: {sddl}"
