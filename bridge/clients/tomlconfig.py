"""Codex's ``config.toml`` edited in place: one server entry added or removed, every other
byte of the file kept (TOML 1.0, https://toml.io/en/v1.0.0).

tomlkit (the project's TOML library) parses, renders the entry and removes it; it keeps
comments and key order, but a whole-document ``dumps`` after an edit also moves the blank
lines and comments around the tables it touches, and writes the lines it adds with LF. So:

- :func:`install` adds an entry as text: the ``[mcp_servers.NAME]`` table tomlkit renders,
  in the file's own line end, after one more line end, following the last ``[mcp_servers…]``
  table, or at the end of the file (where a new table is always valid TOML). Only where that cannot be (``mcp_servers``
  written as an inline table, or an entry replaced) does tomlkit edit the document.
- :func:`uninstall` first looks for the exact inverse: the text that :func:`install` turns
  into this one. The file as ``config install`` left it thus gets back its original bytes.
  Any other entry is removed by tomlkit.

Every result is read back with :mod:`tomllib` (Python's TOML reader) and must hold the
same document but for that one entry; a file that tomllib reads is never refused otherwise.
tomlkit is imported only here (and this module only by ``config`` commands).

Errors: :class:`~bridge.clients.clienttable.ClientConfigError` naming the construct that could
not be edited; the text is never changed. Pure (text in, text out).
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.items
from tomlkit.exceptions import TOMLKitError

from .clienttable import CLIENT_INFO, ClientConfigError, EntryExistsError, read_servers

__all__ = ["entries", "entry_table", "install", "uninstall", "redacted", "render"]


def entry_table(entry: dict[str, Any], table: Any = None) -> Any:
    """The entry as a tomlkit table (or filled into ``table``, an inline one): its own
    ``[mcp_servers.NAME]`` table, with ``env`` and other objects as inline tables (one line each)."""
    table = tomlkit.table() if table is None else table
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            value = inline
        table.add(key, value)
    return table


def render(document: dict[str, dict[str, dict[str, Any]]]) -> str:
    """A whole new document: each ``{servers_key: {name: entry}}`` as ``[servers_key.name]`` tables (LF)."""
    out = tomlkit.document()
    for key, servers in document.items():
        table = tomlkit.table(is_super_table=True)
        for name, entry in servers.items():
            table.add(name, entry_table(entry))
        out.add(key, table)
    return tomlkit.dumps(out)


def _newline(text: str) -> str:
    """The file's line end: that of its last line break (LF when it has none)."""
    last = text.rfind("\n")
    return "\r\n" if last > 0 and text[last - 1] == "\r" else "\n"


def _parse(path: Path, text: str, client: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    try:
        document = tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ClientConfigError(
            f"{path} is not valid TOML ({exc}); correct it there in an editor, or move it aside to start a new one, then try again"
        ) from None
    _key, entries = read_servers(document.unwrap(), client)
    return document, entries


def entries(path: Path, client: str, text: str) -> dict[str, dict[str, Any]]:
    """The file's server entries (``catalog.read_servers``).

    Raises:
        ClientConfigError: not TOML, or entries that are not valid."""
    return _parse(path, _split_bom(text)[1], client)[1]


#: A UTF-8 byte order mark, as Windows Notepad and PowerShell 5.1 write one: Codex reads a
#: file that starts with it, tomllib and tomlkit do not. It is set aside while the file is
#: edited and written back in front.
_BOM = "\ufeff"


def _split_bom(text: str) -> tuple[str, str]:
    return (_BOM, text[1:]) if text.startswith(_BOM) else ("", text)


_HEADER = re.compile(r"^[ \t]*\[", re.MULTILINE)
_LINE = re.compile(r"[^\n]*\n?")


def _insertion(text: str, key: str) -> int | None:
    """Where the entry's table goes: after the last ``[key…]`` table, before the blank lines
    and comments in front of the table header that follows it. None: at the end (no such
    table, or none after it). A line that only looks like a header (in a multi-line string
    or array) makes a wrong place, which the check of the result refuses."""
    quoted = re.escape(key)
    headers = re.finditer(rf"^[ \t]*\[[ \t]*(?:{quoted}|\"{quoted}\"|'{quoted}')[ \t]*[.\]]", text, re.MULTILINE)
    servers = None
    for servers in headers:  # noqa: B007  (the last one)
        pass
    following = _HEADER.search(text, servers.end()) if servers is not None else None
    if servers is None or following is None:
        return None
    lines = [match.start() for match in _LINE.finditer(text, 0, following.start()) if match.group()]
    at = following.start()
    for start in reversed(lines):
        line = text[start:at].strip()
        if start <= servers.start() or (line and not line.startswith("#")):
            break
        at = start
    return at


def _added(text: str, key: str, name: str, entry: dict[str, Any]) -> str:
    """The text with the entry's table added, in the file's line end, after one more line
    end: after the last ``[key…]`` table (:func:`_insertion`), or at the end of the file."""
    newline = _newline(text)
    block = render({key: {name: entry}}).replace("\n", newline)
    if not text:
        return block
    at = _insertion(text, key)
    if at is None:
        return text + newline + block
    return text[:at] + newline + block + text[at:]


def _same_but(text: str, new: str, key: str, name: str, entry: dict[str, Any] | None, client: str) -> bool:
    """Whether tomllib reads ``new`` as ``text`` with the entry ``name`` set to ``entry``
    (or, with None, removed), and nothing else changed."""
    try:
        before, after = tomllib.loads(text), tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        return False
    servers = dict(before.get(key, {}))
    if entry is None:
        servers.pop(name, None)
    else:
        servers[name] = entry
    if servers or key in after:
        before[key] = servers
    else:
        before.pop(key, None)
    if entry is not None and read_servers(after, client)[1].get(name) != read_servers(before, client)[1].get(name):
        return False
    return after == before


def install(path: Path, client: str, text: str, name: str, entry: dict[str, Any], force: bool) -> tuple[str, bool]:
    """The text with the entry ``name`` added (or, with ``force``, replaced), and whether it
    replaced one. A leading byte order mark is kept.

    Raises:
        EntryExistsError: there is one and not ``force``.
        ClientConfigError: not TOML, or a construct this editor cannot add to (named).
    """
    bom, text = _split_bom(text)
    new, replaced = _install(path, client, text, name, entry, force)
    return bom + new, replaced


def _install(path: Path, client: str, text: str, name: str, entry: dict[str, Any], force: bool) -> tuple[str, bool]:
    key = CLIENT_INFO[client].servers_key
    document, entries = _parse(path, text, client)
    replaced = name in entries
    if replaced and not force:
        raise EntryExistsError(name)
    servers = document.get(key)
    if not replaced and not isinstance(servers, tomlkit.items.InlineTable):
        new = _added(text, key, name, entry)
        if _same_but(text, new, key, name, entry, client):
            return new, False
    edited = _through_tomlkit(text, lambda document: _set(document, key, name, entry))
    if edited is None or not _same_but(text, edited, key, name, entry, client):
        construct = (
            f"{key} written as an inline table ({key} = {{ … }})"
            if isinstance(servers, tomlkit.items.InlineTable)
            else f"the way {key} is written"
        )
        raise ClientConfigError(
            f"{path}: this editor cannot add the entry to {construct} without changing other lines; "
            f"add it by hand ({CLIENT_INFO[client].doc_url})"
        )
    return edited, replaced


def _set(document: Any, key: str, name: str, entry: dict[str, Any]) -> None:
    servers = document.get(key)
    if isinstance(servers, tomlkit.items.InlineTable):
        servers[name] = entry_table(entry, tomlkit.inline_table())
        return
    if servers is None:
        document.add(key, tomlkit.table(is_super_table=True))
    table = entry_table(entry)
    table.add(tomlkit.nl())  # a blank line before whatever table follows
    document[key][name] = table


def _through_tomlkit(text: str, change: Callable[[Any], None]) -> str | None:
    """``change`` made to the document by tomlkit, in the file's line ends (tomlkit writes
    the lines it adds with LF); None when tomlkit fails."""
    crlf = "\r\n" in text and text.count("\n") == text.count("\r\n")
    lf_text = text.replace("\r\n", "\n") if crlf else text
    try:
        document = tomlkit.parse(lf_text)
        change(document)
        new = tomlkit.dumps(document)
    except (ValueError, TOMLKitError, KeyError):
        return None
    if new.endswith("\n\n") and not lf_text.endswith("\n\n"):
        new = new[:-1]  # the blank line was for a table after it; there is none
    return new.replace("\n", "\r\n") if crlf else new


def uninstall(path: Path, client: str, text: str, name: str, previous: str | None = None) -> str:
    """The text without the entry ``name`` (the caller checked that there is one): the text
    :func:`install` made this one from, when there is one (``previous``, the backup of the
    last edit, is tried first), else tomlkit's removal.

    Raises:
        ClientConfigError: not TOML, or the removal would change more than the entry.
    """
    bom, text = _split_bom(text)
    return bom + _uninstall(path, client, text, name, None if previous is None else _split_bom(previous)[1])


def _uninstall(path: Path, client: str, text: str, name: str, previous: str | None) -> str:
    key = CLIENT_INFO[client].servers_key
    document, _entries = _parse(path, text, client)
    entry = document.unwrap()[key][name]
    removed = _through_tomlkit(text, lambda document: document[key].__delitem__(name))
    candidates = [previous] if previous is not None else []
    candidates += _bases(text, key, name, entry)
    candidates += [removed] if removed is not None else []
    for candidate in candidates:
        try:
            if install(path, client, candidate, name, entry, False)[0] == text:
                return candidate
        except ClientConfigError:
            continue
    removed = _comments_kept(text, removed) if removed is not None else None
    if removed is None or not _same_but(text, removed, key, name, None, client):
        raise ClientConfigError(
            f"{path}: this editor cannot remove the entry {name!r} from the way {key} is written "
            f"without changing other lines; remove it by hand ({CLIENT_INFO[client].doc_url})"
        )
    return removed


def _comments_kept(text: str, removed: str) -> str:
    """tomlkit's removal with the comment lines it took after the entry's last line given
    back: tomlkit counts the comments (and blank lines) between a table's last key and the
    next header as that table's, so ``# about tools`` above ``[tools]`` went with the entry."""
    before, after = text.splitlines(keepends=True), removed.splitlines(keepends=True)
    kept: list[str] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for operation, start, end, new_start, new_end in matcher.get_opcodes():
        kept += after[new_start:new_end]
        if operation != "delete":
            continue
        tail = end
        while tail > start and (not before[tail - 1].strip() or before[tail - 1].lstrip().startswith("#")):
            tail -= 1
        while tail < end and not before[tail].strip():  # (the blank lines before them went with the entry)
            tail += 1
        kept += before[tail:end]
    return "".join(kept)


def _bases(text: str, key: str, name: str, entry: dict[str, Any]) -> list[str]:
    """The texts that :func:`install` turns into ``text`` by adding the entry's table as text."""
    found: list[str] = []
    block = render({key: {name: entry}})
    if text == block:
        found.append("")
    for newline in ("\n", "\r\n"):
        piece = newline + block.replace("\n", newline)
        at = text.find(piece)
        while at >= 0:
            candidate = text[:at] + text[at + len(piece) :]
            if _added(candidate, key, name, entry) == text:
                found.append(candidate)
            at = text.find(piece, at + 1)
    return found


def redacted(path: Path, client: str, text: str, name: str, value: str) -> str:
    """The text with the entry's ``env`` and ``http_headers`` values replaced by ``value``
    (a backup with no copy of its secrets)."""
    bom, text = _split_bom(text)
    key = CLIENT_INFO[client].servers_key

    def blank(document: Any) -> None:
        for block in ("env", "http_headers"):
            values = document[key][name].get(block)
            if values is not None and hasattr(values, "keys"):
                for variable in list(values.keys()):
                    values[variable] = value

    _parse(path, text, client)
    new = _through_tomlkit(text, blank)
    if new is None:
        raise ClientConfigError(f"{path}: this editor cannot blank the entry {name!r}'s values for the backup")
    return bom + new
