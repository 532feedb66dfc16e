"""The bridge's command-line options, declared once (pip's ``cmdoptions`` idea): flag,
destination, converter, default, help, environment variable, and whether a message may
repeat the value.

Everything else is built from :data:`BRIDGE_OPTIONS`:

- the click command's options (``bridge/cli/options.py``: ``bridge_options``), whose types
  call the converters below;
- the click-free parser of a client's plain command line (``bridge/cli/serve.py``);
- :func:`bridge.cli.buildconfig.build_config`, which passes every option marked
  ``config=True`` to :class:`~bridge.core.config.BridgeConfig` as it is;
- the options table of docs/usage.md (tests/cli/test_optiontable.py checks it).

Defaults of the options that fill a :class:`~bridge.core.config.BridgeConfig` field of the
same name are that field's default (:func:`~bridge.core.config.config_defaults`), so a default is written once.

Click-free and cheap to import: a client's start of the bridge loads this module.

**Values and messages.** An option's value may be a secret given by mistake: a token
passed to ``--token-env`` (a shell that expanded ``--token-env $MYAPP_TOKEN``), a URL with
a key in it, a token split off its ``--header`` and left as a stray argument. So no
message, reply or log line repeats a value, unless the option's :attr:`BridgeOption.echo`
says it may: a file's path (``"path"``), or a name that passed a name check (``"name"``:
``--app-name``, checked by :func:`~bridge.core.config.check_app_name`; ``--token-env``, a
valid variable name); or the program of a command (``"program"``: ``--launch``,
``--token-command``, whose first word is a file's path). The converters' errors (:class:`OptionValueError`) never repeat the
value they refuse, but a path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..core.config import LAUNCH_POLICIES, PROTOCOL_ERAS, config_defaults

__all__ = [
    "BRIDGE_OPTIONS",
    "LOG_LEVELS",
    "BridgeOption",
    "Echo",
    "OptionValueError",
    "defaults",
    "file_path",
    "log_level",
    "seconds",
    "text",
    "tool_glob",
    "whole_number",
]

LOG_LEVELS = ("debug", "info", "warning", "error")

#: Whether a message may repeat an option's value: ``"never"``; ``"path"`` (a file's path);
#: ``"name"`` (only once it passed a name check); ``"program"`` (a command: its first word,
#: the program's path, may be named, as "the token command ./get-token could not be
#: started"; its arguments never).
Echo = Literal["never", "path", "name", "program"]


class OptionValueError(ValueError):
    """A value an option cannot take. The message says why without repeating the value (a
    path excepted); click shows it as "Invalid value for '--option': <message>"."""


def text(value: str) -> str:
    """Any text, as given."""
    return value


def file_path(value: str) -> Path:
    """A file's path (as click's ``Path(dir_okay=False)``): not empty, not an existing folder."""
    if not value:
        raise OptionValueError("give a file's path, not an empty word")
    if os.path.isdir(value):
        raise OptionValueError(f"{value} is a folder, not a file")
    return Path(value)


def seconds(value: str) -> float:
    """A number of seconds greater than 0 (``inf`` included: no bound)."""
    try:
        number = float(value)
    except ValueError:
        raise OptionValueError("must be a number of seconds, such as 30 or 2.5") from None
    if not number > 0:  # (nan too)
        raise OptionValueError("must be a number of seconds greater than 0")
    return number


def seconds_or_zero(value: str) -> float:
    """A number of seconds, 0 or more (0: off)."""
    try:
        number = float(value)
    except ValueError:
        raise OptionValueError("must be a number of seconds, such as 20 or 0 (off)") from None
    if not number >= 0:  # (nan too)
        raise OptionValueError("must be a number of seconds, 0 or more")
    return number


def whole_number(minimum: int) -> Callable[[str], int]:
    """A whole number, at least ``minimum``."""

    def convert(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise OptionValueError(f"must be a whole number, at least {minimum}") from None
        if number < minimum:
            raise OptionValueError(f"must be at least {minimum}")
        return number

    convert.__name__ = f"whole_number_at_least_{minimum}"
    return convert


def protocol_era(value: str) -> str:
    """One of :data:`~bridge.core.config.PROTOCOL_ERAS`, in any case; returned in lower case."""
    if value.lower() not in PROTOCOL_ERAS:
        raise OptionValueError(f"must be one of {', '.join(PROTOCOL_ERAS)}")
    return value.lower()


def launch_policy(value: str) -> str:
    """One of :data:`~bridge.core.config.LAUNCH_POLICIES`, in any case; returned in lower case."""
    if value.lower() not in LAUNCH_POLICIES:
        raise OptionValueError(f"must be one of {', '.join(LAUNCH_POLICIES)}")
    return value.lower()


def tool_glob(value: str) -> str:
    """A glob over tool names (``bridge/core/toolfilter.py``): not empty, no control characters."""
    if not value:
        raise OptionValueError("give a glob over tool names, such as 'delete_*', not an empty word")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
        raise OptionValueError("a glob over tool names has no control characters (a line break, a tab)")
    return value


def log_level(value: str) -> str:
    """One of :data:`LOG_LEVELS`, in any case; returned in lower case."""
    if value.lower() not in LOG_LEVELS:
        raise OptionValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return value.lower()


class BridgeOption:
    """One bridge option (a plain class, not a dataclass: building one at import was a
    millisecond of every client's start of the bridge).

    Attributes:
        flag: its spelling, ``--url``; for an on/off switch the "on" one.
        dest: the parsed options' key (and the click parameter's name).
        help: one line for ``--help``.
        default: its value when not given.
        convert: ``str -> value`` (raises :class:`OptionValueError`), or ``None`` for a
            switch, which takes no value.
        metavar: the value's name in help.
        off_flag: an on/off switch's "off" spelling, ``--no-verify-listener``.
        multiple: may be given more than once; the values are a tuple, in order.
        env: an environment variable that gives the value when the option is not given.
        echo: whether messages may repeat the value (see the module docstring).
        config: passed to ``BridgeConfig`` as is, under ``dest`` (whose default it takes).
        choices: the values it takes, for help and shell completion (``--log-level``).
        aliases: other spellings of the same option (``--ignore-tool`` for ``--deny-tool``,
            so that a peer's users can switch); help and docs show the flag.
    """

    __slots__ = (
        "flag", "dest", "help", "default", "convert", "metavar", "off_flag", "multiple", "env", "echo", "config", "choices", "aliases",
    )

    def __init__(
        self,
        flag: str,
        dest: str,
        help: str,
        *,
        default: Any = None,
        convert: Callable[[str], Any] | None = text,
        metavar: str | None = None,
        off_flag: str | None = None,
        multiple: bool = False,
        env: str | None = None,
        echo: Echo = "never",
        config: bool = False,
        choices: tuple[str, ...] = (),
        aliases: tuple[str, ...] = (),
    ) -> None:
        self.flag, self.dest, self.help, self.default, self.convert = flag, dest, help, default, convert
        self.metavar, self.off_flag, self.multiple, self.env, self.echo = metavar, off_flag, multiple, env, echo
        self.config, self.choices, self.aliases = config, choices, aliases

    def __repr__(self) -> str:
        return f"BridgeOption({self.flag!r}, {self.dest!r})"

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every spelling: the flag, its aliases, and the "off" one of a switch."""
        return (self.flag, *self.aliases, *((self.off_flag,) if self.off_flag else ()))


_CONFIG_DEFAULTS = config_defaults()


def _from_config(flag: str, dest: str, help: str, **kwargs: Any) -> BridgeOption:
    """An option that fills ``BridgeConfig.<dest>`` as it is, with that field's default."""
    return BridgeOption(flag, dest, help, default=_CONFIG_DEFAULTS[dest], config=True, **kwargs)


def _switch(flag: str, dest: str, help: str, off_flag: str | None = None) -> BridgeOption:
    return _from_config(flag, dest, help, convert=None, off_flag=off_flag)


#: Every bridge option, in help's order. Taken by the bridge itself and ``check``, and
#: after their own by ``config`` and ``bundle``.
BRIDGE_OPTIONS: tuple[BridgeOption, ...] = (
    _from_config("--url", "url", "The app's MCP endpoint on this machine: http://127.0.0.1:8765/mcp (loopback only), http+unix://%2Fpath%2Fapp.sock/mcp (a Unix socket) or npipe://./pipe/app/mcp (a named pipe, Windows).", metavar="URL"),
    BridgeOption("--app-name", "app_name", "The app's name: used in messages and for its default discovery file.", metavar="NAME", echo="name"),
    BridgeOption("--discovery-file", "discovery_file", "The app's discovery file (endpoint, pid, token), re-read on every reconnect.", convert=file_path, metavar="PATH", echo="path"),
    BridgeOption("--header", "headers", "Extra HTTP header for every request (repeatable).", default=(), metavar="'NAME: VALUE'", multiple=True),
    BridgeOption("--token-env", "token_env", "Bearer token from environment variable VAR (its name in capitals, digits and _, not its value).", metavar="VAR", echo="name"),
    BridgeOption("--token-file", "token_file", "Bearer token from a file (mode 0600).", convert=file_path, metavar="PATH", echo="path"),
    BridgeOption("--token-command", "token_command", "Bearer token printed by a command (run without a shell).", metavar="CMD", echo="program"),
    BridgeOption("--auth-url", "auth_url", "The app's auth route (a URL, or a path on the MCP endpoint): POST the --secret-file, get a token.", metavar="URL"),
    BridgeOption("--secret-file", "secret_file", "The local secret for --auth-url (mode 0600).", convert=file_path, metavar="PATH", echo="path"),
    _from_config("--token-timeout", "token_timeout_seconds", "Bound on getting a token.", convert=seconds, metavar="SECONDS"),
    BridgeOption("--launch", "launch", "Start the app with CMD (no shell) when nothing listens.", metavar="CMD", echo="program"),
    _from_config("--launch-timeout", "launch_timeout_seconds", "Bound on starting the app until it accepts connections.", convert=seconds, metavar="SECONDS"),
    _from_config("--launch-log", "launch_log_file", "Where the launched app's output goes (default: discarded).", convert=file_path, metavar="PATH", echo="path"),
    _from_config("--launch-policy", "launch_policy", "When to start the app: on-call (answer start-up probes from the catalog the app last served, start it for the first call), on-start, never.", convert=launch_policy, metavar="POLICY", choices=LAUNCH_POLICIES),
    _switch("--session-400-heuristic", "session_400_heuristic", "Treat a 400 that mentions the session like a 404 (session gone).", off_flag="--no-session-400-heuristic"),
    _from_config("--connect-timeout", "connect_timeout_seconds", "Bound on connecting to the app.", convert=seconds, metavar="SECONDS"),
    _from_config("--request-timeout", "request_timeout_seconds", "Bound on each reply: its head within this of sending, a JSON body within this of its head; an SSE reply may go this long between events or keep-alives.", convert=seconds, metavar="SECONDS"),
    _from_config("--drain-timeout", "drain_timeout_seconds", "After the client closes stdin, how long requests in flight may still finish; then they are answered shutting_down and cancelled at the app.", convert=seconds, metavar="SECONDS"),
    _from_config("--progress-heartbeat", "progress_heartbeat_seconds", "For a call with a progress token: after this long without a word from the app, send the client a progress notification saying the bridge waits on it (0: never).", convert=seconds_or_zero, metavar="SECONDS"),
    _from_config("--max-message-bytes", "max_message_bytes", "Largest message accepted in either direction.", convert=whole_number(1024), metavar="N"),
    _from_config("--max-concurrent-requests", "max_concurrent_requests", "Requests in flight to the app at once.", convert=whole_number(1), metavar="N"),
    _switch("--allow-remote", "allow_remote", "Allow a non-loopback --url (https only)."),
    _from_config("--protocol-era", "protocol_era", "Which MCP era to speak to the app: auto (the client's; translated when the app does not speak it), legacy (always 2025-11-25), modern (always 2026-07-28).", convert=protocol_era, metavar="ERA", choices=PROTOCOL_ERAS),
    _switch("--merge-list-pages", "merge_list_pages", "For a client that drops pages: answer a tools, prompts, resources or templates list that has a nextCursor with the app's pages merged into one."),
    _from_config("--allow-tool", "allow_tools", "Show the client only the tools whose names match GLOB (repeatable; * and ? as in file names, case-sensitive).", convert=tool_glob, metavar="GLOB", multiple=True),
    _from_config("--deny-tool", "deny_tools", "Hide the tools whose names match GLOB from the client, and refuse their calls (repeatable; wins over --allow-tool; also spelled --ignore-tool).", convert=tool_glob, metavar="GLOB", multiple=True, aliases=("--ignore-tool",)),
    _switch("--read-only", "read_only", "Show the client only the tools the app annotates readOnlyHint: true, and refuse calls of the others."),
    _switch("--verify-listener", "verify_listener", "Check that the app (this user's process, the discovery file's pid) listens on the port, or serves the Unix socket or named pipe, before sending anything there.", off_flag="--no-verify-listener"),
    BridgeOption("--log-level", "log_level", f"The bridge's diagnostics level: {', '.join(LOG_LEVELS)} (always stderr or --log-file, never stdout; other libraries log warnings and errors only).", default="warning", convert=log_level, metavar="LEVEL", choices=LOG_LEVELS),
    BridgeOption("--log-file", "log_file", "Write diagnostics to PATH instead of stderr.", convert=file_path, metavar="PATH", echo="path"),
)


def defaults() -> dict[str, Any]:
    """Every option's value when it is not given, keyed by ``dest`` (a new dict)."""
    return {option.dest: option.default for option in BRIDGE_OPTIONS}
