"""How the interop tests reach a server: directly over Streamable HTTP, or over stdio through the bridge.

Imported by the interop tests (``tests/interop/test_interop_*.py``) and by ``conformance_client.py``,
which the conformance CLI runs as a program. Standard library and the official ``mcp`` SDK only.

- ``VIA``: the two ways, ``"direct"`` (the control: the SDK's own Streamable HTTP client)
  and ``"bridge"`` (the SDK's stdio client, with the bridge as its server process).
- ``bridge_command()``: ``python -m bridge``, or the frozen executable named by
  ``MCP_APP_BRIDGE_EXE``.
- ``transport(via, url, bridge_log)``: what ``mcp.Client(...)`` is given for either way; the
  bridge's stderr (its log, at ``debug``) goes to the open text file ``bridge_log``.
"""

from __future__ import annotations

import os
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal, TextIO

from mcp import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
INTEROP_DIR = Path(__file__).resolve().parent
NODE_MODULES = INTEROP_DIR / "node_modules"

BRIDGE_EXE_VAR = "MCP_APP_BRIDGE_EXE"
"""Environment variable naming a frozen bridge executable to use instead of ``python -m bridge``."""

Via = Literal["direct", "bridge"]
VIA: tuple[Via, Via] = ("direct", "bridge")


def bridge_command() -> list[str]:
    """The command that starts the bridge: the frozen executable if configured, else this Python."""
    exe = os.environ.get(BRIDGE_EXE_VAR)
    if exe:
        return [exe]
    return [sys.executable, "-m", "bridge"]


def bridge_params(url: str, *extra_args: str) -> StdioServerParameters:
    """The bridge as an AI client starts it: ``<bridge> --url URL --log-level debug *extra_args``.

    No ``env``: the SDK then gives the process its cut-down default environment, as real
    clients do.
    """
    command = bridge_command()
    return StdioServerParameters(
        command=command[0],
        args=[*command[1:], "--url", url, "--log-level", "debug", *extra_args],
        cwd=REPO_ROOT,
    )


def transport(via: Via, url: str, bridge_log: TextIO | None = None) -> AbstractAsyncContextManager[Any]:
    """The transport an ``mcp.Client`` uses to reach `url`, directly or through the bridge."""
    if via == "direct":
        return streamable_http_client(url)
    if via == "bridge":
        return stdio_client(bridge_params(url), errlog=bridge_log if bridge_log is not None else sys.stderr)
    raise ValueError(f"unknown way to reach the server: {via!r}")
