"""Configuration values of one bridge run, and their validation.

Pure: imports only the standard library. The CLI and the library both build a
:class:`BridgeConfig`; nothing here reads files, the environment or the network.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "is_conventional_variable",
    "variable_in_message",
    "BridgeConfig",
    "config_defaults",
    "HTTP_TOKEN",
    "HTTP_TOKEN_CHAR",
    "ConfigError",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "check_endpoint_url",
    "is_loopback_host",
    "parse_header",
    "DEFAULT_APP_NAME",
    "DEFAULT_LAUNCH_TIMEOUT_SECONDS",
    "DEFAULT_REQUEST_TIMEOUT_SECONDS",
    "DEFAULT_TOKEN_TIMEOUT_SECONDS",
    "LAUNCH_POLICIES",
    "PROTOCOL_ERAS",
    "check_app_name",
    "in_sentence",
]

#: How the app is called in messages when no --app-name is given.
DEFAULT_APP_NAME = "The app"


#: How long a launched app may take to accept connections by default, in seconds
#: (``--launch-timeout``, :attr:`BridgeConfig.launch_timeout_seconds`, and the start-up
#: budget ``config install`` writes for a client).
DEFAULT_LAUNCH_TIMEOUT_SECONDS = 30.0

#: The default bound on each reply, in seconds (``--request-timeout``,
#: :attr:`BridgeConfig.request_timeout_seconds`, and the tool-call bound ``config install``
#: writes for a client that has one).
DEFAULT_REQUEST_TIMEOUT_SECONDS = 300.0

#: The default bound on getting one token, in seconds (``--token-timeout``,
#: :attr:`BridgeConfig.token_timeout_seconds`).
DEFAULT_TOKEN_TIMEOUT_SECONDS = 10.0

#: When the bridge starts the app (``--launch-policy``, :attr:`BridgeConfig.launch_policy`):
#: ``on-call`` answers a client's start-up probes from the catalog the app last served while
#: the app is down and starts it for the first request that needs it; ``on-start`` starts it
#: for the first request (``initialize``), as before catalogs; ``never`` never starts it.
LAUNCH_POLICIES = ("on-call", "on-start", "never")

#: Which era the bridge speaks to the app (``--protocol-era``, :attr:`BridgeConfig.protocol_era`):
#: ``auto`` follows the client and translates when the app does not speak its era; ``legacy``
#: always speaks 2025-11-25 (2026-07-28 clients translated); ``modern`` always speaks
#: 2026-07-28 (2025-era clients translated). docs/behaviour.md, "Protocol eras".
PROTOCOL_ERAS = ("auto", "legacy", "modern")

#: The longest app name, in characters.
MAX_APP_NAME_CHARS = 64


def check_app_name(name: str) -> None:
    """Check that ``name`` can be an app's name: shown in every message, and the name of
    its state folder (``--app-name``): 1 to :data:`MAX_APP_NAME_CHARS` characters, no
    control character, no ``/`` or ``\\``, not ``.`` or ``..``, no white space at an end.

    Raises:
        ConfigError: saying which rule it breaks, without repeating the name (a name that
            fails the check may be something else, a token given by mistake).
    """
    if (
        not 0 < len(name) <= MAX_APP_NAME_CHARS
        or _has_control(name)
        or "\t" in name
        or any(separator in name for separator in "/\\")
        or name in (".", "..")
        or name != name.strip()
    ):
        raise ConfigError(
            f"the app name (--app-name) must be 1 to {MAX_APP_NAME_CHARS} characters, with no control character, "
            "no / or \\, and no space at either end"
        )


def in_sentence(app_name: str) -> str:
    """The app's name for the middle of a sentence ("the app" for the default name)."""
    return "the app" if app_name == DEFAULT_APP_NAME else app_name


#: Default cap on one message, either direction: 64 MiB (well over the 10 MiB the TypeScript SDK's stdio reader buffers).
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: RFC 9110 §5.6.2 ``tchar``: one character of a token, as a regular expression class.
HTTP_TOKEN_CHAR = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]"
#: RFC 9110 §5.6.2 ``token``: a field name, a method, a parameter name.
HTTP_TOKEN = re.compile(rf"^{HTTP_TOKEN_CHAR}+\Z")  # (\Z: "$" would also match before a final line end)
# Headers the bridge sets itself: a user header must not override the transport's own.
_RESERVED_HEADERS = frozenset(
    {
        "accept",
        "authorization",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "transfer-encoding",
    }
)


#: Schemes a message may name (a mistaken ``--url``'s scheme is repeated only if it is one).
_KNOWN_SCHEMES = frozenset({"ftp", "file", "ws", "wss", "tcp", "udp", "unix", "ssh", "git", "mcp", "stdio", "localhost"})


class ConfigError(ValueError):
    """A configuration value is unusable. The message says which and why; nothing started."""


class BridgeConfig:
    """Everything one bridge run needs to know.

    Attributes:
        url: the app's MCP endpoint (Streamable HTTP), e.g. ``http://127.0.0.1:8765/mcp``.
            Optional when ``discovery_file`` is given; wins over it when both are.
        discovery_file: the app's discovery file (see ``bridge.app.discovery``), read on every
            reconnect and after every 401.
        app_name: how the app is named in messages ("MyApp is not running …").
        headers: extra HTTP headers sent with every request, as ``(name, value)`` pairs.
        token: a fixed bearer token, or ``None``. Never logged.
        token_source: an object with ``async fetch(context) -> str | None`` (see
            ``bridge.app.tokens``), or a callable ``(base_url) -> str | None``, sync or async.
            Takes precedence over ``token`` and over the discovery file's token.
        token_timeout_seconds: bound on one token fetch.
        launch_command: argv that starts the app when nothing listens (no shell), or ``None``.
        ensure_running: a callable (sync or async) that starts the app, for library users.
        launch_timeout_seconds: bound on starting the app and waiting for it to listen.
        launch_log_file: where the launched app's output goes (default: the null device).
        launch_policy: when the app is started, one of :data:`LAUNCH_POLICIES`. With
            ``on-call`` (the default) and a catalog cached for the app
            (``bridge/app/servedcatalog.py``), a down app is not started for ``initialize``,
            ``server/discover``, the four lists or ``ping``: they are answered from the
            catalog, and the first other request starts it. Without a catalog, ``on-call``
            is ``on-start``. ``never``: the launch command and ``ensure_running`` are not used.
        session_400_heuristic: treat a 400 whose body mentions the session, in reply to a
            request that carried a session id, like a 404 (the session is gone).
        connect_timeout_seconds: bound on opening a TCP connection to the app.
        request_timeout_seconds: bound on each reply, failing the request with reason
            ``timeout``: the response head must be complete within this of sending the
            request, a JSON body within this of its head (total bounds: bytes dripped in do
            not extend them); an SSE reply may go this long without a complete event or a
            comment (a keep-alive). Sized for tool calls, not for network round trips.
        max_message_bytes: the largest message accepted in either direction, in bytes.
        max_concurrent_requests: how many requests may be in flight to the app at once;
            further ones wait their turn (notifications never wait).
        progress_heartbeat_seconds: for a request with a ``progressToken``, how long the
            app may be silent before the bridge sends the client a progress notification
            saying it waits on the app (and again after as long); 0 turns it off.
            ``bridge/serve/heartbeat.py``.
        shutdown_grace_seconds: after SIGINT or SIGHUP, how long requests in flight may
            still finish before they are answered with reason ``shutting_down`` (not after
            SIGTERM or a second signal: those answer at once; stdin EOF alone lets them
            finish, within ``drain_timeout_seconds``). Sized to end well within
            the 0.52 s from SIGINT to SIGKILL that Claude Code gives a server.
        drain_timeout_seconds: after stdin EOF (with no signal before it), how long the
            requests in flight may still finish; those still open then are answered with
            reason ``shutting_down`` and the app is told they are cancelled
            (``notifications/cancelled`` before 2026-07-28; since, the closed exchange says
            it). The official SDK clients send SIGTERM 2 s after closing stdin, which ends
            the wait sooner; a pipeline (``bridge < requests.jsonl``) gets the replies of
            its short calls.
        delete_timeout_seconds: bound on the best-effort ``DELETE`` of the MCP session.
        allow_remote: accept a non-loopback ``url`` (it must then be https).
        verify_listener: before anything is written on a new ``http://`` connection (and
            before the auth route gets the secret), check that the socket listening there
            belongs to this user and, when the discovery file names a pid, to that process
            or a child of it (``bridge/app/listener.py``). ``False`` (``--no-verify-listener``)
            is for setups where the OS cannot tell: a container or network namespace, an
            app run as another user on purpose. ``https://`` endpoints rely on TLS instead.
        protocol_era: which era the bridge speaks to the app, one of :data:`PROTOCOL_ERAS`.
            ``auto`` (the default): the client's, translated when the app refuses it (a
            2026-07-28 client with a legacy-only app: ``bridge/serve/legacyapp.py``; a 2025-era
            client with a 2026-07-28-only app: ``bridge/serve/modernapp.py``). ``legacy``:
            always 2025-11-25 (2026-07-28 clients translated). ``modern``: always
            2026-07-28 (2025-era clients translated).
        merge_list_pages: for a client known to drop pages (it never sends a list's
            ``cursor``), a ``tools/list``, ``prompts/list``, ``resources/list`` or
            ``resources/templates/list`` reply with ``nextCursor`` is completed by the bridge:
            it asks the app for the next pages itself and answers with one list and no
            ``nextCursor`` (``Driver.request``, ``bridge/serve/driver.py``). Bounded by
            ``MAX_LIST_PAGES`` pages, ``max_message_bytes`` and the request's
            ``request_timeout_seconds``; a merge a bound stopped keeps the ``nextCursor`` of
            the first page not merged. Off by default: a client that follows cursors gets
            the app's pages as they are (docs/clients.md says which clients need it).
        allow_tools: ``--allow-tool`` globs: when any is given, the client sees only the
            tools whose names match one (``bridge/core/toolfilter.py``; fnmatch globs,
            case-sensitive).
        deny_tools: ``--deny-tool`` globs: the tools whose names match one are hidden from
            the client, and their calls refused without reaching the app; deny wins.
        read_only: ``--read-only``: only the tools the app annotates ``readOnlyHint: true``.
            A hidden tool's ``tools/call`` gets -32602 (reason ``tool_filtered``); the
            lazy-launch catalog keeps the app's whole list (``bridge/serve/toolgate.py``).

    Built with keyword arguments only; frozen (setting an attribute raises
    ``AttributeError``), compared and hashed by its values, and its ``repr`` leaves out the
    token and the callables. A plain class rather than a dataclass: importing
    :mod:`dataclasses` loads :mod:`inspect` and :mod:`ast`, 5-8 ms of every start of the
    bridge (bench/README.md, "Start-up"). :meth:`replace` makes a changed copy;
    :func:`config_defaults` gives each value's default.
    """

    __slots__ = (
        "url",
        "discovery_file",
        "app_name",
        "headers",
        "token",
        "token_source",
        "token_timeout_seconds",
        "launch_command",
        "ensure_running",
        "launch_timeout_seconds",
        "launch_log_file",
        "launch_policy",
        "session_400_heuristic",
        "connect_timeout_seconds",
        "request_timeout_seconds",
        "max_message_bytes",
        "max_concurrent_requests",
        "shutdown_grace_seconds",
        "drain_timeout_seconds",
        "progress_heartbeat_seconds",
        "delete_timeout_seconds",
        "allow_remote",
        "verify_listener",
        "protocol_era",
        "merge_list_pages",
        "allow_tools",
        "deny_tools",
        "read_only",
    )
    url: str | None
    discovery_file: Path | None
    app_name: str
    headers: tuple[tuple[str, str], ...]
    token: str | None
    token_source: Any
    token_timeout_seconds: float
    launch_command: tuple[str, ...] | None
    ensure_running: Callable[[], Any] | None
    launch_timeout_seconds: float
    launch_log_file: Path | None
    launch_policy: str
    session_400_heuristic: bool
    connect_timeout_seconds: float
    request_timeout_seconds: float
    max_message_bytes: int
    max_concurrent_requests: int
    shutdown_grace_seconds: float
    drain_timeout_seconds: float
    progress_heartbeat_seconds: float
    delete_timeout_seconds: float
    allow_remote: bool
    verify_listener: bool
    protocol_era: str
    merge_list_pages: bool
    allow_tools: tuple[str, ...]
    deny_tools: tuple[str, ...]
    read_only: bool

    def __init__(
        self,
        *,
        url: str | None = None,
        discovery_file: Path | None = None,
        app_name: str = DEFAULT_APP_NAME,
        headers: tuple[tuple[str, str], ...] = (),
        token: str | None = None,
        token_source: Any = None,
        token_timeout_seconds: float = DEFAULT_TOKEN_TIMEOUT_SECONDS,
        launch_command: tuple[str, ...] | None = None,
        ensure_running: Callable[[], Any] | None = None,
        launch_timeout_seconds: float = DEFAULT_LAUNCH_TIMEOUT_SECONDS,
        launch_log_file: Path | None = None,
        launch_policy: str = "on-call",
        session_400_heuristic: bool = True,
        connect_timeout_seconds: float = 5.0,
        request_timeout_seconds: float = DEFAULT_REQUEST_TIMEOUT_SECONDS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_concurrent_requests: int = 32,
        shutdown_grace_seconds: float = 0.2,
        drain_timeout_seconds: float = 5.0,
        progress_heartbeat_seconds: float = 20.0,
        delete_timeout_seconds: float = 0.5,
        allow_remote: bool = False,
        verify_listener: bool = True,
        protocol_era: str = "auto",
        merge_list_pages: bool = False,
        allow_tools: tuple[str, ...] = (),
        deny_tools: tuple[str, ...] = (),
        read_only: bool = False,
    ) -> None:
        given = locals()  # every argument by name: one value per slot
        for name in self.__slots__:
            object.__setattr__(self, name, given[name])
        self._check()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BridgeConfig is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"BridgeConfig is frozen: cannot delete {name!r}")

    def replace(self, **changes: Any) -> BridgeConfig:
        """A new configuration with these values changed (by name, as the constructor takes
        them), checked as any new one (what ``dataclasses.replace`` gave).

        Raises:
            TypeError: a name that is not one of the values.
            ConfigError: a value the check refuses.
        """
        return BridgeConfig(**{**{name: getattr(self, name) for name in self.__slots__}, **changes})

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, BridgeConfig)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__ if name not in _NOT_IN_REPR)
        return f"BridgeConfig({shown})"

    def _check(self) -> None:
        if self.url is None and self.discovery_file is None:
            raise ConfigError("give the app's endpoint: --url, --discovery-file or --app-name")
        check_app_name(self.app_name)
        if self.url is not None:
            check_endpoint_url(self.url, allow_remote=self.allow_remote)
        for name, value in self.headers:
            _check_header(name, value)
        if self.token is not None and (not self.token or _has_control(self.token) or " " in self.token):
            raise ConfigError("the token is empty or contains spaces or control characters")
        if self.launch_policy not in LAUNCH_POLICIES:
            raise ConfigError(f"launch_policy must be one of {', '.join(LAUNCH_POLICIES)}")
        if self.protocol_era not in PROTOCOL_ERAS:
            raise ConfigError(f"protocol_era must be one of {', '.join(PROTOCOL_ERAS)}")
        if self.launch_command is not None and not self.launch_command:
            raise ConfigError("the launch command is empty")
        for name in (
            "connect_timeout_seconds",
            "request_timeout_seconds",
            "shutdown_grace_seconds",
            "drain_timeout_seconds",
            "token_timeout_seconds",
            "launch_timeout_seconds",
        ):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be a positive number of seconds")
        if not self.progress_heartbeat_seconds >= 0:
            raise ConfigError("progress_heartbeat_seconds must not be negative")
        if self.delete_timeout_seconds < 0:
            raise ConfigError("delete_timeout_seconds must not be negative")
        if self.max_message_bytes < 1024:
            raise ConfigError("max_message_bytes must be at least 1024")
        if self.max_concurrent_requests < 1:
            raise ConfigError("max_concurrent_requests must be at least 1")
        for name in ("allow_tools", "deny_tools"):
            globs = getattr(self, name)
            if not isinstance(globs, tuple) or not all(isinstance(glob, str) and glob for glob in globs):
                raise ConfigError(f"{name} must be a tuple of globs over tool names, none empty")


#: What :class:`BridgeConfig`'s ``repr`` leaves out: a secret, and callables.
_NOT_IN_REPR = frozenset({"token", "token_source", "ensure_running"})


def config_defaults() -> dict[str, Any]:
    """Each :class:`BridgeConfig` value's default, by name (a new dict)."""
    defaults = BridgeConfig.__init__.__kwdefaults__
    assert defaults is not None
    return dict(defaults)


def is_loopback_host(host: str) -> bool:
    """Return whether ``host`` (as it appears in a URL, without brackets) is loopback:
    ``localhost``, 127.0.0.0/8 or ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_CONVENTIONAL_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def is_conventional_variable(name: str) -> bool:
    """Whether ``name`` is a conventional environment variable name: capital letters,
    digits and ``_``, not starting with a digit, at most 64 characters."""
    return _CONVENTIONAL_VARIABLE.fullmatch(name) is not None


def variable_in_message(name: str) -> str:
    """How ``--token-env``'s variable is named in a message, a reply or a log line:
    ``environment variable NAME`` for a conventional name (:func:`is_conventional_variable`);
    otherwise without the name, since it may be the token itself given by mistake
    (``ghp_…``, ``sk_live_…`` and many other tokens are valid identifiers). The command
    line refuses such a name; this guards the library's own callers too."""
    if is_conventional_variable(name):
        return f"environment variable {name}"
    return "the environment variable given by name (not a conventional name, so not repeated)"


def check_endpoint_url(url: str, *, allow_remote: bool = False) -> None:
    """Check that ``url`` may be used as the app's MCP endpoint.

    Loopback ``http``/``https`` URLs are always allowed, and so are valid ``http+unix://``
    URLs (a Unix domain socket, ``bridge/core/unixurl.py``) except on Windows, where the
    bridge does not connect to one (apps serve on a named pipe or TCP there), and valid
    ``npipe://`` URLs (a Windows named pipe, ``bridge/core/pipeurl.py``) on Windows only. Any other host is refused unless
    ``allow_remote`` is true and the scheme is ``https`` (docs/security.md: the bearer token must
    not cross a network in clear text). User info and fragments are refused.

    Raises:
        ConfigError: with a sentence saying what is wrong.
    """
    # Nothing of the URL is repeated in these messages, but a scheme that passed the check
    # below: the URL may carry a credential (``?key=…``, a token pasted by mistake), and a
    # message can reach a log file and every reply (a client-started bridge's error).
    # urlsplit's own errors quote the port, so they are not passed on either.
    from .pipeurl import is_pipe_url, split_pipe_url
    from .unixurl import is_unix_url, split_unix_url

    if is_pipe_url(url):  # a Windows named pipe of this machine (the host is ".")
        if sys.platform != "win32":
            raise ConfigError("--url: an npipe:// URL names a Windows named pipe, which exists only on Windows; "
                              "give the app's http+unix:// or http://127.0.0.1 URL")
        try:
            split_pipe_url(url)
        except ValueError as exc:
            raise ConfigError(f"--url: {exc}") from None
        return
    if is_unix_url(url):  # a Unix domain socket: on this machine by construction
        if sys.platform == "win32":
            raise ConfigError("--url: an http+unix:// URL names a Unix domain socket, which the bridge on Windows "
                              "does not connect to (apps serve on a named pipe or TCP there); give the app's npipe:// or http://127.0.0.1 URL")
        try:
            split_unix_url(url)
        except ValueError as exc:
            raise ConfigError(f"--url: {exc}") from None
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ConfigError("--url is not a valid URL") from None
    try:
        port = parts.port
    except ValueError:
        raise ConfigError("--url has a port that is not a number from 0 to 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        scheme = parts.scheme.lower()
        shown = "no scheme" if not scheme else f"scheme {scheme!r}" if scheme in _KNOWN_SCHEMES else "another scheme"
        raise ConfigError(f"--url must be an http:// or https:// URL with a host, http+unix:// or npipe:// (this one has {shown}"
                          f"{'' if parts.hostname else ' and no host'})")
    if parts.username is not None or parts.password is not None:
        raise ConfigError("--url must not contain a user name or password; use a token source")
    if parts.fragment:
        raise ConfigError("--url must not contain a #fragment")
    if port == 0:
        raise ConfigError("--url must not use port 0")
    if is_loopback_host(parts.hostname):
        return
    if not allow_remote:
        raise ConfigError(
            "--url points at a host that is not a loopback address "
            "(127.0.0.0/8, ::1 or localhost); the bridge only talks to an app on this machine "
            "unless --allow-remote is given with an https:// URL"
        )
    if parts.scheme != "https":
        raise ConfigError("--allow-remote only accepts https:// URLs")


def parse_header(text: str) -> tuple[str, str]:
    """Parse a ``'Name: value'`` option into a pair.

    Raises:
        ConfigError: no colon, an invalid name, a header the bridge sets itself, or a CR,
            LF or other control character in the value (header injection).
    """
    name, colon, value = text.partition(":")
    if not colon:
        # Not repeated: a missing colon is the usual typo in "Authorization: Bearer …".
        raise ConfigError("--header must look like 'Name: value' (this one has no ':')")
    name, value = name.strip(), value.strip()
    _check_header(name, value)
    return name, value


def _check_header(name: str, value: str) -> None:
    if not HTTP_TOKEN.match(name):
        raise ConfigError(
            "a --header name is not a valid HTTP field name (RFC 9110 §5.1: letters, digits and "
            "!#$%&'*+-.^_`|~, no spaces)"
        )
    if name.lower() in _RESERVED_HEADERS:
        raise ConfigError(f"header {name!r} is set by the bridge itself and cannot be overridden")
    if _has_control(value) or value != value.strip(" \t") or not value.isascii():
        raise ConfigError(f"the value of header {name!r} has a control or non-ASCII character, or white space at an end")


def _has_control(value: str) -> bool:
    return any(ord(ch) < 0x20 and ch != "\t" or ord(ch) == 0x7F for ch in value)
