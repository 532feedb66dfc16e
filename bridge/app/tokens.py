"""Where the bearer token comes from (docs/discovery.md, "Tokens"; docs/security.md).

A token source is anything with ``async fetch(context) -> str | None``. The sources here:

- :class:`EnvTokenSource` — an environment variable (``--token-env VAR``);
- :class:`FileTokenSource` — a file, refused when group or others may read it
  (``--token-file PATH``);
- :class:`~bridge.app.tokencommand.CommandTokenSource` — a command's stdout, run without
  a shell, bounded in time (``--token-command CMD``); in a module of its own, imported only
  when that option is given (a start without it loads none of its process machinery);
- :class:`AuthRouteTokenSource` — POST a local secret to the app's auth route and read
  the token from its JSON reply (``--auth-url URL --secret-file PATH``);
- :class:`DiscoveryTokenSource` — the ``token`` of the app's discovery file;
- :class:`CallableTokenSource` — a Python callable ``(base_url) -> str | None``, sync or
  async, for apps using the library.

:func:`token_source_for` picks the one a configuration asks for; ``tokenstore.TokenStore``
fetches lazily, caches, and refreshes once per rejection however many requests were
rejected at the same time. No token ever appears in a message, a log line or an
exception: failures name the source and the reason only.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.config import variable_in_message
from ..core.unixurl import resolve_path

if TYPE_CHECKING:
    from ..core.config import BridgeConfig
    from .discovery import Endpoint

__all__ = [
    "TokenContext",
    "TokenSource",
    "TokenSourceError",
    "TokenSourceUnreachableError",
    "EnvTokenSource",
    "FileTokenSource",
    "AuthRouteTokenSource",
    "DiscoveryTokenSource",
    "CallableTokenSource",
    "FixedTokenSource",
    "token_source_for",
    "header_safe",
    "read_credential",
]

log = logging.getLogger("bridge.tokens")

#: A library app's token provider: ``(base_url) -> token or None``, sync or async.
TokenCallable = Callable[[str], "str | None | Awaitable[str | None]"]


class TokenSourceError(Exception):
    """A token source failed. The message names the source and why, never a token."""


class TokenSourceUnreachableError(TokenSourceError):
    """The source is the app itself (its auth route) and nothing accepts connections there:
    the app is not running, which ``ensure_running`` may fix."""


#: ``async (url, body) -> (status, reply body)``: POST ``body`` as JSON (see :class:`TokenContext`).
PostJson = Callable[[str, object], Awaitable[tuple[int, bytes]]]


async def _no_http(url: str, body: object) -> tuple[int, bytes]:
    raise TokenSourceError("this token context offers no HTTP exchange")


class TokenContext:
    """What a source may need: the app's MCP endpoint and a way to POST to the app.

    Args:
        base_url: the app's MCP endpoint URL (``""`` when it is not known yet).
        post_json: ``async (url, body) -> (status, reply body)``: ``POST url`` with ``body``
            as JSON, no proxies, no redirects (the bridge's ``AuthRouteClient.post_json``:
            over its own HTTP/1.1 transport for ``http://``, each new connection verified
            before the secret goes on it; over httpx for ``https://``). It raises the
            bridge's ``TransportError`` classes (``ConnectFailed``: nothing listens). Not
            given: calling it raises ``TokenSourceError``.
        verify_listener: ``(host, port) -> None``, a look at who listens on an address
            (``ListenerCheck.verify_address``; raises ``ListenerUnverifiedError``; ``None``:
            the check is off). It proves nothing about a connection made afterwards: the
            bridge's :attr:`post_json` checks each of its ``http://`` connections itself.
    """

    __slots__ = ("base_url", "post_json", "verify_listener")

    def __init__(
        self,
        base_url: str,
        *,
        post_json: PostJson | None = None,
        verify_listener: Callable[[str, int], None] | None = None,
    ) -> None:
        self.base_url = base_url
        self.post_json: PostJson = post_json or _no_http
        self.verify_listener = verify_listener


class TokenSource(Protocol):
    """Something that produces the bearer token."""

    #: How the source is named in error messages (``"--token-file /path"``).
    description: str

    async def fetch(self, context: TokenContext) -> str | None:
        """Return the current token, or ``None`` for none. Raises ``TokenSourceError``."""
        ...


def read_credential(path: Path, what: str) -> str:
    """Read a secret file by OpenSSH's rules (``bridge/system/privatefile.py``): not through a
    symbolic link, owned by this user, no permission for group or others (POSIX), in
    folders nobody else may write to.

    Raises:
        TokenSourceError: missing, unreadable, unsafe (the message says why and the fix), or empty.
    """
    from ..system.privatefile import UnsafeFileError, credential_text
    from ..system.privatefile import read_private_file as read_safely

    try:
        raw = read_safely(path, what)
    except UnsafeFileError as exc:
        raise TokenSourceError(str(exc)) from None
    except OSError as exc:
        raise TokenSourceError(f"cannot read the {what} {path}: {exc.strerror}") from None
    try:
        return credential_text(raw, path, what)
    except ValueError as exc:
        raise TokenSourceError(str(exc)) from None


class EnvTokenSource:
    def __init__(self, variable: str) -> None:
        self.variable = variable
        self.description = variable_in_message(variable)

    async def fetch(self, context: TokenContext) -> str | None:
        token = os.environ.get(self.variable, "").strip()
        if not token:
            raise TokenSourceError(f"{self.description} is not set or empty")
        return token


class FileTokenSource:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.description = f"token file {path}"

    async def fetch(self, context: TokenContext) -> str | None:
        return read_credential(self.path, "token file")


class AuthRouteTokenSource:
    """Exchange a local secret for a token at the app's auth route.

    The exchange: ``POST <auth_url>`` with ``Content-Type: application/json`` and body
    ``{"secret": "<contents of the secret file>"}``; the app answers 200 with a JSON object
    holding the token as ``"token"`` (or ``"access_token"``). The secret file must have
    mode 0600. The auth URL must be on loopback like the MCP endpoint; a path such as
    ``/auth/token`` is resolved against the MCP endpoint, so it follows an app whose port
    changes with every start (on an ``http+unix://`` endpoint: the same socket, whose peer
    the OS checks as for every request; ``bridge/core/unixurl.py``).

    The secret goes only on a connection verified to be the app's: the bridge's client
    (``transport.AuthRouteClient``) resolves the route's host once, connects to each address in
    turn, runs the listener check on that very socket (this user's, held by the discovery
    file's pid when the route is on the endpoint's port) and sends on the first connection
    that passes; another user's listener on ``[::1]`` while the app has ``127.0.0.1`` is
    skipped, never written to. On a Unix socket or a named pipe (``npipe://``) the route
    goes on the endpoint's own socket or pipe, whose server the OS names and the bridge
    checks as for every request. ``https://`` routes rely on TLS instead.

    Public as ``bridge.AuthRouteTokenSource``: a Python app's ``--mcp-stdio`` passes it as
    ``BridgeConfig(token_source=AuthRouteTokenSource("/auth/token", secret_file))``, the
    same source as the command line's ``--auth-url /auth/token --secret-file PATH``.

    Args:
        auth_url: ``/path`` (resolved against the MCP endpoint found) or an absolute
            loopback URL.
        secret_file: the file holding the secret; read at each fetch, refused when others
            may read it.

    :meth:`fetch` raises :class:`TokenSourceUnreachableError` when nothing accepts
    connections at the route (the app is down: a launch may follow) and
    :class:`TokenSourceError` for any other failure (an unsafe secret file, a status other
    than 200, a reply without a token); the bridge answers ``auth_rejected`` then. Neither
    message holds the secret or a token.
    """

    def __init__(self, auth_url: str, secret_file: Path) -> None:
        self.auth_url = auth_url
        self.secret_file = secret_file
        self.description = f"auth route {auth_url}"

    async def fetch(self, context: TokenContext) -> str | None:
        secret = read_credential(self.secret_file, "secret file")
        auth_url = resolve_path(context.base_url, self.auth_url) if self.auth_url.startswith("/") else self.auth_url
        from ..transport.base import ConnectFailed, TransportError

        try:  # the transports raise the bridge's classes (bridge/transport/base.py)
            status, body = await context.post_json(auth_url, {"secret": secret})
        except ConnectFailed:
            raise TokenSourceUnreachableError(f"nothing accepts connections at the {self.description}") from None
        except TransportError as exc:
            raise TokenSourceError(f"the {self.description} is not reachable ({type(exc).__name__})") from None
        if status != 200:
            raise TokenSourceError(f"the {self.description} answered HTTP {status}")
        try:
            document = json.loads(body)
        except ValueError:
            raise TokenSourceError(f"the {self.description} did not answer with JSON") from None
        token = document.get("token", document.get("access_token")) if isinstance(document, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenSourceError(f'the {self.description} answered without a "token"')
        return token


class DiscoveryTokenSource:
    """The ``token`` of the discovery file, read fresh on every fetch."""

    def __init__(self, read: Callable[[], str | None]) -> None:
        self._read = read
        self.description = "discovery file"

    async def fetch(self, context: TokenContext) -> str | None:
        return self._read()


class CallableTokenSource:
    """Wrap a library app's provider ``(base_url) -> str | None`` (sync or async)."""

    def __init__(self, provider: TokenCallable) -> None:
        self._provider = provider
        self.description = f"token provider {getattr(provider, '__qualname__', type(provider).__name__)}"

    async def fetch(self, context: TokenContext) -> str | None:
        try:
            value = self._provider(context.base_url)
            import inspect  # only a library app's callable source comes here

            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            raise TokenSourceError(f"the {self.description} raised {type(exc).__name__}") from None
        if value is not None and not isinstance(value, str):
            raise TokenSourceError(f"the {self.description} returned {type(value).__name__}, not a string")
        return value or None


class FixedTokenSource:
    """A token given once (``BridgeConfig.token``)."""

    description = "configured token"

    def __init__(self, token: str) -> None:
        self._token = token

    async def fetch(self, context: TokenContext) -> str | None:
        return self._token


def header_safe(token: str) -> bool:
    """Whether ``token`` can go in an ``Authorization: Bearer`` field as it is: printable
    ASCII without spaces (RFC 6750 section 2.1). The token store refuses any other."""
    return all(0x21 <= ord(ch) <= 0x7E for ch in token)


def token_source_for(config: BridgeConfig, endpoint: Endpoint) -> TokenSource | None:
    """Pick the token source: ``token_source`` (an object or a callable), else the fixed
    ``token``, else the discovery file's token, else none."""
    source = config.token_source
    if source is not None:
        if hasattr(source, "fetch"):
            return source  # type: ignore[no-any-return]
        if callable(source):
            return CallableTokenSource(source)
        raise TypeError("token_source must have an async fetch(context) method or be a callable")
    if config.token is not None:
        return FixedTokenSource(config.token)
    if config.discovery_file is not None:
        return DiscoveryTokenSource(endpoint.token)
    return None
