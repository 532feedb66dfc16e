"""``mcp-app-bridge demo-app``: a tiny stand-in for a desktop app, to try a client's connection.

Someone connecting an AI client often has no app at hand to test against. This command is
one: a minimal MCP server over Streamable HTTP (MCP 2025-06-18, "Transports") on
``127.0.0.1``, standard library only (no MCP SDK, no uvicorn), that behaves as the apps the
bridge is made for:

- it listens on a free port (``--port 0``, the default) at ``/mcp``;
- it publishes a discovery file (``{"url", "pid", "token"}``, mode 0600; docs/discovery.md)
  at the default place for ``--app-name`` (``DemoApp`` unless given), so that
  ``mcp-app-bridge --app-name DemoApp`` finds it, and removes it when it stops (Ctrl-C,
  SIGTERM);
- every request needs ``Authorization: Bearer <token>`` (401 and ``WWW-Authenticate:
  Bearer`` otherwise), a token new at every start and found by the bridge in the
  discovery file; ``Host`` and ``Origin`` must be loopback (403 otherwise: DNS rebinding);
- it answers each POSTed JSON-RPC request with one ``application/json`` reply, a
  notification or response with 202, and GET and DELETE with 405 (no server-initiated
  stream, no session): the spec's simplest server.

MCP methods: ``initialize`` (any requested protocol version this server knows is echoed,
else ``2025-06-18``), ``ping``, ``tools/list`` and ``tools/call`` with two tools, ``echo``
(the text back) and ``add`` (the sum of two numbers); anything else is a JSON-RPC error.

Bounds: a request head or body must arrive within :data:`SOCKET_TIMEOUT_SECONDS` of each
read; a body of at most :data:`MAX_BODY_BYTES` (413 beyond). It serves until stopped.
Nothing of this module is loaded when the bridge serves.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from .._version import __version__
from ..app.discovery import (
    DiscoveryError,
    default_discovery_path,
    pid_is_alive,
    read_discovery_file,
    remove_discovery_file,
    write_discovery_file,
)

__all__ = ["demo_app", "DemoServer"]

SOCKET_TIMEOUT_SECONDS = 10.0
"""Bound on each read of a request (head and body) and each write of a reply."""

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body accepted (413 beyond)."""

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The MCP versions this server answers in; the first one the client asks for among these."""

DEFAULT_PROTOCOL_VERSION = "2025-06-18"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
]

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class _MethodError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def answer(app_name: str, method: str, params: Any) -> Any:
    """The result of one MCP request. Raises :class:`_MethodError` for a JSON-RPC error."""
    if method == "initialize":
        asked = params.get("protocolVersion") if isinstance(params, dict) else None
        version = asked if asked in PROTOCOL_VERSIONS else DEFAULT_PROTOCOL_VERSION
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": app_name, "version": __version__},
            "instructions": f"{app_name} is mcp-app-bridge's demo app: try the echo tool.",
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name = params.get("name") if isinstance(params, dict) else None
        arguments = params.get("arguments") if isinstance(params, dict) else None
        arguments = arguments if isinstance(arguments, dict) else {}
        if name == "echo" and isinstance(arguments.get("text"), str):
            return {"content": [{"type": "text", "text": arguments["text"]}], "isError": False}
        if name == "add" and all(isinstance(arguments.get(k), (int, float)) and not isinstance(arguments.get(k), bool) for k in "ab"):
            return {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}], "isError": False}
        if name in ("echo", "add"):
            return {"content": [{"type": "text", "text": f"bad arguments for {name}"}], "isError": True}
        raise _MethodError(-32602, f"unknown tool: {name!r}")
    raise _MethodError(-32601, f"method not found: {method}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the head and the body go out in two writes
    timeout = SOCKET_TIMEOUT_SECONDS
    server: DemoServer
    server_version = "mcp-app-bridge-demo-app"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if self.server.verbose:
            sys.stderr.write("demo-app: " + (format % args) + "\n")

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _json(self, message: dict[str, Any]) -> None:
        self._send(200, json.dumps(message).encode("utf-8"), {"Content-Type": "application/json"})

    def _allowed(self) -> bool:
        """Path, Host, Origin and token; answers (and returns False) when one is wrong."""
        if urlsplit(self.path).path != "/mcp":
            self._send(404)
            return False
        try:
            host = urlsplit("//" + (self.headers.get("Host") or "")).hostname
            origin = self.headers.get("Origin")
            origin_host = urlsplit(origin).hostname if origin is not None else "localhost"
        except ValueError:
            host = origin_host = None
        if host not in _LOOPBACK_HOSTS or origin_host not in _LOOPBACK_HOSTS:
            self._send(403)
            return False
        given = self.headers.get("Authorization") or ""
        if not (given.startswith("Bearer ") and secrets.compare_digest(given[7:].encode(), self.server.token.encode())):
            self._send(401, headers={"WWW-Authenticate": "Bearer"})
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self._allowed():
            self._send(405, headers={"Allow": "POST"})

    do_DELETE = do_GET

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            self._send(411)
            return
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._send(413)
            return
        body = self.rfile.read(length)
        if not self._allowed():
            return
        try:
            message = json.loads(body)
        except ValueError:
            self._json({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            return
        if not isinstance(message, dict):
            self._json({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "one JSON-RPC message per POST"}})
            return
        if "method" not in message or "id" not in message:  # a notification or a response
            self._send(202)
            return
        try:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": answer(self.server.app_name, str(message["method"]), message.get("params"))}
        except _MethodError as exc:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": exc.code, "message": str(exc)}}
        self._json(reply)


class DemoServer(ThreadingHTTPServer):
    """The demo app's HTTP server on ``127.0.0.1:port`` (0: a free one), one thread per connection."""

    daemon_threads = True

    def __init__(self, app_name: str, port: int = 0, *, verbose: bool = False) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.app_name = app_name
        self.token = secrets.token_urlsafe(32)
        self.verbose = verbose

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/mcp"


def _refuse_second_instance(path: Path) -> None:
    try:
        current = read_discovery_file(path)
    except DiscoveryError:
        return
    except OSError:
        return
    if current.pid is not None and current.pid != os.getpid() and pid_is_alive(current.pid):
        raise click.ClickException(
            f"an app already publishes {path} (pid {current.pid}, {current.url}): stop it first, or give another --app-name"
        )


@click.command("demo-app", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--app-name", default="DemoApp", show_default=True, metavar="NAME", help="The name the bridge finds it by (--app-name NAME).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="The port on 127.0.0.1 (0: a free one).")
@click.option("--discovery-file", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH", help="Where to publish it (default: the one of --app-name).")
@click.option("--verbose", is_flag=True, help="Log each HTTP request on stderr.")
def demo_app(app_name: str, port: int, discovery_file: Path | None, verbose: bool) -> None:
    """Run a tiny MCP app on 127.0.0.1 to try a client's connection against.

    It publishes its discovery file, so an entry with --app-name NAME (DemoApp by default)
    finds it and its token. Tools: echo and add. Ctrl-C stops it and removes the file.

    \b
        mcp-app-bridge demo-app
        mcp-app-bridge check --app-name DemoApp
        mcp-app-bridge config install --client claude-code --name demo --app-name DemoApp
    """
    path = discovery_file or default_discovery_path(app_name)
    _refuse_second_instance(path)
    try:
        server = DemoServer(app_name, port, verbose=verbose)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    for name in ("SIGTERM", "SIGINT", "SIGBREAK", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), on_signal)
    try:
        try:
            write_discovery_file(path, url=server.url, token=server.token)
        except (DiscoveryError, OSError) as exc:
            raise click.ClickException(f"cannot publish the discovery file {path}: {exc}") from None
        click.echo(f"{app_name} (mcp-app-bridge's demo app) serves {server.url}")
        click.echo(f"discovery file: {path}")
        click.echo("try it:")
        option = f"--app-name {app_name}" if discovery_file is None else f"--discovery-file {path}"
        click.echo(f"  mcp-app-bridge check {option}")
        click.echo(f"  mcp-app-bridge config install --client CLIENT --name demo {option}")
        click.echo("Ctrl-C stops it.", nl=True)
        sys.stdout.flush()
        if not stop.is_set():
            server.serve_forever(poll_interval=0.5)
    finally:
        remove_discovery_file(path)
        server.server_close()
