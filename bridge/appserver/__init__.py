"""The server half for Python apps (public): serve an ASGI MCP app on loopback behind a token,
publish it in a discovery file the bridge reads. Not used by the bridge itself; needs uvicorn
(the ``app`` extra)."""

from .server import AppServer, TokenAuthMiddleware, UnsafeFileError, load_or_create_secret, serve_app

__all__ = ["AppServer", "TokenAuthMiddleware", "UnsafeFileError", "load_or_create_secret", "serve_app"]
