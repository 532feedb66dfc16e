"""``mcp-app-bridge check``: walk the path an AI client's request takes, and say where it breaks.

Steps, each printed with ✓ or ✗, its time and, on failure, the likely fix:

1. **endpoint** — the ``--url``, or the discovery file (and whether its pid lives);
   **launch** — with ``--launch``, whether its program still exists here (an app updated or
   moved to another install folder leaves an entry pointing at nothing: the bridge could
   not start the app once it is down, even while it runs now);
   **catalog** — with a launcher, the catalog the app last served (lazy launch,
   ``bridge/app/servedcatalog.py``): the app version in it and its age, or that none is cached;
2. **connect** — a connection to the endpoint made as the bridge makes each one
   (``bridge/transport/verifiedconnect.py``: each address in turn, the listener check on
   that very connection), so ✓ means a connection the bridge would send on, and a failure
   names the cause the bridge would (the same message and reason). If the app is not
   running and a launcher is configured, it is started exactly as the bridge would start
   it (a started process that does not accept connections within the launch timeout is
   stopped again: the check leaves no child behind);
   **listener** — what the listener check found (this user's socket, held by the
   discovery file's pid; the addresses skipped), or, when it refused, whose listener it is;
3. **token** — the configured token source (its name and the token's length, never the
   token itself);
4. **initialize**, **tools/list**, **ping** — real MCP requests through the same driver the
   bridge uses (token refresh, relaunch, session rebuild included); the tools are listed,
   every page of them (**pages** ✗: a cursor repeats), with what the tool filter hides and
   why (**tool filter** ✗: it leaves no tool), and what each client's limits would cost
   (``bridge/cli/toolreport.py``);
5. the MCP session is closed again (``DELETE``).

The report goes to stdout (this is not the stdio bridge); colour only on a terminal.
Exit status 0 when every step passed, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from ..app.discovery import DiscoveryError, pid_is_alive, unpublished_app_hint
from ..core.config import BridgeConfig, in_sentence
from ..core.errors import AppUnreachableError, HTTPStatusError, UpstreamError
from ..core.jsonrpc import INITIALIZED_BODY, Request, encode_message
from ..serve.parts import Stack, build_stack, connection_checks
from ..streamable.failures import map_transport_errors
from ..transport.verifiedconnect import open_verified_socket

__all__ = ["run_check", "FIXES"]

#: The likely fix for each failure reason, shown under a ✗.
FIXES: dict[str, str] = {
    "app_unreachable": "Start the app (or give --launch CMD so the bridge can start it), and check --url / --app-name.",
    "app_launch_failed": "Run the --launch command by hand to see why the app does not start or listen.",
    "auth_rejected": "Check the token source: the app rejected the token, or no token could be read.",
    "timeout": "The app did not answer in time: check that it is healthy, or raise --request-timeout.",
    "http_status": "The app refused the request: check that --url is its MCP endpoint (often …/mcp).",
    "bad_upstream_response": "The answer was not MCP: check that --url is the app's MCP endpoint.",
    "stream_closed": "The app dropped the connection: check the app's own log.",
    "session_lost": "The app forgot the session: restart the app and run the check again.",
    "message_too_large": "Raise --max-message-bytes.",
    "shutting_down": "Run the check again.",
    "listener_unverified": (
        "Something other than the app holds its port: stop it, or start the app on another port. "
        "If the app runs as another user or in a container on purpose, give --no-verify-listener."
    ),
}
#: The fix for HTTP 421 Misdirected Request (RFC 9110 §15.5.20): the app's Host check (the
#: official MCP Python SDK's DNS-rebinding protection, for one) refused the Host header.
HOST_REFUSED_FIX = (
    "The app refused the Host header the bridge sent (HTTP 421): over a Unix socket that is 'localhost', "
    "over TCP the --url's host and port. Allow it in the app; with the official MCP Python SDK, pass "
    'transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=["localhost", '
    '"127.0.0.1:*", "localhost:*", "[::1]:*"], allowed_origins=[...]) (the whole block is in the docs: '
    'For Python apps, "On a Unix domain socket").'
)
#: The fix for ``listener_unverified`` when the app's link is a Unix socket.
PIPE_LISTENER_FIX = (
    "Something other than the app serves its named pipe (another user's process, or not the pid its discovery file "
    "names): stop it and start the app again. If the app runs as another user on purpose, give --no-verify-listener."
)
UNIX_LISTENER_FIX = (
    "Something other than the app holds its socket, or the socket's folder is not private: fix what the message "
    "names (a folder group or others may write to: chmod go-w it; another process's socket: stop that process) and "
    "start the app again. If the app runs as another user on purpose, give --no-verify-listener."
)

Echo = Callable[[str], None]


class _Report:
    def __init__(self, echo: Echo, style: Callable[..., str]) -> None:
        self._echo = echo
        self._style = style
        self.failed = False

    def step(self, name: str, ok: bool, detail: str, seconds: float, fix: str | None = None) -> None:
        mark = self._style("✓", fg="green") if ok else self._style("✗", fg="red", bold=True)
        self._echo(f"{mark} {name:<11} {detail}  ({seconds * 1000:.0f} ms)")
        if not ok:
            self.failed = True
            if fix:
                self._echo(f"  {self._style('fix:', bold=True)} {fix}")

    def line(self, text: str) -> None:
        self._echo(f"  {text}")


async def run_check(config: BridgeConfig, echo: Echo, style: Callable[..., str]) -> bool:
    """Run every step against the app; return whether all passed.

    Args:
        config: the bridge options to check (as the AI client's entry would give them).
        echo: writes one line of the report.
        style: ``click.style``-like colouring (the caller decides whether colour shows).
    """
    report = _Report(echo, style)
    stack = build_stack(config)
    try:
        await _walk(config, stack, report)
    finally:
        await _to_the_end(_close(stack))
    echo("")
    echo(style("all checks passed", fg="green") if not report.failed else style("the check failed", fg="red", bold=True))
    return not report.failed


async def _walk(config: BridgeConfig, stack: Stack, report: _Report) -> None:
    started = time.monotonic()
    endpoint = stack.parts.endpoint
    endpoint.reload()
    try:
        url = endpoint.url()
        where = "--url" if config.url else f"discovery file {endpoint.discovery_file}"
        detail = f"{url} (from {where})"
        discovery = endpoint.discovery
        if discovery is not None and discovery.pid is not None:
            detail += f", app pid {discovery.pid} " + ("running" if pid_is_alive(discovery.pid) else "not running")
        report.step("endpoint", True, detail, time.monotonic() - started)
    except DiscoveryError as exc:
        startable = exc.missing and stack.parts.launcher.configured
        fix = FIXES["app_unreachable"] if exc.missing else (
            "Fix the discovery file as the message says: mode 0600, owned by you, its url on 127.0.0.1 or [::1]."
        )
        detail = str(exc)
        hint = unpublished_app_hint(config.app_name, config.discovery_file) if exc.missing and config.url is None else None
        if hint is not None:
            detail += f" ({hint})"
        report.step("endpoint", startable, detail + ("; the bridge will start the app" if startable else ""),
                    time.monotonic() - started, None if startable else fix)
        if not startable:
            return

    _launch_program_step(config, report)
    _catalog_step(config, stack, report)
    if not await _connect_step(config, stack, report):
        return

    started = time.monotonic()
    source = stack.parts.tokens.source_description
    try:
        token = (await stack.parts.tokens.current(stack.parts.upstream.token_context()))[0]
        detail = f"from {source}, {len(token)} characters" if token else "none configured (the app must not need one)"
        report.step("token", True, detail, time.monotonic() - started)
    except UpstreamError as exc:
        report.step("token", False, exc.message, time.monotonic() - started, FIXES.get(str(exc.reason)))
        return

    result = await _request(stack, report, "initialize", {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "mcp-app-bridge check", "version": "1"},
    })
    if result is None:
        return
    server = result.get("serverInfo") or {}
    version = f" {server['version']}" if server.get("version") else ""
    translated = stack.top.translating_for_legacy_client
    era = " (the app serves MCP 2026-07-28 only; the bridge translates for 2025-era clients)" if translated else ""
    report.line(f"server {server.get('name', '?')}{version}, protocol {result.get('protocolVersion')}{era}")
    try:
        await stack.top.deliver(INITIALIZED_BODY, "notification notifications/initialized")
    except UpstreamError as exc:
        report.step("initialized", False, exc.message, 0.0, _fix_for(exc))
        return
    tools = await _request(stack, report, "tools/list", {})
    if tools is None:
        return
    if not await _tools_step(config, stack, report, tools):
        return
    await _request(stack, report, "ping", None)


async def _tools_step(config: BridgeConfig, stack: Stack, report: _Report, first: dict[str, Any]) -> bool:
    """The app's whole list (every page), what the tool filter hides and why, and what each
    client's limits cost (``bridge/cli/toolreport.py``). False when a later page failed."""
    from ..clients.limits import CLIENT_LIMITS, client_losses, longest_server_key, too_long_alone
    from .toolreport import filter_report, follow_pages

    pages = 0

    async def ask(method: str, params: Any) -> dict[str, Any]:
        nonlocal pages
        pages += 1
        page = await _request(stack, report, f"tools/list page {pages + 1}", params, method=method, quiet=True)
        if page is None:
            raise ValueError("a page failed")
        return page

    try:
        listed, repeated = await follow_pages(ask, first)
    except (UpstreamError, ValueError):
        return False
    names = [tool.get("name", "?") for tool in listed if isinstance(tool, dict)]
    in_pages = f" (in {pages + 1} pages)" if pages else ""
    report.line(f"{len(names)} tool{'' if len(names) == 1 else 's'}{in_pages}: {', '.join(names) if names else '(none)'}")
    if pages:
        from ..clients.clienttable import CLIENT_INFO, DROPS_LIST_PAGES

        titles = ", ".join(CLIENT_INFO[client].title for client in DROPS_LIST_PAGES)
        report.line(
            f"the app sends its tools in pages (its first page has a nextCursor): a client that reads only the first "
            f"page never sees the others; {titles} need --merge-list-pages in their entry "
            f"(docs/clients.md, \"Lists in pages\")"
        )
    if repeated is not None:
        report.step("pages", False, f"the app gives the cursor {repeated[:40]!r} twice: its list loops", 0.0,
                    "Fix the app's tools/list paging: each nextCursor must lead to the next page.")
    lines, shown, problem = filter_report(config, listed)
    for line in lines:
        report.line(line)
    if problem is not None:
        report.step("tool filter", False, problem, 0.0,
                    "Check the --allow-tool globs against the names above (case-sensitive), or drop --read-only.")
    fits: list[str] = []
    for client, limits in CLIENT_LIMITS.items():
        if client == "claude-code-user":
            continue  # (Claude Code's limits, once)
        for loss in client_losses(client, "", shown):
            if loss.what != "name":
                report.line(f"{limits.title}: {loss.tool!r}: {loss.detail}")
        longest = longest_server_key(client, shown)
        if longest is not None:
            fits.append(f"{limits.title} {longest}")
        alone = too_long_alone(client, shown)
        if alone:
            report.line(f"{limits.title}: too long whatever the entry's name: {', '.join(repr(name) for name in alone)}")
    if fits:
        report.line("longest entry name (--name) that keeps every tool name within the client's limit: " + ", ".join(fits))
    return True


def _launch_program_step(config: BridgeConfig, report: _Report) -> None:
    """``--launch``'s program: ✗ when it no longer exists or cannot be run."""
    if not config.launch_command:
        return
    import os
    import shutil

    program = config.launch_command[0]
    if not any(sep in program for sep in (os.sep, os.altsep) if sep):
        found = shutil.which(program)
        problem = None if found else f"the --launch program {program!r} is not on PATH here"
        path = found or program
    else:
        path = os.path.abspath(program)
        problem = None
        if not os.path.exists(path):
            problem = f"the --launch program {path} no longer exists"
        elif os.path.isdir(path) or (os.name == "posix" and not os.access(path, os.X_OK)):
            problem = f"the --launch program {path} is not an executable file"
    if problem is None:
        report.step("launch", True, f"program {path}", 0.0)
        from ..clients.stablepath import stable_path

        for remark in stable_path(path, what="the --launch program")[1]:
            report.line(remark)
    else:
        report.step("launch", False, problem + "; the bridge cannot start the app with it", 0.0,
                    "Point --launch at the app's stable launcher (not a versioned install folder), "
                    "then install the client's entry again (config install).")


def _catalog_step(config: BridgeConfig, stack: Stack, report: _Report) -> None:
    """What a client's start-up is answered from while the app is down (lazy launch)."""
    catalog = stack.parts.catalog
    if catalog is None:
        return  # no launcher: nothing is started lazily, no catalog is kept
    from ..core.lazylaunch import app_version

    started = time.monotonic()
    age = catalog.age_seconds()
    if age is None:
        detail = f"none cached yet at {catalog.path}: the next client start launches the app"
    else:
        version = app_version(catalog.entry()) or "(no version)"
        detail = f"app version {version}, written {_age(age)} ago ({catalog.path}); --launch-policy {config.launch_policy}"
    report.step("catalog", True, detail, time.monotonic() - started)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


async def _request(
    stack: Stack, report: _Report, step: str, params: Any, *, method: str | None = None, quiet: bool = False
) -> dict[str, Any] | None:
    """One request through the stack, reported as ``step`` (its method, unless ``method``
    says); ``quiet``: only a failure is reported. Its result, or ``None`` when it failed."""
    method = method or step
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": f"check-{step.replace(' ', '-')}", "method": method}
    if params is not None:
        message["params"] = params
    request = Request(message["id"], method, params, encode_message(message)[:-1])
    started = time.monotonic()

    async def ignore(line: bytes, message: Any = None) -> None:
        return None

    try:
        line = await stack.top.request(request, ignore)
    except UpstreamError as exc:
        report.step(step, False, exc.message, time.monotonic() - started, _fix_for(exc))
        return None
    reply = json.loads(line)
    if "error" in reply:
        error = reply["error"]
        report.step(step, False, f"the app answered error {error.get('code')}: {error.get('message')}",
                    time.monotonic() - started, "Check the app's own log for this error.")
        return None
    if not quiet:
        report.step(step, True, "ok", time.monotonic() - started)
    result = reply.get("result")
    return result if isinstance(result, dict) else {}


def _fix_for(exc: UpstreamError) -> str | None:
    """The likely fix for a failed MCP request: by reason, and for HTTP 421 the Host check's."""
    if isinstance(exc, HTTPStatusError) and exc.http_status == 421:
        return HOST_REFUSED_FIX
    return FIXES.get(str(exc.reason))


async def _connect_step(config: BridgeConfig, stack: Stack, report: _Report) -> bool:
    """Connect as the bridge does; start the app first if it is not running and can be."""
    started = time.monotonic()
    endpoint = stack.parts.endpoint
    outcome = await _verified_connect(config, stack)
    launched = False
    if isinstance(outcome, AppUnreachableError) and outcome.recoverable:
        # What the bridge's recovery policy does next (bridge/core/policy.py): make sure the
        # app runs (start it, if a launcher is configured), then connect once more.
        try:
            await stack.parts.launcher.ensure_running()
        except UpstreamError as exc:
            # A diagnostic leaves nothing behind: the child it started and that did not
            # listen in time is stopped (the bridge itself leaves a launched app running).
            stopped = stack.parts.launcher.stop_unready_child()
            message = exc.message
            if stopped:  # then say what the check did, not what the bridge would do next
                cause = stack.parts.launcher.failure_cause or exc.message
                message = f"{cause} The check stopped the process it started (pid {stopped})."
            report.step("connect", False, message, time.monotonic() - started, FIXES.get(str(exc.reason)))
            return False
        launched = stack.parts.launcher.configured
        outcome = await _verified_connect(config, stack)
    if isinstance(outcome, UpstreamError):
        step = "listener" if outcome.reason == "listener_unverified" else "connect"
        fix = FIXES.get(str(outcome.reason))
        if step == "listener" and _is_unix_endpoint(stack):
            fix = PIPE_LISTENER_FIX if _endpoint_url(stack).startswith("npipe:") else UNIX_LISTENER_FIX
        report.step(step, False, outcome.message, time.monotonic() - started, fix)
        return False
    url, address, skipped = outcome
    if launched:
        pid = stack.parts.launcher.started_pid
        what = f"started {in_sentence(config.app_name)}" + (f" (pid {pid}; it keeps running, as the bridge leaves it)" if pid else "")
        report.step("connect", True, f"{what} and it accepts connections at {url}", time.monotonic() - started)
    else:
        report.step("connect", True, "the app accepts connections", time.monotonic() - started)
    check = stack.parts.upstream.listener_check
    if url.startswith("http+unix:"):  # the link is a Unix socket: the OS names its peer
        return _unix_link_step(config, stack, report, url)
    if url.startswith("npipe:"):  # the link is a named pipe: Windows names its server
        return _pipe_link_step(config, stack, report, url)
    if check is None or not url.startswith("http:"):
        why = "off (--no-verify-listener)" if not config.verify_listener else "not needed for https:// (TLS verifies the app)"
        report.step("listener", True, why, 0.0)
        return True
    pid = endpoint.listener_pid(urlsplit(url).port or 80)
    detail = "a socket of this user's" + (f", held by the app's pid {pid} (or a child)" if pid is not None else "")
    if skipped:
        detail += f", at {address}; skipped {', '.join(skipped)}: not the app's (nothing is sent there)"
    report.step("listener", True, detail, 0.0)
    return True


def _endpoint_url(stack: Stack) -> str:
    try:
        return stack.parts.endpoint.url()
    except DiscoveryError:
        return ""


def _is_unix_endpoint(stack: Stack) -> bool:
    """Whether the endpoint is a local link the OS names the peer of (a Unix socket or a named pipe)."""
    return _endpoint_url(stack).startswith(("http+unix:", "npipe:"))


def _unix_link_step(config: BridgeConfig, stack: Stack, report: _Report, url: str) -> bool:
    """The ``listener`` step on a Unix domain socket: the link used, and what the connect
    step checked on it (``bridge/transport/unixlink.py``, ``bridge/app/unixpeer.py``)."""
    from ..core.unixurl import split_unix_url

    path = split_unix_url(url)[0]
    if not config.verify_listener:
        report.step("listener", True, f"Unix socket {path}; not checked (--no-verify-listener)", 0.0)
        return True
    described = stack.parts.endpoint.discovery_for_socket(path)
    pid = described.pid if described is not None else None
    detail = (f"Unix socket {path}: the file is this user's socket in a private folder; its peer, as the OS says, "
              "runs as this user" + (f" and is the app's pid {pid} (or a child), started when the discovery file says" if pid else ""))
    report.step("listener", True, detail, 0.0)
    return True


def _pipe_link_step(config: BridgeConfig, stack: Stack, report: _Report, url: str) -> bool:
    """The ``listener`` step on a named pipe: the link used, and what the connect step
    checked on it (``bridge/transport/pipelink.py``, ``bridge/app/pipepeer.py``)."""
    from ..core.pipeurl import split_pipe_url

    pipe = split_pipe_url(url)[0]
    if not config.verify_listener:
        report.step("listener", True, f"named pipe {pipe}; not checked (--no-verify-listener)", 0.0)
        return True
    described = stack.parts.endpoint.discovery_for_pipe(pipe)
    pid = described.pid if described is not None else None
    detail = (f"named pipe {pipe}: its server, as Windows says, runs as this user"
              + (f" and is the app's pid {pid}, started when the discovery file says" if pid else ""))
    report.step("listener", True, detail, 0.0)
    return True


async def _verified_connect(config: BridgeConfig, stack: Stack) -> tuple[str, str, tuple[str, ...]] | UpstreamError:
    """One connection to the endpoint as the bridge's pool makes it (the same function, the
    same listener or peer check, the same time bound, the same error table), closed unused:
    ``(url, address, skipped addresses)``, or the error the bridge would report."""
    try:
        url = stack.parts.endpoint.url()
    except DiscoveryError as exc:
        if exc.missing:
            return AppUnreachableError(f"{config.app_name} is not running ({exc}).")
        return AppUnreachableError(f"{config.app_name} cannot be reached: {exc}.", recoverable=False)
    verify = None
    if stack.parts.upstream.listener_check is not None and not url.startswith("https:"):  # TLS verifies an https:// app
        verify = connection_checks(config, stack.parts.endpoint)[1]
    try:
        with map_transport_errors(config.app_name):
            sock, address, skipped = await open_verified_socket(url, verify=verify, timeout_seconds=config.connect_timeout_seconds)
    except UpstreamError as exc:
        return exc
    sock.close()
    return url, address, skipped


async def _close(stack: Stack) -> None:
    await stack.top.terminate_session()
    await stack.top.aclose()


async def _to_the_end(cleanup: Awaitable[None]) -> None:
    """Run ``cleanup`` (bounded inside) to its end in a task of its own, even if this task
    is cancelled meanwhile (a Ctrl-C during the check); then re-raise that cancellation.
    Its own task starts with no cancel request pending, so the timeouts inside it behave
    as they do anywhere else."""
    task = asyncio.ensure_future(cleanup)
    interrupted = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            interrupted = True
    task.result()
    if interrupted:
        raise asyncio.CancelledError
