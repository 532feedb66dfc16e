"""The server check of a named-pipe connection (bridge/app/pipepeer.py), on every OS, with
the Win32 answers played by stand-ins: the same user and the discovery file's pid pass;
another user's server (a squatted name), another pid, a reused pid, or Windows not
answering are refused with nothing sent. The real calls run in
tests/transport/test_pipe_windows.py on Windows."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from bridge.app.discovery import Discovery
from bridge.app.pipepeer import PipePeerCheck
from bridge.core.errors import ListenerUnverifiedError
from bridge.system.namedpipe import PipeServer, PipeUnavailable

ME = "S-1-5-21-1004336348-1177238915-682003330-1001"
OTHER = "S-1-5-21-1004336348-1177238915-682003330-1002"
PIPE = "\\\\.\\pipe\\mcp-app-bridge-1-0123456789abcdef"
URL = "npipe://./pipe/mcp-app-bridge-1-0123456789abcdef/mcp"
APP_PID = os.getpid()  # a live pid whose start time the OS tells: this process plays the app


class Pipe:
    handle = 88
    path = PIPE


def discovery(pid: int | None = APP_PID, start: float | None = None) -> Discovery:
    return Discovery(url=URL, pid=pid, token=None, pid_start_time=start, written_at=None)


def check(server: PipeServer | Exception, described: Discovery | None, **options: Any) -> PipePeerCheck:
    asked: list[int] = []

    def identify(handle: int) -> PipeServer:
        asked.append(handle)
        if isinstance(server, Exception):
            raise server
        return server

    made = PipePeerCheck(lambda path: described if path == PIPE else None, identify=identify, own_sid=lambda: ME, **options)
    made.asked = asked  # type: ignore[attr-defined]
    return made


@pytest.mark.anyio
async def test_the_apps_pipe_served_by_this_user_and_the_named_pid_passes() -> None:
    made = check(PipeServer(pid=APP_PID, sid=ME.lower()), discovery())  # SIDs compare without regard to case
    await made.verify_connection(Pipe())
    assert made.asked == [88]  # type: ignore[attr-defined]


def test_without_a_named_pid_the_same_user_passes() -> None:
    check(PipeServer(pid=12345, sid=ME), None).verify_pipe(Pipe(), PIPE)
    check(PipeServer(pid=12345, sid=ME), discovery(pid=None)).verify_pipe(Pipe(), PIPE)


def test_another_users_server_is_refused_whatever_the_discovery_file_says() -> None:
    with pytest.raises(ListenerUnverifiedError, match="another user") as refused:
        check(PipeServer(pid=APP_PID, sid=OTHER), discovery()).verify_pipe(Pipe(), PIPE)
    message = str(refused.value)
    assert PIPE in message and f"pid {APP_PID}, user {OTHER}" in message and ME in message
    assert "No credential and no request were sent" in message and message.count("sent") == 1


def test_another_pid_is_refused_after_one_fresh_read_of_the_discovery_file() -> None:
    reads: list[int] = []
    made = check(PipeServer(pid=APP_PID + 1, sid=ME), discovery(), refresh=lambda: reads.append(1))
    with pytest.raises(ListenerUnverifiedError, match=f"served by pid {APP_PID + 1}, not by pid {APP_PID}"):
        made.verify_pipe(Pipe(), PIPE)
    assert reads == [1]


def test_a_restart_named_by_the_fresh_read_passes() -> None:
    current = {"file": discovery(pid=APP_PID + 1)}
    made = PipePeerCheck(
        lambda path: current["file"],
        identify=lambda handle: PipeServer(pid=APP_PID, sid=ME),
        own_sid=lambda: ME,
        refresh=lambda: current.update(file=discovery()),
    )
    made.verify_pipe(Pipe(), PIPE)


def test_a_reused_pid_is_refused_by_its_start_time() -> None:
    made = check(PipeServer(pid=APP_PID, sid=ME), discovery(start=time.time() + 3600))
    with pytest.raises(ListenerUnverifiedError, match="reused pid"):
        made.verify_pipe(Pipe(), PIPE)


def test_windows_not_answering_is_a_refusal() -> None:
    made = check(PipeUnavailable("GetNamedPipeServerProcessId failed (error 6)"), discovery())
    with pytest.raises(ListenerUnverifiedError, match="error 6"):
        made.verify_pipe(Pipe(), PIPE)
