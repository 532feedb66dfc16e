"""Editing a client's configuration file in place (the I/O half of ``catalog.py``).

JSON and JSONC files go through ``bridge.clients.jsonc`` (only the entry's text changes); TOML
(Codex) through tomlkit, which keeps comments and key order. tomlkit is imported here
only, and this module only by the ``config`` commands, so serving never loads it.

Every write: the file is parsed and checked first (a refusal changes nothing); the
previous file goes to ``<file>.bak`` with mode 0600 (a symlink there is replaced, not
followed); the new content is written to a temporary file beside the real file and
renamed over it; a config file that is a symlink stays one (its target is replaced).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import jsonc
from .atomicfile import replace_bytes, write_private
from .catalog import CLIENT_INFO, ClientConfigError, ServerEntry, check_name, entry_object, read_servers

__all__ = ["install_entry", "uninstall_entry", "install", "uninstall", "render_document", "REDACTED"]

#: What a removed entry's secret values become in the backup of a ``config remove``.
REDACTED = "<removed by mcp-app-bridge config remove>"

Warn = Callable[[str], None]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ClientConfigError(f"{path} is a folder; give the file's path with --path") from None
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}; check its permissions, then try again") from None


def _text(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientConfigError(
            f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8 in an editor, then try again"
        ) from None


def _write(path: Path, new: bytes, previous: bytes | None) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if previous is not None:
            write_private(path.with_name(path.name + ".bak"), previous)
        replace_bytes(path, new)
    except OSError as exc:
        raise ClientConfigError(f"cannot write {path}: {exc.strerror}") from None


def _refuse_jsonc(path: Path, client: str | None, exc: jsonc.JsoncError) -> ClientConfigError:
    return ClientConfigError(
        f"{path} is not valid JSON ({exc}); correct it there in an editor "
        "(comments and trailing commas are fine), or move the file aside to start a new one, then try again"
    )


def render_document(client: str, document: dict[str, Any]) -> str:
    """The text of a whole new document for ``client`` (``config print``, a new file)."""
    if CLIENT_INFO[client].syntax == "toml":
        import tomlkit

        out = tomlkit.document()
        for key, servers in document.items():
            table = tomlkit.table(is_super_table=True)
            for name, entry in servers.items():
                table.add(name, _toml_entry(entry))
            out.add(key, table)
        return tomlkit.dumps(out)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def install(
    path: Path, client: str, name: str, entry: dict[str, Any], *, force: bool, warn: Warn | None = None
) -> bool:
    info = CLIENT_INFO[client]
    raw = _read(path)
    text = "" if raw is None else _text(path, raw)
    if info.syntax == "toml":
        new, replaced = _toml_install(path, client, text, name, entry, force)
    elif not text.strip():
        new, replaced = render_document(client, {info.servers_key: {name: entry}}), False
    else:
        try:
            root = jsonc.parse(text)
        except jsonc.JsoncError as exc:
            raise _refuse_jsonc(path, client, exc) from None
        document = root.to_python()
        _key, entries = read_servers(document, client)
        replaced = name in entries
        if replaced and not force:
            raise ClientConfigError(
                f"an entry called {name!r} exists already; replace it with --force (force=True from Python)"
            )
        if info.syntax == "json" and warn is not None and jsonc.has_extensions(text):
            warn(
                f"{path} has comments or trailing commas, which {info.title} may not accept; they were kept as they were"
            )
        new = jsonc.apply(text, jsonc.set_member(text, [info.servers_key], name, entry))
        expected = read_servers(
            {**document, info.servers_key: {**document.get(info.servers_key, {}), name: entry}}, client
        )
        if read_servers(jsonc.parse(new).to_python(), client) != expected:  # the edit must say exactly that
            raise ClientConfigError(
                f"{path} has a layout this editor cannot change safely; add the entry by hand ({info.doc_url})"
            )
    _write(path, new.encode("utf-8"), raw)
    return replaced


def uninstall(path: Path, client: str | None, name: str, warn: Warn | None = None) -> None:
    raw = _read(path)
    if raw is None:
        raise ClientConfigError(f"{path} does not exist; check --client, or give the file with --path")
    text = _text(path, raw)
    if client is not None and CLIENT_INFO[client].syntax == "toml":
        new, backup = _toml_uninstall(path, client, text, name)
    else:
        try:
            document = jsonc.parse(text).to_python() if text.strip() else {}
        except jsonc.JsoncError as exc:
            raise _refuse_jsonc(path, client, exc) from None
        key, entries = read_servers(document, client)
        _missing(path, name, entries)
        new = jsonc.apply(text, jsonc.remove_member(text, [key], name))
        backup = text
        for block in ("env", "headers"):
            values = entries[name].get(block)
            for variable in values if isinstance(values, dict) else {}:
                backup = jsonc.apply(backup, jsonc.set_member(backup, [key, name, block], variable, REDACTED))
    _write(path, new.encode("utf-8"), backup.encode("utf-8"))


def _missing(path: Path, name: str, entries: dict[str, Any]) -> None:
    if name not in entries:
        names = ", ".join(repr(entry) for entry in entries) or "none"
        raise ClientConfigError(f"there is no entry called {name!r} in {path} (its entries: {names}); check --name")


# -- TOML (Codex) -----------------------------------------------------------------------------


def _toml_entry(entry: dict[str, Any]) -> Any:
    import tomlkit

    table = tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table.add(key, inline)
        else:
            table.add(key, value)
    return table


def _toml_parse(path: Path, text: str, client: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        document = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ClientConfigError(
            f"{path} is not valid TOML ({exc}); correct it there in an editor, or move it aside to start a new one, then try again"
        ) from None
    _key, entries = read_servers(document.unwrap(), client)
    return document, entries


def _toml_install(
    path: Path, client: str, text: str, name: str, entry: dict[str, Any], force: bool
) -> tuple[str, bool]:
    import tomlkit

    key = CLIENT_INFO[client].servers_key
    document, entries = _toml_parse(path, text, client)
    replaced = name in entries
    if replaced and not force:
        raise ClientConfigError(
            f"an entry called {name!r} exists already; replace it with --force (force=True from Python)"
        )
    if key not in document:
        document.add(key, tomlkit.table(is_super_table=True))
    table = _toml_entry(entry)
    table.add(tomlkit.nl())  # a blank line before whatever table follows
    document[key][name] = table
    new = tomlkit.dumps(document)
    if new.endswith("\n\n") and not text.endswith("\n\n"):
        new = new[:-1]  # the blank line was for a table after it; there is none
    return new, replaced


def _toml_uninstall(path: Path, client: str, text: str, name: str) -> tuple[str, str]:
    import tomlkit

    key = CLIENT_INFO[client].servers_key
    document, entries = _toml_parse(path, text, client)
    _missing(path, name, entries)
    del document[key][name]
    backup, _ = _toml_parse(path, text, client)
    for block in ("env", "http_headers"):
        values = backup[key][name].get(block)
        if values is not None and hasattr(values, "keys"):
            for variable in list(values.keys()):
                values[variable] = REDACTED
    new = tomlkit.dumps(document)
    if new.endswith("\n\n") and not text.endswith("\n\n"):
        new = new[:-1]  # the blank line install put after the entry, now at the end
    return new, tomlkit.dumps(backup)


def install_entry(
    path: Path | str,
    client: str,
    name: str,
    entry: ServerEntry,
    *,
    force: bool = False,
    warn: Callable[[str], None] | None = None,
) -> bool:
    """Add the entry to the client's file at ``path`` (created, with its folder, if missing),
    or replace the entry of that name with ``force``.

    Returns:
        whether an entry of that name was replaced (only possible with ``force``).
        ``warn`` gets any remark worth showing (a strict-JSON client's file with comments).

    Raises:
        ClientConfigError: the file cannot be used or already has ``name`` (without
            ``force``); the file is left byte for byte unchanged.
    """
    check_name(client, name)
    return install(Path(path), client, name, entry_object(client, entry), force=force, warn=warn)


def uninstall_entry(path: Path | str, name: str, client: str | None = None) -> None:
    """Remove the entry ``name`` from the file at ``path``. The backup (``<file>.bak``)
    holds the previous file with that entry's ``env`` values blanked, so no copy of its
    secrets is left behind.

    Raises:
        ClientConfigError: no such file or entry, or a file that cannot be used (left
            unchanged).
    """
    uninstall(Path(path), client, name)
