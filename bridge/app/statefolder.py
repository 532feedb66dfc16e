"""The per-user state folder of an app (its discovery file) or of the bridge (its catalogs,
its launch locks): platformdirs' ``user_state_path(name, appauthor=False)``.

On Linux the folder is found here, by platformdirs' own rule (``$XDG_STATE_HOME`` when it is
an absolute path, else ``~/.local/state``, with ``HOME`` absolute), because importing
platformdirs there loads :mod:`tempfile`, :mod:`shutil`, :mod:`random` and the
compression modules: 4-6 ms of a start that the catalog answers in all
(``bridge/serve/catalogstart.py``). Every other case (another OS, ``HOME`` unset or relative)
asks platformdirs itself. tests/app/test_statefolder.py holds the two equal.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["user_state_path"]


def user_state_path(name: str) -> Path:
    """The per-user state folder of ``name`` (not created): what
    ``platformdirs.user_state_path(name, appauthor=False)`` returns."""
    if sys.platform == "linux":
        state_home = os.environ.get("XDG_STATE_HOME", "")
        if os.path.isabs(state_home):
            return Path(state_home, name)
        if os.path.isabs(os.environ.get("HOME", "")):
            return Path(os.path.expanduser("~/.local/state"), name)
    import platformdirs

    return platformdirs.user_state_path(name, appauthor=False)
