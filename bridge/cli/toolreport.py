"""What a client sees of an app's tools, for ``check``, ``check --client`` and ``config
install``: the app's whole list (every page), what the tool filter hides and why
(``bridge/core/toolfilter.py``), and what each client loses past its limits
(``bridge/clients/limits.py``; docs/clients.md, "What each client sees").

:func:`list_app_tools` lists without starting anything: the app's own list when it runs, or
the list its lazy-launch catalog keeps (``bridge/app/servedcatalog.py``) when it does not.
Each report function returns lines (and a verdict); the caller prints them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ..core.config import BridgeConfig
from ..core.errors import AppNotRunningError, UpstreamError
from ..core.jsonrpc import INITIALIZED_BODY, Request, encode_message
from ..core.quirks import MAX_LIST_PAGES
from ..core.toolfilter import ToolFilter, filter_tools_result, hidden_on_purpose

__all__ = [
    "LIST_BOUND_SECONDS",
    "ToolListing",
    "follow_pages",
    "list_app_tools",
    "filter_report",
    "limits_report",
    "run_limits_check",
]

#: Bound on each request of :func:`list_app_tools` (seconds): it runs inside ``config install``
#: and ``check --client``, which must not wait out a request timeout of minutes.
LIST_BOUND_SECONDS = 10.0

#: ``async (method, params) -> result``: one request to the app; raises ``UpstreamError``, or
#: ``ValueError`` for an error reply.
Ask = Callable[[str, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolListing:
    """The app's tools, as far as they could be listed.

    Attributes:
        tools: every tool of every page, in order (the app's whole list, before any filter).
        source: where they came from, for a report line ("the app", "its catalog").
        repeated_cursor: a ``nextCursor`` the app gave twice (its list loops): the pages
            after it were not read.
        problem: why nothing could be listed (``tools`` is then empty).
        not_running: nothing could be listed because the app is not running (the listing
            starts nothing), rather than for a reason starting it would not mend.
    """

    tools: tuple[Any, ...] = ()
    source: str = "the app"
    repeated_cursor: str | None = None
    problem: str | None = None
    not_running: bool = False


async def follow_pages(ask: Ask, first: dict[str, Any]) -> tuple[list[Any], str | None]:
    """Every tool of ``first`` (a ``tools/list`` result) and of the pages after it, asked
    for with ``ask``, at most ``MAX_LIST_PAGES`` pages; and the cursor the app repeated, if
    it did (the pages stop there, as a client that follows cursors would loop).

    Raises:
        UpstreamError, ValueError: as ``ask`` raises them for a later page.
    """
    listed = first.get("tools")
    tools = list(listed) if isinstance(listed, list) else []
    seen: set[str] = set()
    cursor = first.get("nextCursor")
    for _ in range(MAX_LIST_PAGES - 1):
        if not isinstance(cursor, str):
            return tools, None
        if cursor in seen:
            return tools, cursor
        seen.add(cursor)
        page = await ask("tools/list", {"cursor": cursor})
        more = page.get("tools")
        tools += more if isinstance(more, list) else []
        cursor = page.get("nextCursor")
    return tools, None


def _request(method: str, params: Any, number: int) -> Request:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": f"tools-{number}", "method": method}
    if params is not None:
        message["params"] = params
    return Request(message["id"], method, params, encode_message(message)[:-1])


async def list_app_tools(config: BridgeConfig) -> ToolListing:
    """The app's whole tool list for ``config``, starting nothing: asked of the app when it
    runs (``initialize``, then ``tools/list`` and its pages, each within
    :data:`LIST_BOUND_SECONDS`), else the list its catalog keeps, else none (``problem``)."""
    from ..serve.parts import build_stack  # (imported late: config's other commands never load it)

    quick = config.replace(
        launch_command=None,
        ensure_running=None,
        launch_policy="never",
        request_timeout_seconds=min(config.request_timeout_seconds, LIST_BOUND_SECONDS),
        connect_timeout_seconds=min(config.connect_timeout_seconds, LIST_BOUND_SECONDS),
        token_timeout_seconds=min(config.token_timeout_seconds, LIST_BOUND_SECONDS),
        merge_list_pages=False,
    )
    stack = build_stack(quick).top
    numbers = iter(range(1, 1 << 30))

    async def ask(method: str, params: Any) -> dict[str, Any]:
        async def ignore(line: bytes, message: Any = None) -> None:
            return None

        reply = json.loads(await stack.request(_request(method, params, next(numbers)), ignore))
        if not isinstance(reply, dict) or not isinstance(reply.get("result"), dict):
            error = reply.get("error") if isinstance(reply, dict) else None
            raise ValueError(f"the app answered {method} with error {error.get('message') if isinstance(error, dict) else error}")
        result: dict[str, Any] = reply["result"]
        return result

    try:
        try:
            await ask("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "mcp-app-bridge check", "version": "1"}})
            await stack.deliver(INITIALIZED_BODY, "notification notifications/initialized")
            first = await ask("tools/list", None)
            tools, repeated = await follow_pages(ask, first)
            return ToolListing(tuple(tools), "the app", repeated)
        except (UpstreamError, ValueError) as exc:
            reason = exc.message if isinstance(exc, UpstreamError) else str(exc)
            listing = cataloged_tools(config, reason)
            if listing.problem is not None and isinstance(exc, AppNotRunningError):
                return replace(listing, not_running=True)
            return listing
    finally:
        try:
            await stack.terminate_session()
        finally:
            await stack.aclose()


def cataloged_tools(config: BridgeConfig, reason: str) -> ToolListing:
    """The tool list the app's catalog keeps for ``config`` (bridge/app/servedcatalog.py),
    read from the file alone: no connection is made. With no such list, ``problem`` is
    ``reason``."""
    from ..app.servedcatalog import ServedCatalog

    entry = ServedCatalog(config.app_name, config.url or str(config.discovery_file)).entry()
    lists = entry.get("lists") if isinstance(entry, dict) else None
    cached = lists.get("tools/list") if isinstance(lists, dict) else None
    if isinstance(cached, dict) and isinstance(cached.get("tools"), list):
        return ToolListing(tuple(cached["tools"]), "its catalog (the app is not running)")
    return ToolListing(problem=reason)


def _names(tools: Any) -> list[str]:
    return [tool["name"] for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)]


def filter_report(config: BridgeConfig, tools: Any) -> tuple[list[str], list[Any], str | None]:
    """What the tool filter of ``config`` does to ``tools``: report lines (each hidden tool
    with the option that hid it), the tools a client is shown, and a problem when the filter
    leaves none of several tools and not by ``--deny-tool`` alone (fails closed: docs/usage.md,
    "Which tools a client sees")."""
    rules = ToolFilter(config.allow_tools, config.deny_tools, config.read_only)
    if not rules.active:
        return [], list(tools), None
    filtered, hidden = filter_tools_result({"tools": list(tools)}, rules)
    shown = filtered["tools"]
    by_option: dict[str, list[str]] = {}
    for item in hidden:
        by_option.setdefault(item.option, []).append(item.name or "(no name)")
    lines = [f"the tool filter hides {len(hidden)} of {len(tools)}: "
             + "; ".join(f"by {option}: {', '.join(hid)}" for option, hid in by_option.items())]
    if not hidden:
        lines = [f"the tool filter ({', '.join(rules.options)}) hides none of the {len(tools)} tools"]
    lines.append(f"a client is shown {len(shown)}: {', '.join(_names(shown)) or '(none)'}")
    problem = None
    if hidden and not shown and not hidden_on_purpose(hidden):
        problem = "the tool filter leaves no tool: the client is shown none (an --allow-tool that matches nothing, or --read-only with no read-only tool?)"
    return lines, shown, problem


def limits_report(client: str, server: str, shown: Any, repeated_cursor: str | None) -> tuple[list[str], bool, str | None]:
    """What ``client`` loses of ``shown`` (the tools it is shown) from an entry named
    ``server``: report lines, whether it loses a tool (or a list that loops), and a shorter
    entry name that would make every name fit, when the entry's name is what makes some too
    long."""
    from ..clients.limits import CLIENT_LIMITS, client_losses, longest_server_key, shorter_name, too_long_alone

    limits = CLIENT_LIMITS.get(client)
    title = limits.title if limits is not None else client
    losses = client_losses(client, server, shown)
    lines = [f"{title} loses {loss.tool!r}: {loss.detail}" if loss.lost else f"{title} cuts {loss.tool!r}: {loss.detail}"
             for loss in losses]
    lost = any(loss.lost for loss in losses)
    if repeated_cursor is not None:
        lost = True
        lines.append(f"the app's list gives the cursor {repeated_cursor[:40]!r} twice: a client that follows cursors "
                     "reads the same page again (or stops); the pages after it were not read")
    suggestion = None
    if any(loss.what == "name" for loss in losses):
        alone = too_long_alone(client, shown)
        fits = longest_server_key(client, shown)
        if fits is not None and any(loss.what == "name" and loss.tool not in alone for loss in losses):
            suggestion = shorter_name(server, fits)
            if suggestion is not None:
                lines.append(f"an entry name of at most {fits} characters keeps the other names within the limit: "
                             f"install it again with --name {suggestion} (or another name that short)")
        if alone:
            lines.append(f"too long for {title} whatever the entry's name: {', '.join(repr(name) for name in alone)}; "
                         "hide them with --deny-tool, or have the app shorten them")
    return lines, lost, suggestion


def run_limits_check(client: str, names: tuple[str, ...], echo: Callable[[str], None], style: Callable[..., str]) -> bool:
    """``check --client CLIENT``'s second part: for each of the client's entries that runs the
    bridge (only ``names``, when given), what the client is shown of the app's tools (listed
    as :func:`list_app_tools` does, with the entry's own options and environment) and what it
    loses past its limits. Prints ✓ or ✗ per entry; returns whether none loses a tool. An
    entry whose tools cannot be listed, or that is not the bridge's, gets a note, not a ✗."""
    import asyncio

    from ..clients.clienttable import ClientConfigError, config_path
    from ..clients.limits import CLIENT_LIMITS
    from .entrycheck import read_entries

    try:
        entries = read_entries(config_path(client), client)
    except ClientConfigError:
        return True  # (the entry check above said why)
    chosen = {name: entry for name, entry in entries.items() if (not names or name in names) and "command" in entry}
    if not chosen:
        return True
    limits = CLIENT_LIMITS.get(client)
    title = limits.title if limits is not None else client
    echo("")
    echo(f"What {title} is shown of each entry's tools (docs/clients.md, \"What each client sees\"):")
    good = style("✓", fg="green")
    bad = style("✗", fg="red", bold=True)
    ok = True
    for name, entry in chosen.items():
        config, why_not = _entry_config(entry)
        if config is None:
            echo(f"  {name}: not checked: {why_not}")
            continue
        with _entry_environment(entry):
            listing = asyncio.run(list_app_tools(config))
        if listing.problem is not None and listing.not_running and config.launch_command is not None:
            # (not the launcher's "Start it": the entry's bridge starts the app itself)
            echo(f"  {name}: its tools could not be listed: the app is not running, and this check starts nothing; "
                 f"the bridge starts it itself (the entry's --launch) when {title} first needs it: run this again after that")
            continue
        if listing.problem is not None:
            echo(f"  {name}: its tools could not be listed ({listing.problem}); run this again once the app runs")
            continue
        lines, shown, problem = filter_report(config, listing.tools)
        losses, lost, _suggestion = limits_report(client, name, shown, listing.repeated_cursor)
        failed = lost or problem is not None
        ok = ok and not failed
        summary = f"{len(shown)} of {len(listing.tools)} tools shown (from {listing.source})"
        echo(f"{bad if failed else good} {name}: {summary}" + ("" if losses or problem else f", none past {title}'s limits"))
        for line in [*lines, *([problem] if problem else []), *losses]:
            echo(f"  {line}")
    return ok


def _entry_config(entry: dict[str, Any]) -> tuple[BridgeConfig | None, str]:
    """The bridge configuration an entry's ``args`` give, or ``None`` and why not (an app's
    own ``--mcp-stdio``, whose options are in its code; options this bridge refuses)."""
    import click

    from .options import build_config, parse_bridge_args

    args = entry.get("args")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return None, "its args are not a list of words"
    try:
        with _entry_environment(entry):
            return build_config(parse_bridge_args(args)), ""
    except click.ClickException as exc:
        return None, f"its args are not this bridge's options ({exc.format_message()}); an app's own --mcp-stdio is checked with `check` and the app's options"


@contextmanager
def _entry_environment(entry: dict[str, Any]) -> Iterator[None]:
    """The entry's ``env`` in this process's environment while the block runs (its
    ``XDG_STATE_HOME``, its token variable), as the client would give them; restored after."""
    import os

    env = entry.get("env")
    given = {key: value for key, value in env.items() if isinstance(key, str) and isinstance(value, str)} if isinstance(env, dict) else {}
    saved = {key: os.environ.get(key) for key in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
