"""The loop that wires stdin, the app and stdout together (docs/behaviour.md).

Plain asyncio tasks (no anyio on the serving path: bench/README.md, "Start-up"): the **reader** (stdin chunks into a
:class:`~bridge.core.framing.LineFramer`; each line classified, its requests opened in the
:class:`~bridge.core.ledger.Ledger`, one task per message started through
:class:`~bridge.core.admission.Admission`, which pauses reading under load); **one task per
message** (requests wait for one of ``max_concurrent_requests`` slots; notifications never
wait, so a ``notifications/cancelled`` is never stuck behind the call it cancels); the
:class:`~bridge.stdio.outbox.Outbox`, the only writer of stdout; and the **GET stream** once
``notifications/initialized`` was accepted. After an ``initialize`` request later messages
wait (in their tasks) until its reply set the session (MCP basic/lifecycle: nothing but
pings before the ``initialize`` reply; a message sent earlier would carry no session id).

Every request gets exactly one reply, or none once the client cancelled it: the ledger
decides, for replies, for every other line from the app (:meth:`~bridge.serve.dispatch.Dispatcher.relay`) and at
shutdown. A client's cancellation closes the request in the ledger and stops its exchange
at once, freeing its slot and its connection (docs/behaviour.md,
"Cancellation").

Shutdown (stdin EOF, SIGTERM/SIGINT/SIGHUP), within the kill schedules of real clients
(Claude Code: SIGINT, SIGTERM 0.11 s later, SIGKILL 0.52 s after the first; Codex: SIGTERM,
SIGKILL milliseconds later): stop reading; after stdin EOF with no signal, let requests in
flight finish, for ``drain_timeout_seconds`` at most, then cancel those left at the app
(``Dispatcher.drain``); after SIGINT or
SIGHUP, for ``shutdown_grace_seconds`` (0.2 s); not at all after SIGTERM or a second
signal (one during the wait after EOF included); answer every open request with ``shutting_down``; then cancel the tasks,
``DELETE`` the MCP session (best effort) and flush stdout, all within
:data:`SHUTDOWN_TAIL_SECONDS`, and return 0. An open ``subscriptions/listen`` or GET stream
is not work in flight: with nothing else open the run ends within the tail alone. A closed
stdout ends the run at once and quietly.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..core.config import BridgeConfig
from ..core.errors import LineTooLongError
from ..core.framing import EOF, NEED_DATA, LineFramer, OverlongLine
from ..core.jsonrpc import error_line, read_id_from_head
from ..stdio.fds import (
    ByteSink,
    ByteSource,
    FdReader,
    FdWriter,
    claim_stdio,
    is_onefile_child,
    watch_parent,
    watch_parent_on_loop,
)
from ..stdio.outbox import Outbox
from ..system.cancelscope import move_on_after
from .appstart import AppStart
from .catalogstart import STARTED_UNDER_PID, hold_signals, signals_held, take_early_signals
from .dispatch import Dispatcher
from .driver import Driver
from .parts import build_stack
from .taskset import TaskSet

if TYPE_CHECKING:
    import httpx

    from .catalogstart import CatalogStart

__all__ = ["Bridge", "run_stdio"]

log = logging.getLogger("bridge")

#: Once the grace is over, the bound on everything left of a shutdown (seconds): cancelling
#: the tasks, the best-effort ``DELETE`` of the MCP session, flushing stdout. Clients kill a
#: server soon after asking it to stop (Codex: milliseconds after SIGTERM; Claude Code:
#: 0.52 s after SIGINT), so the exit must come first; a ``DELETE`` that would take longer is
#: given up.
SHUTDOWN_TAIL_SECONDS = 0.06
#: How long buffered stdout lines may take to reach the client once the run is over, at
#: least (when the tail's bound is already spent).
FLUSH_TIMEOUT_SECONDS = 0.02

class Bridge:
    """Serve one stdio connection: forward every message to the app, write every reply.

    Args:
        config: the run's configuration.
        stdin: where the client's bytes come from (``receive() -> bytes``, ``b""`` at EOF).
        stdout: where lines go (``send(bytes)``, raising ``OSError`` once the client is gone).
        http_transport: an ``httpx.AsyncBaseTransport`` to use (tests pass
            ``httpx.MockTransport`` backed by respx); by default the bridge builds its own.
        app_probe: ``async (url) -> bool``, whether the app accepts connections (tests pass
            one that follows their fake app); by default a TCP connect.
        handle_signals: stop gracefully on SIGTERM/SIGINT/SIGHUP (where the platform allows).
        catalog_start: what the catalog start read before this loop (``bridge/serve/catalogstart.py``),
            or the running-app start (an :class:`~bridge.serve.appstart.AppStart`, whose
            MCP session the driver adopts): its answered lines run first (their replies
            are not written again), then the rest of what it read, then ``stdin``.
    """

    def __init__(
        self,
        config: BridgeConfig,
        *,
        stdin: ByteSource,
        stdout: ByteSink,
        http_transport: httpx.AsyncBaseTransport | None = None,
        app_probe: Callable[[str], Awaitable[bool]] | None = None,
        handle_signals: bool = False,
        catalog_start: CatalogStart | None = None,
    ) -> None:
        self._config = config
        self._stdin = stdin
        self._catalog_start = catalog_start
        stack = build_stack(config, http_transport=http_transport, app_probe=app_probe, on_session_rebuilt=self._session_rebuilt)
        self._driver = stack.driver
        if isinstance(catalog_start, AppStart) and catalog_start.answered:  # the running-app start opened the MCP session
            self._driver.adopt_initialize(catalog_start.request_id, catalog_start.line, catalog_start.result, catalog_start.headers)
        self._app = stack.top
        self._handle_signals = handle_signals
        self._outbox = Outbox(stdout, on_gone=lambda: self.stop("stdout closed", hurry=True))
        self._tasks = TaskSet()
        self._dispatcher = Dispatcher(config, self._app, self._outbox, self._tasks, self._start_listening)
        self._stopping = asyncio.Event()
        self._signals: list[signal.Signals] = []  # handlers installed by this run
        self._listening = False
        self._stop_reason: str | None = None

    @property
    def driver(self) -> Driver:
        """The recovery layer of the request stack (its session rebuilds: ``rebuilds``)."""
        return self._driver

    def stop(self, reason: str = "told to stop", *, hurry: bool = False) -> None:
        """Begin a graceful shutdown, as stdin EOF would (``reason`` goes into the log and
        the ``shutting_down`` messages). With ``hurry``, or when called again, requests in
        flight are answered ``shutting_down`` at once instead of after the grace."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self._dispatcher.stopping(reason)
        else:
            hurry = True
        if hurry:
            self._dispatcher.end_grace()
        self._stopping.set()

    async def run(self) -> int:
        """Serve until stdin ends, a signal arrives or stdout closes; return the exit status
        (0). Never raises for anything the client or the app does."""
        loop = asyncio.get_running_loop()
        if self._handle_signals:
            # Kept until the very end: a second signal during the bounded shutdown must
            # still find a handler (else: KeyboardInterrupt and a traceback).
            self._catch_signals(loop)
            for signum in take_early_signals():  # (came while this loop was loading: cli/serve.py holds them)
                loop.call_soon(self._on_signal, signal.Signals(signum))
        try:
            async with asyncio.TaskGroup() as parts:
                writer = parts.create_task(self._part(self._outbox.run()))
                reader = parts.create_task(self._part(self._read_loop()))
                await self._stopping.wait()
                if not self._outbox.gone:
                    await self._dispatcher.drain(self._config.shutdown_grace_seconds)
                reader.cancel()
                tail_end = loop.time() + SHUTDOWN_TAIL_SECONDS
                await self._tasks.cancel_and_wait(SHUTDOWN_TAIL_SECONDS)
                await self._app.terminate_session(max(tail_end - loop.time(), 0.0))
                self._outbox.close()
                await asyncio.wait([writer], timeout=max(tail_end - loop.time(), FLUSH_TIMEOUT_SECONDS))
                writer.cancel()  # a stdout still blocked after the bound does not hold the exit
        finally:
            self._release_signals(loop)
            self._tasks.cancel()  # only left when the run itself was cancelled
            await self._app.aclose()
        return 0

    async def _part(self, part: Coroutine[Any, Any, None]) -> None:
        """Run the reader or the stdout writer. A failure inside the bridge ends the run
        (logged, never lost) through the shutdown above, which still answers every open
        request, rather than by cancelling the group."""
        try:
            await part
        except Exception:
            log.exception("the bridge failed; shutting down")
            self.stop("a failure inside the bridge", hurry=True)

    # -- stdin ---------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        framer = LineFramer(self._config.max_message_bytes)
        if self._catalog_start is not None:
            for line in self._catalog_start.answered:
                await self._dispatcher.dispatch_line(line, answered=True)
            if self._catalog_start.rest:  # (b"" would be EOF)
                framer.receive_data(self._catalog_start.rest)
            self._catalog_start = None
        while True:
            await self._dispatcher.wait_for_room()
            event = framer.next_event()
            if event is NEED_DATA:
                framer.receive_data(await self._stdin.receive())
            elif event is EOF:
                if self._stop_reason is None:
                    log.info("stdin closed; shutting down")
                self._dispatcher.input_closed()  # (before stop: EOF first finishes the work in flight)
                self.stop("stdin closed")
                return
            elif isinstance(event, OverlongLine):
                request_id = read_id_from_head(event.head)
                log.warning("discarded a %d-byte line (limit %d)", event.size_bytes, framer.max_line_bytes)
                message = (
                    f"Invalid Request: the message is {event.size_bytes} bytes, more than the "
                    f"{framer.max_line_bytes}-byte limit (--max-message-bytes)"
                )
                await self._outbox.put(error_line(request_id, LineTooLongError(message, request_id)))
            else:
                assert isinstance(event, bytes)
                try:
                    await self._dispatcher.dispatch_line(event, stopping=self._stopping.is_set())
                except Exception:  # a bug must cost one line, never the whole connection
                    log.exception("a stdin line could not be handled")

    def _start_listening(self, opened: asyncio.Event | None = None) -> None:
        """Open the GET stream (if not open); set ``opened`` once it is open, refused or
        failed, or after :data:`LISTEN_OPEN_WAIT_SECONDS` at most."""
        if self._listening or self._stopping.is_set():
            if opened is not None:
                opened.set()
            return
        self._listening = True
        if opened is not None:
            self._tasks.spawn(_set_after(opened, LISTEN_OPEN_WAIT_SECONDS))
        self._tasks.spawn(self._listen(opened))

    async def _listen(self, opened: asyncio.Event | None) -> None:
        try:
            await self._app.listen(self._dispatcher.relay, on_open=None if opened is None else opened.set)
        finally:
            self._listening = False
            if opened is not None:
                opened.set()

    async def _session_rebuilt(self) -> None:
        """After a rebuild: reopen the GET stream, tell the client its lists may differ."""
        self._start_listening()
        for line in self._app.list_changed_notifications():
            await self._outbox.put(line)

    # -- shutdown ------------------------------------------------------------------------

    def _catch_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        wanted = [signal.SIGTERM, signal.SIGINT]
        if hasattr(signal, "SIGHUP"):  # a closed terminal or a parent that hung up (POSIX only)
            wanted.append(signal.SIGHUP)
        for signum in wanted:
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except (NotImplementedError, RuntimeError, ValueError):
                return  # not on this platform (Windows) or not the main thread
            self._signals.append(signum)

    def _release_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        """Give the signals back: to the defaults, or, when the command held them while the
        loop loaded, held again until the exit (``catalogstart.signals_held``)."""
        released = bool(self._signals)
        while self._signals:
            loop.remove_signal_handler(self._signals.pop())
        if released and signals_held():
            hold_signals()

    def _on_signal(self, signum: signal.Signals) -> None:
        name = signal.Signals(signum).name
        if self._stop_reason is not None:
            log.info("%s received during the shutdown (%s); open requests are answered now", name, self._stop_reason)
        else:
            log.info("%s received; shutting down", name)
        # SIGTERM is the last word before SIGKILL (Codex sends that milliseconds
        # later): no grace. SIGINT and SIGHUP keep it, until a second signal.
        self.stop(name, hurry=signum == signal.SIGTERM)


def run_stdio(config: BridgeConfig, *, catalog_start: CatalogStart | None = None) -> int:
    """Run the bridge on this process's stdin and stdout until the client lets go.

    ``catalog_start``: what the catalog start read and answered first
    (``bridge/serve/catalogstart.py``; the command line runs it before this).

    Claims the wire first (:func:`~bridge.stdio.fds.claim_stdio`): a stray ``print()`` from
    the app's own code, a library or a warning then goes to stderr and can never corrupt
    the JSON-RPC stream (MCP basic/transports, "stdio": nothing but MCP messages on stdout).
    In a PyInstaller one-file
    executable a watchdog also ends the process when its bootloader is killed.

    Returns:
        the process exit status: 0 after a normal shutdown (EOF, SIGTERM/SIGINT, closed
        stdout, a dead parent); 1 when stdin or stdout is not usable at all.
    """
    try:
        read_fd, wire_fd = claim_stdio()
    except OSError as exc:
        log.error("stdin or stdout is not usable (%s); an AI client must start the bridge with pipes", exc)
        return 1

    async def serve() -> int:
        bridge = Bridge(
            config, stdin=FdReader(read_fd), stdout=FdWriter(wire_fd), handle_signals=True, catalog_start=catalog_start
        )
        if is_onefile_child():
            loop = asyncio.get_running_loop()

            def parent_gone() -> None:
                log.info("the executable's bootloader is gone; shutting down")
                try:
                    loop.call_soon_threadsafe(bridge.stop, "the executable's bootloader is gone")
                except RuntimeError:  # the loop has finished already
                    pass

            # The bootloader this process started under: an early start's reply may have let
            # the client kill it before this loop was loaded.
            if not watch_parent_on_loop(loop, parent_gone, parent=STARTED_UNDER_PID):  # Linux: no watchdog thread
                watch_parent(parent_gone, parent=STARTED_UNDER_PID)
        return await bridge.run()

    return asyncio.run(serve())


#: The longest that messages after ``notifications/initialized`` wait for the GET stream to
#: open (an app that is slow to answer its GET must not hold the client up for long).
LISTEN_OPEN_WAIT_SECONDS = 1.0


async def _set_after(event: asyncio.Event, seconds: float) -> None:
    if not event.is_set():
        with move_on_after(seconds):
            await event.wait()
        event.set()
