"""Who may call a Python app's MCP server: the bearer-token check, the auth route, and
the private files that keep a token or a secret (the server half, ``bridge.appserver.server``).

Standard library only; nothing here is imported by the bridge itself.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from pathlib import Path
from typing import Any

from ..system.privatefile import UnsafeFileError, check_folders, credential_text, read_private_file

__all__ = ["AUTH_PATH", "TokenAuthMiddleware", "UnsafeFileError", "load_or_create_secret"]

log = logging.getLogger("bridge.appauth")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The auth route's default path (the bridge resolves ``--auth-url /auth/token`` against
#: the MCP endpoint, so it follows the app's port).
AUTH_PATH = "/auth/token"
#: Largest auth-route body read, in bytes.
MAX_AUTH_BODY_BYTES = 64 * 1024
#: Largest credential file read, in bytes.
MAX_CREDENTIAL_FILE_BYTES = 64 * 1024


# -- credential files ------------------------------------------------------------------------


def load_or_create_secret(path: Path, what: str = "token file") -> str:
    """Read a private credential file, or create it with a random value on the first use.

    The file holds one line (the value; surrounding whitespace is ignored, as the bridge's
    ``--token-file`` and ``--secret-file`` ignore it). A new file gets 43 random URL-safe
    characters (256 bits) and mode 0600, and appears with its content in one step (written
    to a temporary file, then hard-linked into place), so a concurrent reader never sees it
    empty and an existing file is never replaced. Symbolic links are never followed.

    Args:
        path: the file; its folder is created with mode 0700 if missing.
        what: how the file is named in messages.

    Raises:
        UnsafeFileError: a symbolic link, not a regular file, another user's, readable by
            others, or in a folder others may write (``bridge/system/privatefile.py``'s rules).
        ValueError: the existing file is empty or not UTF-8.
        OSError: it could not be read or created.
    """
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_folders(path)
    value = secrets.token_urlsafe(32)
    if not _create_with_content(path, (value + "\n").encode("ascii")):
        return _read_private(path, what)
    return value


def _create_with_content(path: Path, content: bytes) -> bool:
    """Create ``path`` holding ``content`` (mode 0600); False if it exists already."""
    import tempfile

    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # O_EXCL, 0600
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(content)
        try:
            os.link(temporary, path)  # fails if path exists, even as a (dangling) symlink
        except FileExistsError:
            return False
        except OSError:  # no hard links here (some Windows and FAT volumes): create in place
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
            try:
                new = os.open(path, flags, 0o600)
            except FileExistsError:
                return False
            with os.fdopen(new, "wb") as handle:
                handle.write(content)
        return True
    finally:
        os.unlink(temporary)


def _read_private(path: Path, what: str) -> str:
    return credential_text(read_private_file(path, what, max_bytes=MAX_CREDENTIAL_FILE_BYTES), path, what)


# -- the middleware --------------------------------------------------------------------------


class TokenAuthMiddleware:
    """ASGI middleware: only a caller that knows the token reaches the app.

    - Every ``http`` and ``websocket`` request must carry exactly one
      ``Authorization: Bearer <token>`` header (scheme case-insensitive, RFC 9110 §11.1).
      Otherwise: HTTP 401 with ``WWW-Authenticate: Bearer`` (plus ``error="invalid_token"``
      when a wrong token was sent, RFC 6750 §3) and a JSON body; a WebSocket is closed with
      code 1008 before it is accepted. The app is not called.
    - With ``secret``, ``POST <auth_path>`` is the bridge's auth route (its ``--auth-url``
      and ``--secret-file``): the JSON body ``{"secret": "<the secret file's content>"}``
      (whitespace around it ignored) gets 200 ``{"token": …, "token_type": "Bearer"}``
      with ``Cache-Control: no-store``. A wrong or missing secret gets 403 (a 401 would
      need a challenge scheme, and there is none for a secret in a body), a body that is
      not JSON 400, one over 64 KiB 413, another method 405.
    - ``lifespan`` and other scopes pass through untouched. Both checks use
      ``hmac.compare_digest``; neither value is ever logged.

    Args:
        app: the ASGI app to protect.
        token: the bearer token.
        secret: the auth route's secret, or ``None`` for no auth route.
        auth_path: the auth route's path.
    """

    def __init__(self, app: ASGIApp, *, token: str, secret: str | None = None, auth_path: str = AUTH_PATH) -> None:
        if not token or not token.isascii() or any(c.isspace() for c in token):
            raise ValueError("the token must be non-empty ASCII without whitespace")
        self.app = app
        self._token = token.encode("ascii")
        self._secret = secret.strip().encode("utf-8") if secret is not None else None
        self._auth_path = auth_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if kind == "http" and self._secret is not None and scope["path"] == self._auth_path:
            await self._exchange(scope, receive, send)
            return
        given = [value for name, value in scope["headers"] if name.lower() == b"authorization"]
        verdict = self._check(given)
        if verdict is None:
            await self.app(scope, receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            challenge = b'Bearer error="invalid_token"' if verdict else b"Bearer"
            problem = {"error": "invalid_token", "error_description": "missing or wrong bearer token"}
            await _send_json(send, 401, problem, [(b"www-authenticate", challenge)])

    def _check(self, given: list[bytes]) -> bool | None:
        """None: authorized; True: a wrong token was sent; False: no usable header."""
        if len(given) != 1:
            return len(given) > 1
        scheme, _, credentials = given[0].strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return None if hmac.compare_digest(credentials.strip(b" "), self._token) else True

    async def _exchange(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await _send_json(send, 405, {"error": "method_not_allowed"}, [(b"allow", b"POST")])
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_AUTH_BODY_BYTES:
                await _send_json(send, 413, {"error": "invalid_request", "error_description": "body too large"})
                return
            if not message.get("more_body", False):
                break
        try:
            document = json.loads(bytes(body))
        except ValueError:
            await _send_json(send, 400, {"error": "invalid_request", "error_description": "expected a JSON object"})
            return
        given = document.get("secret") if isinstance(document, dict) else None
        assert self._secret is not None
        if not isinstance(given, str) or not hmac.compare_digest(given.strip().encode("utf-8"), self._secret):
            log.warning("auth route: a wrong or missing secret was refused")
            await _send_json(send, 403, {"error": "access_denied", "error_description": "wrong or missing secret"})
            return
        token = self._token.decode("ascii")
        await _send_json(send, 200, {"token": token, "token_type": "Bearer"}, [(b"cache-control", b"no-store")])


async def _send_json(send: Send, status: int, document: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(document).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
