"""``mcp-app-bridge check --client codex``: ask Codex itself whether its MCP servers connected.

``codex mcp list`` shows only whether an entry is *enabled*. Codex's own answer to "did it
start, and what tools did it list" comes from ``codex app-server``, the JSON-RPC interface
its IDE extensions use: newline-delimited JSON-RPC on stdin/stdout, with no ``jsonrpc``
member (Codex's app-server protocol, ``codex-rs/app-server-protocol`` in openai/codex).
This module runs it in the current folder, as Codex would start there, and sends:

1. ``initialize`` (``clientInfo``), then the ``initialized`` notification;
2. ``mcpServerStatus/list`` (following ``nextCursor`` while there is one). Codex starts each
   configured server and answers with one entry per server: ``name``, ``tools`` (an object
   keyed by tool name), ``toolsError`` (Codex's start-up error text, which holds the
   bridge's own reason, e.g. "The app is not running …"), ``serverInfo``.

Each server is printed with ✓ (started, tools listed) or ✗ (``toolsError``, or no such
entry); :func:`run_codex_check` returns whether all the servers shown connected. Nothing is
written anywhere: Codex reads its own ``config.toml`` (``$CODEX_HOME`` or ``~/.codex``). No
login or API key is needed.

Bounds: the whole exchange, Codex starting every server included, within
``timeout_seconds`` (default :data:`CODEX_CHECK_TIMEOUT_SECONDS`); one line of Codex's
output at most :data:`MAX_LINE_BYTES`. Codex's stderr (its own log) is read and dropped, so
it cannot block Codex, and is never printed. The ``codex`` process is ended (stdin closed,
then killed after :data:`EXIT_GRACE_SECONDS`) before this returns, whatever happened.

Standard library only besides the caller's ``echo``/``style`` (click's), so it runs in the
frozen executable too.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "CODEX_CHECK_TIMEOUT_SECONDS",
    "CodexCheckError",
    "ServerStatus",
    "codex_server_statuses",
    "run_codex_check",
]

CODEX_CHECK_TIMEOUT_SECONDS = 120.0
"""Bound on the whole check: Codex's start (1–2 s) plus every configured server's start,
which Codex bounds by each entry's ``startup_timeout_sec`` (``config install`` writes 45 s
for an entry with ``--launch``)."""

EXIT_GRACE_SECONDS = 5.0
"""How long Codex gets to exit once its stdin is closed, before it is killed."""

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Largest line read from Codex (a status reply carries every tool's schema)."""

MAX_ERROR_CHARS = 600
"""A server's ``toolsError`` is shown up to this many characters (Codex repeats the cause)."""

Echo = Callable[[str], None]


class CodexCheckError(Exception):
    """Codex could not be asked: not installed, exited, answered with an error, or not in time.
    The message says which, and what to do."""


@dataclass(frozen=True)
class ServerStatus:
    """One server as Codex reported it."""

    name: str
    connected: bool
    """True when Codex started it and listed its tools (no ``toolsError``)."""
    tools: tuple[str, ...]
    """Tool names, sorted."""
    error: str | None
    """Codex's ``toolsError``: why it did not start (the bridge's reason is inside)."""
    server_name: str | None
    """``serverInfo.name`` as the server gave it in ``initialize``."""


def find_codex() -> str | None:
    """The ``codex`` on PATH (``codex.cmd`` on Windows, by PATHEXT), or None."""
    return shutil.which("codex")


class _Lines:
    """Codex's stdout as JSON messages, read by a thread, each waited for with a deadline
    (a pipe has no portable select: Windows)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            while True:
                line = stream.readline(MAX_LINE_BYTES)
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # not ours to judge: Codex's protocol is JSON per line
                if isinstance(message, dict):
                    self._queue.put(message)
        except (OSError, ValueError):
            pass
        finally:
            self._queue.put(None)

    def reply(self, request_id: int, deadline: float) -> dict[str, Any]:
        """The reply to `request_id` (notifications and Codex's own requests skipped).

        Raises:
            CodexCheckError: Codex's output ended, or the deadline passed.
        """
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CodexCheckError("no answer from `codex app-server` in time")
            try:
                message = self._queue.get(timeout=remaining)
            except queue.Empty:
                raise CodexCheckError("no answer from `codex app-server` in time") from None
            if message is None:
                raise CodexCheckError("`codex app-server` exited without answering")
            if message.get("id") == request_id and "method" not in message:
                return message


def _drain(stream: IO[bytes]) -> None:
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):
        pass


def codex_server_statuses(
    codex: str | None = None,
    *,
    timeout_seconds: float = CODEX_CHECK_TIMEOUT_SECONDS,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> list[ServerStatus]:
    """Start ``codex app-server`` (`codex`, default the one on PATH) in `cwd` with `env`
    (default: this process's), and return its ``mcpServerStatus/list``, in Codex's order.

    Raises:
        CodexCheckError: Codex is not on PATH, could not start, exited, answered the status
            request with an error, or did not answer within `timeout_seconds`. Codex is not
            left running in any case.
    """
    program = codex or find_codex()
    if program is None:
        raise CodexCheckError("`codex` is not on PATH: install Codex, or run this where `codex` runs")
    deadline = time.monotonic() + timeout_seconds
    try:
        process = subprocess.Popen(
            [program, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
    except OSError as exc:
        raise CodexCheckError(f"could not start {program} app-server ({exc.strerror or type(exc).__name__})") from None
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()
    lines = _Lines(process.stdout)
    stdin = process.stdin

    def send(message: dict[str, Any]) -> None:
        try:
            stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            stdin.flush()
        except (OSError, ValueError):
            raise CodexCheckError("`codex app-server` exited without answering") from None

    try:
        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "mcp-app-bridge", "version": "1"}}})
        _result(lines.reply(1, deadline), "initialize")
        send({"method": "initialized"})
        entries: list[Any] = []
        cursor: str | None = None
        request_id = 2
        while True:
            params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
            send({"id": request_id, "method": "mcpServerStatus/list", "params": params})
            result = _result(lines.reply(request_id, deadline), "mcpServerStatus/list")
            page = result.get("data")
            entries.extend(page if isinstance(page, list) else [])
            cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
            if not cursor or request_id > 1000:
                break
            request_id += 1
    finally:
        _end(process)
    return [_status(entry) for entry in entries if isinstance(entry, dict) and isinstance(entry.get("name"), str)]


def _result(reply: dict[str, Any], method: str) -> dict[str, Any]:
    error = reply.get("error")
    if error is not None:
        message = error.get("message") if isinstance(error, dict) else error
        raise CodexCheckError(
            f"`codex app-server` refused {method}: {message} (this check needs a Codex whose "
            "app-server has mcpServerStatus/list, as 0.169.0 has: update Codex)"
        )
    result = reply.get("result")
    return result if isinstance(result, dict) else {}


def _status(entry: dict[str, Any]) -> ServerStatus:
    tools = entry.get("tools")
    names = tuple(sorted(str(name) for name in tools)) if isinstance(tools, dict) else ()
    error = entry.get("toolsError")
    info = entry.get("serverInfo")
    server_name = info.get("name") if isinstance(info, dict) and isinstance(info.get("name"), str) else None
    error_text = str(error) if error else None
    return ServerStatus(
        name=entry["name"],
        connected=error_text is None and (bool(names) or server_name is not None),
        tools=names,
        error=error_text,
        server_name=server_name,
    )


def _once(text: str) -> str:
    """Codex's error text without its repeated tail ("…failed: A: A" becomes "…failed: A")."""
    start = 0
    while (index := text.find(": ", start)) != -1:
        rest = text[index + 2 :]
        if rest and text[:index].endswith(rest):
            return text[:index]
        start = index + 2
    return text


def _end(process: subprocess.Popen[bytes]) -> None:
    for stream in (process.stdin,):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        process.wait(timeout=EXIT_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_codex_check(
    names: tuple[str, ...],
    echo: Echo,
    style: Callable[..., str],
    *,
    codex: str | None = None,
    timeout_seconds: float = CODEX_CHECK_TIMEOUT_SECONDS,
) -> bool:
    """Print each server Codex reports (only `names`, when given) with ✓ or ✗, and return
    whether every server printed connected. A name Codex does not have is a ✗ with the
    ``config install`` command that adds it; Codex not answering is one ✗ line with why."""
    good = style("✓", fg="green")
    bad = style("✗", fg="red", bold=True)
    echo("Codex's own report (`codex app-server`, mcpServerStatus/list), from " + os.getcwd() + ":")
    try:
        statuses = codex_server_statuses(codex, timeout_seconds=timeout_seconds)
    except CodexCheckError as exc:
        echo(f"{bad} {exc}")
        return False
    by_name = {status.name: status for status in statuses}
    shown = [by_name.get(name) or name for name in names] if names else list(statuses)
    if not shown:
        echo(f"{bad} Codex has no MCP server configured: add one with "
             "`mcp-app-bridge config install --client codex --name NAME …`")
        return False
    ok = True
    entry_failed = False
    for status in shown:
        if isinstance(status, str):
            ok = False
            echo(f"{bad} {status}: Codex has no server of that name; add it with "
                 f"`mcp-app-bridge config install --client codex --name {status} …`, then run this again")
            continue
        if status.connected:
            count = len(status.tools)
            listed = ", ".join(status.tools[:8]) + (", …" if count > 8 else "")
            echo(f"{good} {status.name}: connected, {count} tool{'s' if count != 1 else ''}" + (f" ({listed})" if count else ""))
        else:
            ok = False
            error = _once(status.error) if status.error else "not started (disabled, or no answer)"
            entry_failed = True
            if len(error) > MAX_ERROR_CHARS:
                error = error[:MAX_ERROR_CHARS] + "…"
            echo(f"{bad} {status.name}: {error}")
    if entry_failed:
        echo("  A bridge entry's own reason is in the text above; `mcp-app-bridge check` with the "
             "entry's args (`codex mcp get NAME` shows them) walks each step.")
    return ok


def client_check_command(ctx: Any, client: str | None, names: tuple[str, ...]) -> None:
    """``check --client CLIENT [--name NAME]…`` (the click context of ``check``): refuses bridge
    options beside ``--client`` (the client's entry has its own), runs the check and exits 0
    when every server shown connected, 1 otherwise."""
    import sys

    import click

    if client is None:
        raise click.UsageError("--name goes with --client (e.g. check --client codex --name myapp)")
    given = [
        name
        for name in ctx.params
        if name not in ("client", "names") and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            "--client asks the client about its own entries: give no bridge options with it "
            "(to walk an entry's path, run `check` with the entry's args instead)"
        )
    from ..clients.clienttable import CLIENTS
    from .entrycheck import run_entry_check

    if client not in CLIENTS:
        raise click.BadParameter(f"{client!r} is not one of {', '.join(CLIENTS)}", param_hint="--client")
    from .toolreport import run_limits_check

    ok = run_entry_check(client, names, click.echo, click.style, problems_only=client == "codex")
    if client == "codex":
        if not ok:
            click.echo("")
        ok = run_codex_check(names, click.echo, click.style) and ok
    ok = run_limits_check(client, names, click.echo, click.style) and ok
    if names:  # each named entry's whole walk, with its own arguments and env
        from ..clients.clienttable import config_path
        from .entrycheck import read_entries
        from .entrywalk import walk_entry

        entries = read_entries(config_path(client), client)
        for name in names:
            entry = entries.get(name)
            if entry is not None and "command" in entry:
                ok = walk_entry(client, name, entry, click.echo, click.style) and ok
    sys.exit(0 if ok else 1)


def check_all_command() -> None:
    """``check --all``: the whole walk of every entry, in every client's file at its default
    place, that runs the bridge (``bridge/cli/entrywalk.py``); exits 0 when all pass, 1
    otherwise (and 1 when there is none)."""
    import sys

    import click

    from .entrywalk import bridge_args_of, bridge_entries, walk_entry

    ok, walked = True, 0
    for clients, _file, name, entry, problem in bridge_entries():
        client = " and ".join(clients)  # (a file two clients read is walked once)
        if problem is not None:
            click.echo(f"{click.style('✗', fg='red', bold=True)} {client}: {problem}")
            ok = False
        elif bridge_args_of(entry) is not None:
            walked += 1
            ok = walk_entry(client, name, entry, click.echo, click.style) and ok
    if walked == 0:
        click.echo("no client entry runs mcp-app-bridge here: add one with `mcp-app-bridge config install --client CLIENT --name NAME …`")
        ok = False
    sys.exit(0 if ok else 1)
