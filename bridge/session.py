"""The loop that wires stdin, the app and stdout together (DESIGN.md §2).

One anyio task group holds everything:

- the **reader** pulls chunks from stdin into a :class:`~bridge.framing.LineFramer`,
  classifies each line, opens its requests in the reply ledger and starts one task per
  message (:class:`~bridge.taskset.TaskSet`). It never waits for a reply, with one
  exception: after an ``initialize`` request, later messages wait (in their tasks) for that
  exchange to finish, so every one carries the session id and version (SPEC-CHECKLIST 23);
- **one task per message** forwards it. Requests wait for a slot of the capacity limit
  (``max_concurrent_requests``); notifications and client responses never wait, so a
  ``notifications/cancelled`` is never stuck behind the slow call it cancels;
- the **outbox** (:mod:`bridge.outbox`) is the only code that writes stdout;
- the **GET stream** task relays server-initiated messages once ``notifications/initialized``
  was accepted.

Every request gets exactly one reply, or none once the client cancelled it: the
:class:`~bridge.ledger.Ledger` decides, for replies, for every other line from the app
(:meth:`Bridge._relay`) and at shutdown.

**Backpressure.** At most :data:`MAX_STARTED_REQUESTS` requests have a task; later ones
wait as their raw line (opened in the ledger, so a cancellation, a duplicate id or the
shutdown still finds them). Reading stdin pauses while the lines of open requests, each
counted with :data:`REQUEST_BOOKKEEPING_BYTES`, hold :data:`MAX_HELD_BYTES` or more, or
:data:`MAX_RUNNING_NOTIFICATIONS` notifications are being delivered; it resumes as replies
go out. Below that bound notifications are read and delivered at once, however many
requests wait, so a ``notifications/cancelled`` reaches the app while requests queue.

**Cancellation.** A client's ``notifications/cancelled`` for an open request closes it in
the ledger (no reply is ever written for it) and stops its exchange at once, which frees
its slot and its connection; a request still waiting is simply never sent. Before
2026-07-28 the notification is also POSTed to the app; 2026-07-28 cancels by closing the
exchange alone (SPEC-CHECKLIST items 63, 67).

Shutdown (stdin EOF, SIGTERM/SIGINT/SIGHUP): stop reading, let open requests finish for
``shutdown_grace_seconds``, answer the rest with ``shutting_down``, ``DELETE`` the MCP
session (bounded), flush stdout (bounded) and return 0. A closed stdout ends the run at
once and quietly.
"""

from __future__ import annotations

import collections
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from .config import BridgeConfig
from .driver import Driver
from .errors import (
    BadUpstreamResponseError,
    InboundError,
    LineTooLongError,
    ShuttingDownError,
    UpstreamError,
    UpstreamTimeoutError,
)
from .framing import EOF, NEED_DATA, LineFramer, OverlongLine
from .jsonrpc import (
    Batch,
    Message,
    Notification,
    Request,
    Response,
    classify,
    encode_message,
    error_line,
    is_valid_id,
    loads_strict,
    read_id_from_head,
)
from .ledger import Ledger, Outcome, Pending, Slot
from .modern import modern_version
from .outbox import Outbox
from .stdio import ByteSink, ByteSource, FdReader, FdWriter, claim_stdio, is_onefile_child, watch_parent
from .taskset import TaskSet

if TYPE_CHECKING:
    import httpx

__all__ = ["Bridge", "run_stdio", "MAX_STARTED_REQUESTS", "MAX_HELD_BYTES", "MAX_RUNNING_NOTIFICATIONS"]

log = logging.getLogger("bridge")

#: How long buffered stdout lines may take to reach the client once the run is over.
FLUSH_TIMEOUT_SECONDS = 0.3
#: Requests that never wait for a slot: a ping must not queue behind slow calls (DESIGN.md
#: §2.7), and a subscription stays open for as long as the client listens.
_OUTSIDE_THE_LIMIT = frozenset({"ping", "subscriptions/listen"})
#: Requests with a task of their own at once (about 6 KiB each); later ones wait as lines.
MAX_STARTED_REQUESTS = 1024
#: Reading stdin pauses while the open requests' lines hold this much (bytes).
MAX_HELD_BYTES = 16 * 1024 * 1024
#: What one open request costs beside its line, for :data:`MAX_HELD_BYTES` (bytes).
REQUEST_BOOKKEEPING_BYTES = 512
#: Reading stdin pauses while this many notifications (or client responses) are being POSTed.
MAX_RUNNING_NOTIFICATIONS = 1024
#: Before 2026-07-28, how long a cancelled request's exchange stays open at most while the
#: app is told with ``notifications/cancelled`` (seconds).
CANCEL_NOTICE_SECONDS = 1.0

_NEVER_SENT = None  # Slot.handle of a request whose task has not started


@dataclass(eq=False, slots=True)
class _Exchange:
    """``Slot.handle`` of a started request: what stops it, and its era."""

    scope: anyio.CancelScope
    modern: bool


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
    ) -> None:
        self._config = config
        self._stdin = stdin
        self._driver = Driver(
            config, http_transport=http_transport, app_probe=app_probe, on_session_rebuilt=self._session_rebuilt
        )
        self._handle_signals = handle_signals
        self._limiter = anyio.CapacityLimiter(config.max_concurrent_requests)
        self._ledger = Ledger()
        self._outbox = Outbox(stdout, on_gone=self.stop)
        self._tasks = TaskSet()
        self._held: collections.deque[tuple[Pending, bytes, anyio.Event, anyio.Event | None]] = collections.deque()
        self._started = 0  # requests with a task
        self._notifying = 0  # notifications and client responses being delivered
        self._room: anyio.Event | None = None  # set when the reader may go on
        self._idle: anyio.Event | None = None  # set when no request is open (shutdown)
        self._stopping = anyio.Event()
        self._handshake = anyio.Event()  # set while no initialize is in flight
        self._handshake.set()
        self._signal_scope: anyio.CancelScope | None = None
        self._listening = False

    @property
    def driver(self) -> Driver:
        """The app side: endpoint, tokens, launcher, HTTP exchange and MCP session."""
        return self._driver

    def stop(self) -> None:
        """Begin a graceful shutdown, as stdin EOF would."""
        self._stopping.set()

    async def run(self) -> int:
        """Serve until stdin ends, a signal arrives or stdout closes; return the exit status
        (0). Never raises for anything the client or the app does."""
        try:
            async with anyio.create_task_group() as outer:
                outer.start_soon(self._outbox.run)
                if self._handle_signals:
                    # In the outer group: a second signal during the bounded shutdown must
                    # still find a handler (else: KeyboardInterrupt and a traceback).
                    self._signal_scope = anyio.CancelScope()
                    outer.start_soon(self._signal_loop)
                async with anyio.create_task_group() as work:
                    work.start_soon(self._read_loop)
                    await self._stopping.wait()
                    if not self._outbox.gone:
                        await self._drain()
                    work.cancel_scope.cancel()
                await self._tasks.cancel_and_wait(FLUSH_TIMEOUT_SECONDS)
                with anyio.CancelScope(shield=True):
                    await self._driver.upstream.terminate_session()
                self._outbox.close()
                if self._signal_scope is not None:
                    self._signal_scope.cancel()
                outer.cancel_scope.deadline = anyio.current_time() + FLUSH_TIMEOUT_SECONDS
        finally:
            self._tasks.cancel()  # only left when the run itself was cancelled
            with anyio.CancelScope(shield=True):
                await self._driver.upstream.aclose()
        return 0

    # -- stdin ---------------------------------------------------------------------------

    def _over_budget(self) -> bool:
        return self._ledger.held_bytes >= MAX_HELD_BYTES or self._notifying >= MAX_RUNNING_NOTIFICATIONS

    async def _read_loop(self) -> None:
        framer = LineFramer(self._config.max_message_bytes)
        while True:
            while self._over_budget():
                self._room = anyio.Event()
                await self._room.wait()
            event = framer.next_event()
            if event is NEED_DATA:
                framer.receive_data(await self._stdin.receive())
            elif event is EOF:
                log.info("stdin closed; shutting down")
                self._stopping.set()
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
                    await self._dispatch_line(event)
                except Exception:  # a bug must cost one line, never the whole connection
                    log.exception("a stdin line could not be handled")

    async def _dispatch_line(self, line: bytes) -> None:
        try:
            message = classify(line)
        except InboundError as exc:
            log.warning("stdin: %s", exc.message)
            await self._outbox.put(error_line(exc.request_id, exc))
            return
        if self._stopping.is_set():
            await self._refuse_while_stopping(message)
            return
        gate = self._handshake
        if isinstance(message, Batch):
            requests = [item for item in message.items if isinstance(item, Request)]
            extra = [error_line(item.request_id, item) for item in message.items if isinstance(item, InboundError)]
            for item in message.items:
                if isinstance(item, (Notification, Response)):
                    self._deliver_soon(item, gate)
            opened = self._ledger.open([r.id for r in requests], batch=True, held_bytes=self._cost(line), extra=extra)
        elif isinstance(message, Request):
            opened = self._ledger.open([message.id], batch=False, held_bytes=self._cost(line))
        else:
            if isinstance(message, Notification) and message.method == "notifications/cancelled":
                if self._cancel(message, gate):
                    return
            self._deliver_soon(message, gate)
            return
        if opened.line is not None:
            await self._outbox.put(opened.line)
        if opened.pending is None:
            return
        opens = None
        if isinstance(message, Request) and message.method == "initialize":
            # The barrier: messages read after it wait (in their own tasks, so reading goes
            # on and EOF is seen at once) until its reply set the session id.
            opens = self._handshake = anyio.Event()
        if self._held or self._started >= MAX_STARTED_REQUESTS:
            self._held.append((opened.pending, line, gate, opens))
        else:
            self._start(opened.pending, message, gate, opens)

    @staticmethod
    def _cost(line: bytes) -> int:
        return len(line) + REQUEST_BOOKKEEPING_BYTES

    def _start(self, pending: Pending, message: Message | Batch, gate: anyio.Event, opens: anyio.Event | None) -> None:
        """Start a task for each still-open request of ``pending`` (``message``: its line)."""
        requests = [m for m in message.items if isinstance(m, Request)] if isinstance(message, Batch) else [message]
        for request in requests:
            assert isinstance(request, Request)
            slot = self._ledger.slot(request.id)
            if slot is None or slot.pending is not pending or slot.handle is not _NEVER_SENT:
                continue  # cancelled while it waited, or a repeated id the ledger refused
            slot.handle = _Exchange(anyio.CancelScope(), modern_version(request.params) is not None)
            self._started += 1
            self._tasks.spawn(self._handle_request(slot, request, gate, opens))
        if opens is not None and not requests:
            opens.set()

    def _made_room(self) -> None:
        """A request closed or a task ended: start waiting requests, wake the reader."""
        while self._held and self._started < MAX_STARTED_REQUESTS:
            pending, line, gate, opens = self._held.popleft()
            if pending.remaining:
                self._start(pending, classify(line), gate, opens)  # the same line: the same verdict
            elif opens is not None:
                opens.set()
        if self._room is not None and not self._over_budget():
            self._room.set()
        if self._idle is not None and not self._ledger:
            self._idle.set()

    async def _refuse_while_stopping(self, message: Message | Batch) -> None:
        """A line read after shutdown began: its requests are answered at once."""
        items = message.items if isinstance(message, Batch) else (message,)
        exc = ShuttingDownError("The bridge is shutting down and no longer forwards requests.")
        for request in items:
            if isinstance(request, Request):
                await self._outbox.put(error_line(request.id, exc))

    def _cancel(self, message: Notification, gate: anyio.Event) -> bool:
        """The client cancelled a request: close it without a reply and stop its exchange
        (freeing its slot and connection). Returns whether the notification is done with
        here; else it is POSTed (before 2026-07-28: SPEC-CHECKLIST item 63)."""
        request_id = message.params.get("requestId") if isinstance(message.params, dict) else None
        outcome = self._ledger.cancel(request_id) if is_valid_id(request_id) else Outcome()
        slot = outcome.answered
        if slot is None:
            return self._driver.modern  # nothing in flight to close: nothing to send either
        log.info("request %r cancelled by the client; no reply will be written for it", request_id)
        if outcome.line is not None:  # the rest of its batch was answered already
            self._tasks.spawn(self._outbox.put(outcome.line))
        self._made_room()
        exchange = slot.handle
        if not isinstance(exchange, _Exchange):
            return True  # it was still waiting: it never reached the app
        if exchange.modern:
            exchange.scope.cancel()  # 2026-07-28: closing the exchange is the cancellation (item 67)
            return True
        # Earlier revisions: the app hears of it from the notification first (a dropped
        # connection is no cancellation there, item 39); the exchange closes once that POST
        # is done, and CANCEL_NOTICE_SECONDS later at most.
        exchange.scope.deadline = min(exchange.scope.deadline, anyio.current_time() + CANCEL_NOTICE_SECONDS)
        self._deliver_soon(message, gate, then_cancel=exchange.scope)
        return True

    # -- forwarding ----------------------------------------------------------------------

    async def _handle_request(self, slot: Slot, request: Request, gate: anyio.Event, opens: anyio.Event | None) -> None:
        """Forward one request and answer it. Waits at ``gate`` (an ``initialize`` before it)
        first; sets ``opens`` when done (this is an ``initialize``: later messages may go)."""
        exchange = slot.handle
        assert isinstance(exchange, _Exchange)
        line = None
        try:
            with exchange.scope:
                if not gate.is_set():  # (anyio's wait yields to the loop even when set)
                    await gate.wait()
                if request.method in _OUTSIDE_THE_LIMIT:
                    line = await self._driver.request(request, self._relay)
                else:
                    await self._take_slot()
                    try:
                        line = await self._driver.request(request, self._relay)
                    finally:
                        self._limiter.release()
        except UpstreamError as exc:
            if slot.state == "open":
                log.warning("request %r (%s): %s", request.id, request.method, exc.message)
            if isinstance(exc, UpstreamTimeoutError) and request.method != "initialize" and not exchange.modern:
                # The bridge gave up: tell the app to stop working on it (SPEC-CHECKLIST item 64;
                # 2026-07-28: the closed stream says it).
                self._deliver_soon(_cancellation(request.id))
            line = error_line(request.id, exc)
        except Exception as exc:  # a bug must cost one request, never the whole connection
            log.exception("request %r (%s) failed inside the bridge", request.id, request.method)
            line = error_line(request.id, _internal_error(exc))
        finally:
            self._started -= 1
            if opens is not None:
                opens.set()
        if line is not None:  # (None: its scope was cancelled: cancelled, or answered already)
            await self._write(self._ledger.answer(slot, line), f"the reply to request {request.id!r}")
        self._made_room()

    async def _take_slot(self) -> None:
        """One of the ``max_concurrent_requests`` slots; a free one is taken without a
        trip through the event loop (measured: a loop iteration is a tenth of a call)."""
        try:
            self._limiter.acquire_nowait()
        except anyio.WouldBlock:
            await self._limiter.acquire()

    def _deliver_soon(
        self, message: Message, gate: anyio.Event | None = None, then_cancel: anyio.CancelScope | None = None
    ) -> None:
        self._notifying += 1
        self._tasks.spawn(self._handle_message(message, gate, then_cancel))

    async def _handle_message(
        self, message: Message, gate: anyio.Event | None = None, then_cancel: anyio.CancelScope | None = None
    ) -> None:
        """Forward a notification or a client response (after ``gate``), then cancel
        ``then_cancel``. Never writes to stdout."""
        what = f"notification {message.method}" if isinstance(message, Notification) else "response"
        try:
            if gate is not None and not gate.is_set():
                await gate.wait()
            await self._driver.deliver(message.body, what)
        except UpstreamError as exc:
            log.warning("%s not delivered: %s", what, exc.message)
            return
        except Exception:
            log.exception("%s not delivered: failure inside the bridge", what)
            return
        finally:
            self._notifying -= 1
            if then_cancel is not None:
                then_cancel.cancel()
            self._made_room()
        if isinstance(message, Notification) and message.method == "notifications/initialized":
            self._start_listening()

    def _start_listening(self) -> None:
        if self._listening or self._stopping.is_set():
            return
        self._listening = True
        self._tasks.spawn(self._listen())

    async def _listen(self) -> None:
        try:
            await self._driver.upstream.listen(self._relay)
        finally:
            self._listening = False

    async def _session_rebuilt(self) -> None:
        """After a rebuild: reopen the GET stream, tell the client its lists may differ."""
        self._start_listening()
        for line in self._driver.list_changed_notifications():
            await self._outbox.put(line)

    # -- stdout --------------------------------------------------------------------------

    async def _relay(self, line: bytes, message: Any = None) -> None:
        """Where every message from the app other than a request's own reply goes: SSE
        events, the other items of a JSON batch, the GET stream. ``message`` is ``line``
        parsed, when the caller has it."""
        if message is None:
            try:
                message = loads_strict(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                log.warning("dropped a message from the app that is not UTF-8 JSON (%d bytes)", len(line))
                return
        outcome = self._ledger.relay(line, message)
        slot = outcome.answered
        if slot is not None:  # it answered an open request: that one's own exchange may stop
            log.info("request %r answered by a message outside its own response", slot.id)
            if isinstance(slot.handle, _Exchange):
                slot.handle.scope.cancel()
        await self._write(outcome, "a message from the app")
        if slot is not None:
            self._made_room()

    async def _write(self, outcome: Outcome, what: str) -> None:
        if outcome.dropped is not None:
            log.warning("dropped %s: %s", what, outcome.dropped)
        if outcome.line is not None:
            await self._outbox.put(outcome.line)

    # -- shutdown ------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Give open requests the grace period, then answer the rest (bounded too: a
        client that stopped reading stdout cannot hold the exit up)."""
        if self._ledger:
            self._idle = anyio.Event()
            with anyio.move_on_after(self._config.shutdown_grace_seconds):
                await self._idle.wait()
        exc = ShuttingDownError("The bridge is shutting down (its input closed or it was told to stop) before the app answered.")
        with anyio.move_on_after(FLUSH_TIMEOUT_SECONDS):
            for line in self._ledger.close_all(exc):
                await self._outbox.put(line)

    async def _signal_loop(self) -> None:
        wanted = [signal.SIGTERM, signal.SIGINT]
        if hasattr(signal, "SIGHUP"):  # a closed terminal or a parent that hung up (POSIX only)
            wanted.append(signal.SIGHUP)
        try:
            receiver = anyio.open_signal_receiver(*wanted)
        except (NotImplementedError, AttributeError, ValueError):
            return  # not on this platform (Windows) or not the main thread
        assert self._signal_scope is not None
        with self._signal_scope, receiver as signals:
            async for signum in signals:
                if self._stopping.is_set():
                    log.info("%s received again; the shutdown is already under way", signal.Signals(signum).name)
                    continue
                log.info("%s received; shutting down", signal.Signals(signum).name)
                self._stopping.set()


def _cancellation(request_id: Any) -> Notification:
    params = {"requestId": request_id, "reason": "The bridge timed out waiting for the response."}
    body = encode_message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    return Notification("notifications/cancelled", params, body[:-1])


def _internal_error(exc: Exception) -> UpstreamError:
    return BadUpstreamResponseError(f"The bridge failed while handling this request ({type(exc).__name__}).")


def run_stdio(config: BridgeConfig) -> int:
    """Run the bridge on this process's stdin and stdout until the client lets go.

    Claims the wire first (:func:`~bridge.stdio.claim_stdio`): a stray ``print()`` from
    the app's own code, a library or a warning then goes to stderr and can never corrupt
    the JSON-RPC stream (DESIGN.md §2.2, HAZARDS B09). In a PyInstaller one-file
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
            config, stdin=FdReader(read_fd), stdout=FdWriter(wire_fd), handle_signals=True
        )
        if is_onefile_child():
            loop = asyncio.get_running_loop()

            def parent_gone() -> None:
                log.info("the executable's bootloader is gone; shutting down")
                try:
                    loop.call_soon_threadsafe(bridge.stop)
                except RuntimeError:  # the loop has finished already
                    pass

            watch_parent(parent_gone)
        return await bridge.run()

    return anyio.run(serve)
