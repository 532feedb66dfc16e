"""The command an entry starts: kept as the user gave it (issue 14 item 4), never one a
folder can hijack (issue 12 item 5); and the one-click links (issue 14 item 3)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients.command import bridge_command, isolate_python, resolve_command

URL = "http://127.0.0.1:8765/mcp"
TOKEN = "tok-SECRET-0123456789abcdef"
posix_only = pytest.mark.posix_only("POSIX symlinks and modes")


def printed_entry(*args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    done = CliRunner().invoke(main, ["config", "print", "--client", "claude-desktop", "--name", "x", *args], env=env)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["mcpServers"]["x"], done.stderr


@posix_only
def test_a_venv_python_given_by_a_symlink_stays_that_symlink(tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)
    entry, _ = printed_entry("--command", str(venv_bin / "python"), "--", "-m", "bridge", "--url", URL)
    assert entry["command"] == str(venv_bin / "python")  # not the interpreter it points to
    assert entry["args"] == ["-I", "-m", "bridge", "--url", URL]


@posix_only
def test_a_relative_command_is_made_absolute_without_resolving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "MyApp-1.2" / "myapp"
    real.parent.mkdir()
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "MyApp").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    path, warnings = resolve_command("./bin/MyApp")
    assert path == str(tmp_path / "bin" / "MyApp") and warnings == []


@posix_only
def test_a_bare_name_is_looked_up_on_path_or_refused(tmp_path: Path) -> None:
    tool = tmp_path / "myapp"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert resolve_command("myapp", environ={"PATH": str(tmp_path)}) == (str(tool), [])
    done = CliRunner().invoke(
        main,
        ["config", "print", "--client", "cursor", "--name", "x", "--command", "no-such-app-here", "--", "--mcp-stdio"],
        env={"PATH": str(tmp_path)},
    )
    assert done.exit_code == 2 and "'no-such-app-here' is not on PATH; give the executable's path" in done.stderr
    assert done.stdout == ""


@posix_only
def test_warnings_for_a_missing_file_a_file_that_cannot_run_and_no_mcp_stdio(tmp_path: Path) -> None:
    _, stderr = printed_entry("--command", str(tmp_path / "missing"), "--", "--mcp-stdio")
    assert "does not exist (yet)" in stderr
    plain = tmp_path / "plain"
    plain.write_text("data")
    _, stderr = printed_entry("--command", str(plain), "--", "--mcp-stdio")
    assert "is not an executable file" in stderr
    app = tmp_path / "MyApp"
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    entry, stderr = printed_entry("--command", str(app))
    assert "no --mcp-stdio, so the client would start the app itself" in stderr and entry["args"] == []
    entry, stderr = printed_entry("--command", str(app), "--", "--mcp-stdio")
    assert stderr == "" and entry == {"command": str(app), "args": ["--mcp-stdio"]}


def test_a_batch_file_gets_a_warning(tmp_path: Path) -> None:
    shim = tmp_path / "myapp.cmd"
    shim.write_text("@echo off\n")
    shim.chmod(0o755)
    assert any("batch file" in warning for warning in resolve_command(str(shim))[1])


def test_python_m_bridge_always_runs_isolated() -> None:
    assert isolate_python(["/v/bin/python3.12", "-m", "bridge", "--url", URL]) == [
        "/v/bin/python3.12",
        "-I",
        "-m",
        "bridge",
        "--url",
        URL,
    ]
    assert isolate_python(["/v/bin/python", "-I", "-m", "bridge"]) == ["/v/bin/python", "-I", "-m", "bridge"]
    assert isolate_python(["/opt/MyApp", "-m", "bridge"]) == ["/opt/MyApp", "-m", "bridge"]  # not a Python
    assert bridge_command(prefer_script=False)[1:] == ["-I", "-m", "bridge"]


@pytest.mark.process
@pytest.mark.parametrize("form", ["as config print writes it", "python -m bridge"])
def test_a_decoy_bridge_package_in_the_working_folder_is_not_run(tmp_path: Path, form: str) -> None:
    """Clients start servers in the project folder; one that holds its own bridge/ must
    not get to run instead of the bridge (issue 12, item 5)."""
    decoy = tmp_path / "project" / "bridge"
    decoy.mkdir(parents=True)
    marker = tmp_path / "decoy-ran"
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    for name in ("__init__.py", "__main__.py", "cli.py"):
        (decoy / name).write_text(code + "def main():\n    pass\n")
    if form == "python -m bridge":
        entry, _ = printed_entry("--command", sys.executable, "--", "-m", "bridge", "--url", URL)
    else:
        entry, _ = printed_entry("--url", URL)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if entry["args"][:1] == ["-I"]:
        env["PYTHONPATH"] = "."  # even a PYTHONPATH naming the working folder: -I ignores it
    done = subprocess.run(
        [entry["command"], *entry["args"]], input=b"", capture_output=True, timeout=60, cwd=decoy.parent, env=env
    )
    assert not marker.exists(), (entry, done.stderr)
    assert done.returncode == 0, done.stderr  # the real bridge ran: stdin closed at once, a clean exit


# -- links ------------------------------------------------------------------------------------


def link(client: str, *args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    done = CliRunner().invoke(main, ["config", "link", "--client", client, "--name", "my app", *args], env=env)
    assert done.exit_code == 0, done.output
    return done.stdout.strip(), done.stderr


def test_vscode_link_carries_the_entry_and_asks_for_the_secret_instead_of_holding_it() -> None:
    url, stderr = link("vscode", "--url", URL, "--token-env", "MYAPP_TOKEN", env={"MYAPP_TOKEN": TOKEN})
    assert url.startswith("vscode:mcp/install?") and TOKEN not in unquote(url)
    obj = json.loads(unquote(url.split("?", 1)[1]))
    assert obj["name"] == "my app" and obj["type"] == "stdio" and os.path.isabs(obj["command"])
    assert obj["args"][-4:] == ["--url", URL, "--token-env", "MYAPP_TOKEN"]
    assert obj["env"] == {"MYAPP_TOKEN": "${input:MYAPP_TOKEN}"}
    assert obj["inputs"] == [
        {"type": "promptString", "id": "MYAPP_TOKEN", "description": "MYAPP_TOKEN for my app", "password": True}
    ]
    assert "VS Code will ask for MYAPP_TOKEN" in stderr


def test_cursor_link_is_base64_json_without_the_secret_and_says_so() -> None:
    url, stderr = link("cursor", "--url", URL, "--token-env", "MYAPP_TOKEN", env={"MYAPP_TOKEN": TOKEN})
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("cursor", "anysphere.cursor-deeplink", "/mcp/install")
    query = parse_qs(parts.query)
    assert query["name"] == ["my app"]
    config = json.loads(base64.b64decode(query["config"][0]))
    assert set(config) == {"command", "args"} and config["args"][-2:] == ["--token-env", "MYAPP_TOKEN"]
    assert TOKEN not in url and "carries no value for MYAPP_TOKEN" in stderr


def test_link_for_a_client_without_links_is_refused() -> None:
    done = CliRunner().invoke(main, ["config", "link", "--client", "zed", "--name", "x", "--url", URL])
    assert done.exit_code == 2 and "zed takes no install link; choose vscode or cursor" in done.stderr


@posix_only
def test_install_warns_for_a_launch_program_that_is_missing_as_for_a_missing_command(tmp_path: Path) -> None:
    """`config install --launch PATH` with no such PATH: the entry is written (the app may
    be installed later) and a warning says the bridge cannot start the app until then."""
    target = tmp_path / "settings.json"
    base = ["config", "install", "--client", "cursor", "--path", str(target), "--name", "x", "--url", "http://127.0.0.1:8765/mcp"]
    done = CliRunner().invoke(main, [*base, "--launch", f"{tmp_path / 'MyApp'} --serve"])
    assert done.exit_code == 0, done.output
    assert f"the --launch program {tmp_path / 'MyApp'} does not exist (yet)" in done.stderr
    done = CliRunner().invoke(main, [*base, "--force", "--launch", "no-such-app-here --serve"], env={"PATH": str(tmp_path)})
    assert done.exit_code == 0 and "'no-such-app-here' is not on PATH" in done.stderr
    app = tmp_path / "MyApp"
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    done = CliRunner().invoke(main, [*base, "--force", "--launch", f"{app} --serve"])
    assert done.exit_code == 0 and "warning" not in done.stderr, done.stderr


@posix_only
def test_a_refused_install_prints_only_the_refusal(tmp_path: Path) -> None:
    """An entry of that name exists and no --force: nothing is written, so what the entry
    would have warned of (here a --launch program missing) is not said; only the refusal
    and its --force hint are. A written entry still gets its warnings, before the line
    that says it was written."""
    target = tmp_path / "settings.json"
    base = ["config", "install", "--client", "cursor", "--path", str(target), "--name", "x", "--url", URL]
    missing = ["--launch", f"{tmp_path / 'MyApp'} --serve"]
    done = CliRunner().invoke(main, [*base, *missing])
    assert done.exit_code == 0 and "does not exist (yet)" in done.stderr, done.output
    before = target.read_bytes()
    done = CliRunner().invoke(main, [*base, *missing])
    assert done.exit_code == 1 and target.read_bytes() == before
    assert done.stderr.splitlines() == [
        f"Error: an entry called 'x' exists already; replace it with --force. {target} was not changed."
    ], done.stderr
    done = CliRunner().invoke(main, [*base, "--force", *missing])
    assert done.exit_code == 0 and done.output.index("does not exist (yet)") < done.output.index("replaced 'x'"), done.output
