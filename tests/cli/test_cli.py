"""The command line: options, help, exit codes, and nothing but the wire on stdout.

CliRunner runs in-process, so it covers option handling only; the stdio loop itself is
tested with real subprocesses in processes.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge import __version__
from bridge.cli.commands import main

TOKEN = "tok-PLACEHOLDER-0123456789"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(autouse=True)
def run_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """CliRunner stands for a person at a terminal: a configuration error exits 2 at once
    (a client-started bridge answers requests with it instead: test_startup_errors.py)."""
    monkeypatch.setattr("bridge.cli.diagnostics.stdin_is_a_terminal", lambda: True)


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ([], {}, "give the app's endpoint"),
        (["--url", "http://192.168.1.10:8000/mcp"], {}, "not a loopback address"),
        (["--url", "http://example.com/mcp", "--allow-remote"], {}, "only accepts https"),
        (["--url", "ftp://127.0.0.1/mcp"], {}, "http:// or https://"),
        (["--url", "http://user:pw@127.0.0.1/mcp"], {}, "user name or password"),
        (["--url", "http://127.0.0.1:1/mcp", "--header", "NoColon"], {}, "Name: value"),
        (["--url", "http://127.0.0.1:1/mcp", "--header", "Authorization: Bearer x"], {}, "set by the bridge"),
        (["--url", "http://127.0.0.1:1/mcp", "--token-env", "UNSET_VAR_FOR_TEST"], {}, "UNSET_VAR_FOR_TEST is not set"),
        (["--url", "http://127.0.0.1:1/mcp", "--token-env", "A", "--token-file", "f"], {"A": TOKEN}, "at most one"),
        (["--url", "http://127.0.0.1:1/mcp", "--token-command", "x", "--auth-url", "http://127.0.0.1:1/a", "--secret-file", "s"], {}, "at most one"),
        (["--url", "http://127.0.0.1:1/mcp", "--auth-url", "http://127.0.0.1:1/auth"], {}, "go together"),
        (["--url", "http://127.0.0.1:1/mcp", "--auth-url", "http://203.0.113.5/auth", "--secret-file", "s"], {}, "not a loopback"),
        (["--url", "http://127.0.0.1:1/mcp", "--token-command", "  "], {}, "empty"),
        (["--url", "http://127.0.0.1:1/mcp", "--launch", ""], {}, "empty"),
        (["--url", "http://127.0.0.1:1/mcp", "--launch-timeout", "0"], {}, "--launch-timeout"),
        (["--url", "http://127.0.0.1:1/mcp", "--request-timeout", "0"], {}, "--request-timeout"),
        (["--url", "http://127.0.0.1:1/mcp", "--max-message-bytes", "10"], {}, "--max-message-bytes"),
        (["--url", "http://127.0.0.1:1/mcp", "--log-level", "loud"], {}, "--log-level"),
        (["--url", "http://127.0.0.1:1/mcp", "--bogus"], {}, "No such option"),
    ],
)
def test_bad_options_exit_2_with_a_message_on_stderr_and_nothing_on_stdout(
    runner: CliRunner, args: list[str], env: dict[str, str], says: str
) -> None:
    result = runner.invoke(main, args, env=env)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert says in result.stderr
    assert TOKEN not in result.stderr


def test_header_with_a_newline_is_refused_as_header_injection(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--url", "http://127.0.0.1:1/mcp", "--header", "X-A: 1\r\nX-B: 2"])
    assert result.exit_code == 2 and "control or non-ASCII character" in result.stderr


def test_help_and_version_go_to_stdout_and_exit_0(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--help"])
    assert result.exit_code == 0 and "--url" in result.stdout and "--token-env" in result.stdout
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.stdout


@pytest.mark.process
def test_python_dash_m_bridge_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "--url", "http://10.1.2.3/mcp"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30
    )
    assert done.returncode == 2
    assert done.stdout == b""
    assert b"not a loopback address" in done.stderr


def test_mcp_stdio_option_branches_before_the_apps_own_code_with_its_parsed_options() -> None:
    """A Python app's `--mcp-stdio` builds the bridge's configuration from the app's own
    options, wherever the flag stands, and never runs the command body (its GUI)."""
    import click

    from bridge import BridgeConfig, mcp_stdio_option

    body_ran: list[str] = []
    seen: list[dict[str, object]] = []

    def make_config(params: dict[str, object]) -> BridgeConfig:
        seen.append(params)
        return BridgeConfig(url="http://10.0.0.1/mcp")  # refused: the bridge stops right here

    @click.command()
    @click.option("--profile", default="default")
    @mcp_stdio_option(make_config)
    def app(profile: str) -> None:
        body_ran.append(profile)

    result = CliRunner().invoke(app, ["--mcp-stdio", "--profile", "work"])
    assert body_ran == [] and seen == [{"profile": "work"}]
    assert isinstance(result.exception, Exception)  # the bad configuration, not the GUI
    result = CliRunner().invoke(app, ["--profile", "home"])
    assert body_ran == ["home"] and result.exit_code == 0


@pytest.mark.posix_only("file modes (0644) are POSIX")
def test_a_token_file_others_may_read_is_refused_at_start(runner: CliRunner, tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o644)
    result = runner.invoke(main, ["--url", "http://127.0.0.1:1/mcp", "--token-file", str(token_file)])
    assert result.exit_code == 2 and "chmod 600" in result.stderr and TOKEN not in result.stderr


def test_config_print_warns_when_the_token_variable_is_not_set_here(runner: CliRunner) -> None:
    result = runner.invoke(
        main,
        ["config", "print", "--client", "cursor", "--name", "x", "--url", "http://127.0.0.1:1/mcp", "--token-env", "UNSET_FOR_TEST"],
    )
    assert result.exit_code == 0 and "UNSET_FOR_TEST is not set here" in result.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["check", "--help"], ["endpoint -> connect", "-> ping"]),
        (["check", "--url", "URL"], ["OK endpoint", "X connect", "the check failed"]),
    ],
    ids=["check --help", "check"],
)
def test_check_prints_ascii_marks_on_a_console_that_cannot_encode_them(args: list[str], expected: list[str]) -> None:
    """Windows Python writes piped output in cp1252, which has neither ✓ nor →."""
    from support.scripted import closed_port

    args = [arg.replace("URL", f"http://127.0.0.1:{closed_port()}/mcp") for arg in args]
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "PYTHONUTF8": "0"}
    done = subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, timeout=60, env=env)
    stdout, stderr = done.stdout.decode("cp1252"), done.stderr.decode("cp1252", errors="replace")
    assert "Traceback" not in stderr and "UnicodeEncodeError" not in stderr, stderr
    assert done.returncode == (0 if "--help" in args else 1), stderr
    for text in expected:
        assert text in stdout, stdout


def test_version_option_and_version_command_print_the_same(runner: CliRunner) -> None:
    option = runner.invoke(main, ["--version"])
    command = runner.invoke(main, ["version"])
    assert option.exit_code == command.exit_code == 0
    assert option.stdout == command.stdout == f"mcp-app-bridge {__version__}\n"


def test_request_timeout_help_says_what_the_code_does(runner: CliRunner) -> None:
    """A total bound on the head and a JSON body, an idle bound between SSE events (the
    README's "Time bounds"), not "silence": bytes dripped in do not extend it."""
    import re

    text = " ".join(runner.invoke(main, ["--help"]).stdout.split())
    found = re.search(r"--request-timeout SECONDS (.*?)\[default", text)
    assert found is not None, text
    help_text = found.group(1)
    assert "silence" not in help_text
    assert "head" in help_text and "JSON body" in help_text and "SSE" in help_text


def test_the_build_readme_gives_the_build_ci_runs_and_the_prerequisites() -> None:
    from support.apps import REPO_ROOT as root
    build_readme = (root / "build" / "README.md").read_text(encoding="utf-8")
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    command = "pyinstaller --noconfirm --clean --distpath build/out --workpath build/work build/mcp-app-bridge.spec"
    assert command in build_readme and command in ci
    assert "binutils" in build_readme and "python3-venv" in build_readme
    frozen_page = (root / "docs" / "frozen.md").read_text(encoding="utf-8")
    assert "binutils" in frozen_page and "python3-venv" in frozen_page


@pytest.mark.parametrize("own_option", [False, True], ids=["bridge's --log-level", "the app's own --log-level"])
def test_mcp_stdio_takes_log_level(monkeypatch: pytest.MonkeyPatch, own_option: bool) -> None:
    """``MyApp --mcp-stdio --log-level debug`` as an entry for mcp-app-bridge would read:
    the bridge half logs at that level. An app with a ``--log-level`` of its own keeps it
    (no duplicate option), and the bridge half follows its value."""
    import warnings

    import click

    from bridge import BridgeConfig, mcp_stdio_option
    from bridge.cli import appflag

    levels: list[str] = []
    monkeypatch.setattr(appflag, "setup_logging", lambda level, log_file: levels.append(level))
    monkeypatch.setattr("bridge.serve.loop.run_stdio", lambda config: 0)

    def make_config() -> BridgeConfig:
        return BridgeConfig(url="http://127.0.0.1:9/mcp")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # click warns about an option given twice
        if own_option:  # declared above mcp_stdio_option, the usual way

            @click.command()
            @click.option("--log-level", default="INFO")
            @mcp_stdio_option(make_config)
            def command(log_level: str) -> None:
                raise AssertionError("the app's body ran")

        else:

            @click.command()
            @mcp_stdio_option(make_config)
            def command() -> None:
                raise AssertionError("the app's body ran")

        result = CliRunner().invoke(command, ["--mcp-stdio", "--log-level", "debug"])
        assert result.exit_code == 0, result.output
        assert levels == ["debug"]
        assert result.output == "" and CliRunner().invoke(command, ["--help"]).output.count("--log-level") == 1


def test_mcp_stdio_refuses_a_log_level_it_does_not_know() -> None:
    import click

    from bridge import BridgeConfig, mcp_stdio_option

    @click.command()
    @mcp_stdio_option(lambda: BridgeConfig(url="http://127.0.0.1:9/mcp"))
    def app() -> None:
        pass

    result = CliRunner().invoke(app, ["--mcp-stdio", "--log-level", "loud"])
    assert result.exit_code == 2 and "must be one of debug, info, warning, error" in result.output


@pytest.mark.parametrize("client", ["claude-desktop", "cursor"])
def test_config_install_writes_nothing_for_a_desktop_client_without_the_token(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """A client that gets a --token-env token only from its entry, with the variable not set
    here: the entry would only make the bridge refuse to start. Status 1, nothing written,
    and the message says what to do."""
    monkeypatch.delenv("UNSET_FOR_TEST", raising=False)
    target = tmp_path / "config.json"
    args = ["config", "install", "--client", client, "--name", "x", "--path", str(target),
            "--url", "http://127.0.0.1:1/mcp", "--token-env", "UNSET_FOR_TEST"]
    result = runner.invoke(main, args)
    assert result.exit_code == 1 and not target.exists()
    assert "UNSET_FOR_TEST is not set here" in result.stderr and "was not changed" in result.stderr
    assert "run the same command again" in result.stderr and "UNSET_FOR_TEST=" in result.stderr
    monkeypatch.setenv("UNSET_FOR_TEST", TOKEN)
    result = runner.invoke(main, args)
    assert result.exit_code == 0 and target.exists()


def test_config_install_for_a_client_that_passes_the_variable_still_writes(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UNSET_FOR_TEST", raising=False)
    target = tmp_path / "config.toml"
    result = runner.invoke(main, ["config", "install", "--client", "codex", "--name", "x", "--path", str(target),
                                  "--url", "http://127.0.0.1:1/mcp", "--token-env", "UNSET_FOR_TEST"])
    assert result.exit_code == 0 and target.exists() and "start Codex with UNSET_FOR_TEST set" in result.stderr


@pytest.mark.parametrize("name", ["", " MyApp", "My/App", "My\\App", "..", "My\nApp", "x" * 65])
def test_an_app_name_that_cannot_be_one_is_refused_without_being_repeated(name: str) -> None:
    from bridge import BridgeConfig
    from bridge.core.config import ConfigError

    with pytest.raises(ConfigError, match="the app name") as caught:
        BridgeConfig(url="http://127.0.0.1:9/mcp", app_name=name)
    assert name.strip() == "" or name.strip() not in str(caught.value)
    BridgeConfig(url="http://127.0.0.1:9/mcp", app_name="My App 2.0 (beta)")


@pytest.mark.process
@pytest.mark.posix_only("bash completion")
def test_shell_completion_as_docs_usage_md_shows_it_completes_commands_and_clients() -> None:
    """Issue 41, point 13: docs/usage.md, "Shell completion" (click's own), through the
    console script the shell completes (its name makes the variable's)."""
    program = Path(sys.executable).parent / "mcp-app-bridge"
    if not program.exists():
        pytest.skip("no mcp-app-bridge console script beside this Python")
    script = subprocess.run(
        [str(program)], env={**os.environ, "_MCP_APP_BRIDGE_COMPLETE": "bash_source"}, capture_output=True, text=True, timeout=60
    )
    assert "_MCP_APP_BRIDGE_COMPLETE=bash_complete" in script.stdout, script.stdout + script.stderr
    words = {"COMP_WORDS": "mcp-app-bridge config install --client claude-d", "COMP_CWORD": "4", "_MCP_APP_BRIDGE_COMPLETE": "bash_complete"}
    done = subprocess.run([str(program)], env={**os.environ, **words}, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["plain,claude-desktop"], done.stdout + done.stderr
    assert "_MCP_APP_BRIDGE_COMPLETE" in Path(__file__).resolve().parents[2].joinpath("docs", "usage.md").read_text(encoding="utf-8")
