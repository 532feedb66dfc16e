"""The server half's named pipe (bridge/appserver/pipeserver.py), on every OS: the accept
loop with stand-ins for the pipe's instances and the proactor (the first instance made at
once and with FILE_FLAG_FIRST_PIPE_INSTANCE, a spare instance always there, each client
served by the protocol, a client gone before it was served, repeated failures backed off,
close), and AppServer's link choice off Windows. The real pipe is served in tests/transport/test_pipe_windows.py."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from bridge.appserver import AppServer
from bridge.appserver.pipeserver import (
    PipeListener,
    named_pipes_supported,
    new_pipe_path,
)
from bridge.core.pipeurl import pipe_url, split_pipe_url
from bridge.core.policy import PIPE_ACCEPT_BACKOFF

PIPE = "\\\\.\\pipe\\mcp-app-bridge-1-0123456789abcdef"


class Instance:
    def __init__(self, number: int, first: bool) -> None:
        self.number, self.first, self.closed = number, first, False

    def close(self) -> None:
        self.closed = True

    def __repr__(self) -> str:
        return f"Instance({self.number})"


class FakeProactor:
    """``create_instance``, ``accept`` and ``make_transport`` for a PipeListener: instances
    are numbered, each accept is a future the test resolves (a client connects)."""

    def __init__(self, *, squatted: bool = False) -> None:
        self.squatted = squatted
        self.failing = False  # every wait for a client fails at once (a broken pipe, say)
        self.accepts = 0
        self.instances: list[Instance] = []
        self.waiting: list[tuple[Instance, asyncio.Future[Any]]] = []
        self.served: list[tuple[Instance, Any]] = []

    def create_instance(self, first: bool) -> Instance:
        if first and self.squatted:
            raise PermissionError(f"the pipe name {PIPE} is held by another process already")
        instance = Instance(len(self.instances), first)
        self.instances.append(instance)
        return instance

    def accept(self, pipe: Instance) -> asyncio.Future[Any]:
        self.accepts += 1
        if self.failing:
            raise OSError(232, "The pipe is being closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting.append((pipe, future))
        return future

    def make_transport(self, pipe: Instance, protocol: Any) -> object:
        self.served.append((pipe, protocol))
        return object()

    def calls(self) -> dict[str, Any]:
        return {"create_instance": self.create_instance, "accept": self.accept, "make_transport": self.make_transport}


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_first_instance_is_made_at_once_and_a_held_name_fails_before_anything_is_served() -> None:
    proactor = FakeProactor()
    PipeListener(PIPE, **proactor.calls())
    assert [(i.number, i.first) for i in proactor.instances] == [(0, True)]
    with pytest.raises(PermissionError, match="held by another process"):
        PipeListener(PIPE, **FakeProactor(squatted=True).calls())


@pytest.mark.anyio
async def test_each_client_gets_its_protocol_and_a_spare_instance_keeps_the_name() -> None:
    proactor = FakeProactor()
    listener = PipeListener(PIPE, **proactor.calls())
    protocols: list[object] = []

    def factory() -> asyncio.BaseProtocol:
        protocols.append(asyncio.Protocol())
        return protocols[-1]  # type: ignore[return-value]

    listener.start(factory)
    await settle()
    first, waiting = proactor.waiting[0]
    assert first.number == 0 and len(proactor.instances) == 2, "instance 0 waits for a client; instance 1 is the spare"
    waiting.set_result(first)  # a client connects
    await settle()
    assert proactor.served == [(first, protocols[0])] and listener.accepted == 1
    second, waiting = proactor.waiting[1]
    assert second.number == 1 and len(proactor.instances) == 3 and not any(i.first for i in proactor.instances[1:])
    waiting.set_exception(BrokenPipeError("the client went away"))  # gone before it was served
    await settle()
    assert second.closed and listener.accepted == 1 and len(proactor.waiting) == 3, "the loop goes on"
    third, _waiting = proactor.waiting[2]
    listener.close()
    assert third.closed and proactor.instances[-1].closed, "the waiting and the spare instances are closed"
    assert not first.closed, "a connection being served is uvicorn's to end"
    assert not listener.is_serving()
    await listener.wait_closed()


@pytest.mark.anyio
async def test_a_client_accepted_after_close_is_dropped() -> None:
    proactor = FakeProactor()
    listener = PipeListener(PIPE, **proactor.calls())
    listener.start(asyncio.Protocol)
    await settle()
    pipe, future = proactor.waiting[0]
    listener._closed = True  # closed between the connect and its callback
    future.set_result(pipe)
    await settle()
    assert pipe.closed and proactor.served == []


@pytest.mark.anyio
async def test_an_accept_loop_that_keeps_failing_backs_off_and_recovers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure is retried at once; further failures in a row wait 0.05 s, doubling up to
    5 s (no busy loop while, say, the process is out of handles); a client served resets it."""
    loop = asyncio.get_running_loop()
    timers: list[tuple[float, Any]] = []

    def call_later(delay: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        timers.append((delay, callback))  # the test runs the callback when it wants
        return asyncio.TimerHandle(0, callback, args, loop)

    monkeypatch.setattr(loop, "call_later", call_later)
    proactor = FakeProactor()
    proactor.failing = True
    listener = PipeListener(PIPE, **proactor.calls())
    listener.start(asyncio.Protocol)
    await settle()
    assert proactor.accepts == 2, "the first failure is tried again at once, the second waits"
    assert [delay for delay, _ in timers] == [PIPE_ACCEPT_BACKOFF.first_seconds]
    for _ in range(10):
        timers[-1][1]()  # the wait is over
        await settle()
    delays = [delay for delay, _ in timers]
    assert delays[:4] == [0.05, 0.1, 0.2, 0.4] and delays[-1] == PIPE_ACCEPT_BACKOFF.cap_seconds == max(delays)
    assert proactor.accepts == 12, "one try per wait, none in between"
    assert all(i.closed for i in proactor.instances[:-1]), "each instance whose wait failed is closed"
    proactor.failing = False
    timers[-1][1]()
    await settle()
    pipe, future = proactor.waiting[-1]
    future.set_result(pipe)  # a client is served
    await settle()
    assert listener.accepted == 1
    proactor.failing = True
    accepts = proactor.accepts
    proactor.waiting[-1][1].set_result(proactor.waiting[-1][0])  # another client: served, then the waits fail again
    await settle()
    assert listener.accepted == 2 and proactor.accepts == accepts + 2
    assert len(timers) == 12 and timers[-1][0] == PIPE_ACCEPT_BACKOFF.first_seconds, "a client served starts the back-off anew"
    listener.close()


def test_the_retry_delays() -> None:
    delays = [PipeListener.retry_delay_seconds(failures) for failures in range(1, 12)]
    assert delays == [0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5, 5, 5]


def test_pipe_names_are_new_at_every_start_and_make_valid_urls() -> None:
    first, second = new_pipe_path(), new_pipe_path()
    assert first != second
    assert re.fullmatch(r"\\\\\.\\pipe\\mcp-app-bridge-\d+-[0-9a-f]{16}", first)
    assert split_pipe_url(pipe_url(first, "/mcp")) == (first, "/mcp")


@pytest.mark.posix_only("off Windows: there is no named pipe")
def test_off_windows_link_npipe_fails_in_one_line_and_auto_does_not_pick_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not named_pipes_supported()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never served")

    with pytest.raises(OSError, match="only on Windows"):
        AppServer(app, link="npipe").bind()
    assert AppServer(app, link="npipe", discovery_file=tmp_path / "state" / "d.json").run() == 1
    assert capsys.readouterr().err.strip().count("\n") == 0
    auto = AppServer(app, link="auto", discovery_file=tmp_path / "state" / "d.json")
    try:
        url = auto.bind()
        assert auto.link == ("unix" if sys.platform != "win32" else "npipe") and not url.startswith("npipe:")
    finally:
        auto._release()
        if auto._socket is not None:
            auto._socket.close()
        auto._remove_socket_file()


def test_link_must_be_one_of_the_four() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never served")

    with pytest.raises(ValueError, match="'npipe'"):
        AppServer(app, link="pipe")
