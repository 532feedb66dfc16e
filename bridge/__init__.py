"""mcp-app-bridge: reach a desktop app's MCP server (Streamable HTTP on loopback) from any
AI client over stdio.

The public surface is re-exported here; everything else is internal.
"""

from ._version import __version__
from .core.config import BridgeConfig, ConfigError
from .core.errors import REASONS, BridgeError, UpstreamError

__all__ = [
    "__version__",
    "BridgeConfig",
    "ConfigError",
    "BridgeError",
    "UpstreamError",
    "REASONS",
    "Bridge",
    "run_stdio",
    "mcp_stdio_option",
    "write_discovery_file",
    "remove_discovery_file",
    "default_discovery_path",
]


def __getattr__(name: str) -> object:
    # The I/O side imports anyio and httpx; load it only when asked for, so importing the
    # package (or running `--help`) stays fast.
    if name in ("Bridge", "run_stdio"):
        from .serve import loop as session

        return getattr(session, name)
    if name == "mcp_stdio_option":
        from .cli import commands as cli

        return cli.mcp_stdio_option
    if name in ("write_discovery_file", "remove_discovery_file", "default_discovery_path"):
        from .app import discovery

        return getattr(discovery, name)
    raise AttributeError(f"module 'bridge' has no attribute {name!r}")
