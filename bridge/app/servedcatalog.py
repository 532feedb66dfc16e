"""The catalog file: what the app last served, kept for lazy launch (docs/discovery.md, "The catalog").

One JSON file per app and endpoint, in the bridge's private state folder:
``platformdirs.user_state_path("mcp-app-bridge") / "catalogs" / "<16 hex digits>.json"``,
the digits :func:`~bridge.system.privatefile.state_file_digest` of the app's name and the
endpoint's identity (its ``--url``, else its discovery file's path). What it holds, and when it answers, is
``bridge/core/lazylaunch.py``: the ``initialize`` (or ``server/discover``) result and the
four lists, never a token or a header. The app's version is the ``serverInfo.version`` in it.

The file is read and written by the rules of the bridge's credential files
(``bridge/system/privatefile.py``): mode 0600, in a folder only this user may write, never
through a symbolic link, replaced atomically. A file that breaks a rule, or that this
version cannot read, is ignored (logged): the bridge then behaves as with no catalog.
Writing never fails a request: an error is logged.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from ..core.lazylaunch import valid_entry
from ..system.privatefile import UnsafeFileError, read_private_file, state_file_digest, write_private_file

__all__ = ["ServedCatalog", "default_catalog_path", "MAX_CATALOG_BYTES"]

log = logging.getLogger("bridge")

#: A catalog larger than this is not read (the four lists of a large app fit well within).
MAX_CATALOG_BYTES = 16 * 1024 * 1024


def default_catalog_path(app_name: str, endpoint_identity: str) -> Path:
    """Where the catalog of ``app_name`` at ``endpoint_identity`` lives (see the module docstring)."""
    from .statefolder import user_state_path

    digest = state_file_digest(f"{app_name}\0{endpoint_identity}")
    return user_state_path("mcp-app-bridge") / "catalogs" / f"{digest}.json"


class ServedCatalog:
    """The catalog of one app at one endpoint, read once and kept in memory.

    Args:
        app_name: the app's name (``--app-name``).
        endpoint_identity: the endpoint's ``--url``, else its discovery file's path.
        path: the file (default: :func:`default_catalog_path`).
    """

    def __init__(self, app_name: str, endpoint_identity: str, *, path: Path | None = None) -> None:
        self.app_name = app_name
        self.endpoint_identity = endpoint_identity
        self.path = path if path is not None else default_catalog_path(app_name, endpoint_identity)
        self._entry: dict[str, Any] | None = None
        self._loaded = False

    def entry(self) -> dict[str, Any] | None:
        """The catalog's entry (a JSON object), or ``None`` when there is none to use (no
        file, an unsafe or unreadable one, another format). Read from the file once."""
        if not self._loaded:
            self._loaded = True
            self._entry = self._read()
        return self._entry

    def _read(self) -> dict[str, Any] | None:
        try:
            raw = read_private_file(self.path, "catalog file", max_bytes=MAX_CATALOG_BYTES + 1)
        except FileNotFoundError:
            return None
        except (UnsafeFileError, OSError) as exc:
            log.warning("the catalog %s is not used: %s", self.path, exc)
            return None
        try:
            entry = json.loads(raw) if len(raw) <= MAX_CATALOG_BYTES else None
        except (UnicodeDecodeError, ValueError, RecursionError):
            entry = None
        if not valid_entry(entry, app=self.app_name, endpoint=self.endpoint_identity):
            log.warning("the catalog %s is not used: it is not a catalog of %s that this version reads", self.path, self.app_name)
            return None
        assert isinstance(entry, dict)
        return entry

    def age_seconds(self) -> float | None:
        """Seconds since the catalog was last written, or ``None`` without one."""
        entry = self.entry()
        if entry is None:
            return None
        return max(time.time() - float(entry.get("savedAtSeconds", 0)), 0.0)

    def replace(self, entry: dict[str, Any]) -> None:
        """Keep ``entry`` and write it to the file (atomically, mode 0600). A failure to
        write is logged; the entry is kept in memory all the same."""
        self._entry = entry
        self._loaded = True
        try:
            write_private_file(self.path, json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        except (UnsafeFileError, OSError) as exc:
            log.warning("the catalog %s could not be written: %s", self.path, exc)
