"""The catalog start: a client's start-up answered from the catalog before the serving loop
exists (docs/behaviour.md, "Lazy launch"; the rules are ``bridge/core/lazylaunch.py``).

AI clients start their servers far more often than users call tools, and some give an
uncached server one second before they leave its tools out (Codex, openai/codex#31641). When
the app is down and its catalog answers, the bridge's own start is the whole wait. So
before anything of the serving machinery is loaded (asyncio, the HTTP link, the launcher,
the era translations: about two thirds of a start's CPU time, bench/README.md, "Start-up"),
:func:`answer_start_from_catalog` reads the client's first lines and answers those the
catalog answers, exactly as the serving loop would, with the standard library, the
catalog file and the pure rules alone.

It answers only while all of these hold, and hands over at the first line that breaks one:

- POSIX (the wait for more input is a ``select`` on the pipe), a launch command or
  ``ensure_running`` configured (there is no catalog without one), a launch policy other
  than ``on-start``, ``--protocol-era`` ``auto`` or ``legacy`` (2026-07-28 requests:
  ``auto`` only), and no tool filter (``--allow-tool``, ``--deny-tool``, ``--read-only``:
  the serving loop's tool gate, ``bridge/serve/toolgate.py``, filters every list);
- the app is down, as the serving loop would find it without a connection: its endpoint
  comes from a discovery file that does not exist, or is an ``http+unix://`` socket that
  does not exist (any other endpoint is left to the serving loop, which connects);
- the catalog holds the answer: a 2025-era ``initialize`` (not for an app marked
  ``refusesInitialize``), then its ``notifications/initialized``, the four lists and
  ``ping``; or, from a 2026-07-28 client, ``server/discover`` (or its recorded refusal),
  the lists and ``ping``. A tool list the era's check would shorten is left to the loop,
  which logs why.

Once a line breaks a rule, input stays silent for :data:`CATALOG_START_IDLE_SECONDS`, or
stdin ends, the serving loop starts (``bridge/serve/loop.py``, ``run_stdio``) and is handed
what was read (:class:`CatalogStart`): the answered lines are dispatched through it as if
just read, so that its state (the client's ``initialize`` to replay, the session opened on
the first call, the lists to compare) is the one it would have built, and their replies,
already written, are not written again; the rest follows as read.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from typing import Any

from ..core.config import BridgeConfig
from ..core.errors import InboundError
from ..core.jsonrpc import Notification, Request, classify, encode_message

__all__ = ["CATALOG_START_IDLE_SECONDS", "STARTED_UNDER_PID", "CatalogStart", "answer_start_from_catalog", "hold_signals", "read_line", "signals_held", "take_early_signals", "write_all"]

#: How long the catalog start waits for the client's next line before the serving loop
#: starts (seconds). Clients send their start-up messages within milliseconds of the
#: replies; the loop's own watchdogs and signal handling start once this passes.
CATALOG_START_IDLE_SECONDS = 0.2
#: A line longer than this is left to the serving loop (bytes); start-up requests are short.
_MAX_LINE_BYTES = 1024 * 1024

#: This process's parent when the bridge started: what the serving loop's watchdog of a
#: one-file executable's bootloader watches (``bridge/serve/loop.py``). A client that has its
#: first reply from an early start may kill the bootloader before the loop is loaded; by
#: then ``os.getppid()`` names whoever adopted this process.
STARTED_UNDER_PID = os.getppid()

#: The signals (numbers) noted while the serving loop was loading (:func:`hold_signals`).
_early_signals: list[int] = []
_holding = False  # hold_signals() was called (by the mcp-app-bridge command)


def _note_signal(signum: int, frame: Any) -> None:
    _early_signals.append(signum)


def hold_signals() -> None:
    """Note SIGTERM, SIGINT and SIGHUP instead of ending the process, until the serving loop
    takes them over (:func:`take_early_signals`). The ``mcp-app-bridge`` command calls this
    before its early starts: a client that has an early reply may end the bridge at once
    (Claude Code: SIGINT, then SIGTERM 0.1 s later), and the loop, still loading, then acts
    on them as on its own (a graceful stop, exit status 0). POSIX only, as the early starts
    (on Windows the loop takes no signal over), and only from the main thread.

    The serving loop gives them back when it is over (:func:`signals_held`): from then to
    the exit, a late signal (a client's second one, or the one a one-file executable's
    bootloader passes on after the client's own to the group) is noted, not the end of a
    process that is already on its way out with its status."""
    global _holding
    if sys.platform == "win32":
        return
    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            try:
                signal.signal(signum, _note_signal)
            except (ValueError, OSError):  # not the main thread: the default stays
                return
    _holding = True


def signals_held() -> bool:
    """Whether :func:`hold_signals` holds this process's signals while no serving loop has
    them: the serving loop, when over, calls it again instead of leaving the defaults."""
    return _holding


def take_early_signals() -> list[int]:
    """The signals noted since :func:`hold_signals`, in order; each is given once."""
    taken = _early_signals[:]
    del _early_signals[:]
    return taken


class CatalogStart:
    """What the catalog start read: ``answered``, the complete lines it took, in order (each
    without its line end; every request among them was answered), and ``rest``, the bytes
    read after them (the first line it left, and anything after it)."""

    __slots__ = ("answered", "rest")

    def __init__(self, answered: list[bytes], rest: bytes) -> None:
        self.answered = answered
        self.rest = rest


def answer_start_from_catalog(
    config: BridgeConfig, *, read_fd: int = 0, write_fd: int = 1, idle_seconds: float = CATALOG_START_IDLE_SECONDS
) -> CatalogStart | None:
    """Answer the client's start-up from the catalog, as the module docstring says; return
    what was read for the serving loop, or ``None`` when the catalog start does not apply
    (nothing was read then).

    ``read_fd``, ``write_fd``: the client's stdin and stdout (blocking writes of whole lines).
    A failed write (the client closed stdout) ends it; the serving loop then sees the same.
    """
    if sys.platform == "win32":  # (no select on a pipe there)
        return None
    entry = _catalog_entry(config)
    if entry is None:
        return None
    os.set_blocking(read_fd, True)
    os.set_blocking(write_fd, True)
    answerer = _Answerer(entry, protocol_era=config.protocol_era)
    answered: list[bytes] = []
    buffer = b""
    while True:
        buffer, end = read_line(read_fd, buffer, idle_seconds)
        if end < 0:
            break
        line = buffer[:end].rstrip(b"\r")
        reply = answerer.answer(line)
        if reply is None:
            break
        buffer = buffer[end + 1 :]
        answered.append(line)
        if reply and not write_all(write_fd, reply):
            break
    return CatalogStart(answered, buffer)


def _catalog_entry(config: BridgeConfig) -> dict[str, Any] | None:
    """The catalog entry when the catalog start applies to ``config`` (see the module
    docstring), else ``None``."""
    if config.launch_policy == "on-start" or config.protocol_era == "modern":
        return None
    if config.launch_command is None and config.ensure_running is None:
        return None
    if config.allow_tools or config.deny_tools or config.read_only:
        return None  # a tool filter: the serving loop's tool gate filters every list
    if not _app_is_down(config):
        return None
    from ..app.servedcatalog import ServedCatalog

    return ServedCatalog(config.app_name, config.url or str(config.discovery_file)).entry()


def _app_is_down(config: BridgeConfig) -> bool:
    """Whether the app is down, as the serving loop would find it without connecting: no
    discovery file (the app removes it when it stops), or no file at its Unix socket."""
    if config.url is None:
        return config.discovery_file is not None and not os.path.lexists(config.discovery_file)
    from ..core.unixurl import is_unix_url, split_unix_url

    if not is_unix_url(config.url):
        return False
    return not os.path.lexists(split_unix_url(config.url)[0])


class _Answerer:
    """The catalog's answer to each start-up line, or ``None`` for the first line it leaves."""

    def __init__(self, entry: dict[str, Any], *, protocol_era: str) -> None:
        self._entry = entry
        self._modern_allowed = protocol_era == "auto"
        self._initialized = False  # a 2025-era initialize was answered

    def answer(self, line: bytes) -> bytes | None:
        """The reply line to write (``b""`` for a notification it took), or ``None``."""
        try:
            message = classify(line)
        except (InboundError, ValueError):
            return None
        if isinstance(message, Notification):
            took = self._initialized and message.method == "notifications/initialized"
            return b"" if took else None
        if not isinstance(message, Request):
            return None
        answer = self._stateless(message) if message.era.stateless else self._legacy(message)
        if answer is None:
            return None
        return encode_message({"jsonrpc": "2.0", "id": message.id, **answer})

    def _legacy(self, request: Request) -> dict[str, Any] | None:
        from ..core.lazylaunch import catalog_result, refuses
        from ..core.methods import LIST_ITEMS

        if request.method == "initialize":
            if self._initialized or refuses(self._entry, "initialize"):
                return None
            result = catalog_result("initialize", request.params, self._entry, modern=False)
            self._initialized = result is not None
        elif self._initialized and (request.method in LIST_ITEMS or request.method == "ping"):
            result = catalog_result(request.method, request.params, self._entry, modern=False)
        else:
            return None
        return None if result is None else {"result": result}

    def _stateless(self, request: Request) -> dict[str, Any] | None:
        from ..core.era import filter_tools
        from ..core.lazylaunch import catalog_result, discover_refusal
        from ..core.methods import LIST_ITEMS

        if not self._modern_allowed or self._initialized:
            return None
        if request.method == "server/discover":
            refusal = discover_refusal(self._entry)
            if refusal is not None:
                return {"error": refusal}
        elif request.method not in LIST_ITEMS and request.method != "ping":
            return None
        result = catalog_result(request.method, request.params, self._entry, modern=True)
        if result is None:
            return None
        if request.method == "tools/list" and filter_tools(result, {})[1]:
            return None  # the serving loop hides those tools, and says why in the log
        return {"result": result}


def read_line(read_fd: int, buffer: bytes, idle_seconds: float) -> tuple[bytes, int]:
    """Read the client's stdin into ``buffer`` until it holds a whole line: ``(buffer, the
    index of its line end)``, or ``(buffer, -1)`` once the client has been silent for
    ``idle_seconds``, closed stdin (the serving loop reads the EOF again and ends the run) or
    sent a line longer than :data:`_MAX_LINE_BYTES` (the loop's to refuse)."""
    while (end := buffer.find(b"\n")) < 0:
        if len(buffer) > _MAX_LINE_BYTES or not select.select([read_fd], [], [], idle_seconds)[0]:
            return buffer, -1
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return buffer, -1
        buffer += chunk
    return buffer, end


def write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data``; ``False`` once the client closed its end."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    return True
