"""The composition root: the one place that builds the bridge's parts from a configuration.

STYLE rule 9 ("inject, don't patch"): every part takes the parts it uses as arguments, and
only this module decides which concrete ones a run gets. A test, a library app or
``check`` builds them here, or builds its own and hands them to :class:`~bridge.serve.driver.Driver`.

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
- :class:`~bridge.serve.driver.Driver`, built by :func:`build_driver`: performs the recovery
  policy's actions with the four.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..app.discovery import Endpoint
from ..app.launcher import Launcher, default_lock_path
from ..app.tokens import EnvTokenSource, token_source_for
from ..app.tokenstore import TokenStore
from ..core.config import BridgeConfig
from ..streamable.upstream import Upstream
from ..streamable.headers import USER_AGENT
from ..transport import AuthRouteClient
from ..transport.byscheme import ByScheme
from ..transport.verifiedconnect import verified_probe
from .driver import Driver

if TYPE_CHECKING:
    import httpx

__all__ = ["Parts", "build_parts", "build_driver"]


@dataclass(frozen=True)
class Parts:
    """The parts one run of the bridge is made of (see the module docstring)."""

    endpoint: Endpoint
    tokens: TokenStore
    upstream: Upstream
    launcher: Launcher


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
    # The listener check, once per new `http://` connection and before a token source sends
    # a secret; an injected transport is a test's stand-in, with no socket to check.
    listener_check = None
    if config.verify_listener and http_transport is None:
        from ..app.listener import ListenerCheck

        listener_check = ListenerCheck(endpoint.listener_pid, app_name=config.app_name)
    transport = ByScheme(
        config.url,
        max_connections=config.max_concurrent_requests + 2,  # + the GET stream and DELETE
        connect_timeout_seconds=config.connect_timeout_seconds,
        pool_timeout_seconds=config.request_timeout_seconds,
        write_timeout_seconds=config.request_timeout_seconds,
        injected=http_transport,
        verify_connection=listener_check.verify_connection if listener_check is not None else None,
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
            verify_connection=listener_check.verify_connection if listener_check is not None else None,
            user_agent=USER_AGENT,
        ),
    )
    configured = config.launch_command is not None or config.ensure_running is not None
    lock_key = f"{config.app_name}|{config.url}|{config.discovery_file}|{config.launch_command}"
    launcher = Launcher(
        endpoint,
        command=config.launch_command,
        ensure_running=config.ensure_running,
        timeout_seconds=config.launch_timeout_seconds,
        app_name=config.app_name,
        lock_path=default_lock_path(lock_key) if configured else None,
        log_file=config.launch_log_file,
        # Whether the app is up, by the road every connection takes: an address whose
        # listener is not the app's does not count (another user on [::1] must not keep the
        # app from being started on 127.0.0.1).
        probe=app_probe or verified_probe(listener_check.verify_connection if listener_check is not None else None),
        secret_variables=[source.variable] if isinstance(source, EnvTokenSource) else [],
    )
    return Parts(endpoint=endpoint, tokens=tokens, upstream=upstream, launcher=launcher)


def build_driver(
    config: BridgeConfig,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
    app_probe: Callable[[str], Awaitable[bool]] | None = None,
    on_session_rebuilt: Callable[[], Awaitable[None]] | None = None,
) -> Driver:
    """A :class:`~bridge.serve.driver.Driver` over the parts of :func:`build_parts` (same arguments);
    ``on_session_rebuilt`` is awaited after every successful session rebuild."""
    parts = build_parts(config, http_transport=http_transport, app_probe=app_probe)
    return Driver(
        parts.upstream,
        parts.tokens,
        parts.launcher,
        parts.endpoint,
        app_name=config.app_name,
        on_session_rebuilt=on_session_rebuilt,
    )
