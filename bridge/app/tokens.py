"""Where the bearer token comes from (docs/discovery.md, "Tokens"; docs/security.md).

A token source is anything with ``async fetch(context) -> str | None``. The sources here:

- :class:`EnvTokenSource` — an environment variable (``--token-env VAR``);
- :class:`FileTokenSource` — a file, refused when group or others may read it
  (``--token-file PATH``);
- :class:`CommandTokenSource` — a command's stdout, run without a shell, bounded in time
  (``--token-command CMD``);
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

import inspect
import json
import logging
import os
import re
import string
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core.config import variable_in_message
from ..core.unixurl import resolve_path

if TYPE_CHECKING:
    import asyncio

    from ..core.config import BridgeConfig
    from .discovery import Endpoint

__all__ = [
    "TokenContext",
    "TokenSource",
    "TokenSourceError",
    "TokenSourceUnreachableError",
    "EnvTokenSource",
    "FileTokenSource",
    "CommandTokenSource",
    "AuthRouteTokenSource",
    "DiscoveryTokenSource",
    "CallableTokenSource",
    "FixedTokenSource",
    "token_source_for",
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


class CommandTokenSource:
    """Run a command (no shell) and take its stdout, stripped, as the token.

    Args:
        argv: the command and its arguments.
        timeout_seconds: the command is killed (and reaped) after this long, and so it is
            when the fetch is cancelled.

    A failure's message names the exit status, the timeout or why the command could not
    start, never what the command printed: its stderr (the last
    :data:`MAX_COMMAND_STDERR_BYTES`) goes only to the log, at debug level and masked
    (:func:`mask_secrets`), since a failing credential helper may print the very secret
    it failed to use.
    """

    def __init__(self, argv: Sequence[str], timeout_seconds: float = 10.0) -> None:
        self.argv = list(argv)
        self.timeout_seconds = timeout_seconds
        self.description = "token command"

    async def fetch(self, context: TokenContext) -> str | None:
        import asyncio  # not at import time: the serving start imports asyncio first, without ssl (cli/diagnostics.py)

        stdout = bytearray()
        stderr = bytearray()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            raise TokenSourceError(f"the {self.description} could not be started: {exc.strerror}{self._shell_hint()}") from None
        token = None
        try:
            assert process.stdout is not None and process.stderr is not None
            async with asyncio.timeout(self.timeout_seconds):
                await asyncio.gather(
                    _collect(process.stdout, stdout, MAX_TOKEN_OUTPUT_BYTES, keep_end=False),
                    _collect(process.stderr, stderr, MAX_COMMAND_STDERR_BYTES, keep_end=True),
                )
                returncode = await process.wait()
            if returncode != 0:
                raise TokenSourceError(f"the {self.description} exited with status {returncode}{self._see_log(stderr)}")
            token = stdout.decode("utf-8", "replace").strip()
            if not token:
                raise TokenSourceError(f"the {self.description} printed no token{self._see_log(stderr)}")
            return token
        except TimeoutError:
            raise TokenSourceError(
                f"the {self.description} did not finish within {self.timeout_seconds:g} s{self._see_log(stderr)}"
            ) from None
        finally:
            if process.returncode is None:  # timed out or cancelled: never left running
                await _kill(process)
            if not token and stderr:
                log.debug("the %s failed; its stderr ended: %s", self.description, _masked_stderr(stderr, stdout))

    def _see_log(self, stderr: bytearray) -> str:
        return ("; its stderr is in the log at --log-level debug" if stderr else "") + self._shell_hint()

    def _shell_hint(self) -> str:
        """A hint when the command looks written for a shell, which it never runs in."""
        runs_a_shell = os.path.basename(self.argv[0]).lower().removesuffix(".exe") in _SHELLS
        shell_words = [] if runs_a_shell else [word for word in self.argv if _looks_like_shell(word)]
        if not shell_words:
            return ""
        example = "cmd /c \"…\"" if os.name == "nt" else "sh -c '…'"
        return (
            f". The command runs without a shell, so {mask_secrets(shell_words[0])!r} is passed as it is: "
            f"`~`, `$VAR`, pipes, redirections and wildcards are not expanded. To use a shell, "
            f"give --token-command \"{example}\""
        )


#: The most of a token command's stdout kept (bytes); a token is far shorter.
MAX_TOKEN_OUTPUT_BYTES = 64 * 1024
#: How much of the end of a failing token command's stderr goes into the log (bytes).
MAX_COMMAND_STDERR_BYTES = 1024
#: After a kill, the longest wait for the process to be reaped (seconds).
KILL_REAP_SECONDS = 5.0

_SHELL_MARKS = ("|", ">", "<", "$", "&&", ";", "`", "*", "?", "[")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "cmd", "powershell", "pwsh"})
#: A word with a part ending in one of these makes the next word a value to mask
#: (``token=``, ``access_token":``, ``-Token X``, ``API key sk-…``, ``Cookie: …``, ``Bearer …``).
_SECRET_KEYWORD = re.compile(
    r"[a-z]*(?:token|secret|password|passwd|pwd|key|session|cookie|authorization|auth|bearer|basic|credentials?|pin|otp)"
)
_PUNCTUATION = string.punctuation + "“”‘’«»"


def mask_secrets(text: str) -> str:
    """``text`` with every word that may be a credential replaced by ``[masked]``.

    Words are runs without white space, judged without the punctuation around them. Masked:
    a word with a digit or with punctuation inside (``sk-…``, ``a1B2c3``, a JWT, a URL with
    its userinfo, ``session=…``, a path), except a number shorter than 6 digits (an exit
    status, a line number); a word of letters only that is 16 or longer or mixes case
    inside (``QWERTYasdfgh``); and any word after one naming a secret (``token``,
    ``password``, ``key``, ``Cookie``, ``Bearer``, …). What stays readable is prose:
    ``cat: [masked] No such file or directory``.
    """
    words = re.split(r"(\s+)", text)
    after_keyword = False
    for index in range(0, len(words), 2):
        word = words[index]
        core = word.strip(_PUNCTUATION)
        if not core:
            continue
        if after_keyword or _may_be_secret(core):
            start = word.index(core)
            words[index] = word[:start] + "[masked]" + word[start + len(core) :]
        after_keyword = any(_SECRET_KEYWORD.fullmatch(part) for part in re.split(r"[^a-z0-9]+", word.lower()))
    return "".join(words)


def _may_be_secret(core: str) -> bool:
    if core.isdigit():
        return len(core) >= 6
    if not core.isalpha():
        return True  # a digit or punctuation inside
    return len(core) >= 16 or any(a.islower() and b.isupper() for a, b in zip(core, core[1:], strict=False))


def _masked_stderr(stderr: bytearray, stdout: bytearray) -> str:
    """The stderr kept, masked, with any word of stdout (the token, or part of it) out too."""
    text = stderr.decode("utf-8", "replace").strip()
    for word in stdout.decode("utf-8", "replace").split():
        if len(word) >= 4:
            text = text.replace(word, "[masked]")
    return mask_secrets(text)


def _looks_like_shell(word: str) -> bool:
    """Whether one argument looks written for a shell: ``~/x``, ``$VAR``, ``|``, ``>f``,
    ``*.txt``… An argument with white space in it is code or text (``python -c '…'``),
    not a shell word, and never counts."""
    if not word or any(c.isspace() for c in word):
        return False
    return word.startswith("~") or any(mark in word for mark in _SHELL_MARKS)


async def _collect(stream: asyncio.StreamReader, into: bytearray, limit: int, *, keep_end: bool) -> None:
    """Read ``stream`` to its end, keeping at most ``limit`` bytes of it as they arrive: the
    first ones, or the last ones with ``keep_end``. The rest is read and dropped, so a
    chatty command never blocks on a full pipe."""
    while chunk := await stream.read(64 * 1024):
        into += chunk
        if len(into) > limit and keep_end:
            del into[: len(into) - limit]
        elif len(into) > limit:
            del into[limit:]


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill ``process`` and wait, at most :data:`KILL_REAP_SECONDS`, until it is reaped (a
    process stuck in the kernel is left to the event loop's child watcher)."""
    from ..system.cancelscope import move_on_after  # (its asyncio: not at import time, as above)

    try:
        process.kill()
    except ProcessLookupError:
        pass  # ended meanwhile
    # Usually in a task being cancelled (the ``finally`` above): the scope, not a bare
    # asyncio.timeout, which on 3.11.0-3.11.2 let its own cancellation escape there.
    with move_on_after(KILL_REAP_SECONDS) as reaping:
        await process.wait()
    if reaping.cancelled_caught:
        log.warning("the token command (pid %d) did not end within %g s of being killed", process.pid, KILL_REAP_SECONDS)


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
