"""Client config files edited in place: comments kept (JSONC, TOML), backups 0600, no
copy of a removed entry's secrets, symlinked files written through (issue 14 item 2,
issue 12 item 6)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from bridge.cli.commands import main
from bridge.clients import CLIENT_INFO, CLIENTS, ClientConfigError, ServerEntry, install_entry, uninstall_entry
from bridge.clients.files import REDACTED

SECRET = "tok-SECRET-0123456789abcdef"
ENTRY = ServerEntry(command="/opt/My App/app", args=("--mcp-stdio",), env={"MYAPP_TOKEN": SECRET})
posix_only = pytest.mark.posix_only("POSIX file modes and symlinks")


def every_file(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


VSCODE = """// User MCP servers (VS Code allows comments and trailing commas)
{
  "servers": {
    // the fetch server
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"],},
  },
  "inputs": [],
}
"""
ZED = """// Zed settings
{
  "theme": "One Dark", // the theme
  "context_servers": {
    "from-extension": {"settings": {}},
  },
}
"""
CODEX = """# Codex settings
model = "gpt-5"  # the model

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[profiles.fast]
model = "gpt-5-mini"
"""


# Codex's file with the servers table last, and with none: the entry then ends the file
# (a newcomer found one newline too many left there after remove).
CODEX_SERVERS_LAST = CODEX.split("\n\n[profiles")[0] + "\n"
CODEX_NO_SERVERS = "# Codex settings\nmodel = \"gpt-5\"\n"


@pytest.mark.parametrize(
    ("client", "before"),
    [("vscode", VSCODE), ("zed", ZED), ("codex", CODEX), ("codex", CODEX_SERVERS_LAST), ("codex", CODEX_NO_SERVERS)],
)
def test_install_then_remove_gives_back_the_file_byte_for_byte(tmp_path: Path, client: str, before: str) -> None:
    """The entry is added with every comment, trailing comma and key order in place, and
    removing it restores the original bytes."""
    path = tmp_path / "config"
    path.write_text(before)
    install_entry(path, client, "my-app", ENTRY)
    after = path.read_text()
    for line in before.splitlines():
        assert line in after.splitlines() or line.strip() == ""  # every line of the user's stays
    assert "my-app" in after and SECRET in after
    uninstall_entry(path, "my-app", client)
    assert path.read_text() == before


@pytest.mark.parametrize(("client", "left"), [("claude-code", "{\n}\n"), ("cursor", "{\n}\n"), ("codex", "")])
def test_removing_the_last_entry_keeps_the_file_and_its_backup(tmp_path: Path, client: str, left: str) -> None:
    """A file ``config install`` created is not deleted when its last entry goes: it is
    left as the clients read it, with no servers, beside its backup (docs/clients.md, "A
    file is never deleted"). Pinned: the behaviour was chosen, not left over."""
    path = tmp_path / "config"
    install_entry(path, client, "my-app", ENTRY)
    uninstall_entry(path, "my-app", client)
    assert sorted(every_file(tmp_path)) == ["config", "config.bak"]
    assert path.read_text() == left
    if left:
        assert json.loads(left) == {}


def test_codex_entry_is_its_own_table_and_reads_back(tmp_path: Path) -> None:
    import tomlkit

    path = tmp_path / "config.toml"
    path.write_text(CODEX)
    install_entry(path, "codex", "my-app", ENTRY)
    text = path.read_text()
    assert "[mcp_servers.my-app]\n" in text and text.index("[mcp_servers.my-app]") < text.index("[profiles.fast]")
    document = tomlkit.parse(text).unwrap()
    assert document["mcp_servers"]["my-app"] == {
        "command": ENTRY.command,
        "args": ["--mcp-stdio"],
        "env": {"MYAPP_TOKEN": SECRET},
    }
    assert document["mcp_servers"]["docs"]["command"] == "npx" and document["profiles"]["fast"]["model"] == "gpt-5-mini"
    with pytest.raises(ClientConfigError, match="only letters, digits.*--name 'My_App'"):
        install_entry(path, "codex", "My App", ENTRY)


@pytest.mark.parametrize(
    ("client", "content", "says"),
    [
        ("codex", b"[mcp_servers.x\ncommand = 1\n", "not valid TOML.*correct it there"),
        ("codex", b'[mcp_servers.my-app]\ncommand = "/old"\n', "exists already"),
        ("vscode", b'{"servers": {"a": 1}, // c\n', "not valid JSON.*a missing '}'.*line 1, column 1"),
        ("vscode", b'{"mcpServers": {}}', 'VS Code reads "servers", but this file has "mcpServers".*--client'),
        ("zed", b'{"context_servers": {"my-app": {"command": "/old"}}}', "exists already"),
    ],
)
def test_refusals_leave_the_file_and_its_folder_byte_for_byte_unchanged(
    tmp_path: Path, client: str, content: bytes, says: str
) -> None:
    path = tmp_path / "config"
    path.write_bytes(content)
    with pytest.raises(ClientConfigError, match=says):
        install_entry(path, client, "my-app", ENTRY)
    assert every_file(tmp_path) == {"config": content}


@pytest.mark.parametrize("client", CLIENTS)
def test_remove_leaves_no_copy_of_the_entrys_secret_in_any_file(tmp_path: Path, client: str) -> None:
    """install, install --force (its backup holds the first secret), remove: afterwards no
    file in the folder holds either secret; the backup keeps the rest, env values blanked."""
    path = tmp_path / "config"
    install_entry(path, client, "other", ServerEntry(command="/bin/other"))
    install_entry(path, client, "my-app", ServerEntry(ENTRY.command, ENTRY.args, {"MYAPP_TOKEN": SECRET + "-old"}))
    install_entry(path, client, "my-app", ENTRY, force=True)
    uninstall_entry(path, "my-app", client)
    for name, content in every_file(tmp_path).items():
        assert SECRET.encode() not in content, name
    backup = (tmp_path / "config.bak").read_text()
    assert REDACTED in backup and "/bin/other" in backup and "MYAPP_TOKEN" in backup


@posix_only
@pytest.mark.parametrize("client", ["claude-desktop", "codex", "vscode"])
def test_backups_are_private_and_a_symlink_at_the_backup_is_not_followed(tmp_path: Path, client: str) -> None:
    path = tmp_path / "config"
    install_entry(path, client, "my-app", ENTRY)
    path.chmod(0o644)  # as the user left it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not yours to change")
    (tmp_path / "config.bak").symlink_to(elsewhere)
    install_entry(path, client, "my-app", ServerEntry(command="/bin/no-secret"), force=True)
    backup = tmp_path / "config.bak"
    assert not backup.is_symlink() and stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert elsewhere.read_text() == "not yours to change"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the file keeps its own mode (no secret in it)


@posix_only
def test_a_new_config_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "mcp.json"
    install_entry(path, "cursor", "my-app", ENTRY)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@posix_only
@pytest.mark.parametrize("client", ["claude-desktop", "zed", "codex"])
def test_a_symlinked_config_is_written_through_and_stays_a_link(tmp_path: Path, client: str) -> None:
    """Dotfile managers keep the real file in a repository and link to it."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "config"
    real.write_text("" if client != "zed" else ZED)
    link = tmp_path / "home" / "config"
    link.parent.mkdir()
    link.symlink_to(real)
    install_entry(link, client, "my-app", ENTRY)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "my-app" in real.read_text()
    uninstall_entry(link, "my-app", client)
    assert link.is_symlink() and "my-app" not in real.read_text()
    assert sorted(p.name for p in dotfiles.iterdir()) == ["config"]  # no temporary file left beside it


def test_a_strict_json_clients_file_with_comments_is_edited_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text('{\n  // mine\n  "mcpServers": {}\n}\n')
    warnings: list[str] = []
    install_entry(path, "claude-desktop", "my-app", ENTRY, warn=warnings.append)
    assert "// mine" in path.read_text()
    assert warnings and "Claude Desktop may not accept" in warnings[0]


def test_zed_keeps_extension_entries_that_have_no_command(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(ZED)
    install_entry(path, "zed", "my-app", ENTRY)
    assert '"from-extension": {"settings": {}},' in path.read_text()
    cursor = tmp_path / "mcp.json"
    cursor.write_text('{"mcpServers": {"odd": {"settings": {}}}}')
    with pytest.raises(ClientConfigError, match='neither "command" nor "url"'):
        install_entry(cursor, "cursor", "x", ENTRY)  # other clients still refuse such entries


def test_cli_install_into_a_commented_vscode_file_and_remove_it_again(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(VSCODE)
    args = ["--client", "vscode", "--name", "myapp", "--path", str(path)]
    done = CliRunner().invoke(main, ["config", "install", *args, "--url", "http://127.0.0.1:8765/mcp"])
    assert done.exit_code == 0, done.output
    assert "added 'myapp'" in done.stdout and "restart VS Code" in done.stdout
    assert path.read_text().startswith("// User MCP servers") and "// the fetch server" in path.read_text()
    assert CliRunner().invoke(main, ["config", "remove", *args]).exit_code == 0
    assert path.read_text() == VSCODE
    missing = CliRunner().invoke(main, ["config", "remove", *args])
    assert missing.exit_code == 1 and "no entry called 'myapp'" in missing.stderr and "'fetch'" in missing.stderr


def test_every_client_has_a_doc_url_and_the_help_lists_every_command() -> None:
    assert all(info.doc_url.startswith("https://") for info in CLIENT_INFO.values())
    done = CliRunner().invoke(main, ["config", "--help"])
    assert done.exit_code == 0
    example = next(line for line in done.stdout.splitlines() if "config install" in line)
    assert example.strip().endswith("--app-name MyApp")  # one line: pastes as one command
    for command in ("install", "link", "path", "print", "remove"):
        line = next(line for line in done.stdout.splitlines() if line.strip().startswith(command + " "))
        assert not line.rstrip().endswith("..."), line  # summaries are not cut off
    top = CliRunner().invoke(main, ["--help"]).stdout
    assert not next(line for line in top.splitlines() if line.strip().startswith("config ")).rstrip().endswith("...")


def test_print_for_codex_is_toml_and_for_zed_its_settings_key() -> None:
    codex = CliRunner().invoke(
        main, ["config", "print", "--client", "codex", "--name", "myapp", "--url", "http://127.0.0.1:1/mcp"]
    )
    assert codex.exit_code == 0 and codex.stdout.startswith("[mcp_servers.myapp]\ncommand = ")
    zed = CliRunner().invoke(
        main, ["config", "print", "--client", "zed", "--name", "myapp", "--url", "http://127.0.0.1:1/mcp"]
    )
    assert list(json.loads(zed.stdout)) == ["context_servers"]
