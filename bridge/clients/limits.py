"""What each AI client does with a server's tools past its limits: names too long, too many
tools, descriptions too long (docs/clients.md, "What each client sees", has the table with
its sources). Keyed like :data:`~bridge.clients.clienttable.CLIENT_INFO`, by ``--client`` id,
plus clients ``config`` cannot write for (PhpStorm).

Pure: standard library only. ``check --client`` and ``config install`` feed it the tools a
client is shown (after the bridge's tool filter) and the entry's name (the server key the
client puts into each tool's full name), and print what :func:`client_losses` finds.

Lengths are counted as the clients count them: in UTF-16 code units (JavaScript's
``String.length``; every client here is written in TypeScript or runs in Electron), which is
the number of characters for all but the characters outside the Basic Multilingual Plane.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ClientLimits",
    "CLIENT_LIMITS",
    "Loss",
    "client_losses",
    "longest_server_key",
    "too_long_alone",
    "shorter_name",
    "utf16_length",
    "duplicate_names",
]


@dataclass(frozen=True)
class ClientLimits:
    """One client's limits on a server's tools.

    Attributes:
        title: the client's name in messages.
        full_name: how the client forms the name it limits from the entry's name
            (``{server}``) and the tool's (``{tool}``), each with the characters it does not
            take replaced (``name_replaced``); ``None``: no limit on names is known.
        max_name_chars: the longest such name that passes (UTF-16 units).
        name_outcome: what happens to a tool past it.
        name_replaced: a regular expression of the characters the client replaces with
            ``_`` in both parts (Claude Code: anything outside ``[A-Za-z0-9_-]``).
        max_tools: how many of a server's tools the client takes, in list order; ``None``: no cap.
        tools_outcome: what happens past that count.
        max_description_chars: the longest description kept whole; longer ones are cut.
        sources: where each limit is reported (issues, the client's documentation).
    """

    title: str
    full_name: str | None = None
    max_name_chars: int | None = None
    name_outcome: str = "left out"
    name_replaced: str | None = None
    max_tools: int | None = None
    tools_outcome: str = "left out"
    max_description_chars: int | None = None
    sources: tuple[str, ...] = ()


_CLAUDE_CODE = ClientLimits(
    "Claude Code",
    full_name="mcp__{server}__{tool}",
    max_name_chars=64,
    name_outcome="left out (the model API refuses a tool name over 64 characters)",
    name_replaced=r"[^A-Za-z0-9_-]",
    max_description_chars=2048,
    sources=(
        "anthropics/claude-code#19882",
        "anthropics/claude-code#22276",
        "anthropics/claude-code#87650 (descriptions cut at 2048)",
        "RedHatInsights/insights-mcp#340",
    ),
)

#: Each client's limits, by ``--client`` id (docs/clients.md, "What each client sees").
CLIENT_LIMITS: dict[str, ClientLimits] = {
    "claude-code": _CLAUDE_CODE,
    "claude-code-user": _CLAUDE_CODE,
    "cursor": ClientLimits(
        "Cursor",
        full_name="{server}{tool}",
        # "Combined server and tool name length (60) exceeds 60 characters" for 1 + 59.
        max_name_chars=59,
        max_tools=40,
        tools_outcome="not sent to the model (Cursor sends the first 40 tools)",
        sources=("sparfenyuk/mcp-proxy#45", "ComposioHQ/composio#2788 (60 is over)", "anyproto/anytype-mcp#5 (first 40 tools)"),
    ),
    "vscode": ClientLimits(
        "VS Code",
        max_tools=128,
        tools_outcome="over the 128 tools a chat request may carry, all servers and built-in tools together: the request fails",
        sources=("microsoft/vscode-copilot-release#11653",),
    ),
    "phpstorm": ClientLimits(
        "PhpStorm",
        max_tools=100,
        tools_outcome="left out (PhpStorm reads the first 100 tools)",
        sources=("zereight/gitlab-mcp#331",),
    ),
}


def utf16_length(text: str) -> int:
    """``text``'s length as JavaScript counts it (UTF-16 code units)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


@dataclass(frozen=True)
class Loss:
    """One tool a client will not get whole.

    Attributes:
        tool: the tool's name (as the app wrote it).
        what: ``"name"``, ``"count"``, ``"description"`` or ``"duplicate"``.
        detail: a sentence: the figure, the limit, and what the client does.
        lost: the client will not offer the tool at all (a cut description is not lost).
    """

    tool: str
    what: str
    detail: str
    lost: bool = True


def _underscores(match: re.Match[str]) -> str:
    return "_" * utf16_length(match.group())


def _full_name(limits: ClientLimits, server: str, tool: str) -> str:
    assert limits.full_name is not None
    if limits.name_replaced is not None:  # one "_" per UTF-16 unit, as JavaScript's replace without the u flag
        server = re.sub(limits.name_replaced, _underscores, server)
        tool = re.sub(limits.name_replaced, _underscores, tool)
    return limits.full_name.format(server=server, tool=tool)


def duplicate_names(tools: Sequence[Any]) -> list[str]:
    """The tool names that appear more than once, in order of their second appearance."""
    seen: set[str] = set()
    twice: list[str] = []
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str):
            if name in seen and name not in twice:
                twice.append(name)
            seen.add(name)
    return twice


def client_losses(client: str, server: str, tools: Sequence[Any]) -> list[Loss]:
    """What ``client`` (a :data:`CLIENT_LIMITS` key) loses of ``tools`` (the list it is shown,
    in order) from a server it calls ``server`` (the entry's name): names over its limit,
    tools past its count, descriptions it cuts, and names given twice (a client keeps one of
    them). ``[]`` for a client with no known limits."""
    limits = CLIENT_LIMITS.get(client)
    losses: list[Loss] = [
        Loss(name, "duplicate", f"{name!r} is listed more than once: a client keeps one of them (or refuses the list)")
        for name in duplicate_names(tools)
    ]
    if limits is None:
        return losses
    named = [tool for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]
    for index, tool in enumerate(named):
        name = tool["name"]
        if limits.full_name is not None and limits.max_name_chars is not None:
            full = _full_name(limits, server, name)
            length = utf16_length(full)
            if length > limits.max_name_chars:
                losses.append(Loss(
                    name, "name",
                    f"{full} is {length} characters, over {limits.title}'s {limits.max_name_chars}: {limits.name_outcome}",
                ))
        if limits.max_tools is not None and index >= limits.max_tools:
            losses.append(Loss(name, "count", f"tool {index + 1} of {len(named)}, past {limits.title}'s {limits.max_tools}: {limits.tools_outcome}"))
        description = tool.get("description")
        if limits.max_description_chars is not None and isinstance(description, str):
            length = utf16_length(description)
            if length > limits.max_description_chars:
                losses.append(Loss(
                    name, "description",
                    f"its description is {length} characters; {limits.title} cuts it at {limits.max_description_chars} "
                    "(put what matters first)",
                    lost=False,
                ))
    return losses


def longest_server_key(client: str, tools: Sequence[Any]) -> int | None:
    """The longest entry name (server key) with which every one of ``tools`` that can fit
    ``client``'s name limit does (a tool whose name is too long by itself is left out: see
    :func:`too_long_alone`); ``None`` when the client limits no names or no tool can fit."""
    limits = CLIENT_LIMITS.get(client)
    if limits is None or limits.full_name is None or limits.max_name_chars is None:
        return None
    room = [limits.max_name_chars - utf16_length(_full_name(limits, "", name)) for name in _names(tools)]
    fitting = [chars for chars in room if chars >= 1]
    return min(fitting) if fitting else None


def too_long_alone(client: str, tools: Sequence[Any]) -> list[str]:
    """The tools whose names pass ``client``'s name limit whatever the entry's name (even
    one character long)."""
    limits = CLIENT_LIMITS.get(client)
    if limits is None or limits.full_name is None or limits.max_name_chars is None:
        return []
    max_chars = limits.max_name_chars
    return [name for name in _names(tools) if utf16_length(_full_name(limits, "x", name)) > max_chars]


def _names(tools: Sequence[Any]) -> list[str]:
    return [tool["name"] for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]


def shorter_name(name: str, max_chars: int) -> str | None:
    """A name for the entry of at most ``max_chars`` characters made from ``name`` (its
    start, without a trailing ``-``, ``_`` or ``.``), or ``None`` when none fits."""
    if max_chars < 1:
        return None
    shorter = name[:max_chars].rstrip("-_.")
    return shorter or None
