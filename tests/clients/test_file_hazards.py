"""`config install` and `config remove` against what a real config file meets: another
program writing it meanwhile (Claude Code rewrites ~/.claude.json while it runs), FIFOs,
files of other users, read-only files, nesting and syntax the editor does not support,
CRLF files, and a secret going into a file others can read (issue 20 item 6)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bridge.clients import ClientConfigError, ServerEntry, atomicfile, files, install_entry, uninstall_entry

SECRET = "tok-SECRET-0123456789abcdef"
ENTRY = ServerEntry(command="/opt/app", args=("--mcp-stdio",))
SECRET_ENTRY = ServerEntry(command="/opt/app", args=("--mcp-stdio",), env={"APP_TOKEN": SECRET})
posix_only = pytest.mark.posix_only("POSIX file types, owners and modes")
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")

# A writer like Claude Code's: read the file, change its own key, write a temporary file
# and rename it over the config (each update is one read-modify-write of the counter).
WRITER = r"""
import json, os, random, sys, time
path, updates = sys.argv[1], int(sys.argv[2])
random.seed(7)
for _ in range(updates):
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    document["counter"] = document.get("counter", 0) + 1
    temporary = path + ".writer"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2)
    os.replace(temporary, path)
    time.sleep(random.uniform(0.0, 0.08))
print("done", flush=True)
"""


def big_document(counter: int = 0) -> dict[str, Any]:
    """About 2 MiB, so that an edit takes long enough for the writer to strike inside it."""
    return {
        "mcpServers": {},
        "counter": counter,
        "projects": {f"/p/{i}": {"history": ["x" * 100] * 10} for i in range(1800)},
    }


@pytest.mark.process
@pytest.mark.linux_only("renameat2(RENAME_EXCHANGE) closes the last window; elsewhere microseconds remain")
@pytest.mark.parametrize("action", ["install", "remove"])
def test_a_concurrent_writer_loses_no_update(tmp_path: Path, action: str) -> None:
    """Another process updates the file 40 times while the editor installs and removes
    entries in a loop: every one of its updates is in the final file (before the checked
    rename, it lost most of them)."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(big_document(), indent=2))
    updates = 40
    if action == "remove":
        install_entry(path, "cursor", "mine", ENTRY)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(updates)], stdout=subprocess.PIPE, text=True
    )
    edits = refused = 0
    overlapped = 0  # edits begun while the writer was writing (done or refused)
    deadline = time.monotonic() + 60
    try:
        # On a loaded machine every edit made while the writer writes may be refused ("another
        # program keeps writing it"): then one more once it is done shows the editor edits.
        while writer.poll() is None or (edits == 0 and time.monotonic() < deadline):
            overlapped += writer.poll() is None
            try:
                if action == "install":
                    install_entry(path, "cursor", "mine", ENTRY, force=True)
                else:
                    install_entry(path, "cursor", "mine", ENTRY, force=True)  # (the writer may have dropped it)
                    uninstall_entry(path, "mine", "cursor")
                edits += 1
            except ClientConfigError as exc:
                # the writer's own read-modify-write may drop our entry: its doing, not ours
                assert "another program keeps writing it" in str(exc) or "no entry called 'mine'" in str(exc)
                refused += 1
        assert writer.wait(timeout=60) == 0
    finally:
        writer.kill()
    assert writer.stdout is not None and writer.stdout.read().strip() == "done"
    assert json.loads(path.read_text())["counter"] == updates, (edits, refused)  # 0 updates lost
    assert overlapped >= 1 and edits >= 1, (overlapped, edits, refused)


def test_a_write_during_the_edit_is_kept_and_the_edit_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other program writes after the file was read and before the rename: the edit
    is done again on its content, so both changes are there."""
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}, "theirs": 1}\n')
    real = atomicfile.replace_if
    strikes: list[int] = []

    def striking(target: Path, data: bytes, **options: Any) -> bool:
        if not strikes:
            strikes.append(1)
            target.write_text('{"mcpServers": {}, "theirs": 2}\n')  # in place, as some editors save
        return real(target, data, **options)

    monkeypatch.setattr(files, "replace_if", striking)
    install_entry(path, "cursor", "mine", ENTRY)
    document = json.loads(path.read_text())
    assert document["theirs"] == 2 and "mine" in document["mcpServers"]


@pytest.mark.linux_only("renameat2(RENAME_EXCHANGE)")
def test_a_write_in_the_instant_between_the_check_and_the_rename_is_swapped_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other program's rename lands after the last check: the file it displaced is
    seen to be theirs, swapped back, and the edit redone on it."""
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}, "theirs": 1}\n')
    real = files._Original.unchanged
    strikes: list[int] = []

    def then_strike(self: Any) -> bool:
        result = real(self)
        if result and not strikes:
            strikes.append(1)
            other = tmp_path / "other"
            other.write_text('{"mcpServers": {}, "theirs": 2}\n')
            os.replace(other, path)
        return result

    monkeypatch.setattr(files._Original, "unchanged", then_strike)
    install_entry(path, "cursor", "mine", ENTRY)
    document = json.loads(path.read_text())
    assert document["theirs"] == 2 and "mine" in document["mcpServers"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json", "mcp.json.bak"]  # no temporary file left


def test_a_file_that_keeps_changing_is_refused_with_their_content_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}, "theirs": 0}\n')
    real = atomicfile.replace_if
    writes = iter(range(1, 100))

    def striking(target: Path, data: bytes, **options: Any) -> bool:
        other = tmp_path / "other"
        other.write_text(f'{{"mcpServers": {{}}, "theirs": {next(writes)}}}\n')
        os.replace(other, target)  # a new inode each time, as Claude Code writes
        return real(target, data, **options)

    monkeypatch.setattr(files, "replace_if", striking)
    with pytest.raises(ClientConfigError, match=r"changed 5 times while it was being edited.*quit that program"):
        install_entry(path, "cursor", "mine", ENTRY)
    assert json.loads(path.read_text()) == {"mcpServers": {}, "theirs": files.ATTEMPTS}


def test_a_file_created_meanwhile_is_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mcp.json"
    real = atomicfile.replace_if
    strikes: list[int] = []

    def striking(target: Path, data: bytes, **options: Any) -> bool:
        if not strikes:
            strikes.append(1)
            target.write_text('{"mcpServers": {"theirs": {"command": "/t"}}}\n')
        return real(target, data, **options)

    monkeypatch.setattr(files, "replace_if", striking)
    install_entry(path, "cursor", "mine", ENTRY)
    assert set(json.loads(path.read_text())["mcpServers"]) == {"theirs", "mine"}


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", "config", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.process
@posix_only
def test_a_fifo_path_is_refused_at_once(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer: the editor opens it non-blocking and
    refuses it (before, the command hung)."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX only")
    fifo = tmp_path / "mcp.json"
    os.mkfifo(fifo)
    for command in (["install", "--url", "http://127.0.0.1:1/mcp"], ["remove"]):
        done = cli(command[0], "--client", "cursor", "--name", "mine", "--path", str(fifo), *command[1:])
        assert done.returncode == 1 and "is a FIFO, not a regular file" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@posix_only
@as_root
def test_a_symlink_to_another_users_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    """Replacing it would make the file ours (before, it changed owner)."""
    if sys.platform == "win32":  # its marker skips it first; this tells mypy --platform
        pytest.skip("POSIX only")
    theirs = tmp_path / "theirs.json"
    theirs.write_text('{"mcpServers": {}}\n')
    os.chown(theirs, 65534, 65534)
    link = tmp_path / "mcp.json"
    link.symlink_to(theirs)
    with pytest.raises(ClientConfigError, match="symbolic link to .*a file of another user's"):
        install_entry(link, "cursor", "mine", ENTRY)
    assert link.is_symlink() and theirs.stat().st_uid == 65534 and theirs.read_text() == '{"mcpServers": {}}\n'
    theirs.unlink()
    theirs.write_text('{"mcpServers": {}}\n')
    os.chown(theirs, 65534, 65534)
    with pytest.raises(ClientConfigError, match="belongs to another user"):
        install_entry(theirs, "cursor", "mine", ENTRY)  # the file itself, not through a link
    assert theirs.stat().st_uid == 65534


@posix_only
def test_a_symlink_to_a_file_of_ones_own_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}\n')
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    install_entry(link, "cursor", "mine", ENTRY)
    assert link.is_symlink() and "mine" in json.loads(real.read_text())["mcpServers"]


@pytest.mark.process
@posix_only
def test_a_read_only_file_is_refused_unless_forced(tmp_path: Path) -> None:
    """Before, a 0444 file was replaced without a word."""
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}}\n')
    path.chmod(0o444)
    done = cli(
        "install", "--client", "cursor", "--name", "mine", "--path", str(path), "--url", "http://127.0.0.1:1/mcp"
    )
    assert done.returncode == 1 and "is read-only (mode 0444)" in done.stderr and "--force" in done.stderr
    assert path.read_text() == '{"mcpServers": {}}\n'
    forced = cli(
        "install",
        "--client",
        "cursor",
        "--name",
        "mine",
        "--path",
        str(path),
        "--force",
        "--url",
        "http://127.0.0.1:1/mcp",
    )
    assert forced.returncode == 0, forced.stderr
    assert "mine" in json.loads(path.read_text())["mcpServers"] and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert cli("remove", "--client", "cursor", "--name", "mine", "--path", str(path)).returncode == 1
    assert cli("remove", "--client", "cursor", "--name", "mine", "--path", str(path), "--force").returncode == 0
    assert json.loads(path.read_text()) == {"mcpServers": {}}


@pytest.mark.process
def test_deep_nesting_is_edited_up_to_hundreds_of_levels_and_refused_clearly_beyond(tmp_path: Path) -> None:
    """500 levels used to end in a RecursionError traceback."""
    path = tmp_path / "mcp.json"
    deep = '{"mcpServers": {"a": {"command": "/a"}}, "deep": ' + "[" * 600 + "]" * 600 + "}\n"
    path.write_text(deep)
    install_entry(path, "cursor", "mine", ENTRY)
    uninstall_entry(path, "mine", "cursor")
    assert path.read_text() == deep
    deeper = '{"mcpServers": {}, "deep": ' + '{"a": ' * 20000 + "1" + "}" * 20000 + "}\n"
    path.write_text(deeper)
    done = cli(
        "install", "--client", "cursor", "--name", "mine", "--path", str(path), "--url", "http://127.0.0.1:1/mcp"
    )
    assert done.returncode == 1 and "nested more than 800 levels deep" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and path.read_text() == deeper


@pytest.mark.process
@pytest.mark.parametrize(
    "content",
    [
        'mcp_servers = { docs = { command = "npx" } }\n',
        'model = "gpt-5"\nmcp_servers = {}\n',
    ],
)
def test_codex_inline_servers_table_gets_the_entry_and_loses_it_again(tmp_path: Path, content: str) -> None:
    """``mcp_servers = { … }`` is valid TOML that Codex reads: the entry goes into that inline
    table, and remove gives back the file (before: refused, and a ValueError traceback
    before that; issue 38 item 3)."""
    import tomllib

    path = tmp_path / "config.toml"
    path.write_text(content)
    done = cli("install", "--client", "codex", "--name", "mine", "--path", str(path), "--url", "http://127.0.0.1:1/mcp")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    servers = tomllib.loads(path.read_text())["mcp_servers"]
    assert "mine" in servers and set(servers) - {"mine"} == set(tomllib.loads(content)["mcp_servers"])
    assert cli("remove", "--client", "codex", "--name", "mine", "--path", str(path)).returncode == 0
    assert path.read_text() == content


CRLF = (
    '{\r\n  // servers\r\n  "mcpServers": {\r\n    "a": {"command": "/a"} /* after a */ ,\r\n'
    '    "b": {"command": "/b"} // last\r\n  },\r\n  "x": 1\r\n}\r\n'
)


@pytest.mark.parametrize("client", ["cursor", "codex"])
def test_crlf_files_stay_crlf_and_remove_restores_the_bytes(tmp_path: Path, client: str) -> None:
    path = tmp_path / "config"
    before = CRLF if client == "cursor" else '# codex\r\nmodel = "gpt-5"\r\n\r\n[mcp_servers.a]\r\ncommand = "/a"\r\n'
    path.write_bytes(before.encode())
    install_entry(path, client, "mine", SECRET_ENTRY)
    after = path.read_bytes()
    assert b"mine" in after and after.count(b"\n") == after.count(b"\r\n"), after  # no bare LF
    assert b"/* after a */ ," in after or client == "codex"
    uninstall_entry(path, "mine", client)
    assert path.read_bytes() == before.encode()


@posix_only
@pytest.mark.parametrize("client", ["cursor", "codex"])
def test_a_secret_makes_a_file_others_can_read_private_and_says_so(tmp_path: Path, client: str) -> None:
    """Decision: the file is tightened (mode & 0700) and a warning says so (before, the
    token went into a 0644 file without a word)."""
    path = tmp_path / "config"
    path.write_text("" if client == "codex" else '{"mcpServers": {}}\n')
    path.chmod(0o644)
    warnings: list[str] = []
    install_entry(path, client, "mine", SECRET_ENTRY, warn=warnings.append)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(warnings) == 1 and "could be read by other users (mode 0644)" in warnings[0] and "0600" in warnings[0]
    assert SECRET not in warnings[0]


@posix_only
@pytest.mark.parametrize(
    "env", [{"XDG_STATE_HOME": "/home/me/.state"}, {"MYAPP_TOKEN": "$MYAPP_TOKEN"}, {"MYAPP_TOKEN": "${MYAPP_TOKEN}"}]
)
def test_an_entry_without_a_secret_value_leaves_the_files_mode_alone(tmp_path: Path, env: dict[str, str]) -> None:
    """The state folder and a ``$VAR`` reference are no secret: no tightening, no warning
    saying the file "now holds a secret" (a newcomer's 0644 Cursor file became 0600 with
    that warning for XDG_STATE_HOME alone)."""
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {}}\n')
    path.chmod(0o644)
    warnings: list[str] = []
    install_entry(path, "cursor", "mine", ServerEntry(command="/opt/MyApp/bin/myapp", env=env), warn=warnings.append)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not warnings
