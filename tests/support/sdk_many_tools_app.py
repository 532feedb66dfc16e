"""An official SDK (v2) server with many tools, for the tool filter and the client-limits
check (docs/usage.md, "Which tools a client sees"; docs/clients.md, "What each client sees").

Run as a script (``python tests/support/sdk_many_tools_app.py``), it serves a low-level SDK
``Server`` through the library's :class:`bridge.appserver.AppServer` on a free port, with no
token, and prints ``LISTENING http://127.0.0.1:<port>/mcp`` on stdout once it listens. Logs
go to stderr, one line ``tools/call <name>`` for every call it runs (so a test counts the
calls that reached it).

Its :data:`TOOL_COUNT` tools, in one page: ``read_00``… (annotated ``readOnlyHint: true``),
``write_00``… (``readOnlyHint: false``), :data:`MEDIUM_NAME` (52 characters, read-only) and
:data:`LONG_NAME` (70 characters, read-only: too long for Claude Code whatever the entry's
name). ``tools/call`` of any of them answers with the tool's name.

From a test: :func:`launch_many_tools_app` starts it.
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
TOOL_COUNT = 50
#: 70 characters: ``mcp__<any name>__`` makes it pass Claude Code's 64.
LONG_NAME = "read_the_whole_document_history_with_every_revision_and_its_author_now"
#: 52 characters: fits Claude Code's 64 with an entry name of at most 5.
MEDIUM_NAME = "read_the_document_outline_with_headings_and_sections"
READ_COUNT = 24

log = logging.getLogger("sdk-many-tools-app")


def launch_many_tools_app(log_path: Path) -> AppServer:
    """Start this script and wait for it to listen.

    Raises:
        RuntimeError: it exited or printed no LISTENING line in time; the message has its stderr.
    """
    return start_listening_app([sys.executable, str(SCRIPT)], log_path=log_path, scheme="http", what="the SDK many-tools app")


def tool_names() -> list[str]:
    reads = [f"read_{index:02d}" for index in range(READ_COUNT)]
    writes = [f"write_{index:02d}" for index in range(TOOL_COUNT - READ_COUNT - 2)]
    return [*reads, MEDIUM_NAME, LONG_NAME, *writes]


def read_only(name: str) -> bool:
    return name.startswith("read_")


def build_app() -> Any:
    from mcp import types
    from mcp.server.lowlevel.server import Server

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = [
            types.Tool(
                name=name,
                description=f"Answers {name}.",
                input_schema={"type": "object"},
                annotations=types.ToolAnnotations(read_only_hint=read_only(name)),
            )
            for name in tool_names()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        log.info("tools/call %s", params.name)
        return types.CallToolResult(content=[types.TextContent(type="text", text=params.name)])

    server: Server[Any] = Server("sdk-many-tools-app", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    return server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")


def main() -> int:
    return serve_until_stopped(build_app())


if __name__ == "__main__":
    sys.exit(main())
