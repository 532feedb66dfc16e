"""The composition root: the one place that builds the bridge's parts from a configuration.

STYLE rule 9 ("inject, don't patch"): every part takes the parts it uses as arguments, and
only this module decides which concrete ones a run gets. A test, a library app or
``check`` builds them here (:func:`build_stack`), or builds its own and hands them to :class:`~bridge.serve.driver.Driver`.

The parts, and who uses whom:

- :class:`~bridge.app.discovery.Endpoint`: where the app listens (``--url`` or its discovery file);
- :class:`~bridge.app.tokenstore.TokenStore`: the bearer token, from
  :func:`~bridge.app.tokens.token_source_for`;
- :class:`~bridge.app.listener.ListenerCheck`: who listens on the app's port (when on);
- :class:`~bridge.transport.byscheme.ByScheme`: the transport to the app, chosen by URL
  scheme, which runs the listener check on every new connection;
- :class:`~bridge.transport.AuthRouteClient`: the token sources' POST to the app's auth
  route, over the same transports (each new ``http://`` connection verified), built on first use;
- :class:`~bridge.streamable.upstream.Upstream`: the MCP requests and the MCP session (over
  the endpoint, the token store and the three above);
- :class:`~bridge.app.launcher.Launcher`: ``ensure_running``, single-flight across bridges
  (over the endpoint);
- :class:`~bridge.app.servedcatalog.ServedCatalog`: what the app last served, for lazy launch
  (only when a launch command or ``ensure_running`` is configured: without one there is
  nothing to start lazily, and a run without it imports nothing of it);
- :class:`~bridge.serve.driver.Driver`: performs the recovery policy's actions with the
  others; :class:`~bridge.serve.lazy.LazyLaunch` and :class:`~bridge.serve.translate.EraRouter`
  stand on it (:func:`build_stack` builds the three: the request stack).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..app.discovery import Endpoint
from ..app.launcher import Launcher, default_lock_path, log_package_state
from ..app.tokens import EnvTokenSource, token_source_for
from ..app.tokenstore import TokenStore
from ..core.config import BridgeConfig
from ..core.jsonrpc import PrivateIds
from ..streamable.headers import USER_AGENT
from ..streamable.upstream import Upstream
from ..transport import AuthRouteClient
from ..transport.byscheme import ByScheme
from ..transport.verifiedconnect import verified_probe
from .driver import Driver
from .lazy import LazyLaunch
from .translate import EraRouter

if TYPE_CHECKING:
    import httpx

    from ..app.listener import ListenerCheck
    from ..app.servedcatalog import ServedCatalog

__all__ = ["Parts", "Stack", "build_parts", "build_stack"]


class Parts(NamedTuple):
    """The parts one run of the bridge is made of (see the module docstring). (A named
    tuple: a dataclass loads :mod:`inspect` and :mod:`ast` at every start.)"""

    endpoint: Endpoint
    tokens: TokenStore
    upstream: Upstream
    launcher: Launcher
    catalog: ServedCatalog | None = None


def connection_checks(config: BridgeConfig, endpoint: Endpoint) -> tuple[ListenerCheck, Callable[[Any], object]]:
    """The checks made on every new connection to the app, before a byte is written:
    ``(listener_check, verify)``. ``listener_check`` is the TCP listener check
    (``bridge/app/listener.py``: the port's listener is this user's socket, held by the
    discovery file's pid); ``verify(sock)`` runs it on a TCP socket, and on a Unix socket
    (``http+unix://``) the peer check instead (``bridge/app/unixpeer.py``: the OS names
    the peer), and on a named pipe (``npipe://``) the server check (``bridge/app/pipepeer.py``).
    The pool, the auth route, the launcher's probe and ``check`` all use ``verify``."""
    from ..app.listener import ListenerCheck
    from ..transport.unixlink import verify_by_family

    listener_check = ListenerCheck(endpoint.listener_pid, app_name=config.app_name)
    # The other links' checks are made on their first connection: a start that connects
    # nowhere (answered from the catalog) or over TCP loads none of their modules.
    unix_checks: list[Any] = []
    pipe_checks: list[Any] = []  # (Windows only)

    def verify_unix(sock: Any) -> object:
        if not unix_checks:
            from ..app.unixpeer import UnixPeerCheck

            unix_checks.append(UnixPeerCheck(endpoint.discovery_for_socket, app_name=config.app_name, refresh=endpoint.reload))
        return unix_checks[0].verify_connection(sock)

    def verify_pipe(handle: Any) -> object:
        if not pipe_checks:
            from ..app.pipepeer import PipePeerCheck

            pipe_checks.append(PipePeerCheck(endpoint.discovery_for_pipe, app_name=config.app_name, refresh=endpoint.reload))
        return pipe_checks[0].verify_connection(handle)

    verify = verify_by_family(listener_check.verify_connection, verify_unix, verify_pipe)
    assert verify is not None
    return listener_check, verify


def build_parts(
    config: BridgeConfig,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
    app_probe: Callable[[str], Awaitable[bool]] | None = None,
) -> Parts:
    """Build the parts ``config`` asks for.

    Args:
        config: the run's configuration.
        http_transport: an injected ``httpx.AsyncBaseTransport`` (tests), else the bridge
            builds its own connection pool.
        app_probe: an injected ``async (url) -> bool`` telling whether the app accepts
            connections (tests), else ``verifiedconnect.verified_probe``.

    Raises:
        TypeError: ``config.token_source`` is neither a token source nor a callable.
    """
    endpoint = Endpoint(url=config.url, discovery_file=config.discovery_file)
    source = token_source_for(config, endpoint)
    tokens = TokenStore(source, timeout_seconds=config.token_timeout_seconds, app_name=config.app_name)
    listener_check = connection_verifier = None
    if config.verify_listener and http_transport is None:  # an injected transport has no socket
        listener_check, connection_verifier = connection_checks(config, endpoint)
    transport = ByScheme(
        config.url,
        max_connections=config.max_concurrent_requests + 2,  # + the GET stream and DELETE
        connect_timeout_seconds=config.connect_timeout_seconds,
        pool_timeout_seconds=config.request_timeout_seconds,
        write_timeout_seconds=config.request_timeout_seconds,
        injected=http_transport,
        verify_connection=connection_verifier,
    )
    upstream = Upstream(
        config,
        endpoint=endpoint,
        tokens=tokens,
        transport=transport,
        listener_check=listener_check,
        auth_client=AuthRouteClient(
            http_transport,
            timeout_seconds=config.token_timeout_seconds,
            verify_connection=connection_verifier,
            user_agent=USER_AGENT,
        ),
    )
    configured = config.launch_command is not None or config.ensure_running is not None
    catalog = None
    if configured:
        from ..app.servedcatalog import ServedCatalog

        catalog = ServedCatalog(config.app_name, config.url or str(config.discovery_file))
    starts = config.launch_policy != "never"
    if configured and starts:
        log_package_state()  # Windows: inside an MSIX package, is the state folder in the real profile?
    lock_key = f"{config.app_name}|{config.url}|{config.discovery_file}|{config.launch_command}"
    launcher = Launcher(
        endpoint,
        command=config.launch_command if starts else None,
        ensure_running=config.ensure_running if starts else None,
        timeout_seconds=config.launch_timeout_seconds,
        app_name=config.app_name,
        lock_path=default_lock_path(lock_key) if configured and starts else None,
        log_file=config.launch_log_file,
        # Whether the app is up, by the road every connection takes (a Unix socket's file
        # and peer, or each TCP address's listener): an address whose listener is not the
        # app's does not count (another user on [::1] must not keep the app from being
        # started on 127.0.0.1).
        probe=app_probe or verified_probe(connection_verifier),
        secret_variables=[source.variable] if isinstance(source, EnvTokenSource) else [],
    )
    return Parts(endpoint=endpoint, tokens=tokens, upstream=upstream, launcher=launcher, catalog=catalog)


class Stack(NamedTuple):
    """One run's request stack over its parts (CONTRIBUTING.md, "The request stack"):
    ``top`` (era routing) → ``lazy`` (lazy launch) → ``driver`` (recovery) → the parts."""

    parts: Parts
    driver: Driver
    lazy: LazyLaunch
    top: EraRouter


def build_stack(
    config: BridgeConfig,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
    app_probe: Callable[[str], Awaitable[bool]] | None = None,
    on_session_rebuilt: Callable[[], Awaitable[None]] | None = None,
) -> Stack:
    """The request stack over the parts of :func:`build_parts` (same arguments);
    ``on_session_rebuilt`` is awaited after every successful session rebuild. The layers
    share one space of private request ids."""
    parts = build_parts(config, http_transport=http_transport, app_probe=app_probe)
    ids = PrivateIds()
    driver = Driver(
        parts.upstream,
        parts.launcher,
        private_ids=ids,
        app_name=config.app_name,
        on_session_rebuilt=on_session_rebuilt,
        merge_list_pages=config.merge_list_pages,
        max_message_bytes=config.max_message_bytes,
    )
    lazy = LazyLaunch(
        driver, catalog=parts.catalog, launch_policy=config.launch_policy, protocol_era=config.protocol_era, app_name=config.app_name
    )
    top = EraRouter(lazy, protocol_era=config.protocol_era, private_ids=ids, app_name=config.app_name)
    return Stack(parts=parts, driver=driver, lazy=lazy, top=top)
