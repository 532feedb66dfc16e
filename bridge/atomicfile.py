"""Writing a JSON file so that readers see the old or the new content, never a half."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["replace_json"]


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
            if mode is not None and os.name == "posix":
                os.fchmod(handle.fileno(), mode)
            json.dump(document, handle, indent=indent, ensure_ascii=False)
            if indent is not None:
                handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
