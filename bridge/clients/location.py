"""Where a packaged (MSIX) Claude Desktop keeps the configuration file it reads, on Windows.

Since February 2026 the Windows Claude Desktop, from the direct installer and from the
Store alike, is an MSIX package. Writes a packaged process makes under the user's AppData
are redirected into the package's private folder (Microsoft Learn, "Understanding how
packaged desktop apps run on Windows", the AppData rows), so the app reads

    %LOCALAPPDATA%\\Packages\\Claude_<publisher id>\\LocalCache\\Roaming\\Claude\\claude_desktop_config.json

and never the documented ``%APPDATA%\\Claude\\claude_desktop_config.json``: an entry written
there is ignored with no error and no log (anthropics/claude-code issues 26073 and 25579;
fixed the same way in akitaonrails/ai-memory pull request 250 and hannesill/m4 pull request 54).

:func:`claude_desktop_location` decides, from the folders that exist:

- no ``Claude_*`` folder under ``%LOCALAPPDATA%\\Packages``: an unpackaged (Squirrel)
  install, which reads ``%APPDATA%\\Claude\\claude_desktop_config.json`` (as before);
- one package: its file, whether it exists yet or not;
- several packages: the one whose file exists, when exactly one has it; otherwise
  :class:`AmbiguousLocation` lists them, and nothing is written (``--path`` picks one).

The publisher id is not hard-coded: any ``Claude_*`` folder counts. ``LOCALAPPDATA`` and
``APPDATA`` are read from the environment (a redirected profile), falling back to the
home folder's ``AppData\\Local`` and ``AppData\\Roaming``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AmbiguousLocation", "ConfigLocation", "claude_desktop_location", "PACKAGE_PREFIX"]

#: The package folder's name starts with the package name and an underscore; the publisher
#: id follows (``Claude_pzs8sxrjxfjjc`` for Anthropic's signature, as the reports show).
PACKAGE_PREFIX = "Claude_"
#: Inside the package folder: where the redirected ``%APPDATA%\\Claude`` lives.
_PACKAGED_TAIL = ("LocalCache", "Roaming", "Claude", "claude_desktop_config.json")
_FILE_NAME = "claude_desktop_config.json"


@dataclass(frozen=True)
class ConfigLocation:
    """The file a client reads, and why that one.

    Attributes:
        path: the configuration file (it may not exist yet).
        reason: one sentence saying why the app reads this file.
        ignored: files that exist but that the app does not read (the unpackaged path
            beside a packaged install), for a warning.
    """

    path: Path
    reason: str
    ignored: tuple[Path, ...] = ()


class AmbiguousLocation(ValueError):
    """Several packaged Claude Desktop folders could be the one in use, and their files
    do not tell which (none or several of them exist). Nothing was written.

    Attributes:
        candidates: each package's configuration file, sorted.
    """

    def __init__(self, candidates: tuple[Path, ...]) -> None:
        listed = "; ".join(str(path) for path in candidates)
        super().__init__(
            f"there are {len(candidates)} Claude Desktop packages and their files do not tell which one the app "
            f"reads: {listed}. Give the right one with --path"
        )
        self.candidates = candidates


def _folder(environ: Mapping[str, str], name: str, home: Path, *fallback: str) -> Path:
    value = environ.get(name, "").strip()
    return Path(value) if value else home.joinpath(*fallback)


def _packages(local: Path) -> list[Path]:
    try:
        names = sorted(os.listdir(local / "Packages"))
    except OSError:
        return []
    return [local / "Packages" / name for name in names if name.startswith(PACKAGE_PREFIX) and (local / "Packages" / name).is_dir()]


def claude_desktop_location(environ: Mapping[str, str], home: Path) -> ConfigLocation:
    """The file Windows Claude Desktop reads (see the module), and why.

    Args:
        environ: the environment (``LOCALAPPDATA``, ``APPDATA``).
        home: the home folder, for the fallbacks.

    Raises:
        AmbiguousLocation: several packages, and not exactly one of their files exists.
    """
    local = _folder(environ, "LOCALAPPDATA", home, "AppData", "Local")
    roaming = _folder(environ, "APPDATA", home, "AppData", "Roaming")
    unpackaged = roaming / "Claude" / _FILE_NAME
    packages = _packages(local)
    if not packages:
        return ConfigLocation(
            unpackaged,
            f"no Claude_* package under {local / 'Packages'}, so this is an unpackaged install, which reads "
            f"%APPDATA%\\Claude",
        )
    files = tuple(package.joinpath(*_PACKAGED_TAIL) for package in packages)
    existing = tuple(path for path in files if path.is_file())
    if len(files) == 1:
        chosen = files[0]
        why = f"Claude Desktop is the MSIX package {packages[0].name}, which reads this file"
        if not existing:
            why += " (it does not exist yet: the app makes it at its first start, or this command does)"
    elif len(existing) == 1:
        chosen = existing[0]
        package = chosen.parents[len(_PACKAGED_TAIL) - 1].name
        why = f"of {len(files)} Claude Desktop packages, only {package} has a configuration file"
    else:
        raise AmbiguousLocation(existing or files)
    why += (
        "; a packaged app reads its own copy of %APPDATA%\\Claude, under the package's LocalCache, "
        "and never the unpackaged path"
    )
    ignored = (unpackaged,) if unpackaged.is_file() else ()
    return ConfigLocation(chosen, why, ignored)
