"""The pinned real clients and an app that lists its tools in pages, with and without
``--merge-list-pages`` in the entry ``config install`` writes (docs/clients.md, "Lists in pages").

The app is an official-SDK server with 25 tools in pages of 10
(``tests/support/sdk_paged_app.py``; it logs each ``tools/list`` with its cursor). Measured
with the versions in ``tests/realclients/package.json``:

- Codex asks for every page itself: its ``app-server`` (``mcpServerStatus/list``) lists all
  25 tools either way, and calls one from the last page;
- Claude Code and Qwen Code ask for every page and name all 25 tools to their model, either way;
- Gemini CLI asks once and names the first page's 10 tools to its model; with the option, all 25.

The tools a client names to its model are read from its first model request, sent to a model
endpoint on loopback that answers 400 (``realclients.harness.model_session``): no login, and
nothing leaves the machine. Marked ``clients``, as ``tests/realclients/test_realclients.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from realclients.harness import (
    MODEL_CLIENTS,
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
from support.processes import bridge_command
from support.sdk_paged_app import PAGE_SIZE, TOOL_COUNT, launch_sdk_paged_app, tool_names

pytestmark = [pytest.mark.clients, pytest.mark.posix_only("the clients' POSIX installs")]

NAME = "paged"

#: The cursors of the ``tools/list`` requests the app gets when every page is asked for
#: (by the client, or by the bridge with ``--merge-list-pages``): none, then each page's offset.
EVERY_PAGE = ["None", *(str(offset) for offset in range(PAGE_SIZE, TOOL_COUNT, PAGE_SIZE))]

#: The clients that ask for the first page only (measured).
FIRST_PAGE_ONLY = ("gemini-cli",)

MERGE = [False, True]
MERGE_IDS = ["as-paged", "merge-list-pages"]


@pytest.fixture(autouse=True)
def _clients_installed() -> None:
    require_clients()


@pytest.fixture
def paged_app(tmp_path: Path) -> Iterator[AppServer]:
    with launch_sdk_paged_app(tmp_path / "app.log") as app:
        yield app


def _cursors(app: AppServer) -> list[str]:
    """The cursor of each ``tools/list`` the app got, in order (``None`` for none)."""
    return re.findall(r"tools/list cursor=(\S+)", app.stderr_text())


def _install(tmp_path: Path, app: AppServer, client: str, merge: bool) -> Home:
    """A fresh user with the entry `config install` writes for the app (with the option when
    `merge`), and the client's one-time trust step taken."""
    home = fresh_home(tmp_path / "user")
    config_install(home, client, NAME, ["--url", app.url, *(["--merge-list-pages"] if merge else [])], bridge=bridge_command())
    trust(home, client, NAME)
    return home


@pytest.mark.timeout(300)
@pytest.mark.parametrize("merge", MERGE, ids=MERGE_IDS)
def test_codex_lists_every_page_and_calls_a_tool_of_the_last(tmp_path: Path, paged_app: AppServer, merge: bool) -> None:
    """Codex's ``app-server`` reports all 25 tools and calls ``tool_24`` (page 3). Without the
    option the cursors the app gets are Codex's own: it follows ``nextCursor`` (an earlier
    version did not: openai/codex#28858, 0.140.0); with it they are the bridge's, and Codex
    gets one list."""
    home = _install(tmp_path, paged_app, "codex", merge)
    last = tool_names()[-1]
    status = check(home, "codex", NAME, call=(last, {}))
    assert status.connected, status.output
    assert status.tools == sorted(tool_names()), status.tools
    # Each listing (the status, then the thread's start) asks for every page.
    cursors = _cursors(paged_app)
    assert cursors and cursors == EVERY_PAGE * (len(cursors) // len(EVERY_PAGE)), cursors
    result = (status.called or {}).get("result")
    assert isinstance(result, dict) and result.get("content") == [{"type": "text", "text": last}], status.called


@pytest.mark.timeout(300)
@pytest.mark.parametrize("merge", MERGE, ids=MERGE_IDS)
@pytest.mark.parametrize("client", MODEL_CLIENTS)
def test_the_tools_the_client_names_to_its_model(tmp_path: Path, paged_app: AppServer, client: str, merge: bool) -> None:
    """The tools of the paged app a client names in its first model request: Gemini CLI's
    first page (10) as it asks once, and all 25 with ``--merge-list-pages`` (the bridge asks
    for every page and answers with one list); Claude Code and Qwen Code all 25 either way
    (they follow ``nextCursor``)."""
    home = _install(tmp_path, paged_app, client, merge)
    with model_endpoint() as endpoint:
        output = model_session(home, client, endpoint, NAME)
    offered = offered_tools(endpoint, client, NAME)
    first_page_only = client in FIRST_PAGE_ONLY and not merge
    expected = tool_names()[:PAGE_SIZE] if first_page_only else tool_names()
    assert sorted(offered) == expected, f"{client} named {len(offered)} tools:\n{output[-3000:]}"
    cursors = _cursors(paged_app)
    listing = ["None"] if first_page_only else EVERY_PAGE
    assert cursors and cursors == listing * (len(cursors) // len(listing)), cursors
