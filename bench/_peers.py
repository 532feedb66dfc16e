"""Peer bridges at pinned versions, installed into a cache folder outside the repository.

Each Python peer gets its own virtual environment (they pin SDK versions of their own),
each npm peer its own ``npm install --prefix`` folder; both are made once and reused.
A peer that cannot be installed or found is reported as unavailable with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

INSTALL_TIMEOUT = 300.0


@dataclass(frozen=True)
class Peer:
    key: str  # short name used on the command line (--only)
    package: str
    version: str  # the pin
    registry: str  # "pypi" or "npm"
    entry: str  # console script (pypi) or the package's bin file (npm)
    args: tuple[str, ...]  # "{url}" is replaced by the endpoint
    language: str

    def folder(self, cache: Path) -> Path:
        prefix = "py" if self.registry == "pypi" else "npm"
        return cache / f"{prefix}-{self.package}-{self.version}"

    def label(self) -> str:
        return f"{self.package} {self.version} ({self.language})"


# Pins: the versions PERF-NOTES.md measured (newest patch release of each line).
# Each is run as a stdio client of a Streamable HTTP URL, at its quietest log level, with
# everything else at its defaults (mcp-stdio keeps its 10 MiB message cap).
PEERS = (
    Peer("mcp-proxy", "mcp-proxy", "0.13.0", "pypi", "mcp-proxy",
         ("--transport", "streamablehttp", "--log-level", "WARNING", "{url}"), "Python"),
    Peer("mcp-stdio", "mcp-stdio", "0.45.2", "pypi", "mcp-stdio", ("{url}",), "Python"),
    Peer("mcp-remote", "mcp-remote", "0.15.1", "npm", "dist/proxy.js",
         ("{url}", "--transport", "http-only", "--silent"), "Node"),
    Peer("supergateway", "supergateway", "4.0.0", "npm", "dist/index.js",
         ("--streamableHttp", "{url}", "--logLevel", "none"), "Node"),
)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("MCP_BENCH_CACHE", str(Path(base) / "mcp-app-bridge-bench")))


def _run(argv: list[str], cwd: Path | None = None) -> str | None:
    """Run an install step; None when it worked, else the reason (tail of its output)."""
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]}: {exc}"
    if done.returncode != 0:
        tail = [line for line in (done.stderr + done.stdout).splitlines() if "is ignored" not in line][-3:]
        return f"`{' '.join(argv[:4])} …` exited {done.returncode}: {' / '.join(tail)}"
    return None


def installed_version(peer: Peer, folder: Path) -> str | None:
    if peer.registry == "pypi":
        python = folder / "bin" / "python"
        try:
            out = subprocess.run(
                [str(python), "-c", f"import importlib.metadata as m; print(m.version({peer.package!r}))"],
                capture_output=True, text=True, timeout=60,
            )
        except OSError:
            return None
        return out.stdout.strip() or None
    try:
        meta = json.loads((folder / "node_modules" / peer.package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    return str(meta.get("version"))


def prepare(peer: Peer, cache: Path, install: bool) -> tuple[list[str] | None, str, dict[str, str]]:
    """The peer's argv template (``{url}`` unreplaced), its installed version or the reason
    it is unavailable, and extra environment variables."""
    folder = peer.folder(cache)
    env: dict[str, str] = {}
    if peer.registry == "pypi":
        program = folder / "bin" / peer.entry
        if not program.exists():
            if not install:
                return None, f"not installed in {folder} (run without --no-install)", env
            reason = _run([sys.executable, "-m", "venv", "--clear", str(folder)]) or _run(
                [str(folder / "bin" / "pip"), "install", "--disable-pip-version-check", "-q",
                 f"{peer.package}=={peer.version}"]
            )
            if reason is not None or not program.exists():
                return None, f"pip install {peer.package}=={peer.version} failed: {reason}", env
        argv = [str(program)]
    else:
        node, npm = shutil.which("node"), shutil.which("npm")
        if node is None:
            return None, "node not found on PATH", env
        program = folder / "node_modules" / peer.package / peer.entry
        if not program.exists():
            if not install:
                return None, f"not installed in {folder} (run without --no-install)", env
            if npm is None:
                return None, "npm not found on PATH", env
            folder.mkdir(parents=True, exist_ok=True)
            reason = _run([npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
                           "--loglevel=error", f"{peer.package}@{peer.version}"])
            if reason is not None or not program.exists():
                return None, f"npm install {peer.package}@{peer.version} failed: {reason}", env
        argv = [node, str(program)]
        if peer.package == "mcp-remote":  # its token/config store, kept out of ~/.mcp-auth
            env["MCP_REMOTE_CONFIG_DIR"] = str(cache / "mcp-remote-config")
    version = installed_version(peer, folder)
    if version != peer.version:
        return None, f"installed version {version!r} is not the pin {peer.version}", env
    return argv + list(peer.args), version, env
