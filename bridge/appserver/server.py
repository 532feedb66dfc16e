"""The server half for Python apps: serve an ASGI MCP app on loopback and publish it.

The bridge (``mcp-app-bridge --app-name NAME`` or the app's own ``--mcp-stdio``) finds a
running app through its discovery file and authenticates with a bearer token. This module
is the other side of that handshake, for an app whose MCP server is any ASGI application
(the official SDK's ``MCPServer.streamable_http_app()``, or any other)::

    from mcp.server.mcpserver import MCPServer
    from bridge.appserver import serve_app

    mcp = MCPServer("MyApp")
    ...                                   # @mcp.tool() functions
    serve_app(mcp.streamable_http_app(), app_name="MyApp")

What :class:`AppServer` does, in order:

1. Binds ``127.0.0.1`` (or ``::1``) on port 0, so the system picks a free port; or,
   with ``link="unix"`` (``"auto"``: where the OS allows), a Unix domain socket in a
   private folder, published as ``http+unix://…`` (``bridge/appserver/unixsocket.py``); or,
   with ``link="npipe"`` (``"auto"`` on Windows), a named pipe for this user only, published
   as ``npipe://./pipe/NAME/mcp`` (``bridge/appserver/pipeserver.py``).
   Before that, the discovery file's folder is created 0700 (whatever the umask) and
   checked, and a lock beside the discovery file is taken for the server's lifetime: a
   second instance for the same file refuses to start. Any of these failing ends
   :meth:`AppServer.run` with one line on stderr and status 1, before anything is served.
2. Wraps the app in :class:`LoopbackHostMiddleware` (``Host`` and ``Origin`` must be
   loopback: DNS rebinding; the auth route included) and
   :class:`TokenAuthMiddleware` (``bridge/appserver/auth.py``): every HTTP and WebSocket request needs
   ``Authorization: Bearer <token>`` (401 otherwise). The token is random and new at every
   start, or kept in ``token_file`` (created 0600 on the first start, reused after). With
   ``secret_file`` it also serves the bridge's auth route (``--auth-url /auth/token
   --secret-file S``): ``POST /auth/token {"secret": …}`` → ``{"token": …}``.
3. Runs uvicorn (the ``app`` extra: ``pip install 'mcp-app-bridge[app]'``) with bounds on
   what a local client can hold: a request head must be complete within
   :data:`HEADER_TIMEOUT_SECONDS` of the connection (or of the previous response) and
   within :data:`MAX_HEADER_BYTES`; an idle keep-alive connection closes after
   :data:`KEEP_ALIVE_SECONDS`; past :data:`MAX_CONNECTIONS` connections or running
   requests that were let in (see below), new requests get 503. Once uvicorn
   has started (the app's lifespan has run and the socket is served), it writes the
   discovery file ``{"url", "pid", "token"}`` atomically with mode 0600, at
   ``default_discovery_path(app_name)`` unless told otherwise; ``pid`` is this process,
   the one that holds the listening socket.
4. On SIGTERM, SIGINT (Ctrl-C) or :meth:`AppServer.stop`, removes the discovery file
   first, then lets open requests finish for ``graceful_shutdown_seconds`` and stops.

Idle connections cannot deny the app (anyone on the machine may connect, token or not):
only a connection that has sent a complete request that passed the checks (the token) is
counted against :data:`MAX_CONNECTIONS`; one that has not (a head still arriving, a request
refused 401, the auth route) holds no slot, must be done within the header timeout from the
moment it opened, and, past :data:`MAX_PENDING_CONNECTIONS` of them, the oldest idle one is
closed for each new one. So 200 connections dripping their heads, reopened as they are
closed, leave a bridge's requests served (``tests/appserver/test_appserver.py``), where
uvicorn's own ``limit_concurrency`` counted them and answered the bridge 503.

Nothing here is imported by the bridge itself: its start-up never loads this module or
uvicorn.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import ipaddress
import logging
import os
import secrets
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..app.discovery import DiscoveryError, default_discovery_path, remove_discovery_file, write_discovery_file
from ..core.pipeurl import pipe_url
from ..core.unixurl import unix_url
from ..system.privatefile import check_folders, make_private_folders
from .auth import (
    AUTH_PATH,
    ASGIApp,
    LoopbackHostMiddleware,
    TokenAuthMiddleware,
    UnsafeFileError,
    load_or_create_secret,
)

if TYPE_CHECKING:
    import filelock
    import uvicorn

    from .pipeserver import PipeListener
    from .unixsocket import BoundSocketFile

__all__ = [
    "AlreadyServingError",
    "AppServer",
    "HEADER_TIMEOUT_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "LoopbackHostMiddleware",
    "MAX_CONNECTIONS",
    "MAX_HEADER_BYTES",
    "MAX_PENDING_CONNECTIONS",
    "TokenAuthMiddleware",
    "UnsafeFileError",
    "load_or_create_secret",
    "serve_app",
]

log = logging.getLogger("bridge.appserver")

#: A request head (request line and headers) must be complete this many seconds after the
#: connection opened or the previous response ended; else the connection is closed.
#: uvicorn has no such timeout of its own (its keep-alive timer starts only after a response).
HEADER_TIMEOUT_SECONDS = 10.0
#: Largest request head, in bytes (h11's ``max_incomplete_event_size``; over it: 400).
MAX_HEADER_BYTES = 64 * 1024
#: An idle keep-alive connection is closed after this many seconds (uvicorn's ``timeout_keep_alive``).
KEEP_ALIVE_SECONDS = 5
#: Past this many connections that had a request let in (the token checked), or this many
#: such requests running, a new request gets 503 (uvicorn's ``limit_concurrency``, but
#: counting only those: connections that never sent a request that passed the checks hold
#: no slot). A bridge holds at most ``--max-concurrent-requests`` (32 by default) plus its
#: GET stream.
MAX_CONNECTIONS = 128
#: Connections that have not (yet) had a request let in, at most: past it, the oldest of
#: them that runs no request is closed for each new one (a bound on descriptors; a real
#: client sends its request at once and is never the oldest).
MAX_PENDING_CONNECTIONS = 256
_LOCK_SUFFIX = ".lock"


class AlreadyServingError(RuntimeError):
    """Another server already publishes through the same discovery file (its lock is held)."""

# -- the server ------------------------------------------------------------------------------


class AppServer:
    """Serve an ASGI app on loopback behind :class:`TokenAuthMiddleware`, and publish it.

    Args:
        app: the ASGI app (e.g. ``MCPServer.streamable_http_app()``).
        app_name: the name the bridge knows the app by (``--app-name``); the discovery file
            goes to ``default_discovery_path(app_name)``.
        discovery_file: another place for it; with neither, no discovery file is written.
        host: ``127.0.0.1`` or ``::1`` (another loopback address is accepted; nothing else).
        port: 0 lets the system pick a free port (the discovery file tells the bridge).
        path: the MCP endpoint's path inside the app, for the published URL.
        token_file: keep the token in this file (created 0600 on the first start, reused
            after): for a bridge started with ``--token-file``. Default: a new random
            token at every start.
        token_in_discovery: put the token in the discovery file (the bridge then needs no
            token option).
        secret_file: serve the auth route for this secret (created 0600 with a random
            secret if missing): for a bridge started with ``--auth-url --secret-file``.
        auth_path: the auth route's path.
        require_token: ``False`` serves without any check. Then every local user, and any
            web page a browser shows through DNS rebinding, may call the app's tools.
        on_listening: called with this server once the discovery file is written.
        header_timeout_seconds: a request head must be complete within this time.
        log_level: uvicorn's log level; all its logs go to stderr.
        access_log: log one line per request (off by default).
        graceful_shutdown_seconds: how long open requests and streams may still run after
            a stop was asked for.
        link: ``"tcp"`` (the default): ``host`` and ``port``; ``"unix"``: a Unix domain
            socket in a private folder (``bridge/appserver/unixsocket.py``: beside the
            discovery file, mode 0600, a stale one of a dead run replaced), published as
            ``http+unix://…``, with the bridge checking its peer through the OS;
            ``"npipe"`` (Windows): a named pipe of a new random name, admitting only this
            user and local clients (``bridge/appserver/pipeserver.py``), published as
            ``npipe://./pipe/NAME/mcp``; ``"auto"``: ``"npipe"`` on Windows, ``"unix"``
            where the OS allows (Linux, macOS), else TCP, with a log line (and TCP, with a
            log line, when the socket or pipe cannot be made).
        socket_path: where the socket goes instead (its folder must be this user's and
            closed to others).
        uvicorn_options: further ``uvicorn.Config`` arguments (they win over the bounds
            above; an ``http`` protocol of your own keeps the header timeout only if it is
            uvicorn's h11 or httptools one).

    Raises:
        ValueError: ``host`` is not a loopback address, or ``path`` does not start with "/".
        UnsafeFileError, OSError: a token or secret file cannot be used.

    Attributes:
        url: the published MCP endpoint, once :meth:`bind` (or :meth:`run`) has run.
        link: ``"tcp"``, ``"unix"`` or ``"npipe"`` once bound (``"auto"`` resolved).
        socket_path: the Unix socket's path, once bound on one.
        pipe_path: the named pipe's path (``\\\\.\\pipe\\NAME``), once bound on one.
        token: the bearer token (``None`` without ``require_token``). Never log it.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        app_name: str | None = None,
        discovery_file: Path | str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/mcp",
        token_file: Path | str | None = None,
        token_in_discovery: bool = True,
        secret_file: Path | str | None = None,
        auth_path: str = AUTH_PATH,
        require_token: bool = True,
        on_listening: Callable[[AppServer], None] | None = None,
        log_level: str = "warning",
        access_log: bool = False,
        graceful_shutdown_seconds: float = 2.0,
        header_timeout_seconds: float = HEADER_TIMEOUT_SECONDS,
        uvicorn_options: Mapping[str, Any] | None = None,
        link: str = "tcp",
        socket_path: Path | str | None = None,
    ) -> None:
        if link not in ("tcp", "unix", "npipe", "auto"):
            raise ValueError("link must be 'tcp', 'unix', 'npipe' or 'auto'")
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"{host!r} is not a loopback address; the app's MCP server stays on this machine")
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        if discovery_file is not None:
            self.discovery_file: Path | None = Path(discovery_file)
        else:
            self.discovery_file = default_discovery_path(app_name) if app_name else None
        self.host, self.port, self.path = host, port, path
        self.url: str | None = None
        self.token: str | None = None
        secret = None
        if require_token:
            self.token = load_or_create_secret(Path(token_file)) if token_file else secrets.token_urlsafe(32)
            secret = load_or_create_secret(Path(secret_file), "secret file") if secret_file else None
        self._token_in_discovery = token_in_discovery
        self._admission = _Admission(app, MAX_CONNECTIONS)  # behind the token check: only requests let in
        admitted: ASGIApp = self._admission
        inner = admitted if self.token is None else TokenAuthMiddleware(admitted, token=self.token, secret=secret, auth_path=auth_path)
        self._host_check = LoopbackHostMiddleware(inner)
        self.app: ASGIApp = self._host_check
        self._header_timeout_seconds = header_timeout_seconds
        self._lock: filelock.BaseFileLock | None = None
        #: Why the server stopped before it could publish itself (one line), if it did.
        self.failure: str | None = None
        self._on_listening = on_listening
        self._log_level = log_level
        self._access_log = access_log
        self._graceful_shutdown_seconds = graceful_shutdown_seconds
        self._uvicorn_options = dict(uvicorn_options or {})
        self._socket: socket.socket | None = None
        self.link = link
        self.socket_path: Path | None = Path(socket_path) if socket_path is not None else None
        self._socket_file: BoundSocketFile | None = None
        #: The named pipe's path (``\\.\pipe\NAME``), once bound on one.
        self.pipe_path: str | None = None
        self._pipe: PipeListener | None = None
        self._server: uvicorn.Server | None = None
        self._stop_asked = False
        self._published = False

    def __repr__(self) -> str:
        return f"AppServer(url={self.url!r}, discovery_file={self.discovery_file!r})"

    def bind(self) -> str:
        """Create the listening socket (once) and return the endpoint URL.

        Raises:
            OSError: the address or port cannot be bound.
        """
        if self._socket is None and self._pipe is None and self.link != "tcp":
            if self.link == "npipe" or (self.link == "auto" and sys.platform == "win32"):
                self._bind_pipe()
            else:
                self._bind_unix()
        if self._socket is None and self._pipe is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that name TCP
            # (CPython < 3.12); without it every reply waits for the client's delayed ACK.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                if os.name == "posix":  # a restart may take the same port at once
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((self.host, self.port))
                sock.listen(128)
            except BaseException:
                sock.close()
                raise
            sock.set_inheritable(False)  # a process the app starts must not hold the port
            self._socket = sock
            self.port = sock.getsockname()[1]
            self._host_check.port = self.port
            host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
            self.url = f"http://{host}:{self.port}{self.path}"
        assert self.url is not None
        return self.url

    def _bind_unix(self) -> None:
        """Bind the Unix domain socket (``link`` ``"unix"``, or ``"auto"`` where the OS
        allows; ``bridge/appserver/unixsocket.py``). With ``"auto"``, a failure is logged
        and the server binds TCP instead."""
        from .unixsocket import bind_private_socket, socket_path_for, unix_sockets_supported

        if not unix_sockets_supported():
            if self.link == "unix":
                raise OSError("this OS does not serve the app on a Unix domain socket")
            log.warning("serving on TCP (%s): this OS has no Unix domain socket the bridge can check", self.host)
            self.link = "tcp"
            return
        # The discovery file's lock first: a stale socket is replaced only by its one server.
        self.prepare()
        try:
            path = self.socket_path or socket_path_for(self.discovery_file)
            self._socket, self._socket_file = bind_private_socket(path)
        except (UnsafeFileError, OSError) as exc:
            if self.link == "unix":
                raise
            log.warning("serving on TCP (%s) instead of a Unix domain socket: %s", self.host, exc)
            self.link = "tcp"
            return
        self.link, self.socket_path, self.port = "unix", path, 0
        self._host_check.unix_socket = True
        self.url = unix_url(path, self.path)

    def _bind_pipe(self) -> None:
        """Create the named pipe's first instance (``link`` ``"npipe"``, or ``"auto"`` on
        Windows; ``bridge/appserver/pipeserver.py``). With ``"auto"``, a failure is logged
        and the server binds TCP instead."""
        from .pipeserver import PipeListener, named_pipes_supported, new_pipe_path, proactor_calls

        if not named_pipes_supported():
            if self.link == "npipe":
                raise OSError("named pipes exist only on Windows; serve with link='unix' or 'tcp'")
            log.warning("serving on TCP (%s): this OS has no named pipe", self.host)
            self.link = "tcp"
            return
        self.prepare()
        path = new_pipe_path()
        try:
            self._pipe = PipeListener(path, **proactor_calls(path))
        except OSError as exc:  # the name held already (PipeServerRefused), or a Win32 failure
            if self.link == "npipe":
                raise
            log.warning("serving on TCP (%s) instead of a named pipe: %s", self.host, exc)
            self.link = "tcp"
            return
        self.link, self.pipe_path, self.port = "npipe", path, 0
        self._host_check.unix_socket = True  # "Host: localhost", no port, as on a Unix socket
        self.url = pipe_url(path, self.path)

    def _close_pipe(self) -> None:
        if self._pipe is not None:
            self._pipe.close()

    def _remove_socket_file(self) -> None:
        if self._socket_file is not None:
            from .unixsocket import remove_socket_file

            remove_socket_file(self._socket_file)
            self._socket_file = None

    def run(self) -> int:
        """Serve until SIGTERM, SIGINT or :meth:`stop`; return 0, or 1 if start-up failed.

        A start-up that fails before serving (an unsafe or unwritable discovery folder,
        another instance holding the discovery file's lock, a port that cannot be bound)
        or while publishing is told in one line on stderr (no traceback), and returns 1.
        In the main thread uvicorn handles SIGTERM and SIGINT, and re-raises the signal
        once it has stopped, so the process then ends the way that signal ends it.
        """
        try:
            asyncio.run(self.serve())
        except KeyboardInterrupt:
            pass
        except (UnsafeFileError, AlreadyServingError, DiscoveryError, OSError) as exc:
            self.failure = f"cannot serve the app: {exc}"
        except SystemExit:
            if self._server is None or self._server.started:
                raise
            return 1  # uvicorn exits this way when the app's lifespan start-up fails
        finally:
            self._unpublish()
            self._release()
            if self._socket is not None:
                self._socket.close()
            self._close_pipe()
            self._remove_socket_file()
        if self.failure is not None:
            print(f"mcp-app-bridge: {self.failure}", file=sys.stderr, flush=True)
            return 1
        server = self._server
        return 0 if server is not None and (server.started or server.should_exit) else 1

    async def serve(self) -> None:
        """Serve on the running event loop until asked to stop (see :meth:`run`).

        Raises:
            UnsafeFileError: the discovery file's folder, or one above it, is open to
                other users.
            AlreadyServingError: another instance serves through the same discovery file.
            OSError: the folder could not be created, or binding failed.
        """
        self.prepare()
        try:
            url = self.bind()
            self._server = _make_server(self, self._uvicorn_config())
            self._server.should_exit = self._stop_asked  # stop() may come before the server exists
            log.info("serving %s", url)
            try:
                # A pipe has no socket: an empty list keeps uvicorn from binding host and port.
                sockets = [self._socket] if self._socket else [] if self._pipe is not None else None
                await self._server.serve(sockets=sockets)
            finally:
                self._unpublish()
                self._remove_socket_file()
        finally:
            self._release()

    def prepare(self) -> None:
        """Before serving: create the discovery file's folder (0700, whatever the umask),
        check it as the bridge will, and take the lock beside the discovery file (held
        until the server stops). Done once; :meth:`serve` calls it.

        Raises:
            UnsafeFileError: the folder, or one above it, is another user's or others may write to it.
            AlreadyServingError: another live server holds the lock.
            OSError: the folder or the lock file could not be created.
        """
        if self.discovery_file is None or self._lock is not None:
            return
        import filelock

        make_private_folders(self.discovery_file.parent)
        check_folders(self.discovery_file)
        lock_path = self.discovery_file.with_name(self.discovery_file.name + _LOCK_SUFFIX)
        lock = filelock.FileLock(str(lock_path), timeout=0, mode=0o600, thread_local=False)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise AlreadyServingError(
                f"another instance already serves through the discovery file {self.discovery_file} "
                f"(it holds {lock_path.name}); stop that one first, or give this one another discovery file"
            ) from None
        self._lock = lock

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def stop(self) -> None:
        """Ask the server to stop (from any thread); :meth:`run` then returns."""
        self._stop_asked = True
        if self._server is not None:
            self._server.should_exit = True

    def _uvicorn_config(self) -> uvicorn.Config:
        import uvicorn

        options: dict[str, Any] = {
            "log_config": _log_config(self._log_level),
            "log_level": self._log_level.lower(),
            "access_log": self._access_log,
            "timeout_graceful_shutdown": self._graceful_shutdown_seconds,
            # h11, not "auto": httptools sets no limit on a request head's size.
            "http": "h11",
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "timeout_keep_alive": KEEP_ALIVE_SECONDS,
            "limit_concurrency": MAX_CONNECTIONS,
        }
        options.update(self._uvicorn_options)
        # uvicorn's own limit counts every open connection, idle or not, token or not: 128
        # dripping connections denied the app. The admission behind the token check keeps
        # the limit instead, counting only connections that had a request let in.
        self._admission.limit = options.pop("limit_concurrency")
        options["http"] = _with_header_deadline(options["http"], self._header_timeout_seconds, self._admission)
        return uvicorn.Config(self.app, limit_concurrency=None, **options)

    def _publish(self) -> None:
        if self.discovery_file is not None:
            token = self.token if self._token_in_discovery else None
            assert self.url is not None
            write_discovery_file(self.discovery_file, url=self.url, pid=os.getpid(), token=token)
            self._published = True
            log.info("discovery file written: %s", self.discovery_file)
        if self._on_listening is not None:
            self._on_listening(self)

    def _unpublish(self) -> None:
        if self._published and self.discovery_file is not None:
            self._published = False
            remove_discovery_file(self.discovery_file)  # only while it is still this process's


def _make_server(owner: AppServer, config: uvicorn.Config) -> uvicorn.Server:
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            pipe = owner._pipe
            if pipe is not None and self.started and not self.should_exit:
                from .pipeserver import check_proactor_loop

                check_proactor_loop()
                config, state, app_state = self.config, self.server_state, self.lifespan.state

                def protocol() -> asyncio.BaseProtocol:  # as uvicorn's own create_protocol
                    made: asyncio.BaseProtocol = config.http_protocol_class(  # type: ignore[call-arg]
                        config=config, server_state=state, app_state=app_state
                    )
                    return made

                pipe.start(protocol)
                self.servers.append(pipe)  # type: ignore[arg-type]  # closed by uvicorn's shutdown
            if self.started and not self.should_exit:
                try:
                    owner._publish()  # the socket is served now: the bridge may come
                except (UnsafeFileError, DiscoveryError, OSError) as exc:
                    owner.failure = f"cannot publish the app: {exc}"
                    self.should_exit = True

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Stop advertising first, and here: after a SIGTERM uvicorn re-raises the
            # signal once serve() returns, which ends the process before any finally.
            owner._unpublish()
            await super().shutdown(sockets)
            owner._remove_socket_file()  # a Unix socket's file, once nothing listens on it

    return Server(config)


#: The connection (uvicorn protocol) whose request the current task serves, set by the
#: protocol of :func:`_with_header_deadline` for :class:`_Admission`.
_connection: contextvars.ContextVar[Any] = contextvars.ContextVar("bridge_appserver_connection")


class _Admission:
    """The innermost ASGI layer, behind the token check: what reaches it was let in.

    It keeps :data:`MAX_CONNECTIONS` (``limit``) as uvicorn's ``limit_concurrency`` would,
    but counting only connections that had a request let in (``proven``) and the requests
    let in that still run, so that connections without one (dripping heads, 401s) cannot
    take their slots. Over the limit: 503, as uvicorn answers. It also keeps the
    connections without such a request (``pending``, oldest first) for the protocol's bounds.
    """

    def __init__(self, app: ASGIApp, limit: int | None) -> None:
        self.app = app
        self.limit = limit
        self.proven: set[Any] = set()
        self.pending: dict[Any, None] = {}  # insertion order: oldest first
        self.running = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        connection = _connection.get(None)
        limit = self.limit
        if limit is not None and (
            self.running >= limit or (connection is not None and connection not in self.proven and len(self.proven) >= limit)
        ):
            log.warning("exceeded the concurrency limit (%d): answered 503", limit)
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1013})  # try again later
            else:
                await _service_unavailable(send)
            return
        if connection is not None and connection not in self.proven:
            self.pending.pop(connection, None)
            self.proven.add(connection)
            connection.proven()
        self.running += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running -= 1

    def forget(self, connection: Any) -> None:
        self.pending.pop(connection, None)
        self.proven.discard(connection)


async def _service_unavailable(send: Any) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"19"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": b"Service Unavailable"})


def _with_header_deadline(http: Any, seconds: float, admission: _Admission | None = None) -> Any:
    """uvicorn's HTTP protocol class ``http`` (a name or a class) with a header timeout.

    A connection must complete each request head (request line and headers) within
    ``seconds`` of opening, or of the previous response's end; otherwise it is closed.
    uvicorn itself only times out a connection idle *after* a response (keep-alive), so a
    client that connects and drips a header byte at a time would hold its connection for
    ever. The clock stops once the head is complete (the app then runs; the body and the
    response are the app's own business) and once the connection is upgraded (WebSocket).

    With ``admission`` (:class:`_Admission`): a connection is pending until one of its
    requests is let in (passes the token check); until then its clock runs from the moment
    it opened, through its requests (a 401, the auth route's body) and their responses, and
    it is closed when the time is up, even mid-request. Past
    :data:`MAX_PENDING_CONNECTIONS` pending connections, the oldest that runs no request is
    closed for each new one. A class that is not one of uvicorn's (no ``cycle``) is returned
    unchanged.
    """
    import uvicorn.config
    import uvicorn.importer

    base = uvicorn.importer.import_from_string(uvicorn.config.HTTP_PROTOCOLS.get(http, http)) if isinstance(http, str) else http
    if not isinstance(base, type) or not hasattr(base, "on_response_complete"):
        return http

    class HeaderDeadline(base):  # type: ignore[misc,valid-type]
        app: Any  # uvicorn's: the ASGI app its requests run
        _header_timer: asyncio.TimerHandle | None = None
        _proven = admission is None  # without admission every connection is as before

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if admission is not None:
                app = self.app

                async def as_this_connection(scope: Any, receive: Any, send: Any) -> None:
                    _connection.set(self)  # the request's own task: its context only
                    await app(scope, receive, send)

                self.app = as_this_connection
                admission.pending[self] = None
                if len(admission.pending) > MAX_PENDING_CONNECTIONS:
                    self._close_oldest_pending()
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            super().data_received(data)
            if self.cycle is not cycle and self._proven:  # a request head is complete: the app has it
                self._disarm_header_timer()

        def on_response_complete(self) -> None:
            cycle = self.cycle
            super().on_response_complete()
            if not self._proven:
                return  # the clock that started at the connection runs on
            if self.cycle is cycle and not self.transport.is_closing():
                self._arm_header_timer()  # the next head's clock starts now
            else:
                self._disarm_header_timer()  # a pipelined request started at once, or closing

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            if admission is not None:
                admission.forget(self)
            super().connection_lost(exc)

        def handle_websocket_upgrade(self, *args: Any) -> None:
            if admission is not None:
                admission.forget(self)  # its connection_lost now goes to the WebSocket protocol
            super().handle_websocket_upgrade(*args)

        def proven(self) -> None:
            """A request of this connection was let in: from now on it is a client's."""
            self._proven = True
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm_header_timer()

        def _close_oldest_pending(self) -> None:
            assert admission is not None
            for connection in admission.pending:
                if connection is not self and (connection.cycle is None or connection.cycle.response_complete):
                    log.info("closed the oldest of %d connections without a request let in", len(admission.pending))
                    admission.pending.pop(connection)
                    connection.transport.close()
                    return

        def _arm_header_timer(self) -> None:
            self._disarm_header_timer()
            self._header_timer = self.loop.call_later(seconds, self._header_timeout)

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_timeout(self) -> None:
            self._header_timer = None
            transport = self.transport
            if transport.is_closing() or transport.get_protocol() is not self:
                return  # closed already, or upgraded to a WebSocket
            if self._proven and self.cycle is not None and not self.cycle.response_complete:
                return  # a request is running
            log.info("closed a connection whose request head was not complete within %g s", seconds)
            transport.close()

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


def _log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging config with every handler (the access log's too) on stderr, no colour."""
    import uvicorn.config

    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    for formatter in config["formatters"].values():
        formatter["use_colors"] = False
    for logger in config["loggers"].values():
        if "level" in logger:
            logger["level"] = level.upper()
    return config


def serve_app(app: ASGIApp, **options: Any) -> int:
    """``AppServer(app, **options).run()``: serve until stopped; return the exit status.

    A missing uvicorn is reported on stderr with the command that installs it, and a token
    or secret file that cannot be used, an unsafe discovery folder or another instance on
    the same discovery file in one line (status 1, no traceback).
    """
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("serving the app needs uvicorn: pip install 'mcp-app-bridge[app]'", file=sys.stderr)
        return 1
    try:
        server = AppServer(app, **options)
    except (UnsafeFileError, OSError, ValueError) as exc:  # a token or secret file that cannot be used
        print(f"mcp-app-bridge: cannot serve the app: {exc}", file=sys.stderr, flush=True)
        return 1
    return server.run()
