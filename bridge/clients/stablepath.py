"""A program's stable path: the one an update does not move (docs/clients.md, "A stable
launcher path").

A client's entry names programs by path: its ``command``, and the ``--launch`` program the
bridge starts the app with. Many installers put each version in a folder of its own and
remove the old one on update; an entry that names a path inside such a folder then points at
nothing, and the client (or the bridge, once the app is down) can no longer start it. Each
of those installers also keeps a path that follows updates, and that is the one to write.

The rules, for a path as given (made absolute; symbolic links are kept, never resolved):

- **Versioned folder**: a folder in the path (not the file's own name) whose name is a
  version (``1.2``, ``v2.0.1``, ``223.8214.52``) or ends in one after ``-``, ``_`` or a space
  (``MyApp-1.2.3``, ``app-1.2.3``, ``jdk_17.0.2``, ``MyApp 2.1``). A version has at least two
  numbers separated by dots, so ``python3``, ``java-17`` or ``x86_64`` are not versions.
  ``/Applications/MyApp.app/Contents/MacOS/MyApp`` has none: a macOS app bundle keeps its
  place across updates.
- **Homebrew**: ``<prefix>/Cellar/<formula>/<version>/<rest>`` becomes
  ``<prefix>/opt/<formula>/<rest>``: Homebrew keeps ``opt/<formula>`` pointing at the
  installed version (``brew --prefix <formula>``).
- **Squirrel.Windows** (Electron apps, Slack, Discord…): ``<root>\\app-<version>\\<App>.exe``
  becomes ``<root>\\<App>.exe``, the stub Squirrel keeps beside ``Update.exe``, which starts
  the current version.
- **A link on PATH**: a program of the same name on ``PATH``, outside any versioned folder,
  that is a symbolic link to the same file (``~/.local/bin/myapp`` → ``…/versions/1.2/myapp``).
- **current, latest**: a sibling ``current`` or ``latest`` in place of the versioned folder,
  holding the same relative path (``…/versions/current/bin/myapp``).

:func:`stable_path` substitutes the first rule that applies and whose path exists (with
``check_exists=False``, as for a bundle built for another machine, only the Homebrew rule
applies, which needs no look). Otherwise a path in a versioned folder is kept, with a
warning that names the folder. Standard library only.
"""

from __future__ import annotations

import ntpath
import os
import re
import shutil
from collections.abc import Callable, Mapping

__all__ = ["stable_launch_command", "stable_path", "versioned_folder"]

#: A version: at least two dot-separated numbers, an optional ``v`` before and a suffix after
#: (``1.2``, ``v2.0.1``, ``1.2.3-beta.1``, ``2.1.328+build5``).
_VERSION = r"v?\d+(?:\.\d+)+(?:[-+._]?[A-Za-z0-9]+)*"
_VERSIONED = re.compile(rf"(?:.*[-_ ])?{_VERSION}", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\\/]")


def _parts(path: str) -> list[str]:
    return _SEPARATORS.split(path)


def _windows(path: str) -> bool:
    return bool(re.match(r"^[A-Za-z]:[\\/]|^\\\\", path))


def _join(path: str, parts: list[str]) -> str:
    separator = "\\" if _windows(path) or ("\\" in path and "/" not in path) else "/"
    return separator.join(parts)


def versioned_folder(path: str) -> str | None:
    """The name of the first folder in ``path`` that names a version, or ``None``."""
    for part in _parts(path)[:-1]:
        if part and _VERSIONED.fullmatch(part):
            return part
    return None


def _homebrew(path: str) -> str | None:
    parts = _parts(path)
    for index in range(len(parts) - 3):
        if parts[index] == "Cellar" and _VERSIONED.fullmatch(parts[index + 2]) and index + 3 < len(parts):
            return _join(path, [*parts[:index], "opt", parts[index + 1], *parts[index + 3 :]])
    return None


def _squirrel(path: str) -> str | None:
    parts = _parts(path)
    if len(parts) >= 3 and re.fullmatch(rf"app-{_VERSION}", parts[-2], re.IGNORECASE) and parts[-1].lower().endswith(".exe"):
        return _join(path, [*parts[:-2], parts[-1]])
    return None


def _siblings(path: str) -> list[str]:
    parts = _parts(path)
    for index, part in enumerate(parts[:-1]):
        if part and _VERSIONED.fullmatch(part):
            return [_join(path, [*parts[:index], name, *parts[index + 1 :]]) for name in ("current", "latest")]
    return []


def _linked_on_path(path: str, environ: Mapping[str, str] | None) -> str | None:
    environ = os.environ if environ is None else environ
    found = shutil.which(ntpath.basename(path) if _windows(path) else os.path.basename(path), path=environ.get("PATH", os.defpath))
    if found is None or versioned_folder(found) is not None or not os.path.islink(found):
        return None
    try:
        same = os.path.samefile(found, path)
    except OSError:
        return None
    return found if same else None


def stable_path(
    path: str,
    *,
    what: str,
    check_exists: bool = True,
    environ: Mapping[str, str] | None = None,
    exists: Callable[[str], bool] = os.path.exists,
) -> tuple[str, list[str]]:
    """The path to write for the program at ``path`` (absolute, as given), and what to tell
    the user about it.

    Args:
        path: the program's absolute path, symbolic links kept.
        what: how the messages name it (``"the --launch program"``, ``"the command"``).
        check_exists: whether this machine is the one the entry is for; without it only
            the Homebrew rule, which needs no look, substitutes.
        environ: whose ``PATH`` is searched for a link (default: this process's).
        exists: how a candidate is looked for (a test's stand-in).

    Returns:
        ``(path, remarks)``: the stable path (``path`` itself when no rule applies) and one
        remark when a path was substituted or a versioned folder is kept.
    """
    folder = versioned_folder(path)
    if folder is None:
        return path, []
    candidates: list[str | None] = [_homebrew(path)]
    if check_exists:
        candidates += [_squirrel(path), _linked_on_path(path, environ), *_siblings(path)]
    for candidate in candidates:
        if candidate is not None and versioned_folder(candidate) is None and (not check_exists or exists(candidate)):
            return candidate, [
                f"{what} {path} is inside a versioned install folder ({folder!r}), which an update replaces; "
                f"writing its stable path {candidate} instead"
            ]
    return path, [
        f"{what} {path} is inside a versioned install folder ({folder!r}): once an update replaces that folder, "
        "the entry points at nothing. Give the app's stable launcher instead (a symbolic link on PATH, Homebrew's "
        "opt/<formula>, the .app bundle, the stub beside Update.exe), or install the entry again after each update"
    ]


def stable_launch_command(
    command: str, *, windows: bool, check_exists: bool = True, environ: Mapping[str, str] | None = None
) -> tuple[str, list[str]]:
    """``--launch``'s command line with its program at its stable path, and what to tell the
    user (see :func:`stable_path`).

    With ``check_exists`` (the entry is for this machine), a bare name is looked up on this
    ``PATH`` (a client may start the bridge with another one: Claude Desktop on macOS gets
    the system's short one) and a relative path made absolute, symbolic links kept. The
    command is split as the bridge on that OS splits it (``windows``: quotes kept, as
    ``shlex.split(posix=False)``), and only its first word is replaced; a command that does
    not split is returned unchanged (the bridge's own option check reports it).
    """
    import shlex

    try:
        words = shlex.split(command, posix=not windows)
    except ValueError:
        return command, []
    if not words:
        return command, []
    first = words[0]
    program = first.strip('"') if windows else first
    if check_exists:
        environ = os.environ if environ is None else environ
        if not _SEPARATORS.search(program):
            found = shutil.which(program, path=environ.get("PATH", os.defpath))
            if found is None:
                return command, []  # not on PATH here: the caller warns
            program = found
        else:
            program = os.path.abspath(program)
    stable, remarks = stable_path(program, what="the --launch program", check_exists=check_exists, environ=environ)
    if stable == (first.strip('"') if windows else first):
        return command, remarks
    if windows:
        quoted = f'"{stable}"' if " " in stable else stable
        return quoted + command.lstrip()[len(first) :], remarks
    return shlex.join([stable, *words[1:]]), remarks
