"""A small stand-in for a desktop app with an MCP server (Streamable HTTP on loopback).

This is what the bridge talks to in the demo and in the process-level tests: a real
MCP server built with the official SDK (`mcp` 2.3, `MCPServer`), served by uvicorn on
``127.0.0.1`` at ``/mcp``, with the lifecycle of a desktop app: it publishes a discovery
file, hands out a bearer token in exchange for a local secret, gets a new token on every
start, and offers ``--mcp-stdio`` for AI clients through the bridge library.

Server mode (what the app does when the user starts it)::

    python examples/app_server.py [--port 0 [--host 127.0.0.1] | --link auto|unix|npipe|tcp] [--json-response]
        [--stateless] [--discovery-file PATH [--token-in-discovery]] [--secret-file PATH] [--started-file PATH]

Without ``--port`` it serves with ``--link auto``: on a Unix domain socket on Linux and
macOS (beside its discovery file or in a private temporary folder), on a named pipe of a
new name on Windows (``\\\\.\\pipe\\mcp-app-bridge-<pid>-<random>``, this user only), and on
TCP with a log line when the OS cannot make either. ``--link unix`` (Linux, macOS) and
``--link npipe`` (Windows) fail instead of falling back, and each is refused at once on
the other OSes; ``--port 0`` (or ``--link tcp``) serves TCP on a free port. The server
half is the library's (``bridge.appserver.AppServer``, see docs/python-apps.md). Once
uvicorn serves, the server writes its discovery file (if asked), then prints exactly one
line to **stdout** and flushes it::

    LISTENING http://127.0.0.1:<port>/mcp
    (or LISTENING http+unix://%2F…%2Fmcp-endpoint.sock/mcp, or LISTENING npipe://./pipe/mcp-app-bridge-…/mcp)

Everything else (SDK logs, uvicorn's access log such as ``"DELETE /mcp HTTP/1.1" 200``)
goes to **stderr**. Sessions are on (stateful) unless ``--stateless`` is given. Stop it
with SIGTERM/SIGINT (the discovery file is then removed).

- ``--discovery-file PATH``: once listening, write ``{"url": …, "pid": …}`` there (mode
  0600, atomic), and remove it on exit (only if it is still this process's). With
  ``--token-in-discovery`` the current token is written into it too.
- ``--secret-file PATH``: every request needs ``Authorization: Bearer <token>`` and gets
  401 with ``WWW-Authenticate: Bearer`` otherwise. The token is random and new in every
  process (it rotates on restart); ``POST /auth/token`` with the JSON body
  ``{"secret": "<the secret file's content>"}`` returns ``{"token": …}`` (403 for a wrong
  secret). The file must have mode 0600; when it does not exist it is created with a
  random secret, as a real app does on its first start.
- ``--started-file PATH``: append ``<pid>\\n`` at every start (tests count launches).

Bridge mode (what an AI client runs; the app's own entry point, no GUI, no server)::

    python examples/app_server.py --mcp-stdio [--discovery-file PATH] [--secret-file PATH]
        [--token-in-discovery] [--started-file PATH] [--launch-log PATH] [--link auto|unix|npipe|tcp]

``--mcp-stdio`` comes from the bridge library (``bridge.mcp_stdio_option``): the process
becomes a stdio↔HTTP bridge to the *running* app, found through the discovery file
(default: the per-user one of ``example-app``), authenticated through the app's
``/auth/token`` route with the secret file (``bridge.AuthRouteTokenSource``: over the
bridge's own link, checked to be the app's before the secret is sent), and started in
server mode (same discovery, secret and started files and ``--link``; its output to
``--launch-log`` or discarded) when nothing listens. Only those options are passed on to
the launched app.

Tools (all ``async``, so a cancelled request really stops):

- ``echo(text)``: the text unchanged (non-ASCII, emoji, U+2028 included).
- ``slow(seconds)``: sleeps, then ``"done after N s"``.
- ``progress(steps=4, delay_seconds=0.1)``: one ``notifications/progress`` per step
  (sent on the POST's SSE stream when the request carried a ``progressToken``),
  then a text result.
- ``large(size_bytes)``: one text content block of exactly ``size_bytes`` ASCII bytes.
- ``size(text)``: ``len(text.encode("utf-8"))``, proving a big request arrived intact.
- ``app_info()``: pid, start time and mode of this server process (tells a restarted
  app apart from the old one).
- ``fail(message)``: a tool error (``isError: true``) with that message.

Importable: ``build_server()`` returns the `MCPServer`, ``build_app(...)`` the Starlette
ASGI app (enter its lifespan, e.g. with uvicorn or ``httpx.ASGITransport`` plus
``app.router.lifespan_context``), ``bridge_config(...)`` the bridge configuration of
``--mcp-stdio``, ``main(argv)`` runs the CLI and returns the exit status. The server stack
(SDK server, Starlette, uvicorn) is imported only in server mode, so ``--mcp-stdio``
starts fast.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bridge import AuthRouteTokenSource, BridgeConfig, default_discovery_path, mcp_stdio_option

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette

    from bridge.appserver import AppServer

__all__ = [
    "APP_NAME",
    "AUTH_PATH",
    "DEFAULT_MAX_BODY_BYTES",
    "LINKS",
    "LOOPBACK_HOSTS",
    "MODERN_VERSIONS",
    "ModernOnlyMiddleware",
    "bridge_config",
    "build_app",
    "build_server",
    "main",
]

APP_NAME = "example-app"
"""The app's name: server name, bridge messages, default discovery file."""

LINKS = ("auto", "unix", "npipe", "tcp")
"""``--link``: where the app serves (see the module; ``auto`` by default)."""

LOOPBACK_HOSTS = ("127.0.0.1", "::1")
"""Hosts this example agrees to bind. It is a local app stand-in, never a public server."""

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
"""Request body limit in bytes. The SDK default is 4 MiB; tests send 8 MiB requests."""

AUTH_PATH = "/auth/token"
"""The auth route: POST ``{"secret": …}``, get ``{"token": …}``."""

SCRIPT = Path(__file__).resolve()

_LARGE_PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
"""64 printable ASCII bytes, repeated by `large` (nothing that JSON must escape)."""

_STARTED_AT = time.time()

logger = logging.getLogger("app_server")


def build_server(*, name: str = APP_NAME, mode: str = "stateful") -> MCPServer:
    """Build the MCP server with the demo tools registered.

    Args:
        name: Server name reported in the ``initialize`` result.
        mode: Free text reported by ``app_info`` (e.g. ``"stateful"``, ``"stateless json"``).
    """
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    mcp = MCPServer(
        name,
        version="1.0.0",
        instructions="A stand-in for a desktop app. Try the echo and progress tools.",
    )

    @mcp.tool(description="Return the text unchanged.")
    async def echo(text: str) -> str:
        return text

    @mcp.tool(description="Sleep for the given number of seconds, then answer.")
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"done after {seconds:g} s"

    async def progress(ctx: Context, steps: int = 4, delay_seconds: float = 0.1) -> str:
        for step in range(1, steps + 1):
            await anyio.sleep(delay_seconds)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"completed {steps} steps"

    # The SDK finds the Context parameter by its annotation, evaluated in the module's
    # globals, where Context is not (the server stack is imported lazily): give it the class.
    progress.__annotations__["ctx"] = Context
    mcp.tool(description="Report `steps` progress notifications, `delay_seconds` apart, then answer.")(progress)

    # structured_output=False: one text block and nothing else, so the body carries the
    # payload once (a structured result would repeat it under structuredContent).
    @mcp.tool(description="Return one text block of exactly size_bytes ASCII bytes.", structured_output=False)
    async def large(size_bytes: int) -> str:
        if size_bytes < 0:
            raise ToolError("size_bytes must be >= 0")
        reps, rest = divmod(size_bytes, len(_LARGE_PATTERN))
        return (_LARGE_PATTERN * reps + _LARGE_PATTERN[:rest]).decode("ascii")

    @mcp.tool(description="Return the size of text in UTF-8 bytes.")
    async def size(text: str) -> int:
        return len(text.encode("utf-8"))

    @mcp.tool(description="Describe this app process: pid, start time, transport mode.")
    async def app_info() -> dict[str, Any]:
        return {"name": name, "pid": os.getpid(), "started_at": _STARTED_AT, "mode": mode}

    @mcp.tool(description="Fail with a tool error carrying the given message.")
    async def fail(message: str = "failed on purpose") -> str:
        raise ToolError(message)

    return mcp


def build_app(
    *,
    json_response: bool = False,
    stateless: bool = False,
    host: str = "127.0.0.1",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    session_idle_timeout: float | None = None,
    token: str | None = None,
    secret: str | None = None,
    legacy_only: bool = False,
    modern_only: bool = False,
    unix_socket: bool = False,
) -> Starlette:
    """Build the Starlette app serving MCP Streamable HTTP at ``/mcp``.

    Args:
        json_response: Answer each request POST with one ``application/json`` body instead
            of an SSE stream (progress notifications are then dropped by the SDK).
        stateless: No sessions: no ``mcp-session-id``, every POST stands alone.
        host: The host the app is served on; the SDK turns on its Host/Origin
            (DNS-rebinding) checks for loopback hosts.
        max_body_bytes: Largest accepted request body, in bytes (413 above it).
        session_idle_timeout: Seconds before an idle session is dropped; None keeps
            sessions until DELETE or shutdown.
        token: When given, every request needs ``Authorization: Bearer <token>`` (401
            otherwise; ``bridge.appserver.TokenAuthMiddleware``).
        secret: When given (with ``token``), ``POST /auth/token`` exchanges
            ``{"secret": secret}`` for ``{"token": token}``.
        unix_socket: Served on a Unix domain socket: the SDK's Host check then also allows
            ``localhost`` without a port, which is what clients send there.
        legacy_only: Answer like a server that predates MCP 2026-07-28: a request with
            a newer ``MCP-Protocol-Version`` (such as the ``server/discover`` probe) gets
            400 ``Missing session ID``, so dual-era clients fall back to ``initialize``.
        modern_only: Serve only MCP 2026-07-28, like a server that dropped the
            ``initialize`` handshake: every request without a 2026-07-28
            ``MCP-Protocol-Version`` (``initialize`` first) gets HTTP 400 with the error
            -32022 (Unsupported protocol version) naming ``["2026-07-28"]``; a GET or
            DELETE (the session's stream and its end) gets 405.
    """
    mode = ("stateless" if stateless else "stateful") + (" json" if json_response else " sse")
    server = build_server(mode=mode)
    security = None
    if unix_socket:
        from mcp.server.transport_security import TransportSecuritySettings

        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["localhost", "127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=json_response,
        stateless_http=stateless,
        max_request_body_size=max_body_bytes,
        session_idle_timeout=session_idle_timeout,
        host=host,
        transport_security=security,
    )
    if token is not None:
        from bridge.appserver import TokenAuthMiddleware

        app.add_middleware(TokenAuthMiddleware, token=token, secret=secret, auth_path=AUTH_PATH)
    if legacy_only:
        app.add_middleware(_LegacyOnlyMiddleware)
    if modern_only:
        app.add_middleware(ModernOnlyMiddleware)
    return app


_HANDSHAKE_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})


class _LegacyOnlyMiddleware:
    """Refuse 2026-07-28 requests the way a pre-2026 Streamable HTTP server does."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
            if version and version not in _HANDSHAKE_VERSIONS and b"mcp-session-id" not in headers:
                from starlette.responses import JSONResponse

                refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
                await JSONResponse(refusal, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


#: The revisions a ``--modern-only`` app serves.
MODERN_VERSIONS = ("2026-07-28",)


class ModernOnlyMiddleware:
    """Serve only MCP 2026-07-28 (ASGI middleware around any Streamable HTTP app): refuse
    every request of the ``initialize`` era as a server that serves only 2026-07-28 does,
    with -32022 and ``data.supported`` (2026-07-28 schema, ``UnsupportedProtocolVersionError``: the official SDK's
    ``auto`` client takes that list as proof the server is modern-only)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path", "").rstrip("/").endswith("/mcp"):
            headers = dict(scope["headers"])
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
            if version not in MODERN_VERSIONS:
                import json as _json

                from starlette.responses import JSONResponse, Response

                if scope["method"] != "POST":
                    await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
                    return
                body = b""
                while True:
                    event = await receive()
                    body += event.get("body", b"")
                    if not event.get("more_body"):
                        break
                try:
                    message = _json.loads(body)
                except ValueError:
                    message = None
                if not isinstance(message, dict) or "id" not in message:
                    await Response(status_code=202)(scope, receive, send)  # a notification: nothing to answer
                    return
                params = message.get("params")
                requested = (params.get("protocolVersion") if isinstance(params, dict) else None) or version or None
                error = {
                    "code": -32022,
                    "message": "Unsupported protocol version",
                    "data": {"supported": list(MODERN_VERSIONS), "requested": requested},
                }
                await JSONResponse({"jsonrpc": "2.0", "id": message["id"], "error": error}, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


# -- the bridge side: what --mcp-stdio runs ---------------------------------------------------


def server_command(
    *,
    discovery_file: Path,
    secret_file: Path | None = None,
    token_in_discovery: bool = False,
    started_file: Path | None = None,
    link: str = "auto",
) -> tuple[str, ...]:
    """The argv that starts this app in server mode (no shell), for ``launch_command``."""
    # No --port: the app serves on its Unix socket or named pipe where the OS allows (else TCP, port 0).
    argv = [sys.executable, str(SCRIPT), "--discovery-file", str(discovery_file)]
    if link != "auto":
        argv += ["--link", link]
    if secret_file is not None:
        argv += ["--secret-file", str(secret_file)]
    if token_in_discovery:
        argv.append("--token-in-discovery")
    if started_file is not None:
        argv += ["--started-file", str(started_file)]
    return tuple(argv)


def bridge_config(
    *,
    discovery_file: Path | None = None,
    secret_file: Path | None = None,
    token_in_discovery: bool = False,
    started_file: Path | None = None,
    launch_log: Path | None = None,
    link: str = "auto",
) -> BridgeConfig:
    """The bridge configuration behind ``--mcp-stdio``: find the app by its discovery
    file, get tokens from its auth route (``bridge.AuthRouteTokenSource``) or the discovery
    file, start it (on ``link``) when it is not running."""
    discovery_file = discovery_file or default_discovery_path(APP_NAME)
    return BridgeConfig(
        discovery_file=discovery_file,
        app_name=APP_NAME,
        token_source=AuthRouteTokenSource(AUTH_PATH, secret_file) if secret_file is not None else None,
        launch_command=server_command(
            discovery_file=discovery_file,
            secret_file=secret_file,
            token_in_discovery=token_in_discovery,
            started_file=started_file,
            link=link,
        ),
        launch_log_file=launch_log,
        launch_timeout_seconds=30.0,
    )


def _bridge_config_from_options(params: dict[str, Any]) -> BridgeConfig:
    return bridge_config(
        discovery_file=params.get("discovery_file"),
        secret_file=params.get("secret_file"),
        token_in_discovery=bool(params.get("token_in_discovery")),
        started_file=params.get("started_file"),
        launch_log=params.get("launch_log"),
        link=str(params.get("link") or "auto"),
    )


# -- the server side --------------------------------------------------------------------------


def _read_secret(path: Path) -> str:
    """The secret file's content, stripped; refused if others may read it."""
    with open(path, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        raw = handle.read(64 * 1024)
    if os.name == "posix" and mode & 0o077:
        raise PermissionError(f"the secret file {path} has mode {mode & 0o777:04o}; run: chmod 600 {path}")
    secret = raw.decode("utf-8").strip()
    if not secret:
        raise ValueError(f"the secret file {path} is empty")
    return secret


def _append_started(path: Path) -> None:
    """Append ``<pid>\\n`` (one write with O_APPEND: concurrent starts never mix lines)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, f"{os.getpid()}\n".encode("ascii"))
    finally:
        os.close(descriptor)


def _print_listening(server: AppServer) -> None:
    """Once the discovery file is written: the LISTENING line, the only line on stdout."""
    sys.stdout.write(f"LISTENING {server.url}\n")
    sys.stdout.flush()
    # Anything printed later goes to stderr, so a parent that stops reading the stdout pipe
    # can never block this process.
    sys.stdout = sys.stderr


def serve(
    *,
    port: int | None = None,
    host: str = "127.0.0.1",
    link: str = "auto",
    json_response: bool = False,
    stateless: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    log_level: str = "INFO",
    discovery_file: Path | None = None,
    secret_file: Path | None = None,
    token_in_discovery: bool = False,
    started_file: Path | None = None,
    legacy_only: bool = False,
    modern_only: bool = False,
) -> int:
    """Server mode: serve until SIGTERM/SIGINT; returns the exit status.

    The server half is the library's (``bridge.appserver.AppServer``): with
    ``link="auto"`` a Unix domain socket (Linux, macOS) or a named pipe (Windows) where
    the OS allows (a ``port`` given means TCP), else loopback TCP on ``port`` (0: a free one), the bearer-token middleware and auth route, and the discovery file written once
    uvicorn serves and removed on the way out. Without ``--secret-file`` or
    ``--token-in-discovery`` the example serves without a token, as the tests' plain
    ``--url`` bridges expect.
    """
    from bridge.appserver import AlreadyServingError, AppServer, UnsafeFileError

    # Our own root handler first: the SDK's configure_logging() (basicConfig) then leaves it alone.
    logging.basicConfig(level=log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    if started_file is not None:
        _append_started(started_file)
    if port is not None and link == "auto":
        link = "tcp"
    app = build_app(
        json_response=json_response,
        stateless=stateless,
        host=host,
        max_body_bytes=max_body_bytes,
        legacy_only=legacy_only,
        modern_only=modern_only,
        unix_socket=link != "tcp",
    )
    try:
        server = AppServer(
            app,
            discovery_file=discovery_file,
            host=host,
            port=port or 0,
            link=link,
            secret_file=secret_file,
            token_in_discovery=token_in_discovery,
            # A token is new in every process (restarting rotates it).
            require_token=secret_file is not None or token_in_discovery,
            on_listening=_print_listening,
            log_level=log_level,
            access_log=True,
        )
    except (UnsafeFileError, OSError, ValueError) as exc:
        print(f"app_server: cannot use the secret file: {exc}", file=sys.stderr)
        return 2
    try:
        url = server.bind()
    except (OSError, UnsafeFileError, AlreadyServingError) as exc:
        print(f"app_server: cannot bind ({link}): {exc}", file=sys.stderr)
        return 2
    logger.info(
        "serving %s on %s (%s%s%s%s)",
        url,
        {"unix": "a Unix domain socket", "npipe": "a named pipe"}.get(server.link, "TCP"),
        "MCP 2026-07-28 only" if modern_only else "stateless" if stateless else "stateful",
        ", MCP 2025-era only" if legacy_only else "",
        ", json responses" if json_response else "",
        ", bearer token required" if server.token is not None else "",
    )
    return server.run()


# -- the command line -------------------------------------------------------------------------


_FILE = click.Path(dir_okay=False, path_type=Path)


def _check_link(ctx: click.Context, param: click.Parameter, link: str) -> str:
    """Refuse a link this OS cannot serve, at once (in both modes: ``--mcp-stdio`` passes
    it on to the app it launches)."""
    if link == "npipe" and sys.platform != "win32":
        raise click.BadParameter("named pipes exist only on Windows; use auto, unix or tcp here")
    if link == "unix" and sys.platform == "win32":
        raise click.BadParameter("the app serves on a Unix domain socket on Linux and macOS only; use auto (a named pipe here), npipe or tcp")
    return link


@click.command(help=__doc__.split("\n\n")[0], context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Serve on TCP at this port (0 picks a free one) instead of a Unix socket or named pipe.")
@click.option("--link", type=click.Choice(LINKS), default="auto", show_default=True, callback=_check_link, help="auto: a Unix domain socket (Linux, macOS) or a named pipe (Windows), else TCP with a log line.")
@click.option("--host", type=click.Choice(LOOPBACK_HOSTS), default="127.0.0.1", show_default=True, help="Loopback address to bind.")
@click.option("--json-response", is_flag=True, help="Answer POSTs with JSON instead of SSE.")
@click.option("--stateless", is_flag=True, help="No sessions (no mcp-session-id).")
@click.option("--legacy-only", is_flag=True, help="Refuse MCP 2026-07-28 requests, like a server that predates it.")
@click.option("--modern-only", is_flag=True, help="Serve only MCP 2026-07-28: refuse initialize (-32022), like a server that dropped the handshake.")
@click.option("--max-body-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_BODY_BYTES, show_default=True, help="Request body limit in bytes.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False), default="INFO", show_default=True)
# --mcp-stdio builds the bridge's configuration from these same options.
@click.option("--discovery-file", type=_FILE, help="Publish the endpoint here (mode 0600) while serving.")
@click.option("--secret-file", type=_FILE, help="Require a bearer token, issued by POST /auth/token for this secret (created, mode 0600, with a random secret if missing). The token is new at every start.")
@click.option("--token-in-discovery", is_flag=True, help="Also put the token in the discovery file.")
@click.option("--started-file", type=_FILE, help="Append this process's pid at every start.")
@click.option("--launch-log", type=_FILE, help="With --mcp-stdio: where a launched app's output goes.")
@mcp_stdio_option(_bridge_config_from_options)
def cli(
    port: int | None,
    link: str,
    host: str,
    json_response: bool,
    stateless: bool,
    legacy_only: bool,
    modern_only: bool,
    max_body_bytes: int,
    log_level: str,
    discovery_file: Path | None,
    secret_file: Path | None,
    token_in_discovery: bool,
    started_file: Path | None,
    launch_log: Path | None,
) -> int:
    return serve(
        port=port,
        link=link,
        host=host,
        json_response=json_response,
        stateless=stateless,
        max_body_bytes=max_body_bytes,
        log_level=log_level.upper(),
        discovery_file=discovery_file,
        secret_file=secret_file,
        token_in_discovery=token_in_discovery,
        started_file=started_file,
        legacy_only=legacy_only,
        modern_only=modern_only,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (2 for a bad option)."""
    try:
        status = cli.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="app_server.py", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        return 1
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
