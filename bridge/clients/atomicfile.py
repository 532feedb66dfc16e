"""Writing a file so that readers see the old or the new content, never a half."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["replace_json", "replace_bytes", "replace_if", "write_private"]


def replace_json(path: Path, document: Any, *, mode: int | None = None, indent: int | None = None) -> None:
    """Write ``document`` to a temporary file in ``path``'s folder, then rename it over ``path``.

    Args:
        path: the file to replace (or create; its folder must exist).
        document: any JSON value.
        mode: the new file's permission bits (POSIX); by default those of the file it
            replaces, or the temporary file's own (0600) when there was none.
        indent: as for ``json.dump`` (pretty-printed files end in a newline).

    Raises:
        OSError: the file could not be written; ``path`` is unchanged and no temporary
            file is left behind.
    """
    import tempfile  # (with shutil, random and compression modules: not needed to serve)

    if mode is None and path.exists():
        mode = path.stat().st_mode & 0o777
    descriptor, temporary = tempfile.mkstemp(prefix="." + path.name + ".", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as handle:
            if mode is not None and sys.platform != "win32":  # (sys.platform: mypy checks each OS)
                os.fchmod(handle.fileno(), mode)
            json.dump(document, handle, indent=indent, ensure_ascii=False)
            if indent is not None:
                handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def replace_bytes(path: Path, data: bytes, *, mode: int | None = None, through_symlink: bool = True) -> Path:
    """Replace the file at ``path`` with ``data`` atomically (temporary file + rename).

    Args:
        path: the file to replace or create.
        data: its new content.
        mode: the new file's permission bits (POSIX); by default those of the file it
            replaces, or 0600 when there was none.
        through_symlink: when ``path`` is a symbolic link (as dotfile managers make them),
            the link stays and its target is the file replaced; otherwise the rename
            replaces the link itself.

    Returns:
        the file actually written (the link's target, or ``path``).

    Raises:
        OSError: nothing was replaced and no temporary file is left behind.
    """
    import tempfile

    target = Path(os.path.realpath(path)) if through_symlink and path.is_symlink() else path
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600
    descriptor, temporary = tempfile.mkstemp(prefix="." + target.name + ".", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if sys.platform != "win32":
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return target


def replace_if(target: Path, data: bytes, *, mode: int, unchanged: Callable[[], bool], create: bool) -> bool:
    """Write ``data`` to a temporary file beside ``target``, then, if ``unchanged()`` still
    says yes right before it, put it in place: renamed over ``target``, or, with ``create``,
    linked at ``target`` only if nothing is there yet (so a file another program creates
    meanwhile is never replaced).

    Args:
        target: the file to replace or create (not a symbolic link: resolve it first).
        data: its new content.
        mode: the new file's permission bits (POSIX).
        unchanged: called after the data is on disk, just before the rename; False when
            the file changed since it was read (another program wrote it).
        create: ``target`` did not exist when it was read.

    Returns:
        True when the file was replaced; False when ``unchanged()`` said no or the file
        appeared meanwhile (nothing was changed, no temporary file is left).

    Raises:
        OSError: nothing was replaced and no temporary file is left behind.
    """
    import tempfile

    descriptor, temporary = tempfile.mkstemp(prefix="." + target.name + ".", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if sys.platform != "win32":
                os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if not unchanged():
            return False
        if create:
            try:
                os.link(temporary, target)  # fails if a file appeared at target meanwhile
            except FileExistsError:
                return False
            return True
        os.replace(temporary, target)
        temporary = ""
        return True
    finally:
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (0600), replacing whatever was
    there (a symbolic link at ``path`` is replaced, never followed)."""
    replace_bytes(path, data, mode=0o600, through_symlink=False)
