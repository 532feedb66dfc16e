"""The server half for Python apps (public): serve an ASGI MCP app on loopback behind a token,
publish it in a discovery file the bridge reads. Not used by the bridge itself; needs uvicorn
(the ``app`` extra)."""

from .auth import LoopbackHostMiddleware
from .server import (
    AlreadyServingError,
    AppServer,
    TokenAuthMiddleware,
    UnsafeFileError,
    load_or_create_secret,
    serve_app,
)

__all__ = [
    "AlreadyServingError",
    "AppServer",
    "LoopbackHostMiddleware",
    "TokenAuthMiddleware",
    "UnsafeFileError",
    "load_or_create_secret",
    "serve_app",
]
