"""``--merge-list-pages`` (opt-in, per client entry) reaches every way the bridge is started:
the command line and its help, the entry ``config install`` writes for a client that drops
pages (Codex: openai/codex#28858), and the MCP Bundle's manifest."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner

from bridge.cli.buildconfig import build_config
from bridge.cli.commands import main
from bridge.cli.options import parse_bridge_args
from bridge.cli.optiontable import BRIDGE_OPTIONS, defaults
from bridge.cli.serve import parse_plain_argv
from bridge.clients.bundle import read_manifest
from bridge.core.config import BridgeConfig

URL = "http://127.0.0.1:8765/mcp"


def test_it_is_off_unless_given() -> None:
    assert defaults()["merge_list_pages"] is False is BridgeConfig(url=URL).merge_list_pages
    assert build_config(parse_bridge_args(["--url", URL])).merge_list_pages is False


def test_the_option_parses_in_both_parsers_and_reaches_the_config() -> None:
    assert build_config(parse_bridge_args(["--url", URL, "--merge-list-pages"])).merge_list_pages is True
    plain = parse_plain_argv(["--url", URL, "--merge-list-pages"])
    assert plain is not None and plain["merge_list_pages"] is True


def test_it_is_in_the_table_and_the_help() -> None:
    (option,) = [option for option in BRIDGE_OPTIONS if option.flag == "--merge-list-pages"]
    assert option.convert is None and option.config and option.default is False  # a switch, off
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "--merge-list-pages" in result.output


def test_config_install_writes_it_into_a_codex_entry(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    args = ["config", "install", "--client", "codex", "--name", "myapp", "--path", str(target), "--url", URL, "--merge-list-pages"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    entry = tomllib.loads(target.read_text(encoding="utf-8"))["mcp_servers"]["myapp"]
    assert entry["args"][-1] == "--merge-list-pages"


def test_config_install_writes_it_only_into_the_entry_that_asks(tmp_path: Path) -> None:
    target = tmp_path / "claude_desktop_config.json"
    runner = CliRunner()
    for name, extra in (("paged", ["--merge-list-pages"]), ("plain", [])):
        result = runner.invoke(main, ["config", "install", "--client", "claude-desktop", "--name", name, "--path", str(target), "--url", URL, *extra])
        assert result.exit_code == 0, result.output
    servers = json.loads(target.read_text(encoding="utf-8"))["mcpServers"]
    assert "--merge-list-pages" in servers["paged"]["args"] and "--merge-list-pages" not in servers["plain"]["args"]


def test_the_bundle_keeps_it(tmp_path: Path) -> None:
    exe = tmp_path / "mcp-app-bridge"
    exe.write_bytes(b"\x7fELF" + bytes(range(256)))
    exe.chmod(0o755)
    out = tmp_path / "MyApp.mcpb"
    result = CliRunner().invoke(main, ["bundle", "--exe", str(exe), "--out", str(out), "--app-name", "MyApp", "--merge-list-pages"])
    assert result.exit_code == 0, result.output
    assert read_manifest(out)["server"]["mcp_config"]["args"] == ["--app-name", "MyApp", "--merge-list-pages"]
