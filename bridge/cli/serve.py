"""The plain serving command line without click: ``mcp-app-bridge --url URL …`` as an AI
client runs it, parsed and served without importing click.

An AI client starts the bridge at every session and for every health check, and only
ever with bridge options. click and what only it loads (``uuid``, ``platform``,
``datetime``, ``gettext``, ``locale``, …) were 15-18 ms of the start's CPU and 1.7 MiB of
its memory (bench/README.md, "Start-up"), as much as the bridge's lead over mcp-stdio. So
:func:`main` first tries :func:`parse_plain_argv`: the bridge options in their plain forms
only (``--name VALUE`` and flags, each once; values that click would take as they are).
Anything else (``--help``, ``--version``, a command, ``--name=VALUE``, a value starting
with "-", an option twice, a value click would refuse or change, shell completion), and
any error while building the configuration, goes to the click command
(:data:`bridge.cli.commands.main`) exactly as before: it parses the whole command line
again and says what is wrong. tests/cli/test_serve.py holds the two parsers equal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.config import DEFAULT_MAX_MESSAGE_BYTES
from .buildconfig import LOG_LEVELS, build_config
from .diagnostics import console_fallbacks, exit_now, import_asyncio_without_tls, setup_logging

__all__ = ["PLAIN_DEFAULTS", "main", "parse_plain_argv"]

# -- the plain serving command line ----------------------------------------------------------

#: Every bridge option's value when it is not given: click's defaults (options.py), which
#: tests/cli/test_serve.py checks these against.
PLAIN_DEFAULTS: dict[str, Any] = {
    "url": None,
    "app_name": None,
    "discovery_file": None,
    "headers": (),
    "token_env": None,
    "token_file": None,
    "token_command": None,
    "auth_url": None,
    "secret_file": None,
    "token_timeout_seconds": 10.0,
    "launch": None,
    "launch_timeout_seconds": 30.0,
    "launch_log_file": None,
    "session_400_heuristic": True,
    "connect_timeout_seconds": 5.0,
    "request_timeout_seconds": 300.0,
    "progress_heartbeat_seconds": 20.0,
    "max_message_bytes": DEFAULT_MAX_MESSAGE_BYTES,
    "max_concurrent_requests": 32,
    "allow_remote": False,
    "verify_listener": True,
    "log_level": "warning",
    "log_file": None,
}


class _NotPlain(Exception):
    """The command line is not one this parser takes: the click command parses it."""


def _text(value: str) -> str:
    return value


def _file_path(value: str) -> Path:
    # click.Path(dir_okay=False): refuses an existing directory; the value as a Path.
    if not value or os.path.isdir(value):
        raise _NotPlain
    return Path(value)


def _seconds(value: str) -> float:
    # click.FloatRange(min=0, min_open=True): float(value) > 0.
    try:
        seconds = float(value)
    except ValueError:
        raise _NotPlain from None
    if not seconds > 0:
        raise _NotPlain
    return seconds


def _seconds_or_zero(value: str) -> float:
    # click.FloatRange(min=0): float(value) >= 0.
    try:
        seconds = float(value)
    except ValueError:
        raise _NotPlain from None
    if not seconds >= 0:
        raise _NotPlain
    return seconds


def _at_least(minimum: int) -> Callable[[str], int]:
    def convert(value: str) -> int:
        # click.IntRange(min=minimum): int(value) >= minimum.
        try:
            number = int(value)
        except ValueError:
            raise _NotPlain from None
        if number < minimum:
            raise _NotPlain
        return number

    return convert


def _log_level(value: str) -> str:
    if value not in LOG_LEVELS:  # click also takes other cases: it parses those
        raise _NotPlain
    return value


_VALUE_OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--url": ("url", _text),
    "--app-name": ("app_name", _text),
    "--discovery-file": ("discovery_file", _file_path),
    "--header": ("headers", _text),
    "--token-env": ("token_env", _text),
    "--token-file": ("token_file", _file_path),
    "--token-command": ("token_command", _text),
    "--auth-url": ("auth_url", _text),
    "--secret-file": ("secret_file", _file_path),
    "--token-timeout": ("token_timeout_seconds", _seconds),
    "--launch": ("launch", _text),
    "--launch-timeout": ("launch_timeout_seconds", _seconds),
    "--launch-log": ("launch_log_file", _file_path),
    "--connect-timeout": ("connect_timeout_seconds", _seconds),
    "--request-timeout": ("request_timeout_seconds", _seconds),
    "--progress-heartbeat": ("progress_heartbeat_seconds", _seconds_or_zero),
    "--max-message-bytes": ("max_message_bytes", _at_least(1024)),
    "--max-concurrent-requests": ("max_concurrent_requests", _at_least(1)),
    "--log-level": ("log_level", _log_level),
    "--log-file": ("log_file", _file_path),
}
_REPEATABLE = {"headers"}
_FLAGS: dict[str, tuple[str, bool]] = {
    "--allow-remote": ("allow_remote", True),
    "--session-400-heuristic": ("session_400_heuristic", True),
    "--no-session-400-heuristic": ("session_400_heuristic", False),
    "--verify-listener": ("verify_listener", True),
    "--no-verify-listener": ("verify_listener", False),
}


def parse_plain_argv(argv: list[str]) -> dict[str, Any] | None:
    """The bridge options of ``argv`` (``sys.argv[1:]``) as click would parse them, keyed
    like :data:`PLAIN_DEFAULTS`; or None for any command line that is not plain (see the
    module docstring), which the click command then parses."""
    options = dict(PLAIN_DEFAULTS)
    given: set[str] = set()
    headers: list[str] = []
    index = 0
    try:
        while index < len(argv):
            word = argv[index]
            if word in _FLAGS:
                dest, flag = _FLAGS[word]
                value: Any = flag
                index += 1
            elif word in _VALUE_OPTIONS and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
                dest, convert = _VALUE_OPTIONS[word]
                value = convert(argv[index + 1])
                index += 2
            else:
                return None
            if dest in _REPEATABLE:
                headers.append(value)
                continue
            if dest in given:
                return None
            given.add(dest)
            options[dest] = value
    except _NotPlain:
        return None
    options["headers"] = tuple(headers)
    return options


def main() -> None:
    """The ``mcp-app-bridge`` command (and ``python -m bridge``): serve at once when the
    command line is plain, else hand it to the click command."""
    options = None
    if not any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):  # click's shell completion
        options = parse_plain_argv(sys.argv[1:])
    if options is not None:
        console_fallbacks()  # as the click command does first
        try:
            config = build_config(options)
            setup_logging(options["log_level"], options["log_file"])
        except Exception:  # a reason to give: the click command parses again and gives it
            options = None  # (as a client-started bridge, by answering every request with it)
    if options is None:
        from .commands import main as click_main

        click_main()
        return
    import_asyncio_without_tls()
    from ..serve.loop import run_stdio  # what the click command runs, with what click does around it

    try:
        status = run_stdio(config)
    except (EOFError, KeyboardInterrupt):  # click's "Aborted!"
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    exit_now(status)
