"""Bridge options into a configuration, without click: :func:`build_config` and what it
needs, shared by the click command (``options.py``) and the plain serving start
(``serve.py``), which must not load click. Errors are click's usage errors, as before:
click is imported only to raise one, and the click command reports it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.config import (
    DEFAULT_APP_NAME,
    BridgeConfig,
    ConfigError,
    check_endpoint_url,
    is_conventional_variable,
    parse_header,
    variable_in_message,
)
from .optiontable import BRIDGE_OPTIONS

__all__ = ["build_config", "check_variable_name", "split_command"]

_TOKEN_OPTIONS = ("--token-env", "--token-file", "--token-command", "--auth-url")


def _click() -> Any:
    """click, imported only to raise one of its errors."""
    import click

    return click


def split_command(command: str, *, windows: bool | None = None) -> list[str]:
    """Split a command line into words as the OS's programs read theirs, without a shell.

    POSIX: as a POSIX shell splits words (``shlex.split``). Windows (``windows``; default:
    this OS): as the C runtime's ``CommandLineToArgvW`` does (Microsoft, "Parsing C++
    command-line arguments"): double quotes group words and are removed, so
    ``"C:\\Program Files\\MyApp\\myapp.exe" --x`` is two words, the first without its
    quotes; backslashes are literal except before a double quote, where ``2n`` of them
    give ``n`` and the quote groups, and ``2n+1`` give ``n`` and a literal quote.

    Raises:
        ValueError: unbalanced quotes (POSIX), or no words at all.
    """
    if os.name == "nt" if windows is None else windows:
        words = _split_windows(command)
    else:
        import shlex  # (only with a launch command: not on every start)

        words = shlex.split(command)
    if not words:
        raise ValueError("the command is empty")
    return words


def _split_windows(command: str) -> list[str]:
    """``command`` split by the rules of :func:`split_command` for Windows."""
    words: list[str] = []
    word: list[str] = []
    in_word = quoted = False
    index = 0
    while index < len(command):
        char = command[index]
        if char == "\\":
            end = index
            while end < len(command) and command[end] == "\\":
                end += 1
            count = end - index
            if end < len(command) and command[end] == '"':
                word.append("\\" * (count // 2))
                if count % 2:
                    word.append('"')
                    index = end + 1
                else:
                    index = end  # the quote groups, below
            else:
                word.append("\\" * count)
                index = end
            in_word = True
            continue
        if char == '"':
            if quoted and command[index + 1 : index + 2] == '"':  # "" inside quotes: a literal quote
                word.append('"')
                index += 2
            else:
                quoted = not quoted
                index += 1
            in_word = True
            continue
        if char in " \t" and not quoted:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
        else:
            word.append(char)
            in_word = True
        index += 1
    if in_word:
        words.append("".join(word))
    return words


def check_variable_name(name: str) -> None:
    """Check ``--token-env``'s value: a variable's name, not its value.

    The name must be conventional: capital letters, digits and ``_``, not starting with a
    digit, at most 64 characters (POSIX names the environment variables of its utilities
    so, IEEE Std 1003.1 §8.1). A name of any letters would let through the many tokens
    that are valid identifiers (``ghp_…``, ``sk_live_…``), which the bridge would then name
    in its errors and ``config`` would write into a client's file.

    Raises:
        click.BadParameter: not such a name, or the value of a variable set here (a shell
            that expanded ``--token-env $MYAPP_TOKEN``). The message does not repeat it: it
            may be the token.
    """
    if not is_conventional_variable(name):
        raise _click().BadParameter(
            "it takes a variable's name in capitals, digits and _, such as MYAPP_TOKEN; the value given is not one "
            "(the token itself?) and is not repeated here",
            param_hint="--token-env",
        )
    if name not in os.environ and any(value == name for value in os.environ.values()):
        raise _click().BadParameter(
            "the value is the value of an environment variable, not its name (a shell expanded $VAR?), "
            "so it is not repeated here: give the variable's name, such as MYAPP_TOKEN",
            param_hint="--token-env",
        )


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
        raise _click().UsageError(f"give at most one token source, not {' and '.join(given)}")
    if (auth_url is None) != (secret_file is None):
        raise _click().UsageError("--auth-url and --secret-file go together")
    from ..app import tokens  # the I/O side: imported only once the options are known to be good

    if token_env is not None:
        check_variable_name(token_env)
        if not os.environ.get(token_env, "").strip():
            raise _click().BadParameter(f"{variable_in_message(token_env)} is not set or is empty", param_hint="--token-env")
        return tokens.EnvTokenSource(token_env)
    if token_file is not None:
        _refuse_open_file(token_file, "--token-file")
        return tokens.FileTokenSource(token_file)
    if token_command is not None:
        try:
            argv = split_command(token_command)
        except ValueError as exc:
            raise _click().BadParameter(str(exc), param_hint="--token-command") from None
        from ..app.tokencommand import CommandTokenSource  # its process machinery only when asked for

        return CommandTokenSource(argv, timeout_seconds=token_timeout_seconds)
    if auth_url is not None and secret_file is not None:
        _refuse_open_file(secret_file, "--secret-file")
        try:
            if not auth_url.startswith("/"):  # a path is resolved against the MCP endpoint
                check_endpoint_url(auth_url, allow_remote=allow_remote)
        except ConfigError as exc:
            raise _click().BadParameter(str(exc).replace("--url", "--auth-url"), param_hint="--auth-url") from None
        return tokens.AuthRouteTokenSource(auth_url, secret_file)
    return None


def _refuse_open_file(path: Path, option: str) -> None:
    """A secret file that exists must pass OpenSSH's rules (``bridge/system/privatefile.py``); it
    may appear later: the app can create it when it starts."""
    from ..system.privatefile import UnsafeFileError, read_private_file

    try:
        read_private_file(path, option.lstrip("-").replace("-", " "))
    except UnsafeFileError as exc:
        raise _click().BadParameter(str(exc), param_hint=option) from None
    except OSError:
        pass  # missing or unreadable now: the token source says so when it is needed


def build_config(options: dict[str, Any], *, require_env: bool = True) -> BridgeConfig:
    """Turn parsed bridge options into a configuration (raises click usage errors)."""
    url, app_name, discovery_file = options["url"], options["app_name"], options["discovery_file"]
    if url is None and discovery_file is None and app_name is None:
        raise _click().UsageError("give the app's endpoint: --url URL, --discovery-file PATH or --app-name NAME")
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
    if not require_env and options["token_env"] is not None:
        check_variable_name(options["token_env"])
        if source is not None:
            raise _click().UsageError("give at most one token source")
    launch_command = None
    if options["launch"] is not None:
        try:
            launch_command = tuple(split_command(options["launch"]))
        except ValueError as exc:
            raise _click().BadParameter(str(exc), param_hint="--launch") from None
    try:
        return BridgeConfig(
            discovery_file=discovery_file,
            app_name=DEFAULT_APP_NAME if app_name is None else app_name,
            headers=tuple(parse_header(text) for text in options["headers"]),
            token_source=source,
            launch_command=launch_command,
            **{option.dest: options[option.dest] for option in BRIDGE_OPTIONS if option.config},
        )
    except ConfigError as exc:
        raise _click().UsageError(str(exc)) from None
