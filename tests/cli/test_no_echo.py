"""No message, reply or log line repeats an option's value, unless it is a file's path or a
name that passed a name check: a value may be a secret given by mistake (a token passed to
``--token-env`` by a shell that expanded ``$MYAPP_TOKEN``, ``Bearer <token>``, a URL with
a key, a token split off its ``--header`` and left as a stray argument).

Every option of the click command, with a secret-shaped value, through both parsers
(in-process), and through a real ``python -m bridge`` started as a client starts it (stdin
not a terminal): the error served to ``initialize`` (reason ``not_configured``), stderr and
the log file. The options are taken from the click command itself, so that this file
also runs against a version without the option table."""

from __future__ import annotations

import asyncio
import json
import secrets
import string
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import click
import pytest

from bridge.cli.commands import main
from bridge.cli.serve import parse_plain_argv

ROOT = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:9/mcp"  # (the discard port: nothing listens)


def _secret() -> str:
    return "sk-live-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))


SECRET = _secret()

#: Options whose value may be repeated: file paths (names that pass a name check are given
#: values that fail it).
PATHS = {"--discovery-file", "--token-file", "--secret-file", "--launch-log", "--log-file"}


def _value_options() -> list[str]:
    return [
        param.opts[0]
        for param in main.params
        if isinstance(param, click.Option) and not param.is_flag and param.name not in ("version", "help")
    ]


def _switches() -> list[str]:
    return [
        spelling
        for param in main.params
        if isinstance(param, click.Option) and param.is_flag and param.name not in ("version", "help")
        for spelling in param.opts + param.secondary_opts
    ]


#: Commands: the program (a file's path) may be named, never its arguments.
PROGRAMS = {"--launch", "--token-command"}


def _value_for(option: str) -> str:
    if option in PROGRAMS:
        return f"no-such-program-here {SECRET}"
    if option == "--app-name":  # a name with a "/" fails the name check (a base64 token may have one)
        return SECRET[:20] + "/" + SECRET[20:]
    return SECRET


def _cases() -> list[tuple[str, list[str], str]]:
    """(id, argv, the secret) for every option, and the shapes the issue names."""
    cases = []
    for option in _value_options():
        if option in PATHS:
            continue
        value = _value_for(option)
        extra = ["--secret-file", "/nonexistent/secret"] if option == "--auth-url" else []
        secret = SECRET if option in PROGRAMS else value
        cases.append((f"{option} alone", [option, value, *extra], secret))
        cases.append((f"{option} with --url", ["--url", URL, option, value, *extra] if option != "--url" else [option, value], secret))
    for switch in _switches():
        cases.append((f"{switch}=value", ["--url", URL, f"{switch}={SECRET}"], SECRET))
    cases += [
        ("--token-env Bearer", ["--url", URL, "--token-env", f"Bearer {SECRET}"], SECRET),
        ("--header Bearer", ["--url", URL, "--header", f"Bearer {SECRET}"], SECRET),
        ("--header Authorization", ["--url", URL, "--header", f"Authorization: Bearer {SECRET}"], SECRET),
        ("--header control", ["--url", URL, "--header", f"X-Key: {SECRET}\x01"], SECRET),
        ("--url port", ["--url", f"http://127.0.0.1:{SECRET}/mcp"], SECRET),
        ("--url host", ["--url", f"http://{SECRET}.example/mcp"], SECRET),
        ("--url scheme", ["--url", f"{SECRET}://127.0.0.1:9/mcp"], SECRET),
        ("--auth-url port", ["--url", URL, "--auth-url", f"http://127.0.0.1:{SECRET}/t", "--secret-file", "/nonexistent/s"], SECRET),
        ("--auth-url host", ["--url", URL, "--auth-url", f"http://{SECRET}.example/t", "--secret-file", "/nonexistent/s"], SECRET),
        ("stray argument", ["--url", URL, "--header", "Authorization:", "Bearer", SECRET], SECRET),
        ("token split off its --header", ["--url", URL, "--header", "X-Api-Key:", SECRET], SECRET),
        ("stray argument after check", ["check", "--url", URL, SECRET], SECRET),
        ("stray first", [SECRET, "--url", URL], SECRET),
        ("--token-env expanded", ["--url", URL, "--token-env", "expanded_" + SECRET.replace("-", "_")], "expanded_" + SECRET.replace("-", "_")),
    ]
    return cases


CASES = _cases()


def _env(**more: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_APP_BRIDGE")}
    # "--token-env expanded": the token is the value of a variable set here, as when a shell
    # expanded `--token-env $MYAPP_TOKEN`.
    env["MYAPP_TOKEN"] = "expanded_" + SECRET.replace("-", "_")
    return env | more


def _repeats(text: str, secret: str) -> bool:
    """Whether ``text`` holds ``secret`` or a good part of it, in any case (a host name or a
    scheme comes back in lower case)."""
    return secret.lower() in text.lower() or secret[8:30].lower() in text.lower()


def _in_process_messages(argv: list[str]) -> list[str]:
    """What both parsers, and building the configuration, say about ``argv``."""
    from bridge.cli.buildconfig import build_config

    said = []
    plain = parse_plain_argv(argv)
    if plain is not None:
        try:
            build_config(plain)
        except click.ClickException as exc:
            said.append(exc.format_message())
    try:
        with main.make_context("mcp-app-bridge", list(argv)) as ctx:
            with warnings.catch_warnings():  # (click 8.2 deprecates protected_args, 8.1 needs it)
                warnings.simplefilter("ignore", DeprecationWarning)
                rest = [*ctx.protected_args, *ctx.args]
            if not rest:
                build_config(dict(ctx.params))
            else:  # what the group does with a command, as it would run it
                _name, command, args = main.resolve_command(ctx, rest)
                assert command is not None
                with command.make_context(_name, args, parent=ctx) as sub:
                    build_config(dict(sub.params))
    except click.ClickException as exc:
        said.append(exc.format_message())
    return said


@pytest.mark.parametrize(("argv", "secret"), [(argv, secret) for _, argv, secret in CASES], ids=[case for case, _, _ in CASES])
def test_no_parser_repeats_the_value(monkeypatch: pytest.MonkeyPatch, argv: list[str], secret: str) -> None:
    monkeypatch.setenv("MYAPP_TOKEN", "expanded_" + SECRET.replace("-", "_"))
    monkeypatch.setattr("bridge.cli.diagnostics.stdin_is_a_terminal", lambda: True)  # (never serve in-process)
    for said in _in_process_messages(argv):
        assert not _repeats(said, secret), said


def _initialize() -> bytes:
    message = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    return json.dumps(message).encode() + b"\n"


SERVED = [(case, argv, secret) for case, argv, secret in CASES if "alone" not in case]


@pytest.mark.process
@pytest.mark.parametrize(("argv", "secret"), [(argv, secret) for _, argv, secret in SERVED], ids=[case for case, _, _ in SERVED])
def test_a_client_started_bridge_never_repeats_the_value(tmp_path: Path, argv: list[str], secret: str) -> None:
    """A real bridge, stdin a pipe: the reply to ``initialize`` (the start-up error served
    to every request, or the app's failure), stderr and the log file."""
    log_file = tmp_path / "bridge.log"
    with_log = [*argv, "--log-file", str(log_file), "--log-level", "debug", "--connect-timeout", "2", "--launch-timeout", "2"]
    if "check" in argv or any(word.startswith(("--log-file", "--log-level", "--connect-timeout", "--launch-timeout")) for word in argv):
        with_log = argv
    done = subprocess.run(
        [sys.executable, "-m", "bridge", *with_log], input=_initialize(), capture_output=True, timeout=60, cwd=ROOT, env=_env()
    )
    seen: dict[str, Any] = {"stdout": done.stdout.decode(errors="replace"), "stderr": done.stderr.decode(errors="replace")}
    if log_file.exists():
        seen["log"] = log_file.read_text(encoding="utf-8", errors="replace")
    assert done.stdout or done.stderr  # it said something
    for where, text in seen.items():
        assert not _repeats(text, secret), (where, text[-2000:])


@pytest.mark.parametrize("verb", ["print", "install"])
def test_config_never_repeats_a_stray_bridge_argument(tmp_path: Path, verb: str) -> None:
    """``config`` parses the bridge arguments after its own: a token split off its
    ``--header`` there is refused without being repeated, and nothing is written."""
    from click.testing import CliRunner

    target = tmp_path / "c.json"
    args = ["config", verb, "--client", "cursor", "--name", "x", *(["--path", str(target)] if verb == "install" else []),
            "--url", URL, "--header", "X-Api-Key:", SECRET]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and not _repeats(result.output, SECRET), result.output
    assert "bridge option: an argument is not an option" in result.output
    assert not target.exists()


def test_a_start_up_error_is_masked_again_before_it_is_served() -> None:
    """The second guard (bridge/cli/diagnostics.py): a value of an option that takes text
    is masked in a start-up error, whatever produced the message."""
    from bridge.cli.diagnostics import mask_option_values

    argv = ["--url", f"http://127.0.0.1:9/mcp?key={SECRET}", f"--header=X-Key: {SECRET}", "--app-name", "MyApp"]
    masked = mask_option_values(f"bad: http://127.0.0.1:9/mcp?key={SECRET} and X-Key: {SECRET}; MyApp", argv)
    assert masked == "bad: <the --url value> and <the --header value>; MyApp"
    assert mask_option_values("at least 1024", ["--url", "1024"]) == "at least 1024"  # too short to mask


def test_a_token_that_is_a_valid_identifier_is_not_named_as_a_variable() -> None:
    """``--token-env ghp_…``: a token of letters, digits and ``_`` passes the name check, and
    'environment variable <token> is not set' would repeat it in every reply and log line."""
    from bridge.app.tokens import EnvTokenSource, TokenSourceError
    from bridge.core.config import variable_in_message

    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    assert token not in variable_in_message(token)
    assert variable_in_message("MYAPP_TOKEN") == "environment variable MYAPP_TOKEN"
    source = EnvTokenSource(token)
    assert token not in source.description
    with pytest.raises(TokenSourceError) as caught:
        asyncio.run(source.fetch(None))  # type: ignore[arg-type]
    assert token not in str(caught.value) and "not set" in str(caught.value)


@pytest.mark.process
@pytest.mark.parametrize("command", [["config", "print", "--client", "codex"], ["config", "install", "--client", "claude-code", "--path", "client.json"]])
def test_config_refuses_a_token_given_to_token_env_and_writes_nothing(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token of letters, digits and _ (``ghp_…``) passed the name check, and ``config``
    wrote it into the client's file and repeated it in its warnings."""
    token = "ghp_" + secrets.token_hex(16)
    target = tmp_path / "client.json"
    monkeypatch.chdir(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "bridge", *command, "--name", "t", "--app-name", "DemoApp", "--token-env", token],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert token not in result.stdout + result.stderr
    assert "MYAPP_TOKEN" in result.stderr
    assert not target.exists() and not (tmp_path / ".mcp.json").exists()
