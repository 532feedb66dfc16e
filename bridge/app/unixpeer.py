"""The peer check of a Unix-socket connection: the app's, as the OS says, before the first byte.

Over TCP the bridge must find out who listens on a port from the OS's socket tables
(``listener.py``). A Unix domain socket carries its peer's credentials in the kernel
(``bridge/system/peercred.py``: ``SO_PEERCRED`` on Linux, ``LOCAL_PEERCRED`` and
``LOCAL_PEERPID`` on macOS), so on every new connection, before anything is written, the
bridge checks:

1. the peer runs as the same user as the bridge (effective uid);
2. when the discovery file describes this socket and names a pid, the peer is that pid
   (on Linux, or one of its descendants: an app may serve from a child process; the
   ancestry comes from ``/proc/PID/stat``), and that pid is still the process that wrote
   the file: it started when ``pid_start_time`` says (the same check as
   :func:`~bridge.app.discovery.pid_is_the_apps`, within 2 s).

The peer's pid is the process that called ``listen()`` on the socket (``unix(7)``), which
for :class:`bridge.appserver.AppServer` is the process the discovery file names. The
socket file itself is checked before connecting (``bridge/transport/socketfile.py``: a
socket, owned by this user, not a link, in a folder nobody else may write). Nothing here
waits or loads asyncio: the running-app start (``bridge/serve/appstart.py``) makes this
check on its blocking socket before asyncio is loaded.

A failure raises :class:`~bridge.core.errors.ListenerUnverifiedError` (reason
``listener_unverified``): the connection is closed unused, no token and no request sent.
``--no-verify-listener`` turns this check off with the TCP one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from ..core.config import DEFAULT_APP_NAME
from ..core.errors import ListenerUnverifiedError
from ..system.peercred import PeerCredentials, PeerCredentialsUnavailable, peer_credentials
from .discovery import Discovery, pid_is_the_apps

__all__ = ["UnixPeerCheck"]


class UnixPeerCheck:
    """The peer check for one bridge run.

    Args:
        expected: ``(socket path) -> Discovery or None``: the discovery file's content when
            it describes the endpoint on that socket (``Endpoint.discovery_for_socket``).
        app_name: how the app is named in messages.
        credentials: ``(sock) -> PeerCredentials`` (tests pass a stand-in).
        euid: this user's effective uid (default: ``os.geteuid()``).
        proc_root: where ``/proc`` is, for the peer's ancestry on Linux (tests).
        refresh: called once when the peer is not the pid ``expected`` gave, before
            ``expected`` is asked again: the app may have restarted on the same socket
            since the discovery file was read (``Endpoint.reload``).
    """

    def __init__(
        self,
        expected: Callable[[str], Discovery | None],
        *,
        app_name: str = DEFAULT_APP_NAME,
        credentials: Callable[[Any], PeerCredentials] = peer_credentials,
        euid: int | None = None,
        proc_root: str = "/proc",
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self._refresh = refresh
        self._expected = expected
        self._app = app_name
        self._credentials = credentials
        self._euid = euid
        self._proc = proc_root

    def verify_socket(self, sock: Any) -> None:
        """Check the peer of a freshly connected ``AF_UNIX`` socket; call it before writing.

        Raises:
            ListenerUnverifiedError: another user's process, not the discovery file's pid
                (or that pid is no longer the process that wrote the file), or the OS would
                not say. Nothing has been sent; the caller closes the socket.
        """
        where = _peer_path(sock)
        try:
            peer = self._credentials(sock)
        except PeerCredentialsUnavailable as exc:
            raise self._refusal(where, f"{exc}") from None
        me = self._euid if self._euid is not None else os.geteuid()  # type: ignore[attr-defined,unused-ignore]  # POSIX only
        if peer.uid != me:
            held = f"pid {peer.pid}, " if peer.pid is not None else ""
            raise ListenerUnverifiedError(
                f"{self._app} could not be verified at the Unix socket {where}: the process serving it ({held}uid "
                f"{peer.uid}) belongs to another user, not to the user running the bridge (uid {me}); no credential "
                "and no request were sent. If the app runs as another user on purpose, give --no-verify-listener."
            )
        problem = self._named_pid_problem(where, peer)
        if problem is not None and self._refresh is not None:
            self._refresh()  # a restart on the same socket: the file now names the new pid
            problem = self._named_pid_problem(where, peer)
        if problem is not None:
            raise problem

    def _named_pid_problem(self, where: str, peer: PeerCredentials) -> ListenerUnverifiedError | None:
        discovery = self._expected(where)
        if discovery is None or discovery.pid is None:
            return None
        expected = discovery.pid
        if peer.pid is None:
            return self._refusal(where, f"the OS does not tell the serving process's pid here, and the discovery file names pid {expected}")
        if peer.pid != expected and expected not in self._ancestors(peer.pid):
            return ListenerUnverifiedError(
                f"{self._app} could not be verified at the Unix socket {where}: it is served by pid {peer.pid}, not by "
                f"pid {expected} (the app, as its discovery file says) or one of its child processes; no credential "
                "and no request were sent."
            )
        if not pid_is_the_apps(discovery):
            return ListenerUnverifiedError(
                f"{self._app} could not be verified at the Unix socket {where}: pid {expected} serves it, but it is not "
                "the process that wrote the discovery file (it started at another time: a reused pid); no credential "
                "and no request were sent."
            )
        return None

    async def verify_connection(self, sock: Any) -> None:
        """:meth:`verify_socket` for an event loop (it never waits: the kernel already knows
        the peer once the connection is made).

        Raises:
            ListenerUnverifiedError: as :meth:`verify_socket`.
        """
        self.verify_socket(sock)

    def _ancestors(self, pid: int) -> list[int]:
        """``pid``'s parent, grandparent, … up to pid 1 (Linux ``/proc``; elsewhere none:
        the peer must then be the discovery file's pid itself)."""
        if not sys.platform.startswith("linux"):
            return []
        chain: list[int] = []
        current = pid
        while current > 1 and len(chain) < 64:
            try:
                with open(f"{self._proc}/{current}/stat", "rb") as handle:
                    current = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                break
            chain.append(current)
        return chain

    def _refusal(self, where: str, why: str) -> ListenerUnverifiedError:
        return ListenerUnverifiedError(
            f"{self._app} could not be verified at the Unix socket {where}: {why}; no credential and no request were "
            "sent. Where the check cannot work (an app run as another user on purpose), give --no-verify-listener."
        )


def _peer_path(sock: Any) -> str:
    """The path the peer bound (a client socket's ``getpeername()``), or ``"?"``."""
    try:
        name = sock.getpeername()
    except OSError:
        return "?"
    if isinstance(name, bytes):
        return os.fsdecode(name)
    return name if isinstance(name, str) and name else "?"
