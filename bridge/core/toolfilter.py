"""Which of the app's tools a client sees: ``--allow-tool``, ``--deny-tool`` (also spelled
``--ignore-tool``, as mcp-remote names it) and ``--read-only`` (docs/usage.md, "Which tools a
client sees").

Pure: imports only the standard library. ``bridge/serve/toolgate.py`` applies it to every
``tools/list`` reply and every ``tools/call`` on their way between the client and the app.

The rules, in order; the first that hides a tool names the option given in the error and in
``check``:

1. ``--deny-tool GLOB`` (repeatable): a tool whose name matches any of them is hidden. Deny
   wins over allow.
2. ``--allow-tool GLOB`` (repeatable): when any is given, a tool whose name matches none of
   them is hidden.
3. ``--read-only``: a tool is hidden unless its ``annotations`` say ``readOnlyHint: true``
   (MCP server/tools, ``ToolAnnotations``: a hint the app gives; the bridge takes the app's
   word for it, as the app is the user's own). A missing annotation is not read-only (the
   spec's default for ``readOnlyHint`` is false).

A glob is matched by :func:`fnmatch.fnmatchcase`: ``*`` (any run of characters), ``?`` (one),
``[abc]`` and ``[!abc]``; case-sensitive, against the tool name exactly as the app wrote it
(MCP tool names are case-sensitive, server/tools "Tool names"). A tool entry without a
string ``name`` is hidden by any active filter: it cannot be matched.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

__all__ = [
    "ALLOW_OPTION",
    "DENY_OPTION",
    "DENY_SPELLINGS",
    "READ_ONLY_OPTION",
    "ToolFilter",
    "Hidden",
    "filter_tools_result",
    "hidden_on_purpose",
    "is_read_only",
]

ALLOW_OPTION = "--allow-tool"
DENY_OPTION = "--deny-tool"
#: ``--deny-tool``'s other spelling, mcp-remote's and fastmcp-remote's (geelen/mcp-remote PR #137).
DENY_SPELLINGS = (DENY_OPTION, "--ignore-tool")
READ_ONLY_OPTION = "--read-only"


def is_read_only(tool: Any) -> bool:
    """Whether a ``Tool`` object's ``annotations`` say ``readOnlyHint: true`` (exactly ``true``)."""
    annotations = tool.get("annotations") if isinstance(tool, dict) else None
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


class Hidden(NamedTuple):
    """One tool a filter hid: its ``name`` (``None`` when it had no string name) and the
    ``option`` that hid it (:data:`DENY_OPTION`, :data:`ALLOW_OPTION` or :data:`READ_ONLY_OPTION`).
    (Named tuples, not dataclasses: importing :mod:`dataclasses` loads :mod:`inspect` and
    :mod:`ast` at every start.)"""

    name: str | None
    option: str


class ToolFilter(NamedTuple):
    """The tool filter of one bridge run (``BridgeConfig.allow_tools``, ``deny_tools``, ``read_only``).

    Attributes:
        allow: ``--allow-tool`` globs, in order given.
        deny: ``--deny-tool`` globs, in order given.
        read_only: ``--read-only``.
    """

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    read_only: bool = False

    @property
    def active(self) -> bool:
        """Whether any option is given (else every tool passes, and nothing is parsed)."""
        return bool(self.allow or self.deny or self.read_only)

    @property
    def options(self) -> tuple[str, ...]:
        """The options given, as a user wrote them (for messages; the globs are not repeated)."""
        given = [DENY_OPTION] if self.deny else []
        given += [ALLOW_OPTION] if self.allow else []
        given += [READ_ONLY_OPTION] if self.read_only else []
        return tuple(given)

    def hides_name(self, name: str) -> str | None:
        """The option that hides a tool called ``name`` whatever its annotations (rules 1
        and 2), or ``None``."""
        if any(fnmatchcase(name, glob) for glob in self.deny):
            return DENY_OPTION
        if self.allow and not any(fnmatchcase(name, glob) for glob in self.allow):
            return ALLOW_OPTION
        return None

    def hides(self, tool: Any) -> str | None:
        """The option that hides ``tool`` (one ``Tool`` object of a ``tools/list`` result),
        or ``None`` when it passes."""
        if not self.active:
            return None
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str):
            return self.options[0]
        option = self.hides_name(name)
        if option is None and self.read_only and not is_read_only(tool):
            return READ_ONLY_OPTION
        return option


def filter_tools_result(result: Any, rules: ToolFilter) -> tuple[Any, list[Hidden]]:
    """A ``tools/list`` result (either era) with only the tools that pass ``rules``, and
    what was hidden, in the list's order.

    The result is returned as it is (the same object) when nothing is hidden, or when it is
    not an object with a ``tools`` array (the client then gets the app's reply unchanged).
    Otherwise a copy holds the tools that pass; its other members are kept, but a 2026-07-28
    ``cacheScope: "public"`` becomes ``"private"``: the list is this bridge's view of the
    app, not one to share across clients (2026-07-28, ``CacheableResult.cacheScope``).
    """
    tools = result.get("tools") if isinstance(result, dict) else None
    if not rules.active or not isinstance(tools, list):
        return result, []
    kept: list[Any] = []
    hidden: list[Hidden] = []
    for tool in tools:
        option = rules.hides(tool)
        if option is None:
            kept.append(tool)
        else:
            name = tool.get("name") if isinstance(tool, dict) else None
            hidden.append(Hidden(name if isinstance(name, str) else None, option))
    if not hidden:
        return result, []
    filtered = {**result, "tools": kept}
    if filtered.get("cacheScope") == "public":
        filtered["cacheScope"] = "private"
    return filtered, hidden


def hidden_on_purpose(hidden: Sequence[Hidden]) -> bool:
    """Whether every tool in ``hidden`` was hidden by ``--deny-tool``: the user named what to
    hide (``--deny-tool '*'`` for an app used for its prompts and resources alone), so a
    list left empty is what they asked for, not a glob that matched nothing."""
    return all(item.option == DENY_OPTION for item in hidden)

