"""``--protocol-era`` reaches every way the bridge is started: the command line, the entry
``config`` writes for a client, and the MCP Bundle's manifest; a bad value is refused the
way the bridge refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.cli.optiontable import defaults
from bridge.clients.bundle import read_manifest
from bridge.core.config import BridgeConfig, ConfigError

URL = "http://127.0.0.1:8765/mcp"


def test_the_default_is_auto_and_a_bad_value_is_refused() -> None:
    assert defaults()["protocol_era"] == "auto" == BridgeConfig(url=URL).protocol_era
    with pytest.raises(ConfigError, match="protocol_era"):
        BridgeConfig(url=URL, protocol_era="newest")
    result = CliRunner().invoke(main, ["config", "print", "--client", "claude-desktop", "--name", "a", "--url", URL, "--protocol-era", "newest"])
    assert result.exit_code != 0 and "must be one of auto, legacy, modern" in result.output


def test_config_keeps_the_era_in_the_clients_entry() -> None:
    result = CliRunner().invoke(main, ["config", "print", "--client", "claude-desktop", "--name", "a", "--url", URL, "--protocol-era", "MODERN"])
    assert result.exit_code == 0, result.output
    args = json.loads(result.stdout)["mcpServers"]["a"]["args"]
    assert args[-2:] == ["--protocol-era", "MODERN"]  # as given; the bridge reads it in any case


def test_the_bundle_keeps_the_era(tmp_path: Path) -> None:
    exe = tmp_path / "mcp-app-bridge"
    exe.write_bytes(b"\x7fELF" + bytes(range(256)))
    exe.chmod(0o755)
    out = tmp_path / "MyApp.mcpb"
    result = CliRunner().invoke(main, ["bundle", "--exe", str(exe), "--out", str(out), "--app-name", "MyApp", "--protocol-era", "legacy"])
    assert result.exit_code == 0, result.output
    assert read_manifest(out)["server"]["mcp_config"]["args"] == ["--app-name", "MyApp", "--protocol-era", "legacy"]
