"""The pinned real clients and an app that serves more tools than the entry allows
(docs/usage.md, "Which tools a client sees"): the entry ``config install`` writes carries
``--allow-tool``/``--deny-tool``, and the client lists only the allowed tools.

The app is an official-SDK server with 50 tools (``tests/support/sdk_many_tools_app.py``; it
logs every call it runs). Codex's ``app-server`` (``mcpServerStatus/list``) reports the tools
it got, and calls one; Claude Code names the tools it got to its model in its first request,
sent to a model endpoint on loopback that answers 400 (``realclients.harness.model_session``).
Marked ``clients``, as ``tests/realclients/test_realclients.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from realclients.harness import (
    Home,
    check,
    config_install,
    fresh_home,
    model_endpoint,
    model_session,
    offered_tools,
    require_clients,
    trust,
)
from support.apps import AppServer
from support.processes import bridge_command, count_in_log
from support.sdk_many_tools_app import TOOL_COUNT, launch_many_tools_app, tool_names

pytestmark = [pytest.mark.clients, pytest.mark.posix_only("the clients' POSIX installs")]

NAME = "docs"
#: The entry's filter: nine of the app's fifty tools pass.
FILTER = ["--allow-tool", "read_0?", "--ignore-tool", "read_09"]
ALLOWED = [f"read_0{n}" for n in range(9)]


@pytest.fixture(autouse=True)
def _clients_installed() -> None:
    require_clients()


@pytest.fixture
def many_tools_app(tmp_path: Path) -> Iterator[AppServer]:
    with launch_many_tools_app(tmp_path / "app.log") as app:
        yield app


def _install(tmp_path: Path, app: AppServer, client: str) -> Home:
    home = fresh_home(tmp_path / "user")
    config_install(home, client, NAME, ["--url", app.url, *FILTER], bridge=bridge_command())
    trust(home, client, NAME)
    return home


@pytest.mark.timeout(300)
def test_codex_lists_only_the_allowed_tools(tmp_path: Path, many_tools_app: AppServer) -> None:
    assert len(tool_names()) == TOOL_COUNT
    home = _install(tmp_path, many_tools_app, "codex")
    status = check(home, "codex", NAME, call=("read_03", {}))
    assert status.connected, status.output
    assert status.tools == ALLOWED, status.tools
    result = (status.called or {}).get("result")
    assert isinstance(result, dict) and result.get("content") == [{"type": "text", "text": "read_03"}], status.called
    assert count_in_log(many_tools_app, "tools/call ") == 1


@pytest.mark.timeout(300)
def test_claude_code_offers_its_model_only_the_allowed_tools(tmp_path: Path, many_tools_app: AppServer) -> None:
    home = _install(tmp_path, many_tools_app, "claude-code")
    with model_endpoint() as endpoint:
        output = model_session(home, "claude-code", endpoint, NAME)
    offered = offered_tools(endpoint, "claude-code", NAME)
    assert sorted(offered) == ALLOWED, f"Claude Code named {len(offered)} tools:\n{output[-3000:]}"
    assert count_in_log(many_tools_app, "tools/call ") == 0
