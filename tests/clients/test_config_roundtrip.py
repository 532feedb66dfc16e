"""A config file round trip leaves the user's file as it was (issue 38): a differential test
over generated client files (tests/support/configfiles.py), JSONC as VS Code and Zed users
write it and TOML as Codex users write it.

For each file that the client's own reader accepts (Microsoft's jsonc-parser, VS Code's, for
JSONC: tests/clients/jsonc_oracle; ``tomllib`` for TOML), ``config install`` then
``config remove`` of one entry must:

- never refuse it (a valid file refused);
- keep every comment, in order, after the install and after the remove (a comment lost);
- give the lines it adds the file's own line end (a line end changed);
- give back the original bytes (bytes not restored). ``config install`` leaves the file it
  replaced as ``<file>.bak``; remove uses it (when install turns it into the file as it is)
  where the file alone cannot tell: ``"servers": {}``, ``"servers": {`` on two lines ``}`` and
  no servers object at all become the same text. Without it, remove gives back one of those.

Each count must be 0. The seed is fixed (``MCP_APP_BRIDGE_ROUNDTRIP_SEED``, 38 by default),
so CI runs the same files every time; ``MCP_APP_BRIDGE_ROUNDTRIP_FILES`` sets how many per
client (200 by default, half that without the backup, to keep the suite quick; the full
run (CONTRIBUTING.md) uses 1,500, and 400 for TOML). The last test does the same through the CLI, 12 files per client.
"""

from __future__ import annotations

import os
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.configfiles import ConfigFile, jsonc_file, toml_file
from support.jsoncoracle import oracle, oracle_command

from bridge.cli.commands import main
from bridge.clients import ClientConfigError, ServerEntry, install_entry, uninstall_entry

FILES = int(os.environ.get("MCP_APP_BRIDGE_ROUNDTRIP_FILES", "200"))
SEED = int(os.environ.get("MCP_APP_BRIDGE_ROUNDTRIP_SEED", "38"))
#: The bound on one test: the suite's 60 s, more for a larger run (a loaded machine takes
#: about a minute per 1,000 files).
TIMEOUT_SECONDS = max(60, FILES // 4)
#: TOML files per run: the full run's 400 against 1,500 JSONC ones.
TOML_FILES = max(1, FILES * 4 // 15) if FILES >= 1500 else FILES

NAME = "my-app"
ENTRY = ServerEntry(
    command="/opt/My App/mcp-app-bridge", args=("--app-name", "My App", "--mcp-stdio"), env={"XDG_STATE_HOME": "/s"}
)
CLIENTS = {"vscode": "servers", "zed": "context_servers", "codex": None}


@dataclass
class Counts:
    """Files (their index and what was seen) per kind of failure."""

    checked: int = 0
    refused: list[tuple[int, str]] = field(default_factory=list)
    comments_lost: list[tuple[int, str]] = field(default_factory=list)
    line_ends_changed: list[int] = field(default_factory=list)
    not_restored: list[int] = field(default_factory=list)

    def figures(self) -> dict[str, int]:
        return {
            "checked": self.checked,
            "valid files refused": len(self.refused),
            "comments lost": len(self.comments_lost),
            "line ends changed": len(self.line_ends_changed),
            "bytes not restored": len(self.not_restored),
        }

    def failures(self) -> bool:
        return bool(self.refused or self.comments_lost or self.line_ends_changed or self.not_restored)


def generated(client: str, count: int) -> list[ConfigFile]:
    rng = random.Random(f"{SEED}-{client}")
    key = CLIENTS[client]
    return [toml_file(rng) if key is None else jsonc_file(rng, key) for _ in range(count)]


def readable(client: str, files: list[ConfigFile]) -> list[bool]:
    """Whether the client's own reader reads each file."""
    if CLIENTS[client] is None:
        ok = []
        for file in files:
            try:
                tomllib.loads(file.text)
                ok.append(True)
            except tomllib.TOMLDecodeError:
                ok.append(False)
        return ok
    command = oracle_command()
    texts = [file.text.removeprefix("\ufeff") for file in files]  # VS Code reads a BOM as the encoding's mark
    return [not report["errors"] for report in oracle(command, texts)]


def lost_comment(comments: list[str], text: str) -> str | None:
    """The first of ``comments`` not found in ``text`` in order, if any."""
    pos = 0
    for comment in comments:
        found = text.find(comment, pos)
        if found < 0:
            return comment
        pos = found + len(comment)
    return None


def line_ends_kept(before: str, after: str) -> bool:
    """A file with one kind of line end (LF or CRLF) has only that kind after the edit."""
    crlf, lf, cr = before.count("\r\n"), before.count("\n"), before.count("\r")
    if lf and crlf == lf == cr:
        return after.count("\r\n") == after.count("\n") == after.count("\r")
    if lf and cr == 0:
        return "\r" not in after
    return True  # no line end to follow, or a mix of them


def round_trip(client: str, files: list[ConfigFile], folder: Path, *, cli: bool = False, backup: bool = True) -> Counts:
    """Install then remove on each file the client reads. Without ``backup`` (the
    ``<file>.bak`` install left is deleted first), remove has only the file to go by: a
    file it does not give back counts only when install would not turn the two texts into
    the same one (an empty servers object written ``{}`` and one install created look alike)."""
    counts = Counts()
    path = folder / ("config.toml" if CLIENTS[client] is None else "settings.json")
    for index, (file, ok) in enumerate(zip(files, readable(client, files), strict=True)):
        if not ok:
            continue
        counts.checked += 1
        raw = file.text.encode("utf-8")
        path.write_bytes(raw)
        try:
            install(client, path, cli=cli)
        except ClientConfigError as exc:
            counts.refused.append((index, str(exc)))
            continue
        installed = path.read_bytes().decode("utf-8")
        missing = lost_comment(file.comments, installed)
        if not line_ends_kept(file.text, installed):
            counts.line_ends_changed.append(index)
        if not backup:
            path.with_name(path.name + ".bak").unlink()
        remove(client, path, cli=cli)
        restored = path.read_bytes()
        missing = missing or lost_comment(file.comments, restored.decode("utf-8"))
        if missing is not None:
            counts.comments_lost.append((index, missing))
        if restored != raw and (backup or not alike(client, restored, installed, path)):
            counts.not_restored.append(index)
    return counts


def alike(client: str, restored: bytes, installed: str, path: Path) -> bool:
    """Whether install turns ``restored`` into ``installed`` too."""
    path.write_bytes(restored)
    install(client, path, cli=False)
    return path.read_bytes() == installed.encode("utf-8")


def install(client: str, path: Path, *, cli: bool) -> None:
    if not cli:
        install_entry(path, client, NAME, ENTRY)
        return
    done = CliRunner().invoke(
        main,
        ["config", "install", "--client", client, "--name", NAME, "--path", str(path), "--command", ENTRY.command,
         "--", *ENTRY.args],
    )  # fmt: skip
    if done.exit_code != 0:
        raise ClientConfigError(done.output)


def remove(client: str, path: Path, *, cli: bool) -> None:
    if not cli:
        uninstall_entry(path, NAME, client)
        return
    done = CliRunner().invoke(main, ["config", "remove", "--client", client, "--name", NAME, "--path", str(path)])
    assert done.exit_code == 0, done.output


def report(client: str, files: list[ConfigFile], counts: Counts) -> str:
    lines = [f"{client}, seed {SEED}: {counts.figures()}"]
    for index, why in [*counts.refused, *counts.comments_lost][:3]:
        lines.append(f"file {index} ({why}):\n{files[index].text!r}")
    for index in [*counts.not_restored, *counts.line_ends_changed][:3]:
        lines.append(f"file {index}:\n{files[index].text!r}")
    return "\n".join(lines)


@pytest.mark.process
@pytest.mark.timeout(TIMEOUT_SECONDS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_install_then_remove_gives_back_every_generated_file(client: str, tmp_path: Path) -> None:
    files = generated(client, TOML_FILES if CLIENTS[client] is None else FILES)
    counts = round_trip(client, files, tmp_path)
    print(f"{client}, seed {SEED}: {counts.figures()}")
    assert counts.checked == len(files), "the generator's files should all be valid"
    assert not counts.failures(), report(client, files, counts)


@pytest.mark.process
@pytest.mark.timeout(TIMEOUT_SECONDS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_without_the_backup_remove_gives_back_a_file_install_makes_the_same(client: str, tmp_path: Path) -> None:
    files = generated(client, (TOML_FILES if CLIENTS[client] is None else FILES) // (1 if FILES >= 1500 else 2))
    counts = round_trip(client, files, tmp_path, backup=False)
    print(f"{client}, seed {SEED}, no backup: {counts.figures()}")
    assert not counts.failures(), report(client, files, counts)


@pytest.mark.process
@pytest.mark.parametrize("client", list(CLIENTS))
def test_install_then_remove_through_the_cli_gives_back_the_file(client: str, tmp_path: Path) -> None:
    files = generated(client, 12)
    counts = round_trip(client, files, tmp_path, cli=True)
    assert counts.checked >= 10
    assert not counts.failures(), report(client, files, counts)


# -- the edges the generators found, one by one ---------------------------------------------------

EDGES = [
    ("vscode", '{\n  "inputs": []\n}\n'),  # install creates "servers": remove takes it away
    ("vscode", '{\r\n\t"servers": {},\r\n\t"inputs": []\r\n}\r\n'),  # an empty object it expanded
    ("zed", '{\n  "theme": "One Dark", // the theme\n}'),  # a trailing comma and no final line end
    ("zed", '{\r\n  "context_servers": {\r\n    "a": {"command": "/a"}\n  }\r\n}\r\n'),  # mixed line ends
    ("codex", '# settings\r\nmodel = "gpt-5"\r\n\r\n[mcp_servers.a]\r\ncommand = "/a"\r\n\r\n# tools\r\n[tools]\r\n'),
    ("codex", 'model = "gpt-5" # no final line end'),
    ("codex", 'mcp_servers = { a = { command = "/a" } } # inline\n[tui]\n'),
    ("codex", '\ufeff# saved by Notepad\r\nmodel = "gpt-5"\r\n'),  # a byte order mark, which Codex reads past
]


@pytest.mark.parametrize(("client", "text"), EDGES)
@pytest.mark.parametrize("backup", [True, False])
def test_each_edge_is_given_back_byte_for_byte(tmp_path: Path, client: str, text: str, backup: bool) -> None:
    """Each case is one the editor got wrong before (the entry's servers object left behind,
    a CRLF file given an LF line, an inline table refused, a blank line moved)."""
    path = tmp_path / "file"
    path.write_bytes(text.encode())
    install_entry(path, client, NAME, ENTRY)
    installed = path.read_bytes()
    assert line_ends_kept(text, installed.decode())
    if client == "codex":
        assert tomllib.loads(installed.decode().removeprefix("\ufeff"))["mcp_servers"][NAME]["command"] == ENTRY.command
        assert installed.index(b"my-app") < installed.index(b"[tools]") if b"[tools]" in installed else True
    if not backup:
        path.with_name("file.bak").unlink()
    uninstall_entry(path, NAME, client)
    assert path.read_bytes() == text.encode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'model = "x"\n\n[mcp_servers.a]\ncommand = "/a"\n\n# about tools\n[tools]\nx = 1\n',
            'model = "x"\n\n# about tools\n[tools]\nx = 1\n',
        ),
        (
            '[mcp_servers.b]\ncommand = "/b"\n\n[mcp_servers.a]\ncommand = "/a"\n# inside\n[mcp_servers.a.env]\nK = "v"\n\n# end\n',
            '[mcp_servers.b]\ncommand = "/b"\n# end\n',
        ),
    ],
)
def test_removing_an_entry_install_did_not_write_keeps_the_comments_after_it(
    tmp_path: Path, text: str, expected: str
) -> None:
    """tomlkit counts the comments between a table's last key and the next header as that
    table's: removed with the entry, ``# about tools`` went too (before). The entry's own
    lines (its header, keys, sub-tables and the comments between them) go."""
    path = tmp_path / "config.toml"
    path.write_text(text)
    uninstall_entry(path, "a", "codex")
    assert path.read_text() == expected
