"""The client under test for the conformance suite's client scenarios.

Usage (the conformance CLI appends the scenario server's URL and sets
``MCP_CONFORMANCE_SCENARIO``, ``MCP_CONFORMANCE_PROTOCOL_VERSION`` and, for some scenarios,
``MCP_CONFORMANCE_CONTEXT``)::

    python tests/interop/conformance_client.py {direct|bridge} URL

One client logic, two ways to the server: ``direct`` is the official Python SDK's own
Streamable HTTP client (the control); ``bridge`` is the same SDK client speaking stdio to
``python -m bridge --url URL`` (or the frozen executable, ``MCP_APP_BRIDGE_EXE``). The
bridge's log goes to this program's stderr, which the CLI saves as ``stderr.txt``.

The era follows the revision the CLI runs (``MCP_CONFORMANCE_PROTOCOL_VERSION``): for a
dated revision up to 2025-11-25 the client connects with ``mode="legacy"`` (the initialize
handshake); for 2026-07-28 with ``mode="auto"``, which probes ``server/discover`` and, on
``-32022`` (unsupported version), probes again at a version the server names. The
negotiated version must be the one asked for, else the run fails: a silent fallback to
the handshake would test the wrong era.

What it does per scenario (what the scenario's server checks for):

- ``initialize``: the handshake, then ``tools/list``.
- ``tools_call``: ``add_numbers {a: 5, b: 3}``.
- ``elicitation-sep1034-client-defaults``: calls the scenario's tool; the elicitation handler
  accepts with each field's schema ``default`` (SEP-1034: the client applies defaults).
- ``sse-retry``: calls ``test_reconnection``, whose reply arrives after the server cut the
  POST's SSE stream (SEP-1699: reconnect after ``retry`` ms with ``Last-Event-ID``).
- ``request-metadata``: the probe and ``tools/list``; the server checks each request's
  ``_meta`` and ``MCP-Protocol-Version`` (SEP-2575), and refuses the first with ``-32022``.
- ``http-standard-headers``: every tool, resource and prompt listed is called, read or got,
  so that ``Mcp-Method`` and ``Mcp-Name`` are checked on each (SEP-2243).
- ``http-custom-headers``: the calls the scenario gives in ``MCP_CONFORMANCE_CONTEXT``
  (``toolCalls``), whose arguments go into ``Mcp-Param-*`` headers (SEP-2243).
- ``http-invalid-tool-headers``: calls every tool ``tools/list`` gave; the tools with invalid
  ``x-mcp-header`` annotations must have been left out of that list.
- ``sep-2322-client-request-state``: calls each tool; the server answers with
  ``input_required`` (an elicitation), and the SDK retries with the answers and the
  ``requestState`` (SEP-2322).
- ``json-schema-ref-no-deref``: ``tools/list`` only (the client must not fetch the
  ``$ref`` URL).
- ``json-schema-2020-12-preservation``: sends the focal tool's ``inputSchema`` back through
  the echo tool.
- anything else (the ``auth/*`` scenarios): the handshake, ``tools/list`` and a call of the
  first tool, with no OAuth provider: the bridge has no OAuth flow, so neither has the control.

Exit status 0 when every step worked, 1 with the error on stderr otherwise. Every step is bounded.
"""

from __future__ import annotations

import json
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
MODERN_VERSION = "2026-07-28"
"""The stateless revision: a run at it connects with ``mode="auto"`` and must negotiate it."""


async def _accept_with_defaults(context: Any, params: Any) -> ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    content = {name: spec["default"] for name, spec in schema.get("properties", {}).items() if "default" in spec}
    return ElicitResult(action="accept", content=content)


def _calls(scenario: str, tools: list[Any], context: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``tools/call``s to make, as ``(name, arguments)``."""
    if "toolCalls" in context:
        return [(call["name"], call.get("arguments") or {}) for call in context["toolCalls"]]
    if scenario == "initialize" or scenario == "request-metadata" or scenario == "json-schema-ref-no-deref":
        return []
    if scenario == "tools_call":
        return [("add_numbers", {"a": 5, "b": 3})]
    if scenario == "elicitation-sep1034-client-defaults":
        return [("test_client_elicitation_defaults", {})]
    if scenario == "sse-retry":
        return [("test_reconnection", {})]
    if scenario == "json-schema-2020-12-preservation":
        focal = next(tool for tool in tools if tool.name == "json_schema_2020_12_tool")
        return [("json_schema_echo", {"schema": focal.input_schema})]
    if scenario in ("http-standard-headers", "http-invalid-tool-headers", "sep-2322-client-request-state"):
        return [(tool.name, {}) for tool in tools]
    return [(tools[0].name, {})] if tools else []


async def run(via: str, url: str, scenario: str, version: str, context: dict[str, Any]) -> None:
    modern = version == MODERN_VERSION
    client = Client(
        transport(via, url),  # type: ignore[arg-type]
        mode="auto" if modern else "legacy",
        read_timeout_seconds=STEP_TIMEOUT_SECONDS,
        elicitation_callback=_accept_with_defaults,
        client_info=Implementation(name="mcp-app-bridge-interop", version="1.0.0"),
        cache=None,
    )
    say = f"{via}: {scenario}:"
    with anyio.fail_after(SCENARIO_TIMEOUT_SECONDS):
        async with client:
            if modern and client.protocol_version != MODERN_VERSION:
                raise RuntimeError(f"negotiated {client.protocol_version}, not {MODERN_VERSION}")
            tools = (await client.list_tools()).tools
            print(f"{say} {client.protocol_version}, server {client.server_info}, tools {[tool.name for tool in tools]}", file=sys.stderr)
            for name, arguments in _calls(scenario, tools, context):
                result = await client.call_tool(name, arguments)
                print(f"{say} {name} -> {result.model_dump(mode='json', exclude_none=True)}", file=sys.stderr)
                if result.is_error:
                    raise RuntimeError(f"{name} returned an error result")
            if scenario == "http-standard-headers":
                for resource in (await client.list_resources()).resources:
                    await client.read_resource(str(resource.uri))
                for prompt in (await client.list_prompts()).prompts:
                    await client.get_prompt(prompt.name)
                print(f"{say} resources read and prompts got", file=sys.stderr)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in VIA:
        print(f"usage: {argv[0]} {{{'|'.join(VIA)}}} URL", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    try:
        anyio.run(run, argv[1], argv[2], scenario, version, context)
    except BaseException as exc:  # report every failure, exception groups included, as one line
        print(f"{argv[1]}: {scenario}: failed: {type(exc).__name__}: {exc!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
