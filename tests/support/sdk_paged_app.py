"""An official SDK (v2) server that lists its tools in pages, as a large app does.

Run as a script (``python tests/support/sdk_paged_app.py``), it serves a low-level SDK
``Server`` through the library's :class:`bridge.appserver.AppServer` on a free port, with no
token, and prints ``LISTENING http://127.0.0.1:<port>/mcp`` on stdout once it listens. Logs
go to stderr, one line ``tools/list cursor=<cursor>`` for every listing.

Its ``tools/list`` serves :data:`TOOL_COUNT` tools named ``tool_00``… in pages of
:data:`PAGE_SIZE`; each page but the last carries a ``nextCursor`` (MCP
server/utilities/pagination), the offset of the next page as text. ``tools/call`` of any
listed tool answers with the tool's name.

From a test: :func:`launch_sdk_paged_app` starts it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # (run as a script: tests/ is not on sys.path then)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.apps import AppServer, serve_until_stopped, start_listening_app

SCRIPT = Path(__file__).resolve()
#: How many tools the app has, and how many one page holds: three pages.
TOOL_COUNT = 25
PAGE_SIZE = 10

log = logging.getLogger("sdk-paged-app")


def launch_sdk_paged_app(log_path: Path) -> AppServer:
    """Start this script and wait for it to listen.

    Raises:
        RuntimeError: it exited or printed no LISTENING line in time; the message has its stderr.
    """
    return start_listening_app([sys.executable, str(SCRIPT)], log_path=log_path, scheme="http", what="the SDK paged app")


def tool_names() -> list[str]:
    return [f"tool_{index:02d}" for index in range(TOOL_COUNT)]


def build_app() -> Any:
    from mcp import types
    from mcp.server.lowlevel.server import Server

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        log.info("tools/list cursor=%s", cursor)
        start = int(cursor) if cursor else 0
        names = tool_names()[start : start + PAGE_SIZE]
        tools = [types.Tool(name=name, description=f"Answers {name}.", input_schema={"type": "object"}) for name in names]
        after = start + PAGE_SIZE
        return types.ListToolsResult(tools=tools, next_cursor=str(after) if after < TOOL_COUNT else None)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    server: Server[Any] = Server("sdk-paged-app", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    return server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")


def main() -> int:
    return serve_until_stopped(build_app())


if __name__ == "__main__":
    sys.exit(main())
