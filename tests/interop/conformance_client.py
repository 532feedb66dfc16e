"""The client under test for the conformance suite's client scenarios.

Usage (the conformance CLI appends the scenario server's URL and sets
``MCP_CONFORMANCE_SCENARIO``)::

    python tests/interop/conformance_client.py {direct|bridge} URL

One client logic, two ways to the server: ``direct`` is the official Python SDK's own
Streamable HTTP client (the control); ``bridge`` is the same SDK client speaking stdio to
``python -m bridge --url URL`` (or the frozen executable, ``MCP_APP_BRIDGE_EXE``). The
bridge's log goes to this program's stderr, which the CLI saves as ``stderr.txt``.

The client connects with ``mode="legacy"`` (the initialize handshake): every client scenario
of the pinned suite is a 2025-era one, and its scenario servers answer any unknown method,
``server/discover`` included, with an empty result rather than an error.

What it does per scenario (what the scenario's server checks for):

- ``initialize``: the handshake, then ``tools/list``.
- ``tools_call``: ``add_numbers {a: 5, b: 3}``.
- ``elicitation-sep1034-client-defaults``: calls the scenario's tool; the elicitation handler
  accepts with each field's schema ``default`` (SEP-1034: the client applies defaults).
- ``sse-retry``: calls ``test_reconnection``, whose reply arrives after the server cut the
  POST's SSE stream (SEP-1699: reconnect after ``retry`` ms with ``Last-Event-ID``).
- anything else (the ``auth/*`` scenarios): the handshake, ``tools/list`` and a call of the
  first tool, with no OAuth provider: the bridge has no OAuth flow, so neither has the control.

Exit status 0 when every step worked, 1 with the error on stderr otherwise. Every step is bounded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.types import ElicitResult, Implementation

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as under pytest
from interop.peers import VIA, transport  # noqa: E402

STEP_TIMEOUT_SECONDS = 15.0
"""Bound on each request (``read_timeout_seconds``): a lost server request costs this long."""
SCENARIO_TIMEOUT_SECONDS = 60.0
"""Bound on the whole scenario, shutdown included (the CLI's own timeout is longer, see the test).
Generous: the CLI runs a suite's clients in parallel, on a machine that may be loaded."""


async def _accept_with_defaults(context: Any, params: Any) -> ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    content = {name: spec["default"] for name, spec in schema.get("properties", {}).items() if "default" in spec}
    return ElicitResult(action="accept", content=content)


async def run(via: str, url: str, scenario: str) -> None:
    client = Client(
        transport(via, url),  # type: ignore[arg-type]
        mode="legacy",
        read_timeout_seconds=STEP_TIMEOUT_SECONDS,
        elicitation_callback=_accept_with_defaults,
        client_info=Implementation(name="mcp-app-bridge-interop", version="1.0.0"),
    )
    with anyio.fail_after(SCENARIO_TIMEOUT_SECONDS):
        async with client:
            tools = (await client.list_tools()).tools
            print(f"{via}: {scenario}: server {client.server_info}, tools {[tool.name for tool in tools]}", file=sys.stderr)
            if scenario == "initialize":
                return
            if scenario == "tools_call":
                name, arguments = "add_numbers", {"a": 5, "b": 3}
            elif scenario == "elicitation-sep1034-client-defaults":
                name, arguments = "test_client_elicitation_defaults", {}
            elif scenario == "sse-retry":
                name, arguments = "test_reconnection", {}
            elif tools:
                name, arguments = tools[0].name, {}
            else:
                return
            result = await client.call_tool(name, arguments)
            print(f"{via}: {scenario}: {name} -> {result.model_dump(mode='json', exclude_none=True)}", file=sys.stderr)
            if result.is_error:
                raise RuntimeError(f"{name} returned an error result")


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in VIA:
        print(f"usage: {argv[0]} {{{'|'.join(VIA)}}} URL", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        anyio.run(run, argv[1], argv[2], scenario)
    except BaseException as exc:  # report every failure, exception groups included, as one line
        print(f"{argv[1]}: {scenario}: failed: {type(exc).__name__}: {exc!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
