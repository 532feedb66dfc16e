"""An official SDK (v2) server that speaks only the legacy era, with tools that talk back.

Run as a script (``python tests/support/sdk_legacy_app.py``), it serves an ``MCPServer``
through the library's :class:`bridge.appserver.AppServer` on a free port, with no token,
refusing every 2026-07-28 request without a session (400 "Missing session ID", as a server
that predates that revision does), and prints ``LISTENING http://127.0.0.1:<port>/mcp``
on stdout once it listens. Logs go to stderr. Its tools:

- ``ask``: elicits a name (``elicitation/create`` on the call's own stream) and greets it;
- ``roots``: asks for the client's roots (``roots/list``, which the SDK sends with no
  related request: on the GET stream) and names them;
- ``grow``: sends ``notifications/tools/list_changed`` (on the GET stream) and answers.

From a test: :func:`launch_sdk_legacy_app` starts it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # (run as a script: tests/ is not on sys.path then)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from support.apps import AppServer, serve_until_stopped, start_listening_app

SCRIPT = Path(__file__).resolve()
_LEGACY_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})


def launch_sdk_legacy_app(log_path: Path) -> AppServer:
    """Start this script and wait for it to listen.

    Raises:
        RuntimeError: it exited or printed no LISTENING line in time; the message has its stderr.
    """
    return start_listening_app([sys.executable, str(SCRIPT)], log_path=log_path, scheme="http", what="the SDK legacy-only app")


class LegacyOnly:
    """ASGI middleware: a 2026-07-28 request without a session gets 400 "Missing session ID"."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
            if version and version not in _LEGACY_VERSIONS and b"mcp-session-id" not in headers:
                from starlette.responses import JSONResponse

                refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
                await JSONResponse(refusal, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Name(BaseModel):
    """What ``ask`` elicits."""

    name: str


def build_app() -> Any:
    import warnings

    server = MCPServer("sdk-legacy-app", version="1.0.0")

    @server.tool(description="Ask the user for a name, then greet it.")
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", Name)
        return f"hello {answer.data.name}" if answer.action == "accept" and answer.data else f"no name ({answer.action})"

    @server.tool(description="Name the client's roots.")
    async def roots(ctx: Context) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            listed = await ctx.request_context.session.list_roots()
        return " ".join(str(root.uri) for root in listed.roots)

    @server.tool(description="Announce that the tool list changed.")
    async def grow(ctx: Context) -> str:
        await ctx.request_context.session.send_tool_list_changed()
        return "grown"

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    app.add_middleware(LegacyOnly)
    return app


def main() -> int:
    return serve_until_stopped(build_app())


if __name__ == "__main__":
    sys.exit(main())
