"""The bridge's state folder in the user's real profile, made by ``config install`` and
``check`` on Windows.

A bridge started by a packaged (MSIX) client runs inside the client's package, where a new
folder under ``%LOCALAPPDATA%`` is redirected into the package (``bridge/system/msix.py``):
its served catalog and launch lock would be seen by no other client's bridge. ``config
install`` and ``check`` run from the user's shell, outside any package, so they make the
folder (``%LOCALAPPDATA%\\mcp-app-bridge``) in the real profile; what a bridge later writes
inside it stays there. Run inside a package themselves, they say so instead.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["current_package", "prepare_state_folder"]


def prepare_state_folder(
    *,
    platform: str | None = None,
    package: str | None = None,
    folder: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """On Windows (``platform``, default this one), make the bridge's state ``folder``
    (default ``bridge.app.launcher.state_folder()``), mode 0700, unless this process runs
    inside the MSIX ``package`` (its full name; ``None``: in none, the usual case).

    Returns:
        A line to show: that the folder was made, or, inside a package, what is wrong and
        the fix; ``None`` when there is nothing to say (not Windows, or made already).
    """
    import os

    from ..app.launcher import package_state_problem, state_folder

    if (sys.platform if platform is None else platform) != "win32":
        return None
    folder = state_folder() if folder is None else folder
    if package is not None:
        problem = package_state_problem(package, dict(os.environ if environ is None else environ), folder)
        here = f"this command runs inside the MSIX package {package}, so it does not make the bridge's state folder"
        return f"{here}: {problem}" if problem else None
    if folder.is_dir():
        return None
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return (
        f"made the bridge's state folder {folder} in your real profile, so that a bridge a packaged (MSIX) client "
        "starts shares its catalog and launch lock with every other"
    )


def current_package() -> str | None:
    """This process's MSIX package full name on Windows, else ``None``."""
    from ..system.msix import current_package as package

    return package()
