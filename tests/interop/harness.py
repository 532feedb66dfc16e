"""The pinned reference npm packages of the interop tests, and how to start them.

The packages (``package.json``, locked by ``package-lock.json``) are installed into
``tests/interop/node_modules`` by ``npm ci --prefix tests/interop`` (``.ci/run`` does this).
They bring their own Node.js 22 (the npm package ``node``, which installs the platform's
binary from the npm registry): the conformance CLI needs Node ≥ 22, and the machine's may be older.

- ``require_packages()``: skips the calling test when the packages are absent, with the
  command that installs them; under ``CI=true`` absence fails instead, so CI cannot pass
  by skipping.
- ``NodeServer`` / ``start_everything(log_path)``: the reference "everything" server in its
  Streamable HTTP mode, bound to 127.0.0.1 on a free port.
- ``node_env()``: the environment for the Node.js programs: ``loopback.cjs`` preloaded (every
  server they open listens on 127.0.0.1 only), our Node.js first on ``PATH``, no proxies.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from interop.peers import INTEROP_DIR, NODE_MODULES

NODE = NODE_MODULES / ".bin" / "node"
LOOPBACK_PRELOAD = INTEROP_DIR / "loopback.cjs"
SCOPE = NODE_MODULES / "@modelcontextprotocol"
CONFORMANCE_CLI = SCOPE / "conformance" / "dist" / "index.js"
EVERYTHING_SERVER = SCOPE / "server-everything" / "dist" / "index.js"
INSPECTOR_CLI = SCOPE / "inspector-cli" / "build" / "index.js"

INSTALL_COMMAND = "npm ci --prefix tests/interop --no-audit --no-fund"

LISTEN_TIMEOUT_SECONDS = 20.0
"""Bound on a Node.js server's start until it listens (a loaded 2-core machine)."""
STOP_TIMEOUT_SECONDS = 5.0

PROXY_VARS = tuple(name for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for name in (base, base.lower()))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_packages() -> list[str]:
    """The installed files the interop tests need that are not there."""
    needed = (NODE, CONFORMANCE_CLI, EVERYTHING_SERVER, INSPECTOR_CLI)
    return [str(path.relative_to(INTEROP_DIR)) for path in needed if not path.exists()]


def require_packages() -> None:
    """Skip (outside CI) or fail (``CI=true``) unless the pinned packages are installed."""
    missing = missing_packages()
    if not missing:
        return
    message = f"the interop npm packages are not installed (missing {', '.join(missing)}); run: {INSTALL_COMMAND}"
    if in_ci():
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


def node_env(**extra: str) -> dict[str, str]:
    """This environment without proxies, with the loopback preload and our Node.js first on PATH."""
    env = {key: value for key, value in os.environ.items() if key not in PROXY_VARS}
    env["NODE_OPTIONS"] = f'--require "{LOOPBACK_PRELOAD}"'
    env["PATH"] = os.pathsep.join([str(NODE.parent), env.get("PATH", "")])
    env.update(extra)
    return env


_LISTENING = re.compile(r"LISTENING (http://127\.0\.0\.1:(\d+))")


@dataclass
class NodeServer:
    """A Node.js server subprocess whose output goes to `log_path`."""

    proc: subprocess.Popen[bytes]
    log_path: Path
    url: str
    """The MCP endpoint, ``http://127.0.0.1:<port>/mcp``."""

    def log_text(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_SECONDS)


def start_everything(log_path: Path) -> NodeServer:
    """Start ``server-everything streamableHttp`` on 127.0.0.1 (port 0) and wait until it listens.

    Raises:
        RuntimeError: It exited or did not listen within `LISTEN_TIMEOUT_SECONDS`; the
            message holds its output.
    """
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(NODE), str(EVERYTHING_SERVER), "streamableHttp"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=INTEROP_DIR,
            env=node_env(PORT="0"),
        )
    server = NodeServer(proc=proc, log_path=log_path, url="")
    deadline = time.monotonic() + LISTEN_TIMEOUT_SECONDS
    while True:
        found = _LISTENING.search(server.log_text())
        if found:
            server.url = found.group(1) + "/mcp"
            return server
        if proc.poll() is not None or time.monotonic() >= deadline:
            server.stop()
            raise RuntimeError(
                f"server-everything did not listen within {LISTEN_TIMEOUT_SECONDS:g} s "
                f"(exit code {proc.returncode}); output:\n{server.log_text()[-3000:]}"
            )
        time.sleep(0.05)


def side_by_side(title: str, rows: list[tuple[str, str, str]], width: int = 60) -> str:
    """A plain-text table ``name | direct | bridge`` with a mark on the rows that differ."""
    name_width = max([len(name) for name, _, _ in rows] + [4])
    lines = [title, f"  {'':1} {'step':<{name_width}}  {'direct':<{width}}  bridge"]
    for name, direct, bridge in rows:
        mark = " " if direct == bridge else "≠"
        lines.append(f"  {mark} {name:<{name_width}}  {_cut(direct, width):<{width}}  {_cut(bridge, width)}")
    return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
