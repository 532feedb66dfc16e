"""Who is at the other end of a local socket or pipe, as the OS tells it (no port table).

A connected Unix domain socket carries its peer's credentials in the kernel: the process
that called ``listen()`` (for a client's socket) and its user. Each OS asks differently:

- **Linux**: ``getsockopt(SOL_SOCKET, SO_PEERCRED)`` gives ``struct ucred`` (three C
  ints: ``pid``, ``uid``, ``gid``), as the server had them when it called ``listen()``
  (``unix(7)``, ``socket(7)``).
- **macOS**: ``getsockopt(SOL_LOCAL, LOCAL_PEERCRED)`` gives ``struct xucred``
  (``cr_version`` (``XUCRED_VERSION`` 0), ``cr_uid``, ``cr_ngroups``, ``cr_groups[16]``;
  ``<sys/ucred.h>``), the same as ``getpeereid()``; ``LOCAL_PEERPID`` the peer's pid
  (``<sys/un.h>``). ``SOL_LOCAL`` is 0.
- **Windows** (named pipes) is not a socket: the pipe link checks its server with
  ``namedpipe.py``'s ``pipe_server_identity`` (``GetNamedPipeServerProcessId`` and the
  server's user).

Each function takes an object with ``getsockopt`` (a ``socket.socket``, asyncio's
``TransportSocket``, or a test's stand-in) and the platform name, so every branch runs in
the tests of every OS. Standard library only.
"""

from __future__ import annotations

import socket
import struct
import sys
from typing import NamedTuple, Protocol

__all__ = [
    "PeerCredentials",
    "PeerCredentialsUnavailable",
    "peer_credentials",
    "SO_PEERCRED_LINUX",
    "SOL_LOCAL",
    "LOCAL_PEERCRED",
    "LOCAL_PEERPID",
]

#: ``SO_PEERCRED`` on Linux (``asm-generic/socket.h``; 21 on powerpc, where Python's
#: ``socket.SO_PEERCRED`` is used instead when it exists).
SO_PEERCRED_LINUX = 17
#: macOS ``<sys/un.h>``: the level and options of a local socket's peer credentials.
SOL_LOCAL = 0
LOCAL_PEERCRED = 0x001
LOCAL_PEERPID = 0x002
#: ``struct ucred``: pid_t, uid_t, gid_t (three 32-bit ints on every Linux ABI).
_UCRED = struct.Struct("=iII")
#: The head of macOS's ``struct xucred``: u_int cr_version, uid_t cr_uid, short cr_ngroups
#: (then padding and ``gid_t cr_groups[16]``: 76 bytes in all).
_XUCRED_HEAD = struct.Struct("=IIh")
_XUCRED_SIZE = 76
_XUCRED_VERSION = 0


class _SockoptSource(Protocol):
    def getsockopt(self, level: int, option: int, buflen: int) -> bytes: ...


class PeerCredentialsUnavailable(OSError):
    """The OS would not tell who the peer is (not a Unix socket, an OS without the call,
    an unexpected answer). The message says which; callers refuse the connection."""


class PeerCredentials(NamedTuple):
    """The peer of a connected local socket: its process id and effective user id. (A named
    tuple: a dataclass loads :mod:`inspect` and :mod:`ast` at every start.)

    ``pid`` is ``None`` where the OS gives only the user (macOS before ``LOCAL_PEERPID``).
    """

    pid: int | None
    uid: int


def peer_credentials(sock: _SockoptSource, *, platform: str | None = None) -> PeerCredentials:
    """The credentials of ``sock``'s peer (a connected ``AF_UNIX`` stream socket).

    Args:
        sock: anything with ``getsockopt(level, option, buflen) -> bytes``.
        platform: ``sys.platform`` by default (tests pass another).

    Raises:
        PeerCredentialsUnavailable: the OS would not say (the ``getsockopt`` failure, or
            an answer of the wrong size or version), or has no such call here.
    """
    platform = sys.platform if platform is None else platform
    try:
        if platform.startswith("linux"):
            option = getattr(socket, "SO_PEERCRED", SO_PEERCRED_LINUX)
            raw = sock.getsockopt(socket.SOL_SOCKET, option, _UCRED.size)
            if len(raw) != _UCRED.size:
                raise PeerCredentialsUnavailable(f"SO_PEERCRED answered {len(raw)} bytes, not {_UCRED.size}")
            pid, uid, _gid = _UCRED.unpack(raw)
            if pid <= 0:  # 0: a socketpair or the peer's pid is not in this pid namespace
                raise PeerCredentialsUnavailable("SO_PEERCRED names no process (another pid namespace?)")
            return PeerCredentials(pid=pid, uid=uid)
        if platform == "darwin" or "bsd" in platform:
            raw = sock.getsockopt(SOL_LOCAL, LOCAL_PEERCRED, _XUCRED_SIZE)
            if len(raw) < _XUCRED_HEAD.size:
                raise PeerCredentialsUnavailable(f"LOCAL_PEERCRED answered {len(raw)} bytes")
            version, uid, _groups = _XUCRED_HEAD.unpack_from(raw)
            if version != _XUCRED_VERSION:
                raise PeerCredentialsUnavailable(f"LOCAL_PEERCRED answered struct xucred version {version}")
            peer_pid: int | None = None
            if platform == "darwin":
                raw_pid = sock.getsockopt(SOL_LOCAL, LOCAL_PEERPID, 4)
                if len(raw_pid) != 4:
                    raise PeerCredentialsUnavailable(f"LOCAL_PEERPID answered {len(raw_pid)} bytes")
                peer_pid = int(struct.unpack("=i", raw_pid)[0])
                if peer_pid <= 0:
                    raise PeerCredentialsUnavailable("LOCAL_PEERPID names no process")
            return PeerCredentials(pid=peer_pid, uid=uid)
    except PeerCredentialsUnavailable:
        raise
    except OSError as exc:
        raise PeerCredentialsUnavailable(f"the OS would not tell the socket's peer: {exc.strerror or exc}") from None
    raise PeerCredentialsUnavailable(f"peer credentials of a local socket are not implemented on {platform}")
