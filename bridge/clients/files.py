"""Editing a client's configuration file in place (the I/O half of ``clienttable.py``).

JSON and JSONC files go through ``bridge.clients.jsonc`` (only the entry's text changes); TOML
(Codex) through ``bridge.clients.tomlconfig`` (tomlkit). This module is imported only by the
``config`` commands, so serving never loads either. ``config remove`` after ``config install``
gives back the file's bytes: remove looks for the text that install turns into the file's.

Every write: the file is opened non-blocking and must be a regular file of this user's
(a symlink is followed only to one; it stays a link and its target is replaced), writable
unless ``force``; it is parsed and checked first (a refusal changes nothing); the previous
file goes to ``<file>.bak`` with mode 0600 (a symlink there is replaced, not followed);
the new content is written to a temporary file beside the real file and renamed over it
only if the file is still the version read (else the edit is redone on the new content,
at most :data:`ATTEMPTS` times), so another program's write is never undone.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import jsonc
from .atomicfile import replace_if, write_private
from .clienttable import (
    CLIENT_INFO,
    ClientConfigError,
    EntryExistsError,
    ServerEntry,
    check_name,
    entry_object,
    read_servers,
)

__all__ = ["install_entry", "uninstall_entry", "install", "uninstall", "render_document", "REDACTED"]

#: What a removed entry's secret values become in the backup of a ``config remove``.
REDACTED = "<removed by mcp-app-bridge config remove>"

Warn = Callable[[str], None]


#: How many times an edit is redone when another program writes the file meanwhile.
ATTEMPTS = 5


@dataclass
class _Original:
    """The file as read: where it is (a symbolic link's target), its bytes (None: no file
    yet), and what identifies that version (device, inode, size, mtime_ns)."""

    path: Path
    target: Path
    raw: bytes | None = None
    mode: int = 0o600
    identity: tuple[int, int, int, int] | None = None
    descriptor: int | None = None

    def close(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)
            self.descriptor = None

    def is_original(self, info: os.stat_result) -> bool:
        """Whether ``info`` (an ``lstat``) is the file as read."""
        return _identity(info) == self.identity

    def unchanged(self) -> bool:
        """Whether the file is still the version read: the same bytes (read again, through
        the descriptor kept open where the system lets others rename over an open file),
        then, last and cheapest, the same link target, inode, size and mtime, so that
        little time is left between this check and the rename."""
        if self.raw is None:
            return not os.path.lexists(self.target)
        try:
            if self.descriptor is not None:
                os.lseek(self.descriptor, 0, os.SEEK_SET)
                now_raw = _read_all(self.descriptor)
            else:
                now_raw = self.target.read_bytes()
            if now_raw != self.raw:
                return False
            if self.target != self.path and _resolve(self.path) != self.target:
                return False
            now = os.stat(self.target, follow_symlinks=False)
        except OSError:
            return False
        if self.descriptor is not None and _identity(os.fstat(self.descriptor)) != self.identity:
            return False
        return _identity(now) == self.identity


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _read_all(descriptor: int) -> bytes:
    with open(descriptor, "rb", closefd=False) as handle:
        return handle.read()


def _owned(info: os.stat_result) -> bool:
    return not hasattr(os, "geteuid") or info.st_uid == os.geteuid()


def _resolve(path: Path) -> Path:
    """``path``, or the file its symbolic link(s) lead to."""
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return path
    except FileNotFoundError:
        return path
    return Path(os.path.realpath(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device")):
        if test(mode):
            return name
    return "a device" if stat.S_ISBLK(mode) else "not a regular file"


def _open(path: Path, *, force: bool) -> _Original:
    """Open and read the config file, refusing what must not be edited: a folder, a FIFO,
    socket or device (opened non-blocking, so a FIFO cannot hang the command), a file of
    another user's (directly or through a symbolic link: replacing it would change its
    owner), and a read-only file unless ``force``."""
    try:
        target = _resolve(path)
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}") from None
    if target != path:
        try:
            info = os.stat(target)
        except FileNotFoundError:
            info = None
        if info is not None and not _owned(info):
            raise ClientConfigError(
                f"{path} is a symbolic link to {target}, a file of another user's; "
                "the bridge edits only your own files: copy it, or ask its owner"
            )
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(target, flags | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return _Original(path, target)
    except IsADirectoryError:
        raise ClientConfigError(f"{path} is a folder; give the file's path with --path") from None
    except OSError as exc:
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}; check what it is and its permissions") from None
    original = _Original(path, target, descriptor=descriptor)
    try:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise ClientConfigError(f"{path} is a folder; give the file's path with --path")
        if not stat.S_ISREG(info.st_mode):
            raise ClientConfigError(
                f"{path} is {_kind(info.st_mode)}, not a regular file; give the client's config file with --path"
            )
        if not _owned(info):
            raise ClientConfigError(
                f"{path} belongs to another user; replacing it would make it yours: the bridge edits only your own files"
            )
        if not info.st_mode & stat.S_IWUSR and not force:
            raise ClientConfigError(
                f"{path} is read-only (mode {stat.S_IMODE(info.st_mode):04o}); make it writable, "
                "or use --force to replace it anyway (it stays read-only)"
            )
        original.mode = stat.S_IMODE(info.st_mode) & 0o777
        original.identity = _identity(info)
        original.raw = _read_all(descriptor)
        if sys.platform == "win32":
            original.close()  # an open file cannot be renamed over there, by us or the client
    except ClientConfigError:
        original.close()
        raise
    except OSError as exc:
        original.close()
        raise ClientConfigError(f"cannot read {path}: {exc.strerror}; check its permissions, then try again") from None
    return original


def _text(path: Path, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientConfigError(
            f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8 in an editor, then try again"
        ) from None


#: An edit: from the file's text ("" when there is none) to (new text, backup text, result).
Edit = Callable[[str], tuple[str, str, Any]]


def _edit_file(
    path: Path,
    edit: Edit,
    *,
    force: bool,
    mode: Callable[[int, bool], int] | None = None,
    missing: str | None = None,
) -> Any:
    """Read, edit and replace ``path``; redone from the new content when another program
    writes the file before the rename (checked right before it), at most
    :data:`ATTEMPTS` times, so another program's write is never undone.

    ``mode(old_mode, new_file)`` gives the new file's permission bits (default: the old
    ones, 0600 for a new file); ``missing`` is the refusal when there is no file.

    Raises:
        ClientConfigError: the file cannot be used, the edit refused, or the file kept
            changing; the file is then unchanged.
    """
    for _attempt in range(ATTEMPTS):
        original = _open(path, force=force)
        try:
            if original.raw is None and missing is not None:
                raise ClientConfigError(missing)
            text = "" if original.raw is None else _text(path, original.raw)
            new, backup, result = edit(text)
            new_mode = original.mode if mode is None else mode(original.mode, original.raw is None)
            try:
                original.target.parent.mkdir(parents=True, exist_ok=True)
                if original.raw is not None:
                    write_private(path.with_name(path.name + ".bak"), backup.encode("utf-8"))
                done = replace_if(
                    original.target,
                    new.encode("utf-8"),
                    mode=new_mode,
                    unchanged=original.unchanged,
                    create=original.raw is None,
                    is_original=original.is_original,
                )
            except OSError as exc:
                raise ClientConfigError(f"cannot write {path}: {exc.strerror}") from None
        finally:
            original.close()
        if done:
            return result
    raise ClientConfigError(
        f"{path} changed {ATTEMPTS} times while it was being edited: another program keeps writing it; "
        "quit that program (the AI client), then try again"
    )


def _strict_json(path: Path, client: str | None, new: str) -> None:
    """For a client that exits on a JSON syntax error (``ClientInfo.exits_on_bad_json``), the
    text about to replace ``path`` parsed by a strict JSON parser (``json.loads``: no comment,
    no trailing comma, no duplicate-free guarantee needed).

    Raises:
        ClientConfigError: it does not parse; the file is then unchanged.
    """
    info = CLIENT_INFO.get(client) if client is not None else None
    if info is None or not info.exits_on_bad_json or not new.strip():
        return
    import json

    try:
        json.loads(new)
    except ValueError as exc:
        raise ClientConfigError(
            f"the edited {path} would not be strict JSON ({exc}), and {info.title} exits on that; it was not changed"
        ) from None


def _refuse_jsonc(path: Path, client: str | None, exc: jsonc.JsoncError) -> ClientConfigError:
    info = CLIENT_INFO.get(client) if client is not None else None
    if info is None:
        syntax = ""
    elif info.syntax == "jsonc":
        syntax = f" ({info.title} accepts comments and trailing commas)"
    else:
        syntax = f" ({info.title} reads strict JSON: no comments, no trailing commas)"
    return ClientConfigError(
        f"{path} is not valid JSON ({exc}); correct it there in an editor{syntax}, "
        "or move the file aside to start a new one, then try again"
    )


def render_document(client: str, document: dict[str, Any]) -> str:
    """The text of a whole new document for ``client`` (``config print``, a new file)."""
    if CLIENT_INFO[client].syntax == "toml":
        from . import tomlconfig

        return tomlconfig.render(document)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


#: Entry variables whose values are no secret: the state folder's (``catalog.state_environment``).
_NOT_SECRET_VARIABLES = frozenset({"XDG_STATE_HOME", "WIN_PD_OVERRIDE_LOCAL_APPDATA"})
#: A value that names a variable for the client to fill in (Gemini CLI's ``"$VAR"``): no secret either.
_REFERENCE = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})")


def _has_secret(entry: dict[str, Any]) -> bool:
    """Whether the entry carries a value that may be a credential: any header, or an ``env``
    value other than the state folder's or a ``$VAR`` reference."""
    if any(isinstance(entry.get(block), dict) and entry[block] for block in ("headers", "http_headers")):
        return True
    env = entry.get("env")
    if not isinstance(env, dict):
        return False
    return any(
        name not in _NOT_SECRET_VARIABLES and not (isinstance(value, str) and _REFERENCE.fullmatch(value))
        for name, value in env.items()
    )


def install(
    path: Path, client: str, name: str, entry: dict[str, Any], *, force: bool, warn: Warn | None = None
) -> bool:
    """Add (or with ``force`` replace) the entry ``name``; see :func:`_edit_file` for how
    the file is read and replaced. ``force`` also allows a read-only file. An entry with a
    secret (see :func:`_has_secret`: a header, or an ``env`` value other than the state
    folder's or a ``$VAR`` reference) makes a file that others could read private to its
    owner (mode & 0700), with a warning saying so."""
    info = CLIENT_INFO[client]
    remarks: list[str] = []

    def edit(text: str) -> tuple[str, str, bool]:
        remarks.clear()
        if info.syntax == "toml":
            from . import tomlconfig

            new, replaced = tomlconfig.install(path, client, text, name, entry, force)
            return new, text, replaced
        new, replaced = _jsonc_install(path, client, text, name, entry, force, remarks)
        return new, text, replaced

    def mode(old: int, new_file: bool) -> int:
        if new_file or not _has_secret(entry) or not old & 0o077:
            return old
        remarks.append(
            f"{path} could be read by other users (mode {old:04o}) and now holds a secret: "
            f"it is now private to you (mode {old & 0o700:04o})"
        )
        return old & 0o700

    replaced = _edit_file(path, edit, force=force, mode=mode if hasattr(os, "fchmod") else None)
    for remark in remarks:
        if warn is not None:
            warn(remark)
    return bool(replaced)


def uninstall(path: Path, client: str | None, name: str, warn: Warn | None = None, *, force: bool = False) -> None:
    """Remove the entry ``name`` (every entry of that name). ``force`` allows a read-only file.

    The file as ``config install`` left it gets back its bytes from before (see
    :func:`_jsonc_uninstall`); the backup (``<file>.bak``) gets the file with the entry's
    ``env``/``headers`` values replaced by :data:`REDACTED`."""

    def edit(text: str) -> tuple[str, str, None]:
        previous = _previous(path)
        if client is not None and CLIENT_INFO[client].syntax == "toml":
            from . import tomlconfig

            _missing(path, name, tomlconfig.entries(path, client, text))
            new = tomlconfig.uninstall(path, client, text, name, previous)
            return new, tomlconfig.redacted(path, client, text, name, REDACTED), None
        return _jsonc_uninstall(path, client, text, name, previous)

    _edit_file(path, edit, force=force, missing=f"{path} does not exist; check --client, or give the file with --path")


def _previous(path: Path) -> str | None:
    """The text of ``<file>.bak`` (the file before the last edit), when it is a readable
    UTF-8 regular file of this user's; None otherwise. It only ever serves as a candidate
    that the edit checks by redoing the install on it."""
    try:
        backup = _open(path.with_name(path.name + ".bak"), force=True)
    except ClientConfigError:
        return None
    try:
        return None if backup.raw is None else backup.raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    finally:
        backup.close()


def _jsonc_install(
    path: Path, client: str, text: str, name: str, entry: dict[str, Any], force: bool, remarks: list[str]
) -> tuple[str, bool]:
    """The JSON/JSONC text with the entry ``name`` added (or replaced with ``force``), and whether it replaced one."""
    info = CLIENT_INFO[client]
    if not text.strip():
        return render_document(client, {info.servers_key: {name: entry}}), False
    try:
        root = jsonc.parse(text)
    except jsonc.JsoncError as exc:
        raise _refuse_jsonc(path, client, exc) from None
    document = root.to_python()
    _key, entries = read_servers(document, client)
    replaced = name in entries
    if replaced and not force:
        raise EntryExistsError(name)
    if info.exits_on_bad_json and jsonc.has_extensions(root):
        raise ClientConfigError(
            f"{path} has comments or trailing commas, and {info.title} exits on anything but strict JSON; "
            "remove them, then try again"
        )
    if info.syntax == "json" and jsonc.has_extensions(root):
        remarks.append(
            f"{path} has comments or trailing commas, which {info.title} may not accept; they were kept as they were"
        )
    new = jsonc.apply(text, jsonc.set_member(text, [info.servers_key], name, entry, root=root))
    expected = read_servers({**document, info.servers_key: {**document.get(info.servers_key, {}), name: entry}}, client)
    if read_servers(jsonc.parse(new).to_python(), client) != expected:  # the edit must say exactly that
        raise ClientConfigError(
            f'{path}: this editor cannot add the entry to the "{info.servers_key}" object as it is written '
            f"without changing other members; add it by hand ({info.doc_url})"
        )
    _strict_json(path, client, new)
    return new, replaced


def _jsonc_uninstall(
    path: Path, client: str | None, text: str, name: str, previous: str | None
) -> tuple[str, str, None]:
    """(new text, backup text, None) for removing ``name`` from a JSON/JSONC file.

    The new text is the one :func:`_jsonc_install` turns into ``text``, when there is one:
    ``previous`` (the backup of the last edit), the text without the entry's member, and
    that text without the servers object left empty (an object install created, or an
    empty one it expanded); each is checked by redoing the install on it. Otherwise the
    entry's member goes, and nothing else."""
    try:
        root = jsonc.parse(text) if text.strip() else None
    except jsonc.JsoncError as exc:
        raise _refuse_jsonc(path, client, exc) from None
    document = root.to_python() if root is not None else {}
    key, entries = read_servers(document, client)
    _missing(path, name, entries)
    assert root is not None  # (an entry was found)
    new = jsonc.apply(text, jsonc.remove_member(text, [key], name, root=root))
    if client is not None:
        value = document[key][name]
        servers = root.member(key)
        alone = servers is not None and all(member.key == name for member in servers.value.members)
        removed = new
        for candidates in (lambda: [previous], lambda: _emptied(removed, key) if alone else [removed], lambda: [""]):
            found = [item for item in candidates() if item is not None]
            match = next((item for item in found if _installs_to(path, client, item, name, value, text)), None)
            if match is not None:
                new = match
                break
    if not jsonc.has_extensions(root):  # strict JSON before: strict JSON after (Antigravity CLI)
        _strict_json(path, client, new)
    backup = text
    for block in ("env", "headers"):
        values = entries[name].get(block)
        for variable in values if isinstance(values, dict) else {}:
            backup = jsonc.apply(backup, jsonc.set_member(backup, [key, name, block], variable, REDACTED))
    return new, backup, None


def _emptied(text: str, key: str) -> list[str]:
    """``text`` and, when its servers object ``key`` is left empty (only whitespace in it),
    the texts install may have turned into the same file, most likely first: without that
    member (install created it), with it as ``{}``, as ``{ }``, as it is. Install gives
    some of them the same layout; without a backup to tell, the first one wins."""
    found = [text]
    root = jsonc.parse(text)
    member = root.member(key) if root.kind == "object" else None
    if member is None or not _collapsed(text, member.value):
        return found
    start, end = member.value.start, member.value.end
    without = jsonc.apply(text, jsonc.remove_member(text, [], key, root=root))
    found = [without, *_collapsed(without, jsonc.parse(without))]
    return found + [text[:start] + "{}" + text[end:], text[:start] + "{ }" + text[end:], text]


def _collapsed(text: str, node: jsonc.Node) -> list[str]:
    """``text`` with the object ``node`` written ``{}`` and ``{ }``, when it holds only whitespace."""
    if node.kind != "object" or text[node.start + 1 : node.end - 1].strip(" \t\r\n"):
        return []
    return [text[: node.start] + empty + text[node.end :] for empty in ("{}", "{ }")]


def _installs_to(path: Path, client: str, candidate: str, name: str, entry: Any, text: str) -> bool:
    """Whether installing ``entry`` into ``candidate`` gives exactly ``text``; first, cheaply,
    whether ``text`` is ``candidate`` with text added in at most two places (an install
    adds the member, and a comma before it), so that a large file is not parsed for nothing."""
    if len(candidate) >= len(text):
        return False
    prefix = _common_length(candidate, text, 1)
    suffix = min(_common_length(candidate, text, -1), len(candidate) - prefix)
    if candidate[prefix : len(candidate) - suffix] not in text[prefix : len(text) - suffix]:
        return False
    key = CLIENT_INFO[client].servers_key
    if not candidate.strip():
        return render_document(client, {key: {name: entry}}) == text
    try:  # the edit _jsonc_install makes (the text it gives is ``text``, whose entries were read)
        root = jsonc.parse(candidate)
        servers = root.member(key) if root.kind == "object" else None
        if servers is not None and servers.value.member(name) is not None:
            return False
        return jsonc.apply(candidate, jsonc.set_member(candidate, [key], name, entry, root=root)) == text
    except (jsonc.JsoncError, ValueError):
        return False


def _common_length(first: str, second: str, direction: int) -> int:
    """How many characters ``first`` and ``second`` share at their start (``direction`` 1)
    or end (-1): blocks compared in turn, then a binary search in the first that differs."""
    limit, block, done = min(len(first), len(second)), 4096, 0

    def same(start: int, end: int) -> bool:  # the characters start..end from the chosen side
        if direction > 0:
            return first[start:end] == second[start:end]
        return first[len(first) - end : len(first) - start] == second[len(second) - end : len(second) - start]

    while done < limit and same(done, min(done + block, limit)):
        done = min(done + block, limit)
    low, high = done, min(done + block, limit)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if same(done, middle) else (low, middle - 1)
    return low


def _missing(path: Path, name: str, entries: dict[str, Any]) -> None:
    if name not in entries:
        names = ", ".join(repr(entry) for entry in entries) or "none"
        raise ClientConfigError(f"there is no entry called {name!r} in {path} (its entries: {names}); check --name")


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
        ClientConfigError: the file cannot be used (not a regular file, another user's,
            read-only without ``force``, another program kept writing it meanwhile) or
            already has ``name`` (without ``force``); the file is left byte for byte unchanged.
    """
    check_name(client, name)
    return install(Path(path), client, name, entry_object(client, entry), force=force, warn=warn)


def uninstall_entry(path: Path | str, name: str, client: str | None = None, *, force: bool = False) -> None:
    """Remove the entry ``name`` from the file at ``path``. The backup (``<file>.bak``)
    holds the previous file with that entry's ``env`` values blanked, so no copy of its
    secrets is left behind.

    Raises:
        ClientConfigError: no such file or entry, or a file that cannot be used (left
            unchanged): not a regular file, another user's, read-only (unless ``force``),
            or one that another program kept writing meanwhile.
    """
    uninstall(Path(path), client, name, force=force)
