"""mcp-app-bridge: reach a desktop app's MCP server (Streamable HTTP on loopback) from any
AI client over stdio.

The public API is three import paths, and exactly the names in their ``__all__``
(``tests/test_public_api.py`` pins them; the docs' API page lists them):

- ``bridge``: run the bridge (:class:`BridgeConfig`, :func:`run_stdio`, :class:`Bridge`),
  give an app its ``--mcp-stdio`` flag (:func:`mcp_stdio_option`), get its token from the
  app's auth route (:class:`AuthRouteTokenSource`), publish and find the app (the
  discovery-file helpers), its private credential files, and the errors;
- ``bridge.clients``: write the entry an AI client needs to start the bridge;
- ``bridge.appserver.server``: the server half for Python apps.

Every other module path is internal and may change in any release.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._version import __version__
from .core.config import BridgeConfig, ConfigError
from .core.errors import REASONS, BridgeError, UpstreamError

if _TYPE_CHECKING:  # the lazy names below, typed for type checkers (never run)
    from .app.discovery import default_discovery_path, remove_discovery_file, write_discovery_file
    from .app.tokens import AuthRouteTokenSource
    from .cli.appflag import mcp_stdio_option
    from .serve.loop import Bridge, run_stdio
    from .system.privatefile import UnsafeFileError, read_private_file, write_private_file

__all__ = [
    "REASONS",
    "AuthRouteTokenSource",
    "Bridge",
    "BridgeConfig",
    "BridgeError",
    "ConfigError",
    "UnsafeFileError",
    "UpstreamError",
    "__version__",
    "default_discovery_path",
    "mcp_stdio_option",
    "read_private_file",
    "remove_discovery_file",
    "run_stdio",
    "write_discovery_file",
    "write_private_file",
]

# Each lazily loaded name and the module that defines it: the I/O side imports asyncio (and
# the CLI click), so importing the package (or running `--help`) stays fast.
_LAZY = {
    "Bridge": "serve.loop",
    "run_stdio": "serve.loop",
    "mcp_stdio_option": "cli.appflag",
    "AuthRouteTokenSource": "app.tokens",
    "write_discovery_file": "app.discovery",
    "remove_discovery_file": "app.discovery",
    "default_discovery_path": "app.discovery",
    "read_private_file": "system.privatefile",
    "write_private_file": "system.privatefile",
    "UnsafeFileError": "system.privatefile",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'bridge' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
