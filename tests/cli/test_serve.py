"""The plain serving command line without click (bridge/cli/serve.py) against the click
command (bridge/cli/commands.py) on sample command lines: the same values, or a hand-over
to click; and a client's start of the bridge imports no click. Both against the one table
of options: tests/cli/test_optiontable.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.cli.commands import main
from bridge.cli.optiontable import BRIDGE_OPTIONS
from bridge.cli.serve import PLAIN_DEFAULTS, parse_plain_argv

ROOT = Path(__file__).resolve().parents[2]


def click_params(argv: list[str]) -> dict[str, Any]:
    """What the click command parses ``argv`` into (raises click's errors)."""
    with main.make_context("mcp-app-bridge", list(argv)) as ctx:
        return dict(ctx.params)


def test_no_options_are_clicks_defaults() -> None:
    assert parse_plain_argv([]) == PLAIN_DEFAULTS == click_params([])


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--version"],
        ["check", "--url", "http://127.0.0.1:1/mcp"],
        ["--url=http://127.0.0.1:1/mcp"],
        ["--url"],
        ["--url", "--app-name"],
        ["--url", "a", "--url", "b"],
        ["--verify-listener", "--no-verify-listener"],
        ["--log-level", "verbose"],
        ["--connect-timeout", "0"],
        ["--connect-timeout", "nan"],
        ["--max-message-bytes", "1023"],
        ["--log-file", "."],
        ["--unknown"],
    ],
)
def test_anything_not_plain_goes_to_click(argv: list[str]) -> None:
    assert parse_plain_argv(argv) is None


NAMES = [spelling for option in BRIDGE_OPTIONS for spelling in option.spellings] + ["--url=x", "-h", "--nope", "check"]
VALUES = [
    "", "x", "-x", "0", "1", "-1", "1.5", "1e3", "inf", "nan", "1_000", " 5", "1023", "1024", "32",
    "debug", "DEBUG", "warning", ".", "a.txt", "http://127.0.0.1:8765/mcp", "X-Test: 1", "MyApp",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=8))
def test_a_plain_parse_is_what_click_parses(argv: list[str]) -> None:
    plain = parse_plain_argv(argv)
    if plain is not None:
        assert plain == click_params(argv)


def test_the_plain_forms_of_every_option_are_taken(tmp_path: Path) -> None:
    argv = [
        "--url", "http://127.0.0.1:1/mcp", "--app-name", "MyApp", "--discovery-file", str(tmp_path / "d.json"),
        "--header", "X-A: 1", "--header", "X-B: 2", "--token-env", "T", "--token-timeout", "2.5",
        "--launch", "myapp --serve", "--launch-timeout", "9", "--launch-log", str(tmp_path / "l.log"),
        "--no-session-400-heuristic", "--connect-timeout", "1", "--request-timeout", "60",
        "--max-message-bytes", "2048", "--max-concurrent-requests", "4", "--allow-remote",
        "--no-verify-listener", "--log-level", "debug", "--log-file", str(tmp_path / "b.log"),
    ]
    plain = parse_plain_argv(argv)
    assert plain is not None and plain == click_params(argv)
    assert plain["headers"] == ("X-A: 1", "X-B: 2")


@pytest.mark.process
def test_a_clients_start_of_the_bridge_imports_no_click(app_server) -> None:
    """What an AI client runs (``--url`` and bridge options): served, and click never loaded."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bridge", "--url", app_server.url, "--log-level", "error",
         "--connect-timeout", "5"],
        input=json.dumps(init).encode() + b"\n", capture_output=True, timeout=60, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0])["result"]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "bridge.serve.loop" in imported  # the list is real
    assert not {name for name in imported if name.split(".")[0] == "click" or name in ("bridge.cli.commands", "bridge.cli.options")}


@pytest.mark.process
def test_a_bad_configuration_still_gets_the_click_commands_report() -> None:
    """A client-started bridge (stdin not a terminal) with a configuration error reports it
    as the click command does (bridge/cli/diagnostics.py, start_up_failed): logged, every
    request answered with it, then status 2."""
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "--url", "http://127.0.0.1:1/mcp", "--token-env", "MCP_BRIDGE_TEST_SURELY_UNSET"],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60, cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == b""
    assert b"cannot start: Invalid value for --token-env: environment variable MCP_BRIDGE_TEST_SURELY_UNSET is not set" in done.stderr


@pytest.mark.process
def test_asyncio_without_tls_leaves_ssl_importable_for_everyone_else() -> None:
    """The serving start's ``import_asyncio_without_tls`` (bridge/cli/diagnostics.py), in a
    fresh process: asyncio's modules get ``ssl = None`` (their TLS transports unusable), and
    ``import ssl`` still works afterwards and gives a verifying context, which is what
    httpx's TLS for ``https://`` needs (tests/process/test_https.py runs it end to end)."""
    script = (
        "import sys\n"
        "assert 'asyncio' not in sys.modules and 'ssl' not in sys.modules, sorted(sys.modules)\n"
        "from bridge.cli.diagnostics import import_asyncio_without_tls\n"
        "import_asyncio_without_tls()\n"
        "import asyncio.base_events, asyncio.selector_events, asyncio.sslproto\n"
        "hidden = [m.__name__ for m in (asyncio.base_events, asyncio.selector_events, asyncio.sslproto) if m.ssl is None]\n"
        "import ssl\n"
        "context = ssl.create_default_context()\n"
        "import json\n"
        "print(json.dumps({'hidden': hidden, 'verifies': context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname,\n"
        "                  'sslproto_still_hidden': asyncio.sslproto.ssl is None}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert json.loads(done.stdout) == {
        "hidden": ["asyncio.base_events", "asyncio.selector_events", "asyncio.sslproto"],
        "verifies": True,
        "sslproto_still_hidden": True,
    }
