"""The reference "everything" server, the same scripted session direct and through the bridge.

``@modelcontextprotocol/server-everything`` (pinned in ``tests/interop/package.json``) runs in
its Streamable HTTP mode on 127.0.0.1. The official Python SDK's ``mcp.Client`` runs the
session of ``tests/interop/everything_session.py`` twice: over its own Streamable HTTP client
(the control) and over stdio through the bridge (``python -m bridge --url …``, or the frozen
executable named by ``MCP_APP_BRIDGE_EXE``). The two records must be equal step by step.

Both of the SDK's connect modes are run:

- ``legacy``: the initialize handshake at the newest handshake-era version (2025-11-25);
- ``auto``: the SDK first probes ``server/discover`` (2026-07-28); this server predates that
  era, refuses the probe, and the SDK falls back to the handshake. Through the bridge the
  probe goes to the server and its refusal comes back, so the fallback happens the same way.

Neither mode is the older HTTP+SSE transport (2024-11-05), which the bridge does not speak.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from interop.everything_session import STEPS, client_options, handlers, run_session
from interop.harness import NodeServer, require_packages, side_by_side, start_everything
from interop.peers import Via, transport
from mcp import Client

pytestmark = pytest.mark.interop

SESSION_TIMEOUT_SECONDS = 240.0
"""Bound on one whole session, connect and close included (each step has its own, 15 s)."""




@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    require_packages()
    server = start_everything(tmp_path_factory.mktemp("everything") / "server.log")
    try:
        yield server
    finally:
        server.stop()


async def run(via: Via, mode: str, url: str, bridge_log: Path) -> list[tuple[str, Any]]:
    """The session's record; the bridge's stderr (its log at ``debug``) goes to `bridge_log`."""
    peer = handlers()
    with open(bridge_log, "w", encoding="utf-8") as log:
        with anyio.fail_after(SESSION_TIMEOUT_SECONDS):
            async with Client(transport(via, url, log), mode=mode, **client_options(peer)) as client:
                handshake = {
                    "discover result": client.session.discover_result is not None,
                    "initialize result": client.session.initialize_result is not None,
                    "protocol": client.protocol_version,
                }
                return [("handshake", handshake), *await run_session(client, peer)]


def _text(summary: Any) -> str:
    return json.dumps(summary, ensure_ascii=False, sort_keys=True)


@pytest.mark.timeout(300)
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_everything_session_through_the_bridge_equals_direct(everything: NodeServer, mode: str, tmp_path: Path) -> None:
    """Every tool (sampling, elicitation and roots answered by the client), progress, logs,
    subscriptions, prompts, completion, a task, 12 concurrent calls and a cancel: the bridge's
    record equals the direct one, step by step."""
    records: dict[Via, list[tuple[str, Any]]] = {}

    async def one(via: Via) -> None:
        records[via] = await run(via, mode, everything.url, tmp_path / f"{via}.log")  # direct.log stays empty

    async with anyio.create_task_group() as group:  # two sessions of their own, at once
        for via in ("direct", "bridge"):
            group.start_soon(one, via)
    direct, bridged = records["direct"], records["bridge"]

    table = side_by_side(
        f"server-everything, mcp.Client mode={mode!r}: {len(direct)} steps",
        [(name, _text(left), _text(right)) for (name, left), (_, right) in zip(direct, bridged, strict=True)],
    )
    print(table)
    failed_direct = [name for name, summary in direct if isinstance(summary, dict) and "error" in summary]
    assert not failed_direct, f"the control itself failed at {failed_direct}:\n{table}"
    assert [name for name, _ in direct] == ["handshake", *(name for name, _ in STEPS)]
    differing = [(name, left, right) for (name, left), (_, right) in zip(direct, bridged, strict=True) if left != right]
    bridge_log = (tmp_path / "bridge.log").read_text(encoding="utf-8", errors="replace")
    assert not differing, (
        "the bridge differs from direct:\n"
        + "\n".join(f"- {name}\n  direct: {_text(left)}\n  bridge: {_text(right)}" for name, left, right in differing)
        + f"\n\nbridge log (tail):\n{bridge_log[-4000:]}"
    )
    assert "Traceback" not in bridge_log, bridge_log[-4000:]
