"""The server check of a named-pipe connection: the app's, as Windows says, before the first byte.

A Windows named pipe's client can ask who serves it: ``GetNamedPipeServerProcessId`` on
the client's handle names the server's process, and that process's token names its user
(``bridge/system/namedpipe.py``). On every new connection to an ``npipe://`` endpoint
(``bridge/transport/pipelink.py``), before anything is written, the bridge checks:

1. the server runs as the same user as the bridge (its token user's SID is this process's);
   a pipe name another user created first (pipe squatting) fails here;
2. when the discovery file describes this pipe and names a pid, the server is that pid,
   and that pid is still the process that wrote the file: it started when
   ``pid_start_time`` says (:func:`~bridge.app.discovery.pid_is_the_apps`, within 2 s).
   On a mismatch the discovery file is read once more first (``refresh``: an app
   restarted on another pipe, or the same one, names its new pid).

A failure raises :class:`~bridge.core.errors.ListenerUnverifiedError` (reason
``listener_unverified``): the pipe is closed unused, no token and no request sent.
``--no-verify-listener`` turns this check off with the TCP and Unix-socket ones.

The Win32 calls are given as ``identify`` and ``own_sid`` (tests pass stand-ins); by
default they are :func:`~bridge.system.namedpipe.pipe_server_identity` and
:func:`~bridge.system.namedpipe.process_user_sid` on ``kernel32`` and ``advapi32``
(:func:`~bridge.system.namedpipe.win32_pipe_api`), Windows only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.config import DEFAULT_APP_NAME
from ..core.errors import ListenerUnverifiedError
from ..system.namedpipe import PipeServer, PipeServerRefused, PipeUnavailable, check_pipe_server
from .discovery import Discovery, pid_is_the_apps

__all__ = ["PipePeerCheck"]


def _windows_identify(handle: int) -> PipeServer:  # pragma: no cover - Windows only
    from ..system.namedpipe import pipe_server_identity, win32_pipe_api

    kernel32, advapi32, last_error = win32_pipe_api()
    return pipe_server_identity(kernel32, advapi32, handle, last_error=last_error)


def _windows_own_sid() -> str:  # pragma: no cover - Windows only
    from ..system.namedpipe import process_user_sid, win32_pipe_api

    kernel32, advapi32, last_error = win32_pipe_api()
    return process_user_sid(kernel32, advapi32, None, last_error=last_error)


class PipePeerCheck:
    """The server check for one bridge run.

    Args:
        expected: ``(pipe path) -> Discovery or None``: the discovery file's content when
            it describes the endpoint on that pipe (``Endpoint.discovery_for_pipe``).
        app_name: how the app is named in messages.
        identify: ``(handle) -> PipeServer``: who serves the pipe opened as ``handle``.
        own_sid: ``() -> str``: the string SID of the user running the bridge (asked once).
        refresh: called once when the server is not the pid ``expected`` gave, before
            ``expected`` is asked again (``Endpoint.reload``).
    """

    def __init__(
        self,
        expected: Callable[[str], Discovery | None],
        *,
        app_name: str = DEFAULT_APP_NAME,
        identify: Callable[[int], PipeServer] = _windows_identify,
        own_sid: Callable[[], str] = _windows_own_sid,
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self._expected = expected
        self._app = app_name
        self._identify = identify
        self._own_sid = own_sid
        self._sid: str | None = None
        self._refresh = refresh

    def verify_pipe(self, pipe: Any, path: str = "?") -> None:
        """Check the server of a freshly opened pipe (``pipe``: its handle, or an object
        with ``handle``, as ``asyncio.windows_utils.PipeHandle``); call it before writing.

        Raises:
            ListenerUnverifiedError: another user's process, not the discovery file's pid
                (or that pid is no longer the process that wrote the file), or Windows
                would not say. Nothing has been sent; the caller closes the pipe.
        """
        handle = int(getattr(pipe, "handle", pipe))
        try:
            if self._sid is None:
                self._sid = self._own_sid()
            server = self._identify(handle)
        except PipeUnavailable as exc:
            raise self._refusal(path, str(exc)) from None
        try:
            check_pipe_server(server, own_sid=self._sid, expected_pid=None, pipe_name=path)
        except PipeServerRefused:
            raise ListenerUnverifiedError(
                f"{self._app} could not be verified at the named pipe {path}: the process serving it (pid {server.pid}, user "
                f"{server.sid}) belongs to another user, not to the user running the bridge ({self._sid}); another user may "
                "have created the pipe name first. No credential and no request were sent. If the app runs as another user "
                "on purpose, give --no-verify-listener."
            ) from None
        problem = self._named_pid_problem(path, server)
        if problem is not None and self._refresh is not None:
            self._refresh()
            problem = self._named_pid_problem(path, server)
        if problem is not None:
            raise problem

    def _named_pid_problem(self, path: str, server: PipeServer) -> ListenerUnverifiedError | None:
        discovery = self._expected(path)
        if discovery is None or discovery.pid is None:
            return None
        if server.pid != discovery.pid:
            return ListenerUnverifiedError(
                f"{self._app} could not be verified at the named pipe {path}: it is served by pid {server.pid}, not by pid "
                f"{discovery.pid} (the app, as its discovery file says); no credential and no request were sent."
            )
        if not pid_is_the_apps(discovery):
            return ListenerUnverifiedError(
                f"{self._app} could not be verified at the named pipe {path}: pid {server.pid} serves it, but it is not the "
                "process that wrote the discovery file (it started at another time: a reused pid); no credential and no "
                "request were sent."
            )
        return None

    async def verify_connection(self, pipe: Any) -> None:
        """:meth:`verify_pipe` for the pool and the probes (it never waits: Windows knows
        the server once the pipe is open). The pipe's path is the ``path`` attribute
        ``bridge/transport/pipelink.py`` gives the ``PipeHandle`` it opened.

        Raises:
            ListenerUnverifiedError: as :meth:`verify_pipe`.
        """
        self.verify_pipe(pipe, str(getattr(pipe, "path", "?")))

    def _refusal(self, path: str, why: str) -> ListenerUnverifiedError:
        return ListenerUnverifiedError(
            f"{self._app} could not be verified at the named pipe {path}: {why}; no credential and no request were sent. "
            "Where the check cannot work (an app run as another user on purpose), give --no-verify-listener."
        )
