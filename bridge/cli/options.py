"""The bridge's options, defined once: for the bridge itself, ``check``, and the bridge
arguments that ``config`` and ``bundle`` take after their own (pip's ``cmdoptions`` idea).

:func:`build_config` turns parsed options into a :class:`~bridge.core.config.BridgeConfig`
(click usage errors for what is wrong), and :func:`parse_bridge_args` parses an argument
list as the bridge would, without running it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from ..core.config import DEFAULT_MAX_MESSAGE_BYTES

# click-free, so that a plain serving start (serve.py) can build the configuration too.
from .buildconfig import LOG_LEVELS, build_config, split_command

__all__ = [
    "BRIDGE_OPTIONS",
    "CONTEXT",
    "PATH",
    "SECONDS",
    "bridge_options",
    "build_config",
    "parse_bridge_args",
    "split_command",
]

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


PATH = click.Path(dir_okay=False, path_type=Path)
SECONDS = click.FloatRange(min=0, min_open=True)


BRIDGE_OPTIONS = [
    click.option("--url", metavar="URL", help="The app's MCP endpoint, e.g. http://127.0.0.1:8765/mcp (loopback only)."),
    click.option("--app-name", metavar="NAME", help="The app's name: used in messages and for its default discovery file."),
    click.option("--discovery-file", type=PATH, metavar="PATH", help="The app's discovery file (endpoint, pid, token), re-read on every reconnect."),
    click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="Extra HTTP header for every request (repeatable)."),
    click.option("--token-env", metavar="VAR", help="Bearer token from environment variable VAR."),
    click.option("--token-file", type=PATH, metavar="PATH", help="Bearer token from a file (mode 0600)."),
    click.option("--token-command", metavar="CMD", help="Bearer token printed by a command (run without a shell)."),
    click.option("--auth-url", metavar="URL", help="The app's auth route (a URL, or a path on the MCP endpoint): POST the --secret-file, get a token."),
    click.option("--secret-file", type=PATH, metavar="PATH", help="The local secret for --auth-url (mode 0600)."),
    click.option("--token-timeout", "token_timeout_seconds", type=SECONDS, default=10.0, show_default=True, metavar="SECONDS", help="Bound on getting a token."),
    click.option("--launch", "launch", metavar="CMD", help="Start the app with CMD (no shell) when nothing listens."),
    click.option("--launch-timeout", "launch_timeout_seconds", type=SECONDS, default=30.0, show_default=True, metavar="SECONDS", help="Bound on starting the app until it accepts connections."),
    click.option("--launch-log", "launch_log_file", type=PATH, metavar="PATH", help="Where the launched app's output goes (default: discarded)."),
    click.option("--session-400-heuristic/--no-session-400-heuristic", default=True, show_default=True, help="Treat a 400 that mentions the session like a 404 (session gone)."),
    click.option("--connect-timeout", "connect_timeout_seconds", type=SECONDS, default=5.0, show_default=True, metavar="SECONDS", help="Bound on connecting to the app."),
    click.option("--request-timeout", "request_timeout_seconds", type=SECONDS, default=300.0, show_default=True, metavar="SECONDS", help="Bound on each reply: its head within this of sending, a JSON body within this of its head; an SSE reply may go this long between events or keep-alives."),
    click.option("--progress-heartbeat", "progress_heartbeat_seconds", type=click.FloatRange(min=0), default=20.0, show_default=True, metavar="SECONDS", help="For a call with a progress token: after this long without a word from the app, send the client a progress notification saying the bridge waits on it (0: never)."),
    click.option("--max-message-bytes", type=click.IntRange(min=1024), default=DEFAULT_MAX_MESSAGE_BYTES, show_default=True, metavar="N", help="Largest message accepted in either direction."),
    click.option("--max-concurrent-requests", type=click.IntRange(min=1), default=32, show_default=True, metavar="N", help="Requests in flight to the app at once."),
    click.option("--allow-remote", is_flag=True, help="Allow a non-loopback --url (https only)."),
    click.option("--verify-listener/--no-verify-listener", default=True, show_default=True, help="Check that the app (this user's process, the discovery file's pid) listens on the port before sending anything there."),
    click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="warning", show_default=True, help="Diagnostics level (always stderr or --log-file, never stdout)."),
    click.option("--log-file", type=PATH, metavar="PATH", help="Write diagnostics to PATH instead of stderr."),
]


def bridge_options(function: F) -> F:
    """Add every bridge option to a click command (the bridge itself, ``check``)."""
    for option in reversed(BRIDGE_OPTIONS):
        function = option(function)
    return function




def parse_bridge_args(args: Sequence[str]) -> dict[str, Any]:
    """Parse ``args`` as the bridge's own command line would (the same options), without
    running anything; returns the parsed options for :func:`build_config`.

    Raises:
        click.UsageError: an unknown or malformed option, prefixed "bridge option:".
    """
    command = bridge_options(click.Command("mcp-app-bridge", context_settings=CONTEXT, callback=lambda **_: None))
    try:
        context = command.make_context("mcp-app-bridge", list(args), resilient_parsing=False)
    except click.UsageError as exc:
        raise click.UsageError(f"bridge option: {exc.format_message()}") from None
    return dict(context.params)
