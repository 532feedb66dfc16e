# mypy: ignore-errors
# (It runs with the SDK v1.x of its own venv; mypy here would check it against the v2 SDK.)
"""The official MCP Python SDK v1.x client (a 2025-era client: ``initialize``, a session),
run by ``test_eras_modern.py`` with the Python of a throwaway venv that has ``mcp==1.27.*``.

``python sdk_v1_client.py '<bridge argv as JSON>'``: starts the bridge over stdio, then
initialize, tools/list, tools/call ``progress`` (progress callback), ``ask_name`` (answers
the elicitation with the name "Ada"), ``add_tool`` (waits for
``notifications/tools/list_changed``) and lists the tools again. Prints one JSON object with
what it saw on its stdout, the last line.
"""

import json
import sys
from datetime import timedelta

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(argv: list) -> dict:
    seen: dict = {"progress": [], "elicited": [], "list_changed": 0}
    changed = anyio.Event()

    async def on_elicit(context, params):  # noqa: ANN001 (the v1 SDK's callback)
        seen["elicited"].append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_message(message) -> None:  # noqa: ANN001
        if isinstance(message, types.ServerNotification) and isinstance(message.root, types.ToolListChangedNotification):
            seen["list_changed"] += 1
            changed.set()

    async def on_progress(progress: float, total, message) -> None:  # noqa: ANN001
        seen["progress"].append(progress)

    params = StdioServerParameters(command=argv[0], args=argv[1:])
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write):
            async with ClientSession(
                read, write, read_timeout_seconds=timedelta(seconds=30), elicitation_callback=on_elicit, message_handler=on_message
            ) as session:
                init = await session.initialize()
                seen["protocol_version"] = init.protocolVersion
                seen["server"] = init.serverInfo.name
                seen["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)
                result = await session.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
                seen["progress_result"] = result.content[0].text
                result = await session.call_tool("ask_name", {})
                seen["ask_result"] = result.content[0].text
                await session.call_tool("add_tool", {"name": "fresh"})
                with anyio.fail_after(10):
                    await changed.wait()
                seen["tools_after"] = sorted(tool.name for tool in (await session.list_tools()).tools)
    return seen


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, json.loads(sys.argv[1]))), flush=True)
