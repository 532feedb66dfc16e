"""The MCP Inspector's CLI with the bridge as its stdio server, beside the same call made direct.

``@modelcontextprotocol/inspector-cli`` (pinned in ``tests/interop/package.json``; the
TypeScript SDK's client) runs one method per process: with the bridge's command line as its
target it starts the bridge over stdio (``python -m bridge --url …``, or the frozen executable
named by ``MCP_APP_BRIDGE_EXE``); with the URL as its target it speaks Streamable HTTP to the
same "everything" server itself. Each method's JSON output must be the same both ways.

Two quirks of the pinned CLI, worked around here: it looks for its own ``package.json`` as
``../package.json`` relative to the current folder, so it runs from its ``build`` folder;
and it takes options it knows (``--log-level``, ``--header``, ``--transport``) out of the
target's command line, so the bridge gets ``--log-file`` for its log and nothing else it knows.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from interop.harness import INSPECTOR_CLI, NODE, NodeServer, node_env, require_packages, side_by_side, start_everything
from interop.peers import VIA, Via, bridge_command

pytestmark = pytest.mark.interop

CLI_TIMEOUT_SECONDS = 60.0
"""Bound on one Inspector CLI run (it starts, connects, calls one method and exits)."""

METHODS: dict[str, tuple[str, ...]] = {
    "tools/list": ("--method", "tools/list"),
    "tools/call": ("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=through the Inspector: Grüße 🌍"),
    "resources/list": ("--method", "resources/list"),
    "prompts/list": ("--method", "prompts/list"),
}


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    require_packages()
    server = start_everything(tmp_path_factory.mktemp("everything") / "server.log")
    try:
        yield server
    finally:
        server.stop()


def inspect(via: Via, url: str, method_args: tuple[str, ...], bridge_log: Path) -> subprocess.CompletedProcess[str]:
    target = [url] if via == "direct" else [*bridge_command(), "--url", url, "--log-file", str(bridge_log)]
    return subprocess.run(
        [str(NODE), str(INSPECTOR_CLI), *target, *method_args],
        cwd=INSPECTOR_CLI.parent,
        env=node_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=CLI_TIMEOUT_SECONDS,
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("method", list(METHODS))
def test_inspector_cli_through_the_bridge_prints_what_it_prints_direct(everything: NodeServer, method: str, tmp_path: Path) -> None:
    outputs = {}
    for via in VIA:
        run = inspect(via, everything.url, METHODS[method], tmp_path / "bridge.log")
        log = (tmp_path / "bridge.log").read_text(encoding="utf-8", errors="replace") if (tmp_path / "bridge.log").exists() else ""
        assert run.returncode == 0, f"{via}: the Inspector CLI exited {run.returncode}:\n{run.stderr[-3000:]}\nbridge log:\n{log[-3000:]}"
        outputs[via] = json.loads(run.stdout)
    direct, bridged = (json.dumps(outputs[via], ensure_ascii=False, sort_keys=True) for via in VIA)
    print(side_by_side(f"Inspector CLI {' '.join(METHODS[method])}", [(method, direct, bridged)], width=80))
    assert outputs["direct"], f"the control printed nothing for {method}"
    assert outputs["bridge"] == outputs["direct"]
    if method == "tools/call":
        assert outputs["bridge"]["content"][0]["text"] == "Echo: through the Inspector: Grüße 🌍"
