"""An MCP server on the official SDK v2 (``mcp`` 2.3) that serves only MCP 2026-07-28, for
the era-translation process tests: ``python tests/support/modern_only_app.py`` prints
``LISTENING http://127.0.0.1:<port>/mcp`` once it accepts connections (through
``bridge.appserver.AppServer``, with no token) and serves until SIGTERM.

Its tools use what the 2026-07-28 revision carries differently from 2025-11-25:

- ``progress(steps)``: ``notifications/progress`` on the request's stream;
- ``ask_name()``: elicits a name (a ``Resolve``/``Elicit`` dependency: the SDK answers a
  2026-07-28 request with an ``input_required`` result, SEP-2322, multi round-trip requests);
- ``add_tool(name)``: registers a tool and publishes ``notifications/tools/list_changed``
  to ``subscriptions/listen`` streams.

``initialize`` and every other request without a 2026-07-28 ``MCP-Protocol-Version`` are
refused with -32022 (``examples/app_server.py``'s ``ModernOnlyMiddleware``).
"""

# (no ``from __future__ import annotations``: the SDK reads the tools' annotations at run time)
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support.apps


class Name(BaseModel):
    name: str


def build() -> Any:
    from app_server import ModernOnlyMiddleware

    server = MCPServer("modern-only-app", version="2.0.0", instructions="Serves MCP 2026-07-28 only.")

    def ask(ctx: Context) -> Elicit[Name]:
        return Elicit("What is your name?", Name)

    async def ask_name(who: Annotated[Name, Resolve(ask)]) -> str:
        return f"hello, {who.name}"

    server.tool(description="Ask the user's name (elicitation), then greet.")(ask_name)

    async def progress(ctx: Context, steps: int = 3) -> str:
        for step in range(1, steps + 1):
            await anyio.sleep(0.05)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return f"completed {steps} steps"

    server.tool(description="Report progress, then answer.")(progress)

    async def add_tool(ctx: Context, name: str) -> str:
        async def added() -> str:
            return f"I am {name}"

        server.tool(name=name, description="Added at run time.")(added)
        await ctx.notify_tools_changed()
        return f"added {name}"

    server.tool(description="Register a tool named `name`; the tool list changes.")(add_tool)

    @server.tool(description="Return the text unchanged.")
    async def echo(text: str) -> str:
        return text

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    app.add_middleware(ModernOnlyMiddleware)
    return app


def main() -> int:
    from support.apps import serve_until_stopped

    return serve_until_stopped(build(), log_level="warning", access_log=False)


if __name__ == "__main__":
    sys.exit(main())
