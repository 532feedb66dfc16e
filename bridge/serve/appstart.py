"""The running-app start: a client's first ``initialize`` answered by the running app before
asyncio and the serving loop are loaded (docs/behaviour.md, "Start-up"), the sibling of the
catalog start (``bridge/serve/catalogstart.py``).

A client waits for its ``initialize`` reply before anything else, and most of a start's time
goes to loading the serving machinery (asyncio alone is about a third of it:
bench/README.md, "Start-up"). So, in the plain case, :func:`answer_start_from_app` reads the
client's first line and, when it is a 2025-era ``initialize``, sends it to the running app
on a blocking socket, with the serving loop's own parts, in the loop's order:

1. the endpoint from ``--url`` or the discovery file (:class:`~bridge.app.discovery.Endpoint`);
2. the token from the source the loop would use (:func:`~bridge.app.tokens.token_source_for`),
   only one that answers without waiting (a fixed token, the discovery file's, an
   environment variable, a token file);
3. one connection, checked before a byte is written (unless ``--no-verify-listener``, which
   turns every check here off, as for the loop), as ``transport/verifiedconnect.py`` does
   with the loop's pool:

   - ``http://``: TCP to the endpoint's loopback IP literal, then the listener check
     (:meth:`~bridge.app.listener.ListenerCheck.verify_socket`) on that very socket;
   - ``http+unix://`` (the default link of the example app and of ``bridge.appserver`` on
     Linux and macOS): the socket file first
     (:func:`~bridge.transport.socketfile.check_socket_file`: not a link, this user's
     socket, in a folder nobody else may write to), then an ``AF_UNIX`` connect, then the
     peer check (:meth:`~bridge.app.unixpeer.UnixPeerCheck.verify_socket`: this user's
     process, the discovery file's pid) on that very socket: the loop's checks in the
     order ``transport/unixlink.py`` and ``serve/parts.py`` make them. The socket-file
     check has a module of its own with no asyncio import for this start;
4. the request with the headers of :func:`~bridge.streamable.headers.request_headers` and
   the client's bytes as the body, encoded by the sans-I/O ``transport/http1.py``;
5. the reply read with ``http1.ResponseParser`` and the pure decoders the loop uses
   (``bridge/core/sse.py``, ``bridge/streamable/answers.py``), the whole exchange within
   :data:`APP_START_BOUND_SECONDS` (the connect also within ``--connect-timeout``).

Only a ``200`` whose first message is the ``initialize`` result is written to stdout, as the
serving loop would write it (byte for byte). Anything else (the app down or a stale socket
file nobody listens on, a link or socket file not verified, a 401, an error status, an
error reply such as a 2026-07-28-only app's refusal, a message before the response, a slow
app, anything unexpected) writes nothing: the line is handed to the serving loop as read, and the loop does everything as without this start
(launch, token refresh, era translation); the app may then see that ``initialize`` twice.

After a reply is written, the serving loop adopts the MCP session it opened
(:meth:`~bridge.serve.driver.Driver.adopt_initialize`): the ``initialize`` line is dispatched
through the request stack as if just read, the driver answers it with the adopted reply
(setting the session's id, protocol version and capabilities, and keeping the request for
a session rebuild) instead of sending it again, and the reply is not written again. Lazy
launch, above the driver, sees that reply as the app's and keeps it in the catalog as it
keeps any (``bridge/serve/lazy.py``). The connection is closed (the loop opens its own).
With a launch command, this start runs only when the catalog start did not apply (the app
is not known to be down): an app found down here is the loop's to start.

It applies only when all of these hold, and otherwise returns ``None`` before reading:
POSIX; ``--protocol-era auto``; no tool filter (``--allow-tool``, ``--deny-tool``,
``--read-only``); no ``token_source`` of a library app
(its token may come from anywhere); an ``http://`` endpoint whose host is a loopback IP
literal (a name such as ``localhost`` is resolved by the loop, which tries each address),
or an ``http+unix://`` one (``npipe://`` and ``https://`` are the loop's). A refusal
(:class:`~bridge.core.errors.ListenerUnverifiedError`) is never reported here: the loop
makes the same check again and reports it as it always did.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.config import BridgeConfig
from ..core.errors import InboundError
from ..core.jsonrpc import Request, classify
from .catalogstart import CATALOG_START_IDLE_SECONDS, CatalogStart, read_line, write_all

if TYPE_CHECKING:
    from ..app.discovery import Endpoint

__all__ = ["APP_START_BOUND_SECONDS", "AppStart", "answer_start_from_app"]

#: The bound on the whole exchange with the app (connect, check, request, reply), in seconds.
#: An app slower than this is left to the serving loop, which sends the ``initialize`` again
#: under ``--request-timeout``.
APP_START_BOUND_SECONDS = 1.0
_MAX_LINE_BYTES = 1024 * 1024
_RECV_BYTES = 64 * 1024


class AppStart(CatalogStart):
    """What the running-app start read (``answered``, ``rest``: as :class:`CatalogStart`)
    and, when it answered the ``initialize`` (then ``answered`` holds its line), the MCP
    session it opened: ``request_id`` (the client's id), ``line`` (the stdout line written),
    ``result`` (the reply's ``result``) and ``headers`` (the HTTP response's fields:
    ``get(name)``, ``mcp-session-id``)."""

    __slots__ = ("request_id", "line", "result", "headers")

    def __init__(
        self, answered: list[bytes], rest: bytes, *, request_id: Any = None, line: bytes = b"", result: Any = None, headers: Any = None
    ) -> None:
        super().__init__(answered, rest)
        self.request_id = request_id
        self.line = line
        self.result = result
        self.headers = headers


class _NotHere(Exception):
    """The start leaves the line to the serving loop (nothing was written to stdout)."""


def answer_start_from_app(
    config: BridgeConfig, *, read_fd: int = 0, write_fd: int = 1, idle_seconds: float = CATALOG_START_IDLE_SECONDS
) -> AppStart | None:
    """Answer the client's first ``initialize`` from the running app, as the module docstring
    says; return what was read for the serving loop, or ``None`` when the start does not
    apply (nothing was read then). Never raises for anything the app or the client does."""
    if sys.platform == "win32" or not _applies(config):
        return None
    os.set_blocking(read_fd, True)
    os.set_blocking(write_fd, True)
    buffer, end = read_line(read_fd, b"", idle_seconds)
    if end < 0:
        return AppStart([], buffer)
    line = buffer[:end].rstrip(b"\r")
    try:
        message = classify(line)
    except (InboundError, ValueError):
        return AppStart([], buffer)
    if not isinstance(message, Request) or message.method != "initialize" or not message.era.may_rebuild:
        return AppStart([], buffer)
    try:
        reply, result, headers = _exchange(config, message)
    except Exception as exc:  # (anything: the serving loop does it all again, and says why if it fails)
        import logging

        logging.getLogger("bridge").debug("the running-app start left initialize to the serving loop: %s", exc)
        return AppStart([], buffer)
    write_all(write_fd, reply)  # (a client gone: the serving loop sees the same)
    return AppStart([line], buffer[end + 1 :], request_id=message.id, line=reply, result=result, headers=headers)


def _applies(config: BridgeConfig) -> bool:
    return (
        config.protocol_era == "auto"
        and not (config.allow_tools or config.deny_tools or config.read_only)
        and config.token_source is None
    )


def _exchange(config: BridgeConfig, request: Request) -> tuple[bytes, Any, Any]:
    """POST ``request`` to the running app; return the stdout line, the ``result`` and the
    response's fields. Raises for anything but a ``200`` whose response is a result."""
    import ipaddress

    from ..app.discovery import Endpoint
    from ..app.tokens import (
        DiscoveryTokenSource,
        EnvTokenSource,
        FileTokenSource,
        FixedTokenSource,
        TokenContext,
        header_safe,
        token_source_for,
    )
    from ..core.unixurl import is_unix_url
    from ..streamable.headers import JSON_MEDIA_TYPE, SSE_MEDIA_TYPE, request_headers
    from ..transport.http1 import parse_url

    deadline = time.monotonic() + APP_START_BOUND_SECONDS
    endpoint = Endpoint(url=config.url, discovery_file=config.discovery_file)
    url = endpoint.url()  # (DiscoveryError: the app is not running, or its file is refused)
    unix = is_unix_url(url)
    if not unix and not url.startswith("http://"):
        raise _NotHere("not an http:// or http+unix:// endpoint")
    (host, port), target, authority = parse_url(url)  # (http+unix://: host is the socket's path)
    if not unix and not ipaddress.ip_address(host).is_loopback:  # (ValueError: a name, which the loop resolves)
        raise _NotHere("not a loopback IP literal")
    source = token_source_for(config, endpoint)
    if source is not None and not isinstance(source, (FixedTokenSource, DiscoveryTokenSource, EnvTokenSource, FileTokenSource)):
        raise _NotHere("a token source that may wait")
    token = None if source is None else _now(source.fetch(TokenContext(base_url=url)))
    if token is not None and not header_safe(token):
        raise _NotHere("a token that is not printable ASCII")  # (the loop's token store says so)
    headers = request_headers(config, token)
    headers["Content-Type"] = JSON_MEDIA_TYPE
    sock = _connect_unix(config, endpoint, host, deadline) if unix else _connect_tcp(config, endpoint, (host, port), deadline)
    try:
        return _post(sock, config, request, (target, authority, headers), deadline, (JSON_MEDIA_TYPE, SSE_MEDIA_TYPE))
    finally:
        sock.close()


def _connect_tcp(config: BridgeConfig, endpoint: Endpoint, address: tuple[str, int], deadline: float) -> socket.socket:
    """A blocking TCP socket connected to ``address`` (a loopback IP literal and its port),
    its listener checked (unless ``--no-verify-listener``) before a byte is written, as
    ``transport/verifiedconnect.py`` checks the loop's."""
    verify = None
    if config.verify_listener:  # the loop's check, on this very socket
        from ..app.listener import ListenerCheck

        listener = ListenerCheck(endpoint.listener_pid, app_name=config.app_name)

        def verify(sock: socket.socket) -> None:  # (within this start's bound: psutil may wait for the accept)
            listener.verify_socket(sock, wait_seconds=deadline - time.monotonic())

    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    return _connected(socket.socket(family, socket.SOCK_STREAM), address, config, deadline, verify)


def _connect_unix(config: BridgeConfig, endpoint: Endpoint, path: str, deadline: float) -> socket.socket:
    """A blocking ``AF_UNIX`` socket connected to ``path``, with the loop's checks in the
    loop's order (``transport/unixlink.py``, ``serve/parts.py``), unless
    ``--no-verify-listener``: the socket file (:func:`~bridge.transport.socketfile.check_socket_file`),
    then the connect, then the peer on that very socket
    (:meth:`~bridge.app.unixpeer.UnixPeerCheck.verify_socket`), before a byte is written.
    Raises ``ConnectFailed`` (no socket there, or nobody listens: a stale socket of a dead
    run, the loop may launch) and ``ListenerUnverifiedError`` (refused, which the loop reports)."""
    verify = None
    if config.verify_listener:
        from ..app.unixpeer import UnixPeerCheck
        from ..transport.socketfile import check_socket_file

        check_socket_file(path)
        verify = UnixPeerCheck(endpoint.discovery_for_socket, app_name=config.app_name, refresh=endpoint.reload).verify_socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # type: ignore[attr-defined,unused-ignore]  # POSIX only
    return _connected(sock, path, config, deadline, verify)


def _connected(
    sock: socket.socket, address: Any, config: BridgeConfig, deadline: float, verify: Callable[[socket.socket], None] | None
) -> socket.socket:
    """``sock`` connected to ``address`` within the connect timeout and what is left of the
    start's bound, then ``verify(sock)`` (``None``: not checked) before a byte is written.
    Raises for anything else; ``sock`` is then closed."""
    try:
        sock.settimeout(max(min(config.connect_timeout_seconds, deadline - time.monotonic()), 0.001))
        sock.connect(address)
        if verify is not None:
            verify(sock)
        if sock.family != getattr(socket, "AF_UNIX", None):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def _now(fetching: Any) -> Any:
    """The value of a coroutine that finishes without waiting (a token source's ``fetch``
    that reads a file or a variable); one that would wait is closed and refused."""
    try:
        fetching.send(None)
    except StopIteration as done:
        return done.value
    fetching.close()
    raise _NotHere("the token source waits")


def _post(
    sock: socket.socket, config: BridgeConfig, request: Request, where: tuple[str, str, dict[str, str]], deadline: float, kinds: tuple[str, str]
) -> tuple[bytes, Any, Any]:
    from ..core import sse
    from ..streamable.answers import answer_from_event, answer_from_json, parse_reply
    from ..transport.http1 import END, NEED_DATA, Data, Head, ResponseParser, encode_request_head

    target, authority, headers = where
    sock.settimeout(max(deadline - time.monotonic(), 0.001))
    sock.sendall(encode_request_head("POST", target, authority, headers.items(), len(request.body)) + request.body)
    parser = ResponseParser("POST")

    def next_event() -> Any:
        while (event := parser.next_event()) is NEED_DATA:
            if parser.eof:
                raise _NotHere("the connection ended")
            left = deadline - time.monotonic()
            if left <= 0:
                raise _NotHere("the app did not answer in time")
            sock.settimeout(left)
            parser.receive_data(sock.recv(_RECV_BYTES))
        return event

    head = next_event()
    assert isinstance(head, Head)
    kind = (head.headers.get("content-type") or "").partition(";")[0].strip().lower()
    if head.status_code != 200 or kind not in kinds:
        raise _NotHere(f"HTTP {head.status_code} {kind}")
    app = config.app_name
    if kind == kinds[0]:  # application/json
        body = bytearray()
        while (event := next_event()) is not END:
            assert isinstance(event, Data)
            body += event.data
            if len(body) > config.max_message_bytes:
                raise _NotHere("a reply over --max-message-bytes")
        extras: list[tuple[bytes, Any]] = []
        line, message = answer_from_json(app, request, bytes(body) + b"\n", extras)
        if extras:
            raise _NotHere("a batch")
    else:
        decoder = sse.SSEDecoder(config.max_message_bytes, "")
        found = None
        while found is None:
            event = next_event()
            decoder.receive_data(b"" if event is END else event.data)
            while found is None and (item := decoder.next_event()) is not sse.NEED_DATA:
                if item is sse.EOF:
                    raise _NotHere("the stream ended before the response")
                if not isinstance(item, sse.Event):
                    continue
                raw = item.data_with_newline
                if item.event_type != "message" or not raw or raw.isspace():
                    continue
                value, twice = parse_reply(app, raw)
                if not isinstance(value, dict):
                    raise _NotHere("not one message")
                from ..core.jsonrpc import to_wire_line

                found = answer_from_event(request, to_wire_line(raw, value, twice=twice), value)
                if found is None:
                    raise _NotHere("a message before the response")  # (the loop relays those)
        line, message = found
    if not isinstance(message.get("result"), dict):
        raise _NotHere("an error reply")  # a 2026-07-28-only app's refusal among them: the era router decides
    return line, message["result"], head.headers
