"""AI clients' MCP configuration files: the entry that launches the bridge, where each
client keeps its file, and a safe edit of it.

Each client's format, as its own documentation gives it (the URL is in :data:`CLIENT_INFO`
and in the tests' golden files, ``tests/golden/clients/``):

- Claude Desktop, Cursor, Windsurf, LM Studio, Gemini CLI:
  ``{"mcpServers": {NAME: {"command", "args", "env"}}}``;
- Claude Code (project ``.mcp.json``, user ``~/.claude.json``): the same, with ``"type": "stdio"``;
- VS Code (``mcp.json``): ``{"servers": {NAME: {"type": "stdio", "command", "args", "env"}}}``;
- Zed (``settings.json``): ``{"context_servers": {NAME: {"command", "args", "env"}}}``;
- Codex (``config.toml``): ``[mcp_servers.NAME]`` with ``command``, ``args``, ``env``.

``command`` is always an absolute path to a real executable (never a ``.cmd`` shim, which
Windows clients run through ``cmd.exe /C``, where spaces split arguments — HAZARDS B37);
every option is its own ``args`` element, so paths with spaces survive every client's way
of launching; secrets only ever go in ``env``, never in ``args``.

Writing is careful (``bridge.clients.files``): the file is edited in place, so comments,
trailing commas, key order and layout survive (JSONC and TOML alike); a file that cannot
be used, or an entry of the same name without ``force``, is refused and the file left
byte for byte unchanged; the previous file is kept as ``<file>.bak`` (0600); a symlinked
file is written through (the link stays, its target is replaced atomically).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CLIENTS",
    "CLIENT_INFO",
    "ClientInfo",
    "ClientConfigError",
    "ServerEntry",
    "config_path",
    "entry_object",
    "entry_document",
    "read_servers",
]


class ClientConfigError(ValueError):
    """A client configuration file cannot be used as asked. The file was not changed."""


@dataclass(frozen=True)
class ClientInfo:
    """What one client reads.

    Attributes:
        title: the client's name for messages.
        doc_url: the client's own documentation of the format.
        syntax: ``"json"`` (strict), ``"jsonc"`` (comments and trailing commas) or ``"toml"``.
        servers_key: the top-level key holding the entries.
        stdio_type: entries carry ``"type": "stdio"``.
        remote_keys: keys that make an entry a remote (URL) one.
        rival_key: a key that, present, means the file is another client's (refused).
        bare_entries: entries with neither ``command`` nor a URL are allowed (Zed's
            extension-provided servers).
        name_pattern: names the client accepts, when it restricts them.
    """

    title: str
    doc_url: str
    syntax: str = "json"
    servers_key: str = "mcpServers"
    stdio_type: bool = False
    remote_keys: tuple[str, ...] = ("url",)
    rival_key: str | None = None
    bare_entries: bool = False
    name_pattern: str | None = None


_CLAUDE_CODE_DOC = "https://code.claude.com/docs/en/mcp"

# Each format was checked on 2026-12-01 against the page named beside it, as the search
# corpus holds it. Where the page itself was not in the corpus, the note says what was:
# - Claude Desktop: the MCP user quickstart is only cited by others (their copies agree);
# - Claude Code: code.claude.com/docs/en/mcp through copies (scopes: project .mcp.json,
#   user = top-level "mcpServers" of ~/.claude.json);
# - Windsurf: docs.windsurf.com is cited by others (path and "mcpServers", "serverUrl");
# - LM Studio: its docs say ~/.lmstudio/mcp.json (%USERPROFILE% on Windows); a bug report
#   (lmstudio-bug-tracker 1371) says one macOS build keeps it in ~/.cache/lm-studio instead.

#: Every client ``config`` knows, by its ``--client`` id.
CLIENT_INFO: dict[str, ClientInfo] = {
    "claude-desktop": ClientInfo(
        "Claude Desktop", "https://modelcontextprotocol.io/quickstart/user", rival_key="servers"
    ),
    "claude-code": ClientInfo(
        "Claude Code (project .mcp.json)", _CLAUDE_CODE_DOC, stdio_type=True, rival_key="servers"
    ),
    "claude-code-user": ClientInfo("Claude Code (user scope, ~/.claude.json)", _CLAUDE_CODE_DOC, stdio_type=True),
    "vscode": ClientInfo(
        "VS Code",
        "https://code.visualstudio.com/docs/copilot/guides/mcp-developer-guide",
        syntax="jsonc",
        servers_key="servers",
        stdio_type=True,
        rival_key="mcpServers",
    ),
    "cursor": ClientInfo("Cursor", "https://cursor.com/docs/mcp", rival_key="servers"),
    "codex": ClientInfo(
        "Codex",
        "https://developers.openai.com/codex/mcp",
        syntax="toml",
        servers_key="mcp_servers",
        # Codex refuses other names at start ("must match pattern ^[a-zA-Z0-9_-]+$",
        # openai/codex issue 5635).
        name_pattern=r"[A-Za-z0-9_-]+",
    ),
    "gemini-cli": ClientInfo(
        "Gemini CLI", "https://geminicli.com/docs/tools/mcp-server/", remote_keys=("url", "httpUrl")
    ),
    "windsurf": ClientInfo(
        "Windsurf",
        "https://docs.windsurf.com/windsurf/cascade/mcp",
        remote_keys=("serverUrl", "url"),
        rival_key="servers",
    ),
    "zed": ClientInfo(
        "Zed", "https://zed.dev/docs/ai/mcp", syntax="jsonc", servers_key="context_servers", bare_entries=True
    ),
    "lm-studio": ClientInfo("LM Studio", "https://lmstudio.ai/docs/app/mcp", rival_key="servers"),
}

#: Client ids accepted by ``--client``.
CLIENTS = tuple(CLIENT_INFO)


def _info(client: str) -> ClientInfo:
    try:
        return CLIENT_INFO[client]
    except KeyError:
        raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}") from None


@dataclass(frozen=True)
class ServerEntry:
    """One MCP server entry: how the client launches the bridge.

    Attributes:
        command: absolute path of the executable.
        args: its arguments, one element each.
        env: environment variables for it (where secrets go).
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


def config_path(
    client: str,
    *,
    platform: str = sys.platform,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
) -> Path:
    """Where ``client`` keeps its MCP configuration on this OS (each client's docs).

    - Claude Desktop: ``~/Library/Application Support/Claude/claude_desktop_config.json``
      (macOS), ``%APPDATA%\\Claude\\claude_desktop_config.json`` (Windows),
      ``~/.config/Claude/claude_desktop_config.json`` (Linux).
    - Claude Code: the project's ``.mcp.json`` in the current folder; user scope
      ``~/.claude.json`` (every OS).
    - VS Code: the user profile's ``mcp.json`` (``…/Code/User/mcp.json``).
    - Zed: ``~/.config/zed/settings.json`` (macOS, Linux; ``$XDG_CONFIG_HOME/zed`` when set
      on Linux), ``%APPDATA%\\Zed\\settings.json`` (Windows).
    - Codex: ``$CODEX_HOME/config.toml``, ``~/.codex/config.toml`` by default.
    - Cursor ``~/.cursor/mcp.json``; Gemini CLI ``~/.gemini/settings.json``; Windsurf
      ``~/.codeium/windsurf/mcp_config.json``; LM Studio ``~/.lmstudio/mcp.json`` (every
      OS, ``~`` being ``%USERPROFILE%`` on Windows).
    """
    _info(client)
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    in_home = {
        "claude-code-user": (".claude.json",),
        "cursor": (".cursor", "mcp.json"),
        "gemini-cli": (".gemini", "settings.json"),
        "windsurf": (".codeium", "windsurf", "mcp_config.json"),
        "lm-studio": (".lmstudio", "mcp.json"),
    }
    if client == "claude-code":
        return cwd / ".mcp.json"
    if client in in_home:
        return home.joinpath(*in_home[client])
    if client == "codex":
        return Path(environ.get("CODEX_HOME") or home / ".codex") / "config.toml"
    if platform == "darwin":
        base = home / "Library" / "Application Support"
    elif platform == "win32":
        base = Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "zed":
        if platform == "win32":
            return base / "Zed" / "settings.json"
        if platform == "darwin":
            return home / ".config" / "zed" / "settings.json"
        return base / "zed" / "settings.json"
    if client == "claude-desktop":
        return base / "Claude" / "claude_desktop_config.json"
    return base / "Code" / "User" / "mcp.json"  # vscode


def entry_object(client: str, entry: ServerEntry) -> dict[str, Any]:
    """The one entry's object, in the client's format (``type`` first where it has one)."""
    info = _info(client)
    obj: dict[str, Any] = {}
    if info.stdio_type:
        obj["type"] = "stdio"
    obj["command"] = entry.command
    obj["args"] = list(entry.args)
    if entry.env:
        obj["env"] = dict(entry.env)
    return obj


def check_name(client: str, name: str) -> None:
    """Raises ClientConfigError when the client would not accept ``name``."""
    info = _info(client)
    if not name:
        raise ClientConfigError("the server's name is empty")
    if info.name_pattern and re.fullmatch(info.name_pattern, name) is None:
        raise ClientConfigError(
            f"{info.title} accepts only letters, digits, '-' and '_' in a server's name, not {name!r}; "
            f"give --name {re.sub(r'[^A-Za-z0-9_-]+', '_', name)!r}"
        )


def entry_document(client: str, name: str, entry: ServerEntry) -> dict[str, Any]:
    """The whole document holding just this entry, as ``config print`` shows it."""
    check_name(client, name)
    return {_info(client).servers_key: {name: entry_object(client, entry)}}


def read_servers(document: Any, client: str | None = None) -> tuple[str, dict[str, dict[str, Any]]]:
    """Read the server entries of a client document.

    Without ``client``: accepts exactly one of ``mcpServers`` and ``servers``. With it: the
    client's own key, refusing its rival key. Infers each entry's transport (``stdio`` from
    ``command``, ``streamable-http`` from a URL key) when ``type`` is absent.

    Returns:
        ``(key, entries)`` with each entry's ``type`` filled in (a copy; the document is
        not changed).

    Raises:
        ClientConfigError: not an object, a rival key, an entry that is not an object, has
            both ``command`` and a URL, or neither (where the client needs one).
    """
    if not isinstance(document, dict):
        raise ClientConfigError("the file does not hold a JSON object")
    remote: tuple[str, ...]
    if client is None:
        keys = [key for key in ("mcpServers", "servers") if key in document]
        if len(keys) > 1:
            raise ClientConfigError('the file has both "mcpServers" and "servers"; keep the one your client reads')
        key, remote, bare = (keys[0] if keys else "mcpServers"), ("url",), False
    else:
        info = _info(client)
        key, remote, bare = info.servers_key, info.remote_keys, info.bare_entries
        if info.rival_key and info.rival_key in document:
            raise ClientConfigError(
                f'{info.title} reads "{key}", but this file has "{info.rival_key}": is it another client\'s file? '
                f"Give the right --client, or --path for another file"
            )
    servers = document.get(key, {})
    if not isinstance(servers, dict):
        raise ClientConfigError(f'"{key}" is not an object; make it one ({{}}) or remove it, then try again')
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ClientConfigError(
                f"the entry {name!r} is not an object; correct or remove that entry, then try again"
            )
        url = next((k for k in remote if k in entry), None)
        if "command" in entry and url:
            raise ClientConfigError(f'the entry {name!r} has both "command" and "{url}"; keep one, then try again')
        if "command" not in entry and not url and not bare:
            raise ClientConfigError(
                f'the entry {name!r} has neither "command" nor "{remote[0]}"; correct or remove it, then try again'
            )
        inferred = "stdio" if "command" in entry else "streamable-http"
        entries[name] = {"type": entry.get("type", inferred), **entry}
    return key, entries
