"""Who listens on the app's port: verified before any credential goes on a connection.

While the app is down, any local process can listen on its loopback port. Before the
bridge writes a byte on a new connection (a token, a secret, a request), it checks that
the socket it reached belongs to the app (docs/security.md, "A credential goes only to a
listener verified to be the app"):

1. every listening socket that can have accepted the connection (the exact address, else
   the wildcard ones, on the connection's port) belongs to the same user as the bridge;
2. when the discovery file names a pid, each of those sockets is held by that process or
   one of its descendants (an app may serve from a child process).

How, per OS:

- **Linux**: the kernel's socket diagnostics (``sock_diag``, two exact netlink lookups in
  ``sockdiag.py``: the listener that takes the connection, and the connection's
  own server side by its 4-tuple) give each socket's state, uid and inode; where netlink
  is not available, ``/proc/net/tcp`` and ``/proc/net/tcp6`` give the same (parsed by the
  pure ``procnet.parse_proc_net_tcp``). ``/proc/PID/fd`` links
  ``socket:[inode]`` show whether the named pid (or a descendant, found from
  ``/proc/*/stat``) holds the listening socket.
- **macOS and Windows**: psutil (listening sockets with their pids; each pid's user and
  ancestry), installed with the bridge there. Without it the check refuses. For a
  connection, the connection's own server side is checked too: the socket whose local
  address is the connection's peer and whose peer is the connection's local address, and
  the pid that holds it (the process that accepted it). The app may take a moment to
  accept: :meth:`ListenerCheck.verify_connection` waits for it up to
  :data:`ACCEPT_WAIT_SECONDS`, then refuses.
- Anything the OS will not say (no ``/proc``, no visible listener, psutil refused)
  is a refusal, with that reason. ``--no-verify-listener`` (``BridgeConfig.verify_listener``)
  turns the check off for setups where it cannot work: a container or network namespace,
  an app run as another user on purpose.

When: once per new connection (the pool keeps verified connections), never per request.
Which connection: the very one the request then goes on (``transport/verifiedconnect.py``):
a name such as ``localhost`` is resolved once and each address is connected and checked
in turn; an address whose listener fails the check is skipped, never written to.
A failure raises :class:`~bridge.core.errors.ListenerUnverifiedError`: the connection is closed
before anything is written, and the request gets reason ``listener_unverified``. A listener
that is gone by the time of the check (the kernel accepted the connection into its backlog,
then the app closed it), or whose named pid is exiting, is the app going away:
:class:`~bridge.core.errors.AppUnreachableError` (recoverable; nothing was sent).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..core.config import DEFAULT_APP_NAME
from ..core.errors import AppUnreachableError, ListenerUnverifiedError
from .procnet import LISTEN, Address, TcpEntry, find_listeners, normal_address, parse_proc_net_tcp

__all__ = ["ListenerCheck", "ACCEPT_WAIT_SECONDS"]

#: psutil backend: how long a connection's server side may take to be accepted (held by a
#: process) before the check refuses, in seconds; polled every :data:`_ACCEPT_POLL_SECONDS`.
ACCEPT_WAIT_SECONDS = 2.0
_ACCEPT_POLL_SECONDS = 0.005

_PROC_NET = ("/proc/net/tcp", "/proc/net/tcp6")


class ListenerCheck:
    """The listener check for one bridge run.

    Args:
        expected_pid: ``(port) -> pid or None``: the pid that must hold the listener on
            that port (the discovery file's, when it describes that endpoint).
        app_name: how the app is named in messages.
        backend: ``"proc"`` (Linux: sock_diag, else ``/proc/net/tcp*``), ``"proc-text"``
            (``/proc/net/tcp*`` only), ``"psutil"``, or ``None`` to pick by OS.
        proc_root: where ``/proc`` is (tests).
    """

    def __init__(
        self,
        expected_pid: Callable[[int], int | None],
        *,
        app_name: str = DEFAULT_APP_NAME,
        backend: str | None = None,
        proc_root: str = "/proc",
    ) -> None:
        self._expected_pid = expected_pid
        self._app = app_name
        self._backend = backend or ("proc" if sys.platform.startswith("linux") else "psutil")
        self._proc = proc_root

    def verify_socket(self, sock: Any, *, wait_seconds: float | None = None) -> None:
        """Check the listener a freshly connected socket reached; call it before writing.

        Synchronous: with the psutil backend it may sleep (at most
        :data:`ACCEPT_WAIT_SECONDS`, or ``wait_seconds`` if shorter) until the app has
        accepted the connection. Code on an event loop uses :meth:`verify_connection`.

        Args:
            sock: a connected TCP socket (``socket.socket`` or asyncio's ``TransportSocket``).
            wait_seconds: a shorter bound on that wait (a caller with a deadline of its own).

        Raises:
            ListenerUnverifiedError: another user's socket, not the named pid's, or the OS
                would not say. Nothing has been sent; the caller closes the socket.
        """
        import time

        peer, port, local = self._ends(sock)
        wait = ACCEPT_WAIT_SECONDS if wait_seconds is None else max(min(wait_seconds, ACCEPT_WAIT_SECONDS), 0.0)
        deadline = time.monotonic() + wait
        while not self._verify(peer, port, local):
            if time.monotonic() >= deadline:
                raise self._not_accepted(peer, port)
            time.sleep(_ACCEPT_POLL_SECONDS)

    async def verify_connection(self, sock: Any) -> None:
        """:meth:`verify_socket` for an event loop: the wait for the app to accept the
        connection (psutil backend only) sleeps without blocking the loop.

        Raises:
            ListenerUnverifiedError: as :meth:`verify_socket`.
        """
        import asyncio

        peer, port, local = self._ends(sock)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ACCEPT_WAIT_SECONDS
        while not self._verify(peer, port, local):
            if loop.time() >= deadline:
                raise self._not_accepted(peer, port)
            await asyncio.sleep(_ACCEPT_POLL_SECONDS)

    def _ends(self, sock: Any) -> tuple[Address, int, tuple[Address, int]]:
        try:
            local = sock.getsockname()
            peer = sock.getpeername()
        except OSError as exc:  # ENOTCONN: the app reset the connection at once (it is going away)
            raise AppUnreachableError(
                f"{self._app} closed the connection as soon as it was opened ({exc.strerror or exc}); "
                "nothing was sent."
            ) from None
        return normal_address(peer[0]), int(peer[1]), (normal_address(local[0]), int(local[1]))

    def _not_accepted(self, address: Address, port: int) -> ListenerUnverifiedError:
        where = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        return self._cannot_tell(
            where, f"no process of this user accepted the connection within {ACCEPT_WAIT_SECONDS:g} s "
            "(the connection's server side is held by another user, or the app is stuck)"
        )

    def verify_address(self, host: str, port: int) -> None:
        """Check who listens on ``host:port`` (a loopback address, or ``localhost``: then
        both ``127.0.0.1`` and ``::1``), without a connection: a look before connecting,
        which proves nothing about the connection made afterwards. The bridge itself checks
        each connection (:meth:`verify_connection`) instead; this stays for callers that
        want the look (a library's token source).

        Raises:
            ListenerUnverifiedError: as :meth:`verify_socket`.
        """
        if host.lower() != "localhost":
            self._verify(normal_address(host), port, None)
            return
        # A client may reach either loopback address for "localhost": both must pass.
        missing = []
        for address in ("127.0.0.1", "::1"):
            try:
                self._verify(normal_address(address), port, None)
            except ListenerUnverifiedError as exc:
                if not exc.nothing_listens:
                    raise
                missing.append(exc)
        if len(missing) == 2:
            raise missing[0]

    def _verify(self, address: Address, port: int, client: tuple[Address, int] | None) -> bool:
        """Raise when the listener is not the app's; ``False``: the connection's server
        side is not held by any process yet (psutil backend: the app has not accepted it)."""
        where = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        expected = self._expected_pid(port)
        if self._backend in ("proc", "proc-text"):
            self._verify_proc(where, address, port, client, expected)
            return True
        return self._verify_psutil(where, address, port, expected, client)

    # -- Linux ------------------------------------------------------------------------------

    def _verify_proc(
        self, where: str, address: Address, port: int, client: tuple[Address, int] | None, expected: int | None
    ) -> None:
        from .sockdiag import port_entries

        found = port_entries(address, port, client) if self._backend == "proc" and self._proc == "/proc" else None
        entries = found if found is not None else self._proc_net_entries(where, port)
        listeners = find_listeners(entries, address, port)
        if not listeners:
            raise self._nothing_listens(where, client)
        owners = {entry.uid for entry in listeners}
        if client is not None:
            owners |= {e.uid for e in entries if e.local == (address, port) and e.remote == client and e.state != LISTEN}
        me = os.geteuid()  # type: ignore[attr-defined,unused-ignore]  # POSIX only; mypy cannot narrow this path (the /proc backend)
        strangers = sorted(owners - {me})
        if strangers:
            raise self._other_user(where, f"uid {strangers[0]}", f"uid {me}")
        if expected is None:
            return
        wanted = {entry.inode for entry in listeners}
        for pid in self._family(expected):
            wanted -= self._socket_inodes(pid)
            if not wanted:
                return
        holder = self._holder(wanted)
        if holder is None and _is_exiting(self._proc, expected):
            # No process holds the listener, and the named one is exiting: its fds are being
            # closed (the soak's restarts showed this). Not a squatter, which holds its socket.
            raise self._going_away(where, expected)
        raise self._not_the_app(where, expected, holder)

    def _proc_net_entries(self, where: str, port: int) -> list[TcpEntry]:
        entries: list[TcpEntry] = []
        for name in _PROC_NET:
            try:
                with open(self._proc + name[5:], encoding="ascii", errors="replace") as handle:
                    entries += parse_proc_net_tcp(handle.read(), local_port=port)
            except FileNotFoundError:
                continue  # no IPv6 in this kernel
            except OSError as exc:
                raise self._cannot_tell(where, f"{name} is not readable: {exc.strerror}") from None
        return entries

    def _socket_inodes(self, pid: int) -> set[int]:
        folder = f"{self._proc}/{pid}/fd"
        inodes: set[int] = set()
        try:
            names = os.listdir(folder)
        except OSError:
            return inodes
        for name in names:
            try:
                link = os.readlink(f"{folder}/{name}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
        return inodes

    def _family(self, pid: int) -> Iterable[int]:
        """``pid``, then its descendants (from each process's parent in ``/proc/*/stat``)."""
        yield pid
        children: dict[int, list[int]] = {}
        for name in os.listdir(self._proc):
            if not name.isdigit():
                continue
            try:
                with open(f"{self._proc}/{name}/stat", "rb") as handle:
                    stat = handle.read()
                parent = int(stat.rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(name))
        queue, seen = list(children.get(pid, ())), {pid}
        while queue:
            child = queue.pop()
            if child not in seen:
                seen.add(child)
                yield child
                queue += children.get(child, ())

    def _holder(self, inodes: set[int]) -> int | None:
        """The pid holding one of ``inodes``, among the processes this user may inspect."""
        for name in os.listdir(self._proc):
            if name.isdigit() and self._socket_inodes(int(name)) & inodes:
                return int(name)
        return None

    # -- macOS, Windows (and Linux when asked): psutil --------------------------------------

    def _verify_psutil(
        self, where: str, address: Address, port: int, expected: int | None, client: tuple[Address, int] | None
    ) -> bool:
        try:
            import psutil  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise self._cannot_tell(where, "psutil, which the check needs on this OS, is not installed") from None
        try:
            rows = [row for row in psutil.net_connections(kind="tcp") if row.laddr and row.laddr[1] == port]
        except psutil.AccessDenied:  # macOS without root: only our own processes' sockets
            rows = []
            for process in psutil.process_iter():
                try:
                    rows += [
                        row._replace(pid=process.pid) for row in process.net_connections(kind="tcp")
                        if row.laddr and row.laddr[1] == port
                    ]
                except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                    continue
        server_side = [
            row for row in rows
            if client is not None and row.status != psutil.CONN_LISTEN and row.raddr
            and (normal_address(row.laddr[0]), row.laddr[1]) == (address, port)
            and (normal_address(row.raddr[0]), row.raddr[1]) == client
        ]
        rows = [row for row in rows if row.status == psutil.CONN_LISTEN]
        exact = [row for row in rows if normal_address(row.laddr[0]) == address]
        rows = exact or [
            row for row in rows
            if normal_address(row.laddr[0]).is_unspecified and (normal_address(row.laddr[0]).version == 6 or address.version == 4)
        ]
        if not rows:
            raise self._nothing_listens(where, client)
        me = psutil.Process()
        for row in rows:
            if row.pid is None:
                raise self._cannot_tell(where, "the OS does not say which process listens there")
            self._check_psutil_pid(psutil, me, where, row.pid, expected)
        if client is None:
            return True
        # The connection's own server side: the process that accepted it. Until
        # the app accepts, no process holds it (pid None, or not listed at all).
        held = [row for row in server_side if row.pid is not None]
        if not held:
            return False
        for row in held:
            self._check_psutil_pid(psutil, me, where, row.pid, expected)
        return True

    def _check_psutil_pid(self, psutil: Any, me: Any, where: str, pid: int, expected: int | None) -> None:
        """Raise unless ``pid`` runs as this user and, given ``expected``, is that pid or
        one of its descendants."""
        try:
            owner = psutil.Process(pid)
            same = owner.uids().effective == me.uids().effective if os.name == "posix" else owner.username() == me.username()
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            same = False
        if not same:
            raise self._other_user(where, f"pid {pid}", "this user")
        if expected is not None and pid != expected:
            try:
                family = {expected} | {child.pid for child in psutil.Process(expected).children(recursive=True)}
            except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
                family = {expected}
            if pid not in family:
                raise self._not_the_app(where, expected, pid)

    # -- messages ---------------------------------------------------------------------------

    def _other_user(self, where: str, found: str, expected: str) -> ListenerUnverifiedError:
        return ListenerUnverifiedError(
            f"{self._app} could not be verified at {where}: the socket listening there belongs to {found}, "
            f"not to the user running the bridge ({expected}); no credential and no request were sent. "
            "If the app runs as another user on purpose, give --no-verify-listener."
        )

    def _not_the_app(self, where: str, expected: int, holder: int | None) -> ListenerUnverifiedError:
        held = f"pid {holder}" if holder is not None else "a process this user cannot inspect"
        return ListenerUnverifiedError(
            f"{self._app} could not be verified at {where}: the socket listening there is held by {held}, "
            f"not by pid {expected} (the app, as its discovery file says) or one of its child processes; "
            "no credential and no request were sent."
        )

    def _nothing_listens(self, where: str, client: object) -> ListenerUnverifiedError | AppUnreachableError:
        if client is None:  # before a connection: most likely the app is simply not running
            error = self._cannot_tell(
                where, "no socket listening there is visible to this user (the app is not running, or it runs in "
                "another network namespace)"
            )
            error.nothing_listens = True
            return error
        # The kernel accepted the connection into the listener's backlog, and the listener
        # has been closed since: the app is going away (a restart), as when its pid is
        # exiting. Recoverable, and no advice to turn the check off: no stranger was seen.
        return AppUnreachableError(
            f"{self._app} accepted the connection at {where}, but no socket listens there now (the app is going "
            "away or restarting); nothing was sent."
        )

    def _going_away(self, where: str, expected: int) -> AppUnreachableError:
        """The discovery file's pid is exiting (or gone), and no process holds the listener any
        more: the app is going away, as after a dead pid (the file counts as absent). Recoverable: the
        request waits for the app (``ensure_running``), then its next connection is checked."""
        return AppUnreachableError(
            f"{self._app} (pid {expected}, as its discovery file says) is exiting and no longer holds the "
            f"socket listening at {where}; nothing was sent."
        )

    def _cannot_tell(self, where: str, why: str) -> ListenerUnverifiedError:
        return ListenerUnverifiedError(
            f"{self._app} could not be verified at {where}: {why}; no credential and no request were sent. "
            "Where the check cannot work (a container, an app run as another user on purpose), "
            "give --no-verify-listener."
        )


#: ``PF_EXITING`` in the flags of ``/proc/PID/stat`` (field 9): set when a process starts to
#: exit, before its file descriptors are closed (Linux ``include/linux/sched.h``).
_PF_EXITING = 0x4


def _is_exiting(proc: str, pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, or exiting (its fds are being closed), from
    ``/proc/PID/stat``: then it no longer holding its listener proves nothing."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except OSError:
        return True
    try:
        return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & _PF_EXITING)
    except (IndexError, ValueError):
        return False
