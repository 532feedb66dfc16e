"""The bridge's options, defined once: for the bridge itself, ``check``, and the bridge
arguments that ``config`` and ``bundle`` take after their own (pip's ``cmdoptions`` idea).

:func:`build_config` turns parsed options into a :class:`~bridge.core.config.BridgeConfig`
(click usage errors for what is wrong), and :func:`parse_bridge_args` parses an argument
list as the bridge would, without running it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from ..core.config import DEFAULT_MAX_MESSAGE_BYTES, BridgeConfig, ConfigError, check_endpoint_url, parse_header

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

LOG_LEVELS = ("debug", "info", "warning", "error")
_TOKEN_OPTIONS = ("--token-env", "--token-file", "--token-command", "--auth-url")
CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def split_command(command: str) -> list[str]:
    """Split a command line into words as a shell would, without running a shell.

    Raises:
        ValueError: unbalanced quotes, or no words at all.
    """
    words = shlex.split(command, posix=os.name != "nt")
    if not words:
        raise ValueError("the command is empty")
    return words


def _token_source(
    token_env: str | None,
    token_file: Path | None,
    token_command: str | None,
    auth_url: str | None,
    secret_file: Path | None,
    token_timeout_seconds: float,
    allow_remote: bool,
) -> object | None:
    given = [name for name, value in zip(_TOKEN_OPTIONS, (token_env, token_file, token_command, auth_url), strict=True) if value]
    if len(given) > 1:
        raise click.UsageError(f"give at most one token source, not {' and '.join(given)}")
    if (auth_url is None) != (secret_file is None):
        raise click.UsageError("--auth-url and --secret-file go together")
    from ..app import tokens  # the I/O side: imported only once the options are known to be good

    if token_env is not None:
        if not os.environ.get(token_env, "").strip():
            raise click.BadParameter(f"environment variable {token_env} is not set or is empty", param_hint="--token-env")
        return tokens.EnvTokenSource(token_env)
    if token_file is not None:
        _refuse_open_file(token_file, "--token-file")
        return tokens.FileTokenSource(token_file)
    if token_command is not None:
        try:
            argv = split_command(token_command)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--token-command") from None
        return tokens.CommandTokenSource(argv, timeout_seconds=token_timeout_seconds)
    if auth_url is not None and secret_file is not None:
        _refuse_open_file(secret_file, "--secret-file")
        try:
            if not auth_url.startswith("/"):  # a path is resolved against the MCP endpoint
                check_endpoint_url(auth_url, allow_remote=allow_remote)
        except ConfigError as exc:
            raise click.BadParameter(str(exc).replace("--url", "--auth-url"), param_hint="--auth-url") from None
        return tokens.AuthRouteTokenSource(auth_url, secret_file)
    return None


def _refuse_open_file(path: Path, option: str) -> None:
    """A secret file that exists must pass OpenSSH's rules (``bridge/system/privatefile.py``); it
    may appear later: the app can create it when it starts."""
    from ..system.privatefile import UnsafeFileError, read_private_file

    try:
        read_private_file(path, option.lstrip("-").replace("-", " "))
    except UnsafeFileError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
    except OSError:
        pass  # missing or unreadable now: the token source says so when it is needed


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


def build_config(options: dict[str, Any], *, require_env: bool = True) -> BridgeConfig:
    """Turn parsed bridge options into a configuration (raises click usage errors)."""
    url, app_name, discovery_file = options["url"], options["app_name"], options["discovery_file"]
    if url is None and discovery_file is None and app_name is None:
        raise click.UsageError("give the app's endpoint: --url URL, --discovery-file PATH or --app-name NAME")
    if discovery_file is None and url is None and app_name is not None:
        from ..app.discovery import default_discovery_path

        discovery_file = default_discovery_path(app_name)
    source = _token_source(
        options["token_env"] if require_env else None,
        options["token_file"],
        options["token_command"],
        options["auth_url"],
        options["secret_file"],
        options["token_timeout_seconds"],
        options["allow_remote"],
    )
    if not require_env and options["token_env"] is not None and source is not None:
        raise click.UsageError("give at most one token source")
    launch_command = None
    if options["launch"] is not None:
        try:
            launch_command = tuple(split_command(options["launch"]))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--launch") from None
    try:
        return BridgeConfig(
            url=url,
            discovery_file=discovery_file,
            app_name=app_name or "The app",
            headers=tuple(parse_header(text) for text in options["headers"]),
            token_source=source,
            token_timeout_seconds=options["token_timeout_seconds"],
            launch_command=launch_command,
            launch_timeout_seconds=options["launch_timeout_seconds"],
            launch_log_file=options["launch_log_file"],
            session_400_heuristic=options["session_400_heuristic"],
            connect_timeout_seconds=options["connect_timeout_seconds"],
            request_timeout_seconds=options["request_timeout_seconds"],
            max_message_bytes=options["max_message_bytes"],
            max_concurrent_requests=options["max_concurrent_requests"],
            allow_remote=options["allow_remote"],
            verify_listener=options["verify_listener"],
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None




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
