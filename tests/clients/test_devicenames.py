"""Windows device names (CON, PRN, AUX, NUL, COM0-COM9, LPT0-LPT9, COM¹-COM³, LPT¹-LPT³, with
or without an extension, any case) are refused as bundle and server entry names on every OS
(issue 38 item 4): before, ``--name con`` was accepted while ``..`` and ``a/b`` were refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients import ClientConfigError, ServerEntry, install_entry
from bridge.clients.devicenames import DEVICE_NAMES, is_device_name

PORTS = [f"{port}{digit}" for port in ("com", "lpt") for digit in "123456789¹²³"]
DEVICES = ["con", "prn", "aux", "nul", *PORTS]


@pytest.mark.parametrize("device", DEVICES)
def test_every_device_name_is_one_in_any_case_and_with_an_extension(device: str) -> None:
    for name in (device, device.upper(), device.title(), f"{device}.txt", f"{device.upper()}.tar.gz", f"{device} .x"):
        assert is_device_name(name), name
    assert device.upper() in DEVICE_NAMES


@pytest.mark.parametrize("name", ["console", "com10", "lpt", "com", "nul-x", "auxiliary", "my-con", "x.con", "co.n"])
def test_names_that_only_look_alike_are_not(name: str) -> None:
    assert not is_device_name(name)


@pytest.mark.parametrize("name", ["con", "NUL", "Aux.txt", "com1", "LPT9.log", "prn"])
def test_a_bundle_named_after_a_device_is_refused(tmp_path: Path, name: str) -> None:
    exe = tmp_path / "mcp-app-bridge"
    exe.write_bytes(b"\x7fELF" + bytes(64))
    exe.chmod(0o755)
    out = tmp_path / "MyApp.mcpb"
    result = CliRunner().invoke(
        main, ["bundle", "--exe", str(exe), "--out", str(out), "--name", name, "--app-name", "MyApp"]
    )
    assert result.exit_code == 2 and "Windows device name" in result.output and "--name" in result.output, result.output
    assert not out.exists()
    made = CliRunner().invoke(main, ["bundle", "--exe", str(exe), "--out", str(out), "--app-name", name])
    assert made.exit_code == 2 and "Windows device name" in made.output, made.output


@pytest.mark.parametrize(("client", "name"), [("vscode", "con"), ("zed", "COM¹"), ("codex", "Lpt3"), ("cursor", "nul.json")])
def test_an_entry_named_after_a_device_is_refused_and_the_file_left_alone(tmp_path: Path, client: str, name: str) -> None:
    path = tmp_path / "config"
    path.write_text("{}\n" if client != "codex" else "")
    with pytest.raises(ClientConfigError, match="Windows device name"):
        install_entry(path, client, name, ServerEntry(command="/bin/app"))
    assert path.read_text() == ("{}\n" if client != "codex" else "")
    done = CliRunner().invoke(
        main, ["config", "install", "--client", client, "--name", name, "--path", str(path), "--command", "/bin/app"]
    )
    assert done.exit_code == 1 and "Windows device name" in done.output, done.output
