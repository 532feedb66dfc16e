"""The server half's Windows named pipe: a fresh name, a first instance, only this user.

Where (:func:`new_pipe_path`): ``\\\\.\\pipe\\mcp-app-bridge-<pid>-<16 random hex digits>``,
new at every start and published in the discovery file. Pipe names are one namespace for
the whole machine; a name nobody can guess cannot be taken first by another user
(pipe squatting) before the app starts.

How (:class:`PipeListener`): every instance is made by
:func:`~bridge.system.namedpipe.create_pipe_instance`: the first with
``FILE_FLAG_FIRST_PIPE_INSTANCE`` (a name any other process holds already fails the
start, before anything is served or published), all with ``PIPE_REJECT_REMOTE_CLIENTS``
and a protected DACL that admits only the current user (``O:<SID>D:P(A;;GA;;;<SID>)``:
another user can neither open the pipe nor create an instance of its name). One
unconnected instance is kept at all times, so the name is never free while the server
runs. Each connected instance becomes an asyncio proactor pipe transport with uvicorn's
HTTP protocol on it, so the app is served by uvicorn as on TCP (its h11 protocol, the
header deadline and the admission of ``server.py``).

Why this and not something else: uvicorn has no pipe support (it serves sockets, a file
descriptor or a Unix socket path). asyncio's ``ProactorEventLoop.start_serving_pipe``
(undocumented) has the accept loop, but creates its instances with the default security
descriptor (``Everyone`` may read), without ``PIPE_REJECT_REMOTE_CLIENTS``, and in message
mode, with no way to pass others. :class:`PipeListener` is that accept loop (CPython
``Lib/asyncio/windows_events.py``: ``start_serving_pipe`` and ``PipeServer``) with the
instances made here; it uses the same two proactor calls (``IocpProactor.accept_pipe``
and the loop's ``_make_duplex_pipe_transport``), given as arguments so that its logic runs
in the tests of every OS with stand-ins (:func:`proactor_calls` gives the real ones).
A server of threads and blocking ``ConnectNamedPipe``/``ReadFile`` calls would have been
more code of our own, beside asyncio's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
from collections.abc import Callable
from typing import Any

from ..core.pipeurl import PIPE_PREFIX
from ..core.policy import PIPE_ACCEPT_BACKOFF

__all__ = [
    "PipeListener",
    "check_proactor_loop",
    "named_pipes_supported",
    "new_pipe_path",
    "proactor_calls",
]

log = logging.getLogger("bridge.appserver")

# After a second failure in a row of the accept loop (an instance that cannot be made, a
# wait that fails at once), the wait before the next try: doubled at each further failure up
# to the maximum (``policy.PIPE_ACCEPT_BACKOFF``), back to none once a client is served. A
# lasting failure (out of handles, say) then costs a try every 5 s, not a busy loop and a
# log line per turn.


def named_pipes_supported() -> bool:
    """Whether this process can serve on a named pipe: Windows, with asyncio's proactor
    event loop (its default there)."""
    return sys.platform == "win32" and hasattr(asyncio, "ProactorEventLoop")


def new_pipe_path(pid: int | None = None) -> str:
    """``\\\\.\\pipe\\mcp-app-bridge-<pid>-<16 random hex digits>`` (see the module)."""
    return f"{PIPE_PREFIX}mcp-app-bridge-{os.getpid() if pid is None else pid}-{secrets.token_hex(8)}"


class PipeListener:
    """Accept connections on a named pipe, one instance per client (see the module).

    Args:
        path: ``\\\\.\\pipe\\NAME``.
        create_instance: ``(first) -> pipe``: a new instance of the pipe (an object with
            ``close()``), the first one with ``FILE_FLAG_FIRST_PIPE_INSTANCE``.
        accept: ``(pipe) -> Future[pipe]``: waits for a client on that instance
            (``IocpProactor.accept_pipe``).
        make_transport: ``(pipe, protocol) -> transport``: serves a connected instance
            with ``protocol`` (the loop's ``_make_duplex_pipe_transport``).

    The first instance is created at once, so a name held by another process raises here.

    Raises:
        PermissionError: the name is held by another process already
            (``PipeServerRefused``); nothing is served.
        OSError: another failure of the first instance.
    """

    def __init__(
        self,
        path: str,
        *,
        create_instance: Callable[[bool], Any],
        accept: Callable[[Any], asyncio.Future[Any]],
        make_transport: Callable[[Any, asyncio.BaseProtocol], object],
    ) -> None:
        self.path = path
        self._create = create_instance
        self._accept = accept
        self._make_transport = make_transport
        self._spare: Any = create_instance(True)
        self._waiting: asyncio.Future[Any] | None = None
        self._waiting_pipe: Any = None
        self._factory: Callable[[], asyncio.BaseProtocol] | None = None
        self._closed = False
        self._failures = 0  # failures of the accept loop in a row
        self._retry: asyncio.TimerHandle | None = None
        #: Connections served so far.
        self.accepted = 0

    def start(self, protocol_factory: Callable[[], asyncio.BaseProtocol]) -> None:
        """Start accepting on the running loop: each client gets ``protocol_factory()``."""
        if self._factory is not None or self._closed:
            return
        self._factory = protocol_factory
        asyncio.get_running_loop().call_soon(self._accept_next)

    def _accept_next(self, done: asyncio.Future[Any] | None = None) -> None:
        """The accept loop of CPython's ``start_serving_pipe``: serve the instance a client
        connected to (``done``), then wait on the next one; keep a spare instance meanwhile.
        An instance whose wait failed (a client gone before it was served) is closed here,
        where CPython's loop leaves it to the garbage collector, and the loop goes on: at once
        after one failure, then after ``policy.PIPE_ACCEPT_BACKOFF`` (0.05 s doubling up to
        5 s) while the failures go on (CPython's loop retries at once)."""
        self._retry = None
        pipe: Any = None
        try:
            if done is not None:
                pipe, self._waiting, self._waiting_pipe = self._waiting_pipe, None, None
                pipe = done.result()  # the same instance, connected (closed below if it failed)
                if self._closed:
                    pipe.close()
                    return
                assert self._factory is not None
                self._make_transport(pipe, self._factory())
                self.accepted += 1
                self._failures = 0
                pipe = None
            if self._closed:
                return
            pipe, self._spare = self._spare, self._create(False)
            future = self._accept(pipe)
        except asyncio.CancelledError:
            if pipe is not None:
                pipe.close()
            return
        except OSError as exc:  # a client that went away before it was served (BrokenPipeError), say
            if pipe is not None:
                pipe.close()
            if not self._closed:
                self._failures += 1
                delay = self.retry_delay_seconds(self._failures)
                if delay == 0:
                    log.info("a connection on the named pipe %s failed before it was served: %s", self.path, exc)
                    asyncio.get_running_loop().call_soon(self._accept_next)
                else:
                    log.warning(
                        "the named pipe %s failed %d times in a row (%s); trying again in %g s",
                        self.path, self._failures, exc, delay,
                    )
                    self._retry = asyncio.get_running_loop().call_later(delay, self._accept_next)
            return
        self._waiting, self._waiting_pipe = future, pipe
        future.add_done_callback(self._accept_next)

    @staticmethod
    def retry_delay_seconds(failures: int) -> float:
        """The wait before the accept loop's next try after ``failures`` failures in a row:
        0 after the first, then ``policy.PIPE_ACCEPT_BACKOFF``: 0.05 s doubling up to 5 s."""
        if failures <= 1:
            return 0.0
        return PIPE_ACCEPT_BACKOFF.seconds(failures - 2)

    def close(self) -> None:
        """Stop accepting: the instance waiting for a client and the spare one are closed
        (the name is then free); connections already served go on until uvicorn ends them."""
        if self._closed:
            return
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        for pipe in (self._waiting_pipe, self._spare):
            if pipe is not None:
                pipe.close()
        self._waiting_pipe = self._spare = None

    def is_serving(self) -> bool:
        return self._factory is not None and not self._closed

    async def wait_closed(self) -> None:
        """For uvicorn's shutdown, as ``asyncio.Server.wait_closed``: nothing is left to wait for."""


def check_proactor_loop() -> None:
    """Raise ``OSError`` unless the running event loop can serve a named pipe (asyncio's
    proactor loop, the default on Windows; not a selector loop a policy chose)."""
    loop = asyncio.get_running_loop()
    if not (hasattr(loop, "_proactor") and hasattr(loop, "_make_duplex_pipe_transport")):
        raise OSError("serving on a named pipe needs asyncio's proactor event loop (the default on Windows)")


def proactor_calls(path: str, user_sid: str | None = None) -> dict[str, Any]:  # pragma: no cover - Windows only
    """The real ``create_instance``, ``accept`` and ``make_transport`` for a
    :class:`PipeListener` on ``path``, for the current user (``user_sid``: its string SID,
    asked of Windows by default). ``create_instance`` needs no event loop (the first
    instance is made when the server binds); the other two use the running proactor loop
    (:func:`check_proactor_loop`).

    Raises:
        OSError: not Windows, or this user's SID could not be read (``PipeUnavailable``).
    """
    if sys.platform == "win32":  # (so that mypy checks this body with --platform win32)
        from asyncio import windows_utils

        from ..system.namedpipe import create_pipe_instance, process_user_sid, win32_pipe_api

        kernel32, advapi32, last_error = win32_pipe_api()
        sid = user_sid or process_user_sid(kernel32, advapi32, None, last_error=last_error)

        def create_instance(first: bool) -> Any:
            handle = create_pipe_instance(kernel32, advapi32, path, user_sid=sid, first=first, last_error=last_error)
            return windows_utils.PipeHandle(handle)

        def accept(pipe: Any) -> Any:
            loop: Any = asyncio.get_running_loop()
            return loop._proactor.accept_pipe(pipe)

        def make_transport(pipe: Any, protocol: asyncio.BaseProtocol) -> object:
            loop: Any = asyncio.get_running_loop()
            return loop._make_duplex_pipe_transport(pipe, protocol, extra={"addr": path})

        return {"create_instance": create_instance, "accept": accept, "make_transport": make_transport}
    raise OSError("named pipes exist only on Windows")
