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

from ..system.privatefile import (
    UnsafeFileError,
    check_folders,
    credential_text,
    make_private_folders,
    read_private_file,
)

__all__ = ["AUTH_PATH", "LOOPBACK_HOST_NAMES", "LoopbackHostMiddleware", "TokenAuthMiddleware", "UnsafeFileError", "load_or_create_secret"]

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
    make_private_folders(path.parent)
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
    return credential_text(read_private_file(path, what), path, what)


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


# -- Host and Origin ---------------------------------------------------------------------------

#: The names a request to the app's loopback server may give in ``Host`` and ``Origin``.
LOOPBACK_HOST_NAMES = ("127.0.0.1", "localhost", "[::1]")


class LoopbackHostMiddleware:
    """ASGI middleware against DNS rebinding: only requests addressed to this loopback
    server reach the app (the auth route included, when this wraps :class:`TokenAuthMiddleware`).

    The MCP specification (2025-11-25, Basic › Transports › Streamable HTTP, §2.0.1
    "Security Warning") says servers MUST validate the ``Origin`` header of every incoming
    connection to prevent DNS rebinding, and MUST answer a present but invalid ``Origin``
    with 403 Forbidden. A page whose name was rebound to 127.0.0.1 sends its own name in
    ``Host``, so ``Host`` is checked too (as the official SDKs' DNS-rebinding protection does):

    - ``Host`` must be exactly one of :data:`LOOPBACK_HOST_NAMES` with this server's port
      (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``; case-insensitive). Another
      name or port gets **421** Misdirected Request (RFC 9110 §15.5.20); none or several
      ``Host`` headers get **400** (RFC 9112 §3.2).
    - ``Origin`` may be absent (the bridge and other non-browser clients send none). If
      present it must be one ``http``/``https`` origin on a loopback name (any port: a local
      page, which still needs the token); ``null``, another host or several get **403**.
    - Refusals carry a JSON-RPC error without an ``id`` (code -32000); a WebSocket is closed
      with 1008 before it is accepted (uvicorn answers 403). ``lifespan`` passes through.

    On a Unix domain socket (:attr:`unix_socket`, set by ``AppServer``) ``Host`` must be
    ``localhost`` without a port, as the bridge and curl send it there.

    Args:
        app: the ASGI app to protect.
        port: this server's port; ``None`` takes the one the connection came in on
            (``scope["server"]``).
    """

    def __init__(self, app: ASGIApp, *, port: int | None = None) -> None:
        self.app = app
        self.port = port
        #: Served on a Unix domain socket: ``Host`` must be ``localhost``, without a port.
        self.unix_socket = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        log.warning("refused a request: %s", message)
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await _send_json(send, status, {"jsonrpc": "2.0", "error": {"code": -32000, "message": message}})

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        hosts = [value for name, value in scope["headers"] if name.lower() == b"host"]
        origins = [value for name, value in scope["headers"] if name.lower() == b"origin"]
        if len(hosts) != 1:
            return 400, "exactly one Host header is needed"
        port = self.port
        if self.unix_socket:  # no port: a Unix socket's clients send "Host: localhost"
            if hosts[0].strip().lower() != b"localhost":
                return 421, "the Host header does not name this local server (localhost)"
        else:
            if port is None:
                server = scope.get("server")
                port = server[1] if server else None
            if port is None or not _is_loopback_host(hosts[0], port):
                return 421, "the Host header does not name this loopback server"
        if len(origins) > 1 or (origins and not _is_loopback_origin(origins[0])):
            return 403, "the Origin header is not a loopback origin"
        return None


def _is_loopback_host(value: bytes, port: int) -> bool:
    """Whether a ``Host`` value is a loopback name with ``port`` (no port: only for port 80)."""
    try:
        text = value.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return False
    if text.startswith("["):
        name, _, rest = text.partition("]")
        name += "]"
        given = rest[1:] if rest.startswith(":") else (None if not rest else "bad")
    else:
        name, colon, given_port = text.partition(":")
        given = given_port if colon else None
    if name not in LOOPBACK_HOST_NAMES:
        return False
    if given is None:
        return port == 80
    return given == str(port)


def _is_loopback_origin(value: bytes) -> bool:
    """Whether an ``Origin`` value (RFC 6454 §7) is ``http(s)://`` on a loopback name."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value.decode("ascii").strip())
        parts.port  # noqa: B018 (raises ValueError for a port that is not one)
    except (UnicodeDecodeError, ValueError):
        return False
    if parts.scheme not in ("http", "https") or parts.username is not None or parts.path not in ("", "/"):
        return False
    host = parts.hostname or ""
    return (f"[{host}]" if ":" in host else host) in LOOPBACK_HOST_NAMES


async def _send_json(send: Send, status: int, document: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(document).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})
