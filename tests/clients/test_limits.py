"""Each client's limits on a server's tools (bridge/clients/limits.py), and docs/clients.md's
table of them ("What each client sees")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bridge.clients.clienttable import CLIENTS
from bridge.clients.limits import (
    CLIENT_LIMITS,
    client_losses,
    duplicate_names,
    longest_server_key,
    shorter_name,
    too_long_alone,
    utf16_length,
)

ROOT = Path(__file__).resolve().parents[2]


def tool(name: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


def test_claude_code_drops_a_full_name_over_64() -> None:
    fits = "t" * (64 - len("mcp__myapp__"))
    over = fits + "x"
    losses = client_losses("claude-code", "myapp", [tool(fits), tool(over)])
    assert [(loss.tool, loss.what, loss.lost) for loss in losses] == [(over, "name", True)]
    assert f"mcp__myapp__{over} is 65 characters, over Claude Code's 64" in losses[0].detail


def test_claude_code_replaces_other_characters_and_counts_utf16() -> None:
    """``my app`` becomes ``my_app``: the same length; a character outside the BMP counts
    twice, as JavaScript counts it."""
    assert utf16_length("a😀") == 3
    name = "t" * (64 - len("mcp__my app__") - 1) + "😀"  # 65 in UTF-16 units
    (loss,) = client_losses("claude-code-user", "my app", [tool(name)])
    assert loss.detail.startswith("mcp__my_app__" + "t" * 50 + "__ is 65 characters")


def test_cursor_takes_40_tools_and_60_combined_characters_are_over() -> None:
    tools = [tool(f"t{n:02d}") for n in range(45)]
    losses = client_losses("cursor", "s", tools)
    assert [loss.tool for loss in losses] == [f"t{n:02d}" for n in range(40, 45)] and {loss.what for loss in losses} == {"count"}
    (loss,) = client_losses("cursor", "g", [tool("x" * 59)])  # Composio's report: 1 + 59 is over
    assert loss.what == "name"
    assert client_losses("cursor", "g", [tool("x" * 58)]) == []


def test_descriptions_over_2048_are_cut_not_lost() -> None:
    (loss,) = client_losses("claude-code", "a", [tool("t", "d" * 2049)])
    assert loss.what == "description" and not loss.lost
    assert client_losses("claude-code", "a", [tool("t", "d" * 2048)]) == []


def test_duplicates_count_for_every_client() -> None:
    tools = [tool("a"), tool("b"), tool("a"), tool("a")]
    assert duplicate_names(tools) == ["a"]
    assert [loss.what for loss in client_losses("codex", "x", tools)] == ["duplicate"]


def test_a_shorter_entry_name() -> None:
    tools = [tool("t" * 52), tool("short")]
    assert longest_server_key("claude-code", tools) == 5
    assert shorter_name("docs-app", 5) == "docs" and shorter_name("x", 0) is None
    assert too_long_alone("claude-code", [tool("t" * 56), tool("t" * 57)]) == ["t" * 57]  # mcp__x__ + 57 = 65
    assert longest_server_key("claude-code", [tool("t" * 70)]) is None
    assert longest_server_key("codex", tools) is None  # no known name limit


def test_the_table_is_keyed_by_client_ids_and_phpstorm() -> None:
    assert set(CLIENT_LIMITS) - set(CLIENTS) == {"phpstorm"}


def test_docs_clients_table_is_the_tables() -> None:
    """Each client's row in docs/clients.md names its figures and every source the table cites."""
    text = (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    section = text.split("### What each client sees", 1)[1].split("\n## ", 1)[0]
    rows = {line.strip("| ").split("|")[0].strip(): line for line in section.splitlines() if line.startswith("| ")}
    for limits in {id(limits): limits for limits in CLIENT_LIMITS.values()}.values():
        (row,) = [line for title, line in rows.items() if title.startswith(limits.title)]
        for figure in (limits.max_name_chars, limits.max_tools, limits.max_description_chars):
            if figure is not None:
                assert re.search(rf"\b{figure}\b", row), (limits.title, figure)
        for source in limits.sources:
            repo_issue = source.split(" ")[0]
            repo, number = repo_issue.split("#")
            assert f"#{number}" in row and (repo.split("/")[1] in row or f"github.com/{repo}/issues/{number}" in row), (limits.title, source)
