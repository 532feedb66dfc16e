"""A Python app (the docs' "For Python apps" example) run as a real process in a private
HOME and state folder, and reached through a bridge."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.apps import REPO_ROOT, isolated_env, process_alive
from support.processes import BridgeProcess, result_text, tool_call, wait_until

#: How long an app gets to publish its discovery file.
START_TIMEOUT = 20.0


def docs_block(starts_with: str) -> str:
    """The Python code block of the docs' "For Python apps" page that starts with ``starts_with``, exactly as printed."""
    text = (REPO_ROOT / "docs" / "python-apps.md").read_text(encoding="utf-8")
    blocks: list[str] = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
    matching = [block for block in blocks if block.startswith(starts_with)]
    assert len(matching) == 1, f"docs/python-apps.md has {len(matching)} python blocks starting with {starts_with!r}"
    return matching[0]


class AppDesk:
    """A private HOME and state folder, the app's script in it, and the processes to stop."""

    def __init__(self, root: Path, app_name: str) -> None:
        self.root = root
        self.env = isolated_env(root)
        self.env["PYTHONPATH"] = str(REPO_ROOT)  # as an installed package would be
        self.discovery = Path(self.env["XDG_STATE_HOME"]) / app_name / "mcp-endpoint.json"
        self.apps: list[subprocess.Popen[bytes]] = []
        self.pids: list[int] = []

    def start(self, script: Path, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{script.stem}-{len(self.apps)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, str(script), *args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=self.root, env=self.env,
        )
        log.close()
        self.apps.append(proc)
        return proc

    def log(self, proc: subprocess.Popen[bytes]) -> str:
        index = self.apps.index(proc)
        return next(self.root.glob(f"*-{index}.log")).read_text(errors="replace")

    def published(self) -> dict[str, Any]:
        assert wait_until(self.discovery.exists, START_TIMEOUT), "the app never wrote its discovery file"
        document: dict[str, Any] = json.loads(self.discovery.read_text())
        self.pids.append(document["pid"])
        return document

    def close(self) -> None:
        for proc in self.apps:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for pid in self.pids:  # apps a bridge launched are not our children
            if process_alive(pid):
                os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))


def greet_through(bridge: BridgeProcess, timeout: float = 10.0) -> str:
    bridge.send(tool_call(7, "greet", {"name": "Ada"}))
    return result_text(bridge.read_reply(7, timeout))


