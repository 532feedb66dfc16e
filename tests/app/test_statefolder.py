"""bridge/app/statefolder.py: the state folder found without platformdirs on Linux is the
one platformdirs gives, whatever the variables say; and finding it loads no tempfile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from bridge.app.statefolder import user_state_path


@pytest.mark.parametrize(
    ("state_home", "home"),
    [
        (None, "/home/u"),
        ("/srv/state", "/home/u"),
        ("/srv/state/", "/home/u"),
        ("relative/state", "/home/u"),
        ("", "/home/u"),
        (None, "relative-home"),
        (None, None),
        ("/srv/state", None),
    ],
)
@pytest.mark.parametrize("name", ["mcp-app-bridge", "My App"])
def test_the_folder_is_platformdirs_own(monkeypatch: pytest.MonkeyPatch, state_home: str | None, home: str | None, name: str) -> None:
    for variable, value in (("XDG_STATE_HOME", state_home), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    try:
        expected: Path | type[Exception] = platformdirs.user_state_path(name, appauthor=False)
    except RuntimeError:  # platformdirs cannot tell (no home): neither can this
        expected = RuntimeError
    if expected is RuntimeError:
        with pytest.raises(RuntimeError):
            user_state_path(name)
    else:
        assert user_state_path(name) == expected


@pytest.mark.process
@pytest.mark.linux_only("platformdirs is imported elsewhere")
def test_linux_loads_neither_platformdirs_nor_tempfile(tmp_path: Path) -> None:
    code = "import sys; from bridge.app.statefolder import user_state_path; user_state_path('x'); " \
           "print(sorted({'platformdirs', 'tempfile'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={"HOME": str(tmp_path)})
    assert done.stdout.strip() == "[]", done.stderr
