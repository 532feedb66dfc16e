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

1. Binds ``127.0.0.1`` (or ``::1``) on port 0, so the system picks a free port.
2. Wraps the app in :class:`TokenAuthMiddleware` (``bridge/appserver/auth.py``): every HTTP and WebSocket request needs
   ``Authorization: Bearer <token>`` (401 otherwise). The token is random and new at every
   start, or kept in ``token_file`` (created 0600 on the first start, reused after). With
   ``secret_file`` it also serves the bridge's auth route (``--auth-url /auth/token
   --secret-file S``): ``POST /auth/token {"secret": …}`` → ``{"token": …}``.
3. Runs uvicorn (the ``app`` extra: ``pip install 'mcp-app-bridge[app]'``). Once uvicorn
   has started (the app's lifespan has run and the socket is served), it writes the
   discovery file ``{"url", "pid", "token"}`` atomically with mode 0600, at
   ``default_discovery_path(app_name)`` unless told otherwise; ``pid`` is this process,
   the one that holds the listening socket.
4. On SIGTERM, SIGINT (Ctrl-C) or :meth:`AppServer.stop`, removes the discovery file
   first, then lets open requests finish for ``graceful_shutdown_seconds`` and stops.

Nothing here is imported by the bridge itself: its start-up never loads this module or
uvicorn.
"""

from __future__ import annotations

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

from ..app.discovery import default_discovery_path, remove_discovery_file, write_discovery_file
from .auth import (
    AUTH_PATH,
    ASGIApp,
    TokenAuthMiddleware,
    UnsafeFileError,
    load_or_create_secret,
)

if TYPE_CHECKING:
    import uvicorn

__all__ = ["AppServer", "TokenAuthMiddleware", "UnsafeFileError", "load_or_create_secret", "serve_app"]

log = logging.getLogger("bridge.appserver")

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
        log_level: uvicorn's log level; all its logs go to stderr.
        access_log: log one line per request (off by default).
        graceful_shutdown_seconds: how long open requests and streams may still run after
            a stop was asked for.
        uvicorn_options: further ``uvicorn.Config`` arguments.

    Raises:
        ValueError: ``host`` is not a loopback address, or ``path`` does not start with "/".
        UnsafeFileError, OSError: a token or secret file cannot be used.

    Attributes:
        url: the published MCP endpoint, once :meth:`bind` (or :meth:`run`) has run.
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
        uvicorn_options: Mapping[str, Any] | None = None,
    ) -> None:
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
        self.app = app if self.token is None else TokenAuthMiddleware(app, token=self.token, secret=secret, auth_path=auth_path)
        self._on_listening = on_listening
        self._log_level = log_level
        self._access_log = access_log
        self._graceful_shutdown_seconds = graceful_shutdown_seconds
        self._uvicorn_options = dict(uvicorn_options or {})
        self._socket: socket.socket | None = None
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
        if self._socket is None:
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
            host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
            self.url = f"http://{host}:{self.port}{self.path}"
        assert self.url is not None
        return self.url

    def run(self) -> int:
        """Serve until SIGTERM, SIGINT or :meth:`stop`; return 0, or 1 if start-up failed.

        In the main thread uvicorn handles SIGTERM and SIGINT, and re-raises the signal
        once it has stopped, so the process then ends the way that signal ends it.
        """
        import asyncio

        try:
            asyncio.run(self.serve())
        except KeyboardInterrupt:
            pass
        except SystemExit:
            if self._server is None or self._server.started:
                raise
            return 1  # uvicorn exits this way when the app's lifespan start-up fails
        finally:
            self._unpublish()
            if self._socket is not None:
                self._socket.close()
        server = self._server
        return 0 if server is not None and (server.started or server.should_exit) else 1

    async def serve(self) -> None:
        """Serve on the running event loop until asked to stop (see :meth:`run`).

        Raises:
            OSError: binding failed, or the discovery file could not be written.
        """
        url = self.bind()
        self._server = _make_server(self, self._uvicorn_config())
        self._server.should_exit = self._stop_asked  # stop() may come before the server exists
        log.info("serving %s", url)
        try:
            await self._server.serve(sockets=[self._socket] if self._socket else None)
        finally:
            self._unpublish()

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
        }
        options.update(self._uvicorn_options)
        return uvicorn.Config(self.app, **options)

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
            if self.started and not self.should_exit:
                owner._publish()  # the socket is served now: the bridge may come

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Stop advertising first, and here: after a SIGTERM uvicorn re-raises the
            # signal once serve() returns, which ends the process before any finally.
            owner._unpublish()
            await super().shutdown(sockets)

    return Server(config)


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

    A missing uvicorn is reported on stderr with the command that installs it (status 1).
    """
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("serving the app needs uvicorn: pip install 'mcp-app-bridge[app]'", file=sys.stderr)
        return 1
    return AppServer(app, **options).run()
