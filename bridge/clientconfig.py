"""AI clients' MCP configuration files: the entry that launches the bridge, where each
client keeps its file, and a safe merge into it.

Entries per client (each client's own documented format):

- Claude Desktop, Cursor: ``{"mcpServers": {NAME: {"command", "args", "env"}}}``;
- Claude Code (project ``.mcp.json``): the same, with ``"type": "stdio"``;
- VS Code (``mcp.json``): ``{"servers": {NAME: {"type": "stdio", "command", "args", "env"}}}``.

``command`` is always an absolute path to a real executable (never a ``.cmd`` shim, which
Windows clients run through ``cmd.exe /C``, where spaces split arguments — HAZARDS B37);
every option is its own ``args`` element, so paths with spaces survive every client's way
of launching; secrets only ever go in ``env``, never in ``args``.

Writing is careful: the existing document is parsed first (an invalid one, or an entry of
the same name without ``force``, is refused and the file left byte-for-byte unchanged);
every other key and entry is kept; the previous file is kept as ``<file>.bak``; the new
one is written to a temporary file in the same folder and renamed over the old one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .atomicfile import replace_json

__all__ = [
    "CLIENTS",
    "ClientConfigError",
    "ServerEntry",
    "bridge_command",
    "config_path",
    "entry_document",
    "read_servers",
    "merge_entry",
    "remove_entry",
    "write_document",
    "install_entry",
    "uninstall_entry",
    "split_secrets",
]

#: Client ids accepted by ``--client``.
CLIENTS = ("claude-desktop", "claude-code", "vscode", "cursor")


class ClientConfigError(ValueError):
    """A client configuration file cannot be used as asked. The file was not changed."""


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


def bridge_command() -> list[str]:
    """The argv prefix that starts this bridge again: the frozen executable when frozen, the
    installed ``mcp-app-bridge`` console script when that is what runs, else this Python
    interpreter with ``-m bridge``. Always absolute paths."""
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable)]
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.name in ("mcp-app-bridge", "mcp-app-bridge.exe") and script.exists():
        return [str(script.resolve())]
    return [os.path.abspath(sys.executable), "-m", "bridge"]


def config_path(
    client: str,
    *,
    platform: str = sys.platform,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
) -> Path:
    """Where ``client`` keeps its MCP configuration on this OS.

    - Claude Desktop: ``~/Library/Application Support/Claude/claude_desktop_config.json``
      (macOS), ``%APPDATA%\\Claude\\claude_desktop_config.json`` (Windows),
      ``~/.config/Claude/claude_desktop_config.json`` (Linux).
    - Claude Code: the project's ``.mcp.json`` in the current folder.
    - VS Code: the user profile's ``mcp.json`` (``…/Code/User/mcp.json``).
    - Cursor: ``~/.cursor/mcp.json``.
    """
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    if client == "claude-code":
        return cwd / ".mcp.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if platform == "darwin":
        base = home / "Library" / "Application Support"
    elif platform == "win32":
        base = Path(environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "claude-desktop":
        return base / "Claude" / "claude_desktop_config.json"
    if client == "vscode":
        return base / "Code" / "User" / "mcp.json"
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def _servers_key(client: str) -> str:
    return "servers" if client == "vscode" else "mcpServers"


def _entry_object(client: str, entry: ServerEntry) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    if client in ("vscode", "claude-code"):
        obj["type"] = "stdio"
    obj["command"] = entry.command
    obj["args"] = list(entry.args)
    if entry.env:
        obj["env"] = dict(entry.env)
    return obj


def entry_document(client: str, name: str, entry: ServerEntry) -> dict[str, Any]:
    """The whole document holding just this entry, as ``config print`` shows it."""
    if client not in CLIENTS:
        raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    return {_servers_key(client): {name: _entry_object(client, entry)}}


def read_servers(document: Any) -> tuple[str, dict[str, dict[str, Any]]]:
    """Read the server entries of a client document.

    Accepts exactly one of ``mcpServers`` and ``servers``; infers each entry's transport
    (``stdio`` from ``command``, ``streamable-http`` from ``url``) when ``type`` is absent.

    Returns:
        ``(key, entries)`` with each entry's ``type`` filled in (a copy; the document is
        not changed). An empty document gives ``("mcpServers", {})``.

    Raises:
        ClientConfigError: not an object, both keys, an entry that is not an object, has
            both ``command`` and ``url``, or neither.
    """
    if not isinstance(document, dict):
        raise ClientConfigError("the file does not hold a JSON object")
    keys = [key for key in ("mcpServers", "servers") if key in document]
    if len(keys) > 1:
        raise ClientConfigError('the file has both "mcpServers" and "servers"; keep one')
    key = keys[0] if keys else "mcpServers"
    servers = document.get(key, {})
    if not isinstance(servers, dict):
        raise ClientConfigError(f'"{key}" is not a JSON object')
    entries: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if not isinstance(entry, dict):
            raise ClientConfigError(f"the entry {name!r} is not a JSON object")
        if "command" in entry and "url" in entry:
            raise ClientConfigError(f'the entry {name!r} has both "command" and "url"')
        if "command" not in entry and "url" not in entry:
            raise ClientConfigError(f'the entry {name!r} has neither "command" nor "url"')
        inferred = "stdio" if "command" in entry else "streamable-http"
        entries[name] = {"type": entry.get("type", inferred), **entry}
    return key, entries


def merge_entry(document: dict[str, Any], client: str, name: str, entry: ServerEntry, *, force: bool = False) -> dict[str, Any]:
    """Return a copy of ``document`` with the entry added (or replaced, with ``force``).

    Raises:
        ClientConfigError: the document is not usable (see :func:`read_servers`), or an
            entry called ``name`` exists and ``force`` is false.
    """
    key, entries = read_servers(document)
    if client == "vscode" and "mcpServers" in document:
        raise ClientConfigError('VS Code reads "servers", but this file has "mcpServers"')
    if client != "vscode" and "servers" in document:
        raise ClientConfigError('this client reads "mcpServers", but this file has "servers"')
    if name in entries and not force:
        raise ClientConfigError(f"an entry called {name!r} exists already; use --force to replace it")
    key = _servers_key(client)
    merged = dict(document)
    servers = dict(merged.get(key, {}))
    servers[name] = _entry_object(client, entry)
    merged[key] = servers
    return merged


def remove_entry(document: dict[str, Any], name: str) -> dict[str, Any]:
    """Return a copy of ``document`` without the entry ``name``.

    Raises:
        ClientConfigError: the document is not usable, or has no such entry.
    """
    key, entries = read_servers(document)
    if name not in entries:
        raise ClientConfigError(f"there is no entry called {name!r}")
    merged = dict(document)
    merged[key] = {k: v for k, v in merged[key].items() if k != name}
    return merged


def _load(path: Path) -> tuple[dict[str, Any], bytes | None]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}") from None
    if not raw.strip():
        return {}, raw
    try:
        document = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ClientConfigError(
            f"{path} is not valid JSON ({exc}); fix or remove it (comments are not supported), then try again"
        ) from None
    if not isinstance(document, dict):
        raise ClientConfigError(f"{path} does not hold a JSON object")
    return document, raw


def write_document(path: Path, document: dict[str, Any], previous: bytes | None) -> None:
    """Write ``document`` atomically, keeping ``previous`` (if any) as ``<path>.bak``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if previous is not None:
        backup = path.with_name(path.name + ".bak")
        backup.write_bytes(previous)
        with contextlib.suppress(OSError):
            import shutil

            shutil.copymode(path, backup)
    replace_json(path, document, indent=2)


def install_entry(path: Path | str, client: str, name: str, entry: ServerEntry, *, force: bool = False) -> bool:
    """Merge the entry into the client's file at ``path`` (created if missing).

    Returns:
        whether an entry of that name was replaced (only possible with ``force``).

    Raises:
        ClientConfigError: the file is invalid or already has ``name`` (without ``force``);
            the file is left byte-for-byte unchanged.
    """
    path = Path(path)
    document, previous = _load(path)
    replaced = name in read_servers(document)[1]
    write_document(path, merge_entry(document, client, name, entry, force=force), previous)
    return replaced


def uninstall_entry(path: Path | str, name: str) -> None:
    """Remove the entry ``name`` from the file at ``path``.

    Raises:
        ClientConfigError: no such file or entry, or an invalid file (left unchanged).
    """
    path = Path(path)
    document, previous = _load(path)
    if previous is None:
        raise ClientConfigError(f"{path} does not exist")
    write_document(path, remove_entry(document, name), previous)


def split_secrets(args: Sequence[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The ``env`` block for bridge ``args``: the value of every ``--token-env VAR`` that is
    set in ``environ`` (the token must reach the bridge through its environment)."""
    env: dict[str, str] = {}
    for index, arg in enumerate(args):
        variable = None
        if arg == "--token-env" and index + 1 < len(args):
            variable = args[index + 1]
        elif arg.startswith("--token-env="):
            variable = arg.split("=", 1)[1]
        if variable and environ.get(variable):
            env[variable] = environ[variable]
    return env
