"""The one table of bridge options (bridge/cli/optiontable.py) against what is built from
it: the click command's options, the click-free parser of a client's plain command line,
BridgeConfig's defaults, and the options table of docs/usage.md. A row changed in one of
them and not in the table fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest

from bridge.cli import serve as servecli
from bridge.cli.buildconfig import build_config
from bridge.cli.commands import check, main
from bridge.cli.optiontable import BRIDGE_OPTIONS, LOG_LEVELS, BridgeOption, OptionValueError, defaults
from bridge.cli.serve import PLAIN_DEFAULTS
from bridge.core.config import DEFAULT_LAUNCH_TIMEOUT_SECONDS, BridgeConfig, config_defaults

ROOT = Path(__file__).resolve().parents[2]

#: BridgeConfig fields no option fills as they are: built by build_config from other
#: options, or for library users only.
NOT_AN_OPTION_AS_IS = {
    "discovery_file",  # --discovery-file, or --app-name's default file
    "app_name",  # --app-name, "The app" when not given
    "headers",  # --header, parsed into pairs
    "token",  # library only: a fixed token
    "token_source",  # --token-env, --token-file, --token-command, --auth-url
    "launch_command",  # --launch, split into words
    "ensure_running",  # library only
    "shutdown_grace_seconds",  # fixed for the command (Claude Code's SIGINT-to-SIGKILL window)
    "delete_timeout_seconds",  # fixed for the command
}


def click_options(command: click.Command) -> dict[str, click.Option]:
    return {param.name: param for param in command.params if isinstance(param, click.Option) and param.name not in ("version", "help")}


#: ``check``'s own options, beside the bridge's (``check --client codex [--name NAME]``, ``check --all``).
CHECK_OWN_OPTIONS = ("client", "names", "walk_all")


@pytest.mark.parametrize("command", [main, check], ids=["bridge", "check"])
def test_the_click_options_are_the_tables(command: click.Command) -> None:
    built = {name: param for name, param in click_options(command).items() if command is main or name not in CHECK_OWN_OPTIONS}
    assert list(built) == [option.dest for option in BRIDGE_OPTIONS]
    for option in BRIDGE_OPTIONS:
        param = built[option.dest]
        assert (param.opts, param.secondary_opts) == ([option.flag, *option.aliases], [option.off_flag] if option.off_flag else []), option.flag
        assert param.default == option.default, option.flag
        assert param.help == option.help and param.envvar == option.env, option.flag
        assert param.multiple == option.multiple and param.is_flag == (option.convert is None), option.flag
        if option.convert is not None:
            assert param.metavar == option.metavar, option.flag


def test_the_plain_parser_is_the_tables() -> None:
    assert PLAIN_DEFAULTS == defaults() == {option.dest: option.default for option in BRIDGE_OPTIONS}
    spellings = {spelling: option for option in BRIDGE_OPTIONS for spelling in option.spellings}
    assert set(servecli._VALUE_OPTIONS) | set(servecli._FLAGS) == set(spellings)
    for spelling, option in spellings.items():
        if option.convert is None:
            assert servecli._FLAGS[spelling] == (option.dest, spelling == option.flag)
        else:
            assert servecli._VALUE_OPTIONS[spelling] is option
    assert servecli._ENV_VARIABLES == tuple(option.env for option in BRIDGE_OPTIONS if option.env)


def test_the_defaults_are_bridgeconfigs() -> None:
    fields = config_defaults()
    assert set(fields) == set(BridgeConfig.__slots__)
    as_is = {option.dest for option in BRIDGE_OPTIONS if option.config}
    assert as_is | NOT_AN_OPTION_AS_IS == set(fields) and not as_is & NOT_AN_OPTION_AS_IS
    for option in BRIDGE_OPTIONS:
        if option.config:
            assert option.default == fields[option.dest], option.flag
    assert fields["launch_timeout_seconds"] == DEFAULT_LAUNCH_TIMEOUT_SECONDS == 30.0


def test_every_option_reaches_bridgeconfig_as_given(tmp_path: Path) -> None:
    """build_config passes every ``config`` option on: a value other than the default
    comes out in the configuration."""
    other: dict[type, Any] = {bool: None, float: 7.5, int: 4096, tuple: ("a*", "b?")}
    options = defaults() | {"url": "http://127.0.0.1:9/other", "discovery_file": tmp_path / "d.json"}
    for option in BRIDGE_OPTIONS:
        if option.config and option.dest not in ("url", "discovery_file", "launch_log_file", "launch_policy", "protocol_era"):
            default = option.default
            options[option.dest] = (not default) if isinstance(default, bool) else other[type(default)]
    options["launch_log_file"] = tmp_path / "launch.log"
    options["launch_policy"] = "never"
    options["protocol_era"] = "modern"
    config = build_config(options)
    for option in BRIDGE_OPTIONS:
        if option.config:
            assert getattr(config, option.dest) == options[option.dest] != option.default, option.flag


def test_the_converters_never_repeat_a_value_they_refuse() -> None:
    secret = "sk-live-notanumber0123456789"
    for option in BRIDGE_OPTIONS:
        if option.convert is None:
            continue
        try:
            option.convert(secret)
        except OptionValueError as exc:
            assert secret not in str(exc), option.flag
    (level_option,) = [option for option in BRIDGE_OPTIONS if option.flag == "--log-level"]
    assert level_option.convert is not None
    assert [level_option.convert(level.upper()) for level in LOG_LEVELS] == list(LOG_LEVELS)  # click's Choice took any case


def test_the_echo_classes_are_as_documented() -> None:
    """Only paths and checked names may be repeated in a message."""
    echo = {option.flag: option.echo for option in BRIDGE_OPTIONS if option.echo != "never"}
    assert echo == {
        "--app-name": "name",
        "--launch": "program",
        "--token-command": "program",
        "--token-env": "name",
        "--discovery-file": "path",
        "--token-file": "path",
        "--secret-file": "path",
        "--launch-log": "path",
        "--log-file": "path",
    }


def _usage_rows() -> dict[str, tuple[str, str]]:
    """docs/usage.md's options table: {spelling as written: (default cell, meaning)}."""
    text = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`--"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def _written(option: BridgeOption) -> str:
    if option.off_flag:
        return f"`--[no-]{option.flag[2:]}`"
    return f"`{option.flag} {option.metavar}`" if option.metavar else f"`{option.flag}`"


def _default_cell(option: BridgeOption) -> str:
    default = option.default
    if isinstance(default, bool):
        return "on" if default else "off"
    if default is None or default == ():
        return "—"
    if isinstance(default, str):
        return f"`{default}`"
    return f"{default:g}" if isinstance(default, float) else str(default)


def test_docs_usage_lists_every_option_with_its_default() -> None:
    rows = _usage_rows()
    written = {_written(option): option for option in BRIDGE_OPTIONS}
    # --auth-url and --secret-file share one row
    rows |= {"`--auth-url URL`": rows["`--auth-url URL` + `--secret-file PATH`"], "`--secret-file PATH`": rows["`--auth-url URL` + `--secret-file PATH`"]}
    del rows["`--auth-url URL` + `--secret-file PATH`"]
    assert set(rows) - {"`--version`, `-h`/`--help`"} == set(written)
    for spelling, option in written.items():
        assert re.match(re.escape(_default_cell(option)) + r"\b|" + re.escape(_default_cell(option)) + "$", rows[spelling][0]), (
            spelling,
            rows[spelling][0],
        )


def test_ignore_tool_is_a_spelling_of_deny_tool() -> None:
    """mcp-remote's and fastmcp-remote's ``--ignore-tool``, so that their users can switch;
    both spellings fill one list, in the order given, in both parsers."""
    from bridge.cli.options import parse_bridge_args

    argv = ["--url", "http://127.0.0.1:9/mcp", "--ignore-tool", "a*", "--deny-tool", "b?", "--allow-tool", "*", "--read-only"]
    plain = servecli.parse_plain_argv(argv)
    assert plain is not None and plain["deny_tools"] == ("a*", "b?") and plain["allow_tools"] == ("*",) and plain["read_only"]
    parsed = parse_bridge_args(argv)
    assert parsed["deny_tools"] == ("a*", "b?") and parsed["allow_tools"] == ("*",) and parsed["read_only"] is True
    config = build_config(parsed)
    assert (config.deny_tools, config.allow_tools, config.read_only) == (("a*", "b?"), ("*",), True)


def test_an_empty_glob_is_refused_without_repeating_anything() -> None:
    from bridge.cli.options import parse_bridge_args

    with pytest.raises(click.UsageError, match="empty word"):
        parse_bridge_args(["--url", "http://127.0.0.1:9/mcp", "--deny-tool", ""])
