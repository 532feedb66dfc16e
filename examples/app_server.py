"""A small stand-in for a desktop app's MCP server (Streamable HTTP on loopback).

This is what the bridge talks to in the demo and in the process-level tests: a real
MCP server built with the official SDK (`mcp` 2.3, `MCPServer`), served by uvicorn on
``127.0.0.1`` at ``/mcp``.

Run it::

    python examples/app_server.py --port 0 [--host 127.0.0.1] [--json-response] [--stateless]

``--port 0`` picks a free port. Once the socket accepts connections the server prints
exactly one line to **stdout** and flushes it::

    LISTENING http://127.0.0.1:<port>/mcp

Everything else (SDK logs, uvicorn's access log such as ``"DELETE /mcp HTTP/1.1" 200``)
goes to **stderr**. Sessions are on (stateful) unless ``--stateless`` is given. Stop it
with SIGTERM/SIGINT.

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
``app.router.lifespan_context``), ``main(argv)`` runs the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import logging
import os
import socket
import sys
import time
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.applications import Starlette

__all__ = ["DEFAULT_MAX_BODY_BYTES", "LOOPBACK_HOSTS", "build_app", "build_server", "main"]

LOOPBACK_HOSTS = ("127.0.0.1", "::1")
"""Hosts this example agrees to bind. It is a local app stand-in, never a public server."""

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
"""Request body limit in bytes. The SDK default is 4 MiB; tests send 8 MiB requests."""

_LARGE_PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
"""64 printable ASCII bytes, repeated by `large` (nothing that JSON must escape)."""

_STARTED_AT = time.time()

logger = logging.getLogger("app_server")


def build_server(*, name: str = "demo-app", mode: str = "stateful") -> MCPServer:
    """Build the MCP server with the demo tools registered.

    Args:
        name: Server name reported in the ``initialize`` result.
        mode: Free text reported by ``app_info`` (e.g. ``"stateful"``, ``"stateless json"``).
    """
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

    @mcp.tool(description="Report `steps` progress notifications, `delay_seconds` apart, then answer.")
    async def progress(ctx: Context, steps: int = 4, delay_seconds: float = 0.1) -> str:
        for step in range(1, steps + 1):
            await anyio.sleep(delay_seconds)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"completed {steps} steps"

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
    """
    mode = ("stateless" if stateless else "stateful") + (" json" if json_response else " sse")
    server = build_server(mode=mode)
    return server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=json_response,
        stateless_http=stateless,
        max_request_body_size=max_body_bytes,
        session_idle_timeout=session_idle_timeout,
        host=host,
    )


def _log_config(level: str) -> dict[str, Any]:
    """uvicorn's default logging config with every handler (access log included) on stderr."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    for formatter in config["formatters"].values():
        formatter["use_colors"] = False
    config["loggers"]["uvicorn"]["level"] = level
    return config


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--host", default="127.0.0.1", choices=LOOPBACK_HOSTS, help="loopback address to bind")
    parser.add_argument("--json-response", action="store_true", help="answer POSTs with JSON instead of SSE")
    parser.add_argument("--stateless", action="store_true", help="no sessions (no mcp-session-id)")
    parser.add_argument(
        "--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="request body limit in bytes"
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


async def _serve(server: uvicorn.Server, sock: socket.socket, url: str) -> None:
    """Run uvicorn on `sock`; print the LISTENING line once it accepts connections."""
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():  # startup failed (uvicorn logged why) or a signal arrived
            await task
            return
        await asyncio.sleep(0.01)
    sys.stdout.write(f"LISTENING {url}\n")
    sys.stdout.flush()
    # stdout carries only the LISTENING line: anything printed later goes to stderr, so a
    # parent that stops reading the stdout pipe can never block this process.
    sys.stdout = sys.stderr
    await task


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _parse_args(argv)
    # Our own root handler first: the SDK's configure_logging() (basicConfig) then leaves it alone.
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if sys.platform != "win32":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"app_server: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        sock.close()
        return 2
    sock.listen(128)
    sock.set_inheritable(False)
    port = sock.getsockname()[1]
    url = f"http://{'[' + args.host + ']' if family == socket.AF_INET6 else args.host}:{port}/mcp"

    app = build_app(
        json_response=args.json_response,
        stateless=args.stateless,
        host=args.host,
        max_body_bytes=args.max_body_bytes,
    )
    config = uvicorn.Config(
        app,
        log_config=_log_config(args.log_level),
        log_level=args.log_level.lower(),
        access_log=True,
        # Open SSE streams must not keep a terminated app alive for long.
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    logger.info("serving %s (%s%s)", url, "stateless" if args.stateless else "stateful",
                ", json responses" if args.json_response else "")
    try:
        asyncio.run(_serve(server, sock, url))
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0 if server.started or server.should_exit else 1


if __name__ == "__main__":
    sys.exit(main())
