"""The MCP Bundle (``mcp-app-bridge bundle``): its manifest, what it never holds, and its
entry run as the manifest says against the example app.

The manifest is also checked by the official ``@anthropic-ai/mcpb`` CLI in CI (.ci/run,
"MCP Bundle"), which then unpacks the bundle and names the folder in
``MCP_APP_BRIDGE_BUNDLE_DIR`` for the frozen test at the end of this file.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support import processes
from support.apps import isolated_env, launch_app_server
from support.processes import BRIDGE_EXE_VAR, INITIALIZED, initialize

from bridge import __version__
from bridge.cli.commands import main
from bridge.clients.bundle import MANIFEST_VERSION, read_manifest
from bridge.core.unixurl import unix_url

BUNDLE_DIR_VAR = "MCP_APP_BRIDGE_BUNDLE_DIR"
SECRET = "tok-PLACEHOLDER-5f1e2d3c4b5a"


@pytest.fixture
def fake_exe(tmp_path: Path) -> Path:
    exe = tmp_path / "mcp-app-bridge"
    exe.write_bytes(b"\x7fELF" + bytes(range(256)) * 64)  # (a binary, as a frozen build is)
    exe.chmod(0o755)
    return exe


def run_cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def build(fake_exe: Path, out: Path, *bridge_args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), *bridge_args, env=env)
    assert result.exit_code == 0, result.output
    return read_manifest(out)


def test_the_manifest_version_is_what_version_prints(fake_exe: Path, tmp_path: Path) -> None:
    printed = run_cli("--version").output.split()[-1]
    manifest = build(fake_exe, tmp_path / "MyApp.mcpb", "--app-name", "MyApp")
    assert manifest["version"] == printed == __version__
    assert run_cli("version").output.strip() == f"mcp-app-bridge {manifest['version']}"


def test_the_manifest_declares_the_binary_and_starts_it_from_the_bundle(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist" / "MyApp.mcpb"
    manifest = build(fake_exe, out, "--app-name", "MyApp", "--launch", "/opt/My App/myapp", "--platform", "darwin")
    assert manifest["manifest_version"] == MANIFEST_VERSION
    assert (manifest["name"], manifest["display_name"], manifest["author"]) == ("myapp", "MyApp", {"name": "MyApp"})
    server = manifest["server"]
    assert server["type"] == "binary" and server["entry_point"] == "server/mcp-app-bridge"
    assert server["mcp_config"] == {
        "command": "${__dirname}/server/mcp-app-bridge",
        "args": ["--app-name", "MyApp", "--launch", "/opt/My App/myapp"],
    }
    assert manifest["compatibility"] == {"platforms": ["darwin"]}
    assert "user_config" not in manifest, "nothing to ask the user for"
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ["manifest.json", "server/mcp-app-bridge", "server/LICENSE"]
        entry = archive.getinfo("server/mcp-app-bridge")
        assert stat.S_IMODE(entry.external_attr >> 16) == 0o755, "unzipped, it must stay executable"
        assert archive.read(entry) == fake_exe.read_bytes()


def test_the_licence_text_travels_beside_the_executable(fake_exe: Path, tmp_path: Path) -> None:
    """MIT requires its notice in every copy: an app vendor ships the bundle as built."""
    out = tmp_path / "MyApp.mcpb"
    manifest = build(fake_exe, out, "--app-name", "MyApp")
    shipped = (Path(__file__).resolve().parents[2] / "LICENSE").read_text(encoding="utf-8")
    assert shipped.startswith("MIT License") and "The mcp-app-bridge authors" in shipped
    with zipfile.ZipFile(out) as archive:
        assert archive.read("server/LICENSE").decode("utf-8") == shipped
    assert manifest["license"] == "MIT"


def test_without_a_licence_text_no_bundle_is_written(fake_exe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bridge.clients.bundle as bundle_module

    def missing() -> str:
        raise bundle_module.BundleError("the bridge's licence text (LICENSE) is not part of this installation")

    monkeypatch.setattr(bundle_module, "license_text", missing)
    out = tmp_path / "MyApp.mcpb"
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--app-name", "MyApp")
    assert result.exit_code == 1 and "LICENSE" in result.output and "Nothing was written" in result.output
    assert not out.exists() and list(tmp_path.iterdir()) == [fake_exe]


@pytest.fixture
def fake_onedir(tmp_path: Path) -> Path:
    """A one-folder build's shape: the executable beside ``_internal/`` (a library, a
    module, an executable helper, a link in it)."""
    folder = tmp_path / "mcp-app-bridge-onedir"
    (folder / "_internal" / "lib-dynload").mkdir(parents=True)
    exe = folder / "mcp-app-bridge"
    exe.write_bytes(b"\x7fELF" + bytes(range(256)))
    exe.chmod(0o755)
    (folder / "_internal" / "libpython3.11.so.1.0").write_bytes(b"\x7fELF lib")
    (folder / "_internal" / "lib-dynload" / "_json.so").write_bytes(b"\x7fELF json")
    helper = folder / "_internal" / "helper"
    helper.write_bytes(b"\x7fELF helper")
    helper.chmod(0o755)
    (folder / "_internal" / "libpython3.11.so").symlink_to("libpython3.11.so.1.0")
    return folder


@pytest.mark.posix_only("the build's modes and links are POSIX ones")
@pytest.mark.parametrize("given", ["folder", "executable"])
def test_a_one_folder_build_travels_whole_beside_the_entry(fake_onedir: Path, tmp_path: Path, given: str) -> None:
    out = tmp_path / "MyApp.mcpb"
    exe = fake_onedir / "mcp-app-bridge"
    manifest = build(fake_onedir if given == "folder" else exe, out, "--app-name", "MyApp", "--platform", "linux")
    assert manifest["server"]["entry_point"] == "server/mcp-app-bridge"
    with zipfile.ZipFile(out) as archive:
        modes = {info.filename: stat.S_IMODE(info.external_attr >> 16) for info in archive.infolist()}
        assert archive.read("server/mcp-app-bridge") == exe.read_bytes()
        assert archive.read("server/_internal/lib-dynload/_json.so") == b"\x7fELF json"
        assert archive.read("server/_internal/libpython3.11.so") == b"\x7fELF lib"  # a link, as the file it names
    assert modes == {
        "manifest.json": 0o644,
        "server/mcp-app-bridge": 0o755,
        "server/_internal/helper": 0o755,
        "server/_internal/lib-dynload/_json.so": 0o644,
        "server/_internal/libpython3.11.so": 0o644,
        "server/_internal/libpython3.11.so.1.0": 0o644,
        "server/LICENSE": 0o644,
    }


def test_a_folder_without_the_executable_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_cli("bundle", "--exe", str(tmp_path / "empty"), "--out", str(tmp_path / "x.mcpb"), "--app-name", "MyApp")
    assert result.exit_code != 0 and "without mcp-app-bridge" in result.output
    assert not (tmp_path / "x.mcpb").exists()


def test_a_one_file_executable_is_bundled_alone(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "MyApp.mcpb"
    build(fake_exe, out, "--app-name", "MyApp")
    with zipfile.ZipFile(out) as archive:
        assert sorted(archive.namelist()) == ["manifest.json", "server/LICENSE", "server/mcp-app-bridge"]


def test_a_windows_executable_is_the_entry_with_its_suffix(fake_exe: Path, tmp_path: Path) -> None:
    exe = fake_exe.rename(fake_exe.with_suffix(".exe"))
    manifest = build(exe, tmp_path / "MyApp.mcpb", "--app-name", "MyApp")
    assert manifest["server"]["entry_point"] == "server/mcp-app-bridge.exe"
    assert manifest["server"]["mcp_config"]["command"] == "${__dirname}/server/mcp-app-bridge.exe"
    assert manifest["compatibility"]["platforms"] == ["win32"]


def test_a_token_is_asked_of_the_user_and_never_written_into_the_bundle(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "MyApp.mcpb"
    manifest = build(fake_exe, out, "--app-name", "MyApp", "--token-env", "MYAPP_TOKEN", env={"MYAPP_TOKEN": SECRET})
    assert manifest["server"]["mcp_config"]["env"] == {"MYAPP_TOKEN": "${user_config.token}"}
    token = manifest["user_config"]["token"]
    assert token["type"] == "string" and token["sensitive"] is True and token["required"] is True
    with zipfile.ZipFile(out) as archive:
        assert all(SECRET.encode() not in archive.read(name) for name in archive.namelist())
    assert SECRET.encode() not in out.read_bytes()


@pytest.mark.parametrize(
    "header",
    [
        "Authorization: Bearer " + SECRET,
        "cookie: session=" + SECRET,
        "X-Api-Key: " + SECRET,
        "X-Auth-Token: " + SECRET,
        "Private-Token: " + SECRET,
        "X-Goog-Api-Key: " + SECRET,
        "X-Session-Id: " + SECRET,
        "X-Client-Secret: " + SECRET,
    ],
)
def test_a_credential_header_is_refused_and_nothing_is_written(fake_exe: Path, tmp_path: Path, header: str) -> None:
    out = tmp_path / "MyApp.mcpb"
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--app-name", "MyApp", "--header", header)
    assert result.exit_code != 0
    assert not out.exists() and list(tmp_path.glob("*.tmp")) == []
    assert SECRET not in result.output


def test_every_header_value_is_asked_of_the_user_never_written_into_the_bundle(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "MyApp.mcpb"
    manifest = build(
        fake_exe, out, "--app-name", "MyApp", "--header", "X-Client: " + SECRET, "--header=X-Profile: " + SECRET + "2",
        "--header", "x-client: again-" + SECRET,
    )
    assert manifest["server"]["mcp_config"]["args"] == [
        "--app-name", "MyApp",
        "--header", "X-Client: ${user_config.header_x_client}",
        "--header", "X-Profile: ${user_config.header_x_profile}",
        "--header", "x-client: ${user_config.header_x_client_2}",
    ]
    settings = manifest["user_config"]
    assert set(settings) == {"header_x_client", "header_x_profile", "header_x_client_2"}
    assert all(setting["type"] == "string" and setting["required"] is True for setting in settings.values())
    assert SECRET.encode() not in out.read_bytes()
    with zipfile.ZipFile(out) as archive:
        assert SECRET.encode() not in archive.read("manifest.json")


def test_a_token_command_is_asked_of_the_user_as_a_secret_never_written_into_the_bundle(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "MyApp.mcpb"
    for form in (["--token-command", f"myapp-cli token --password {SECRET}"], [f"--token-command=myapp-cli token --password {SECRET}"]):
        manifest = build(fake_exe, out, "--app-name", "MyApp", *form)
        assert manifest["server"]["mcp_config"]["args"] == ["--app-name", "MyApp", "--token-command", "${user_config.token_command}"]
        setting = manifest["user_config"]["token_command"]
        assert setting["sensitive"] is True and setting["required"] is True
        with zipfile.ZipFile(out) as archive:
            assert SECRET.encode() not in archive.read("manifest.json")


@pytest.mark.posix_only("symbolic links and modes")
def test_the_temporary_file_is_created_exclusively_never_through_a_planted_link(fake_exe: Path, tmp_path: Path) -> None:
    """Another user (or a stale file) at the old predictable name ``.OUT.<pid>.tmp``: the
    bundle must not be written through it."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    dist = tmp_path / "dist"
    dist.mkdir()
    out = dist / "MyApp.mcpb"
    (dist / f".{out.name}.{os.getpid()}.tmp").symlink_to(victim)
    old_umask = os.umask(0o022)
    try:
        build(fake_exe, out, "--app-name", "MyApp")
    finally:
        os.umask(old_umask)
    assert victim.read_bytes() == b"precious\n"
    assert zipfile.is_zipfile(out) and not out.is_symlink()
    assert stat.S_IMODE(out.stat().st_mode) == 0o644, "a bundle is for sharing: the usual mode"
    assert sorted(path.name for path in dist.iterdir()) == sorted([out.name, f".{out.name}.{os.getpid()}.tmp"])


@pytest.mark.parametrize("name", ["../evil", "a/b", "a\\b", "..", ".hidden", "my app", "x..y", "", "-x", "x" * 101])
def test_a_name_that_could_be_a_path_is_refused(fake_exe: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / "MyApp.mcpb"
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--name", name, "--app-name", "MyApp")
    assert result.exit_code == 2 and "--name" in result.output, result.output
    assert not out.exists()


def test_the_default_name_is_the_app_name_made_safe(fake_exe: Path, tmp_path: Path) -> None:
    assert build(fake_exe, tmp_path / "a.mcpb", "--app-name", "My App (Pro)")["name"] == "my-app-pro"
    assert build(fake_exe, tmp_path / "b.mcpb", "--app-name", "MyApp")["name"] == "myapp"


def test_bad_bridge_options_are_refused_like_the_bridge_would(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "MyApp.mcpb"
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--url", "http://example.com/mcp")
    assert result.exit_code == 2 and "loopback" in result.output
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--url", "http://127.0.0.1:1/mcp")
    assert result.exit_code == 2 and "--name" in result.output
    assert not out.exists()


@pytest.mark.posix_only("the executable bit")
def test_a_file_that_is_not_executable_is_refused(fake_exe: Path, tmp_path: Path) -> None:
    fake_exe.chmod(0o644)
    result = run_cli("bundle", "--exe", str(fake_exe), "--out", str(tmp_path / "x.mcpb"), "--app-name", "MyApp")
    assert result.exit_code == 1 and "not executable" in result.output


def unpacked_bundle(tmp_path: Path) -> Path:
    """The folder CI unpacked with ``mcpb unpack``, or this test's own bundle of the frozen
    executable, unzipped with the modes the archive records."""
    given = os.environ.get(BUNDLE_DIR_VAR)
    if given:
        return Path(given)
    out = tmp_path / "ExampleApp.mcpb"
    result = run_cli("bundle", "--exe", os.environ[BRIDGE_EXE_VAR], "--out", str(out), "--app-name", "ExampleApp")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "unpacked"
    with zipfile.ZipFile(out) as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, folder))
            if stat.S_IMODE(info.external_attr >> 16):
                target.chmod(stat.S_IMODE(info.external_attr >> 16))
    return folder


@pytest.mark.frozen
@pytest.mark.skipif(not (os.environ.get(BRIDGE_EXE_VAR) or os.environ.get(BUNDLE_DIR_VAR)), reason="no frozen executable or unpacked bundle")
def test_the_unpacked_bundles_entry_answers_for_the_example_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As Claude Desktop would: the manifest's command with ``${__dirname}`` replaced by the
    bundle's folder, its args and env; the app publishes itself in the default discovery
    file of ``--app-name ExampleApp`` (a private HOME)."""
    folder = unpacked_bundle(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    config = manifest["server"]["mcp_config"]
    command = config["command"].replace("${__dirname}", str(folder))
    assert Path(command) == folder / manifest["server"]["entry_point"]
    assert config["args"] == ["--app-name", "ExampleApp"], "CI's bundle names the example app"
    env = isolated_env(tmp_path / "user")
    discovery = subprocess.run(
        [sys.executable, "-c", "from bridge import default_discovery_path as d; print(d('ExampleApp'))"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()
    app = launch_app_server("--discovery-file", discovery, log_path=tmp_path / "app.log")
    try:
        assert processes.wait_until(Path(discovery).exists, 10), "the app writes its discovery file"
        monkeypatch.setattr(processes, "bridge_command", lambda: [command])
        with processes.BridgeProcess(*config["args"], env={**env, **config.get("env", {})}) as bridge:
            bridge.send(initialize(0))
            assert "result" in bridge.read_reply(0)
            bridge.send(INITIALIZED)
            bridge.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            tools = {tool["name"] for tool in bridge.read_reply(1)["result"]["tools"]}
            assert {"echo", "app_info"} <= tools
    finally:
        app.stop()


def test_the_console_script_shim_is_refused_with_what_to_give_instead(tmp_path: Path) -> None:
    """The `mcp-app-bridge` pip installs is a script for its venv's Python: a bundle made
    of it cannot run anywhere else."""
    import shutil

    shim = shutil.which("mcp-app-bridge") or str(Path(sys.executable).parent / "mcp-app-bridge")
    out = tmp_path / "x.mcpb"
    result = run_cli("bundle", "--exe", shim, "--out", str(out), "--app-name", "MyApp")
    assert result.exit_code == 1 and "frozen executable" in result.stderr, result.output
    assert not out.exists()


def test_a_binary_entry_point_in_a_venv_is_refused(tmp_path: Path, fake_exe: Path) -> None:
    """On Windows pip's console-script launcher is an .exe: a binary, but the venv's."""
    venv = tmp_path / "venv"
    (venv / "Scripts").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    launcher = fake_exe.rename(venv / "Scripts" / "mcp-app-bridge.exe")
    out = tmp_path / "x.mcpb"
    result = run_cli("bundle", "--exe", str(launcher), "--out", str(out), "--app-name", "MyApp")
    assert result.exit_code == 1 and "virtual environment" in result.stderr, result.output
    assert not out.exists()


UNIX_URL = "http+unix://%2Frun%2Fuser%2F1000%2Fmyapp%2Fmcp-endpoint.sock/mcp"


@pytest.mark.posix_only("the bridge connects to Unix domain sockets on Linux and macOS")
@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_an_http_unix_url_goes_into_the_bundle_as_given(fake_exe: Path, tmp_path: Path, platform: str) -> None:
    manifest = build(fake_exe, tmp_path / "MyApp.mcpb", "--name", "myapp", "--url", UNIX_URL, "--platform", platform)
    assert manifest["server"]["mcp_config"]["args"] == ["--url", UNIX_URL]
    assert "Unix domain socket" in manifest["long_description"]


@pytest.mark.posix_only("the bridge connects to Unix domain sockets on Linux and macOS")
def test_an_http_unix_url_the_bundles_platform_cannot_reach_is_refused(fake_exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "MyApp.mcpb"
    windows = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--name", "myapp", "--url", UNIX_URL, "--platform", "win32")
    assert windows.exit_code == 1 and "Windows bridge does not connect" in windows.output, windows.output
    long_url = unix_url("/tmp/" + "d" * 92 + "/s.sock")  # 104 bytes: within Linux's 107, over macOS's 103
    darwin = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--name", "myapp", "--url", long_url, "--platform", "darwin")
    assert darwin.exit_code == 1 and "darwin allows 103" in darwin.output, darwin.output
    relative = run_cli("bundle", "--exe", str(fake_exe), "--out", str(out), "--name", "myapp", "--url", "http+unix://s.sock/mcp")
    assert relative.exit_code == 2 and "must be absolute" in relative.output, relative.output
    assert not out.exists()


def test_the_tool_filter_goes_into_the_bundle_as_given(fake_exe: Path, tmp_path: Path) -> None:
    """``--deny-tool`` (and its spelling ``--ignore-tool``), ``--allow-tool`` and ``--read-only``
    are bridge options like any other: the bundle's entry carries them (docs/usage.md,
    "Which tools a client sees")."""
    args = ["--app-name", "MyApp", "--deny-tool", "delete_*", "--ignore-tool", "send_*", "--allow-tool", "*_doc", "--read-only"]
    manifest = build(fake_exe, tmp_path / "MyApp.mcpb", *args)
    assert manifest["server"]["mcp_config"]["args"] == args
    assert "user_config" not in manifest
