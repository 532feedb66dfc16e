"""Dispatch: every classified stdin message to its task, every reply through the ledger.

The request lifecycle, between the reader (``loop.py``) and the request stack (``translate.py``):
a request line is opened in the :class:`~bridge.core.ledger.Ledger`, started through
:class:`~bridge.core.admission.Admission` (at once, or when started ones end), forwarded in a
task of its own (waiting for one of ``max_concurrent_requests`` slots, except ``ping`` and
``subscriptions/listen``; through the tool gate, ``toolgate.py``, when a tool filter is
given), and answered through the ledger. Notifications and client
responses are delivered in tasks that never wait for a slot. Every other line from the
app passes :meth:`Dispatcher.relay`, the ``emit`` the stack gets.

**Cancellation** (docs/behaviour.md, "Cancellation"). A client's
``notifications/cancelled`` for an open request closes it in the ledger: no reply is ever
written for it (MCP basic/utilities/cancellation: the receiver SHOULD NOT reply; the
client ignores a late one anyway), and a late response from the app is dropped. Its
exchange stops at once, which frees its slot and its connection; one still waiting to start
is never sent. 2026-07-28 cancels by closing the exchange alone (its basic/patterns/cancellation).
Earlier revisions POST the notification first (basic/utilities/cancellation; a dropped
connection is no cancellation there, basic/transports) and close the exchange once that POST is done, within
:data:`CANCEL_NOTICE_SECONDS`. A request answered by a line outside its own exchange (B's
response on A's stream) is stopped the same way.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.admission import Admission
from ..core.config import BridgeConfig
from ..core.era import CANCEL_NOTICE_SECONDS
from ..core.errors import (
    BridgeError,
    BridgeInternalError,
    InboundError,
    ShuttingDownError,
    UpstreamError,
    UpstreamTimeoutError,
)
from ..core.jsonrpc import (
    Batch,
    Message,
    Notification,
    Request,
    Response,
    classify,
    encode_message,
    error_line,
    is_valid_id,
    loads_members,
    refusal_line,
)
from ..core.ledger import Ledger, Outcome, Pending, Slot
from ..core.trace import LOGGER_NAME, message_line
from ..stdio.outbox import Outbox
from ..system.cancelscope import CancelScope, current_time, move_on_after
from .heartbeat import Heartbeats
from .taskset import TaskSet
from .translate import EraRouter

if TYPE_CHECKING:
    from .toolgate import ToolGate

__all__ = ["Dispatcher"]

log = logging.getLogger("bridge")
#: One debug line per message (``bridge/core/trace.py``).
trace = logging.getLogger(LOGGER_NAME)

#: Requests that never wait for a slot: a ping must not queue behind slow calls
#: (docs/behaviour.md, "Concurrency"), and a subscription stays open for as long as the client listens.
_OUTSIDE_THE_LIMIT = frozenset({"ping", "subscriptions/listen"})
#: How long the shutdown answers may take to be queued for stdout (seconds).
_CLOSE_ALL_TIMEOUT_SECONDS = 0.05

_NEVER_SENT = None  # Slot.handle of a request whose task has not started


class _Exchange:
    """``Slot.handle`` of a started request: what stops it, how its era cancels it, and its
    method (an ``initialize`` is never cancelled: MCP basic/utilities/cancellation)."""

    __slots__ = ("scope", "cancel_by_closing", "method", "started_at")

    def __init__(self, scope: CancelScope, cancel_by_closing: bool, method: str = "") -> None:
        self.scope = scope
        self.cancel_by_closing = cancel_by_closing  # request.era.cancel_by_closing (2026-07-28)
        self.method = method
        self.started_at = current_time()  # (the trace's time of a reply: loop time, seconds)


class Dispatcher:
    """Run what the reader hands over; answer through the ledger.

    Args:
        config: the run's configuration.
        stack: the top of the request stack (``request``, ``deliver``; ``bridge/serve/translate.py``).
        outbox: the stdout writer.
        tasks: where per-message tasks run.
        on_initialized: called once the app accepted ``notifications/initialized``, with the
            barrier to lift once the GET stream is open (messages read after the
            notification wait for it).
    """

    def __init__(
        self, config: BridgeConfig, stack: EraRouter, outbox: Outbox, tasks: TaskSet, on_initialized: Callable[[asyncio.Event], None]
    ) -> None:
        self._stack = stack
        self._outbox = outbox
        self._tasks = tasks
        self._on_initialized = on_initialized
        self._slots = asyncio.Semaphore(config.max_concurrent_requests)
        self._heartbeats = Heartbeats(config.progress_heartbeat_seconds, outbox.put, app_name=config.app_name)
        # The tool filter, in front of the request stack (bridge/serve/toolgate.py): every
        # request goes down through it, and every reply comes back up through it. Its
        # modules are loaded only when a filter option is given.
        self._gate: ToolGate | None = None
        if config.allow_tools or config.deny_tools or config.read_only:
            from ..core.toolfilter import ToolFilter
            from .toolgate import ToolGate

            rules = ToolFilter(config.allow_tools, config.deny_tools, config.read_only)
            self._gate = ToolGate(rules, stack.request, app_name=config.app_name)
        self._send_request = stack.request if self._gate is None else self._gate.request
        self._ledger = Ledger()
        self._admission = Admission(self._ledger)
        self._room: asyncio.Event | None = None  # set when the reader may go on
        self._idle: asyncio.Event | None = None  # set when no request is open (shutdown)
        self._handshake = asyncio.Event()  # set while no initialize is in flight
        self._handshake.set()
        self._stop_reason = "its input closed or it was told to stop"
        self._stopping = False
        self._grace_over = False
        # Set when stdin's EOF came before any other stop: the requests in flight are then
        # finished, not cut short (see :meth:`input_closed`).
        self._finish_work = False
        self._drain_timeout_seconds = config.drain_timeout_seconds
        self._notices_scope: CancelScope | None = None  # the cancellations sent after the drain
        # The ids of requests answered by an early start (the catalog start, the running-app
        # start), whose replies are not written again.
        self._answered_before: set[Any] = set()

    async def wait_for_room(self) -> None:
        """Return once the reader may take another line: the open requests are within
        their budgets (``bridge/core/admission.py``) and stdout's budget has room (``bridge/stdio/outbox.py``: a
        client that does not read stdout is not read from either)."""
        while True:
            if self._admission.reading_paused():
                self._room = asyncio.Event()
                await self._room.wait()
            elif not self._outbox.has_room:
                await self._outbox.wait_for_room()
            else:
                return

    async def dispatch_line(self, line: bytes, *, stopping: bool = False, answered: bool = False) -> None:
        """Classify one stdin line (without its line end) and start what it asks for.
        With ``stopping`` its requests are answered ``shutting_down`` at once. With
        ``answered``, the line's request was answered before this loop started (the
        catalog start, ``bridge/serve/catalogstart.py``): it runs as any other, and its
        reply is not written again."""
        try:
            message = classify(line)
        except InboundError as exc:
            log.warning("stdin: %s", exc.message)
            reply = error_line(exc.request_id, exc)
            if trace.isEnabledFor(logging.DEBUG):
                _trace_in_line(None, len(line))
                _trace_reply(None, exc.request_id, len(reply) - 1, None, "bridge")
            await self._outbox.put(reply)
            return
        if answered and isinstance(message, Request):
            self._answered_before.add(message.id)
        if trace.isEnabledFor(logging.DEBUG):
            for item in message.items if isinstance(message, Batch) else (message,):
                _trace_in_line(item, len(item.body) if isinstance(item, (Request, Notification, Response)) else len(line))
        if stopping:
            await self._refuse_while_stopping(message)
            return
        gate = self._handshake
        if isinstance(message, Batch):
            requests = [item for item in message.items if isinstance(item, Request)]
            extra = [error_line(item.request_id, item) for item in message.items if isinstance(item, InboundError)]
            for item in message.items:
                if isinstance(item, (Notification, Response)):
                    self._deliver_soon(item, gate)
            opened = self._ledger.open(
                [r.id for r in requests],
                batch=True,
                held_bytes=Admission.cost(line),
                extra=extra,
                lasting=[r.era.endless(r.method) for r in requests],
            )
        elif isinstance(message, Request):
            opened = self._ledger.open(
                [message.id], batch=False, held_bytes=Admission.cost(line), lasting=[message.era.endless(message.method)]
            )
        else:
            if isinstance(message, Notification) and message.method == "notifications/cancelled":
                if self._cancel(message, gate):
                    return
            opens = None
            if isinstance(message, Notification) and message.method == "notifications/initialized":
                # A second barrier: messages read after it wait until the GET stream is open
                # (or refused, or a bound passed), as the official SDK clients open it before
                # their next request. A server may send its first server-to-client request
                # there at once, and drops it while no stream is open.
                opens = self._handshake = asyncio.Event()
            self._deliver_soon(message, gate, opens=opens)
            return
        if opened.line is not None:
            await self._outbox.put(opened.line)
        if opened.pending is None:
            return
        opens = None
        if isinstance(message, Request) and message.method == "initialize":
            # The barrier: messages read after it wait (in their own tasks, so reading goes
            # on and EOF is seen at once) until its reply set the session id.
            opens = self._handshake = asyncio.Event()
        if self._admission.may_start():
            self._start(opened.pending, message, gate, opens)
        else:
            self._admission.wait(opened.pending, line, (gate, opens))

    def _start(self, pending: Pending, message: Message | Batch, gate: asyncio.Event, opens: asyncio.Event | None) -> None:
        """Start a task for each still-open request of ``pending`` (``message``: its line)."""
        requests = [m for m in message.items if isinstance(m, Request)] if isinstance(message, Batch) else [message]
        for request in requests:
            assert isinstance(request, Request)
            slot = self._ledger.slot(request.id)
            if slot is None or slot.pending is not pending or slot.handle is not _NEVER_SENT:
                continue  # cancelled while it waited, or a repeated id the ledger refused
            slot.handle = _Exchange(CancelScope(), request.era.cancel_by_closing, request.method)
            self._admission.started += 1
            self._tasks.spawn(self._handle_request(slot, request, gate, opens))
            opens = None  # (only a single request carries one)
        if opens is not None:  # an initialize cancelled while it waited: the barrier lifts
            opens.set()

    def _made_room(self) -> None:
        """A request closed or a task ended: start waiting requests, wake the reader."""
        for pending, line, (gate, opens) in self._admission.ready():
            if pending.remaining:
                self._start(pending, classify(line), gate, opens)  # the same line: the same verdict
            elif opens is not None:
                opens.set()
        if self._room is not None and not self._admission.reading_paused():
            self._room.set()
        if self._idle is not None and not self._ledger.working:
            self._idle.set()

    async def _refuse_while_stopping(self, message: Message | Batch) -> None:
        """A line read after shutdown began: its requests are answered at once."""
        exc = ShuttingDownError(f"The bridge is shutting down ({self._stop_reason}) and no longer forwards requests.")
        line = refusal_line(message, exc)  # a batch's replies as one array, as any batch's
        if trace.isEnabledFor(logging.DEBUG):
            for item in message.items if isinstance(message, Batch) else (message,):
                if isinstance(item, Request):
                    _trace_reply(item.method, item.id, len(error_line(item.id, exc)) - 1, None, "bridge")
        if line is not None:
            await self._outbox.put(line)

    def _cancel(self, message: Notification, gate: asyncio.Event) -> bool:
        """The client cancelled a request: close it without a reply and stop its exchange
        (freeing its slot and connection). Returns whether the notification is done with
        here; else it is POSTed (before 2026-07-28: MCP basic/utilities/cancellation)."""
        request_id = message.params.get("requestId") if isinstance(message.params, dict) else None
        outcome = self._ledger.cancel(request_id) if is_valid_id(request_id) else Outcome()
        slot = outcome.answered
        if slot is None:
            return self._stack.client_era.cancel_by_closing  # nothing in flight to close: nothing to send either
        log.info("request %r cancelled by the client; no reply will be written for it", request_id)
        if outcome.line is not None:  # the rest of its batch was answered already
            self._tasks.spawn(self._outbox.put(outcome.line))
        self._made_room()
        exchange = slot.handle
        if not isinstance(exchange, _Exchange):
            return True  # it was still waiting: it never reached the app
        if exchange.cancel_by_closing:
            exchange.scope.cancel()  # 2026-07-28: closing the exchange is the cancellation
            return True
        # Earlier revisions: the app hears of it from the notification first (a dropped
        # connection is no cancellation there); the exchange closes once that POST
        # is done, and CANCEL_NOTICE_SECONDS later at most.
        exchange.scope.deadline = min(exchange.scope.deadline, current_time() + CANCEL_NOTICE_SECONDS)
        self._deliver_soon(message, gate, then_cancel=exchange.scope)
        return True

    # -- forwarding ----------------------------------------------------------------------

    async def _handle_request(self, slot: Slot, request: Request, gate: asyncio.Event, opens: asyncio.Event | None) -> None:
        """Forward one request and answer it. Waits at ``gate`` (an ``initialize`` before it)
        first; sets ``opens`` when done (this is an ``initialize``: later messages may go)."""
        exchange = slot.handle
        assert isinstance(exchange, _Exchange)
        line = None
        answered_by = "bridge"
        try:
            with exchange.scope:
                if not exchange.scope.cancel_called:  # (cancelled before its task ran: never sent)
                    line = await self._forward(request, gate)
                    answered_by = "catalog" if self._stack.answered_from_catalog(request.id) else "app"
        except UpstreamError as exc:
            if slot.state == "open":
                log.warning("request %r (%s): %s", request.id, request.method, exc.message)
            if isinstance(exc, UpstreamTimeoutError) and request.method != "initialize" and request.era.sends_timeout_cancellation:
                # The bridge gave up: tell the app to stop working on it (MCP basic/utilities/cancellation;
                # 2026-07-28: the closed stream says it).
                self._deliver_soon(_cancellation(request.id))
            line = error_line(request.id, exc)
        except Exception as exc:  # a bug must cost one request, never the whole connection
            log.exception("request %r (%s) failed inside the bridge", request.id, request.method)
            line = error_line(request.id, _internal_error(exc))
        finally:
            self._admission.started -= 1
            if opens is not None:
                opens.set()
        if line is not None and request.id in self._answered_before:  # written by an early start
            self._answered_before.discard(request.id)
            self._ledger.answer(slot, line)
            if trace.isEnabledFor(logging.DEBUG):  # (the catalog's, or the app's: the running-app start)
                _trace_reply(request.method, request.id, len(line) - 1, None, answered_by)
        elif line is not None:  # (None: its scope was cancelled: cancelled, or answered already)
            if trace.isEnabledFor(logging.DEBUG) and slot.state == "open":
                if answered_by == "app" and _bridge_error(line):  # (the tool filter's refusal, say)
                    answered_by = "bridge"
                _trace_reply(request.method, request.id, len(line) - 1, current_time() - exchange.started_at, answered_by)
            await self._write(self._ledger.answer(slot, line), f"the reply to request {request.id!r}", expected=True)
        self._made_room()

    async def _forward(self, request: Request, gate: asyncio.Event) -> bytes:
        await gate.wait()
        if request.method in _OUTSIDE_THE_LIMIT:
            await self._stdout_room()
            return await self._send_request(request, self.relay)
        await self._slots.acquire()  # a free one without a trip through the loop
        try:
            await self._stdout_room()
            # (progress heartbeats while the app is silent: bridge/serve/heartbeat.py)
            return await self._heartbeats.watch(request, self._send_request(request, self.relay))
        finally:
            self._slots.release()

    async def _stdout_room(self) -> None:
        """Send nothing to the app while stdout's budget is used up: its reply could not
        go out, and would only be held here. The replies still held are then those of
        the requests already sent: at most ``max_concurrent_requests`` plus pings."""
        if not self._outbox.has_room:
            await self._outbox.wait_for_room()

    def _deliver_soon(
        self,
        message: Message,
        gate: asyncio.Event | None = None,
        then_cancel: CancelScope | None = None,
        *,
        opens: asyncio.Event | None = None,
    ) -> None:
        self._admission.notifying += 1
        self._tasks.spawn(self._handle_message(message, gate, then_cancel, opens))

    async def _handle_message(
        self,
        message: Message,
        gate: asyncio.Event | None = None,
        then_cancel: CancelScope | None = None,
        opens: asyncio.Event | None = None,
    ) -> None:
        """Forward a notification or a client response (after ``gate``), then cancel
        ``then_cancel``. Never writes to stdout. ``opens`` (``notifications/initialized``
        only): the barrier it holds, lifted once the GET stream is open (``on_initialized``)
        or at once when the notification was not delivered."""
        what = f"notification {message.method}" if isinstance(message, Notification) else "response"
        delivered = False
        try:
            if gate is not None:
                await gate.wait()
            await self._stack.deliver(message.body, what)
            delivered = True
        except UpstreamError as exc:
            log.warning("%s not delivered: %s", what, exc.message)
            return
        except Exception:
            log.exception("%s not delivered: failure inside the bridge", what)
            return
        finally:
            self._admission.notifying -= 1
            if then_cancel is not None:
                then_cancel.cancel()
            self._made_room()
            if opens is not None and not delivered:
                opens.set()
        if isinstance(message, Notification) and message.method == "notifications/initialized":
            self._on_initialized(opens if opens is not None else asyncio.Event())

    # -- stdout --------------------------------------------------------------------------

    async def relay(self, line: bytes, message: Any = None) -> None:
        """Where every message from the app other than a request's own reply goes: SSE
        events, the other items of a JSON batch, the GET stream. ``message`` is ``line``
        parsed, when the caller has it."""
        if message is None:
            try:
                message, twice = loads_members(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                log.warning("dropped a message from the app that is not UTF-8 JSON (%d bytes)", len(line))
                return
            if twice:  # never forwarded as it is: a first-member reader would read another message
                line = encode_message(message)
        self._heartbeats.heard(message)
        if self._gate is not None:  # a tools/list reply outside its own exchange is filtered too
            line = self._gate.relayed(line, message)
        outcome = self._ledger.relay(line, message)
        if trace.isEnabledFor(logging.DEBUG) and outcome.dropped is None:
            _trace_from_app(message, outcome.answered, len(line.rstrip(b"\n")))
        slot = outcome.answered
        if slot is not None:  # it answered an open request: that one's own exchange may stop
            log.info("request %r answered by a message outside its own response", slot.id)
            if isinstance(slot.handle, _Exchange):
                slot.handle.scope.cancel()
        await self._write(outcome, "a message from the app")
        if slot is not None:
            self._made_room()

    async def _write(self, outcome: Outcome, what: str, *, expected: bool = False) -> None:
        if outcome.dropped is not None:  # (expected: the request's own reply after a cancel)
            log.log(logging.INFO if expected else logging.WARNING, "dropped %s: %s", what, outcome.dropped)
        if outcome.line is not None:
            await self._outbox.put(outcome.line)

    # -- shutdown ----------------------------------------------------------------------------

    def input_closed(self) -> None:
        """Stdin reached its end. When nothing else began the shutdown before (no signal,
        no :meth:`stopping`), :meth:`drain` lets the requests in flight finish, within
        ``drain_timeout_seconds``, instead of the short grace: a pipeline or a script that
        writes its requests and closes its input still gets the replies of its short calls
        (the MCP stdio transport's shutdown closes the input first, then waits for the
        server to exit before any SIGTERM: basic/lifecycle, "Shutdown", stdio). A signal
        afterwards ends that wait at once (:meth:`end_grace`)."""
        if not self._stopping:
            self._finish_work = True

    def stopping(self, reason: str) -> None:
        """Shutdown began; ``reason`` (``"stdin closed"``, ``"SIGTERM"``…) goes into the
        ``shutting_down`` messages."""
        self._stopping = True
        self._stop_reason = reason

    def end_grace(self) -> None:
        """Stop waiting for open requests: :meth:`drain` answers them at once (a second
        signal, or a SIGTERM: the client's kill follows soon)."""
        self._grace_over = True
        if self._idle is not None:
            self._idle.set()
        if self._notices_scope is not None:
            self._notices_scope.cancel()

    async def drain(self, grace_seconds: float) -> None:
        """Give requests in flight ``grace_seconds`` (or until :meth:`end_grace`), then
        answer every open request ``shutting_down``, lasting ones (``subscriptions/listen``)
        included, which are never waited for (bounded too: a client that stopped reading
        stdout cannot hold the exit up).

        After :meth:`input_closed` alone the requests in flight are waited for instead,
        until each has its reply or :meth:`end_grace`, for ``drain_timeout_seconds`` at
        most. Those still open then are answered ``shutting_down`` and cancelled at the app
        (:meth:`_cancel_at_the_app`)."""
        drained = False
        if self._ledger.working and not self._grace_over:
            self._idle = asyncio.Event()
            if self._finish_work:
                log.info(
                    "stdin closed; waiting for %d request(s) in flight (at most %g s, --drain-timeout)",
                    self._ledger.working,
                    self._drain_timeout_seconds,
                )
                grace_seconds = self._drain_timeout_seconds
            with move_on_after(grace_seconds):
                await self._idle.wait()
            drained = self._finish_work and not self._grace_over and bool(self._ledger.working)
        reason = self._stop_reason
        if drained:
            reason = f"{reason}; --drain-timeout of {self._drain_timeout_seconds:g} s passed"
            log.warning(
                "%d request(s) still in flight %g s after stdin closed (--drain-timeout): answered shutting_down, "
                "and cancelled at the app",
                self._ledger.working,
                self._drain_timeout_seconds,
            )
        in_flight = [(slot.id, slot.handle) for slot in self._ledger.open_slots() if not slot.lasting] if drained else []
        exc = ShuttingDownError(f"The bridge is shutting down ({reason}) before the app answered.")
        if trace.isEnabledFor(logging.DEBUG):
            for slot in self._ledger.open_slots():
                method = slot.handle.method if isinstance(slot.handle, _Exchange) else None
                _trace_reply(method, slot.id, len(error_line(slot.id, exc)) - 1, None, "bridge")
        with move_on_after(_CLOSE_ALL_TIMEOUT_SECONDS):
            for line in self._ledger.close_all(exc):
                await self._outbox.put(line)
        started = [(request_id, handle) for request_id, handle in in_flight if isinstance(handle, _Exchange)]
        if started:
            await self._cancel_at_the_app(started)

    async def _cancel_at_the_app(self, exchanges: list[tuple[Any, _Exchange]]) -> None:
        """Tell the app the requests of ``exchanges`` (their ids and exchanges) are abandoned:
        the drain after stdin EOF ran out. Before 2026-07-28, ``notifications/cancelled``
        for each (not for an ``initialize``), all within :data:`CANCEL_NOTICE_SECONDS` or
        until :meth:`end_grace`; then each exchange is closed, which is the cancellation
        since 2026-07-28 (MCP basic/utilities/cancellation)."""
        reason = "The bridge's input closed and it stopped waiting for the response (--drain-timeout)."
        told = [
            request_id
            for request_id, exchange in exchanges
            if not exchange.cancel_by_closing and exchange.method != "initialize"
        ]
        if told and not self._grace_over:
            self._notices_scope = move_on_after(CANCEL_NOTICE_SECONDS)
            with self._notices_scope:
                await asyncio.gather(*(self._notify(_cancellation(request_id, reason)) for request_id in told))
        for _, exchange in exchanges:
            exchange.scope.cancel()

    async def _notify(self, notification: Notification) -> None:
        """Send the app one notification of the bridge's own; a failure is logged."""
        try:
            await self._stack.deliver(notification.body, f"notification {notification.method}")
        except UpstreamError as exc:
            log.info("notification %s not delivered: %s", notification.method, exc.message)


def _trace_in_line(item: Message | InboundError | None, size_bytes: int) -> None:
    """Trace one message the client sent (``None`` or an ``InboundError``: a line that is
    not a valid message, answered by the bridge)."""
    if isinstance(item, Request):
        text = message_line("client→app", "request", method=item.method, request_id=item.id, has_id=True, size_bytes=size_bytes)
    elif isinstance(item, Notification):
        text = message_line("client→app", "notification", method=item.method, size_bytes=size_bytes)
    elif isinstance(item, Response):
        text = message_line("client→app", "response", request_id=item.id, has_id=True, size_bytes=size_bytes)
    else:
        text = message_line("client→app", "invalid message", size_bytes=size_bytes)
    trace.debug("%s", text)


def _bridge_error(line: bytes) -> bool:
    """Whether a reply line is an error the bridge made (``data.source`` ``"bridge"``,
    ``bridge/core/jsonrpc.py``'s ``error_line``), for the trace."""
    if b'"error"' not in line or b'"bridge"' not in line:
        return False
    try:
        reply = json.loads(line)
    except ValueError:
        return False
    error = reply.get("error") if isinstance(reply, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    return isinstance(data, dict) and data.get("source") == "bridge"


def _trace_reply(method: Any, request_id: Any, size_bytes: int, elapsed_seconds: float | None, answered_by: str) -> None:
    """Trace one reply written to the client."""
    trace.debug(
        "%s",
        message_line(
            "bridge→client",
            "reply",
            method=method,
            request_id=request_id,
            has_id=True,
            size_bytes=size_bytes,
            elapsed_seconds=elapsed_seconds,
            answered_by=answered_by,
        ),
    )


def _trace_from_app(message: Any, answered: Slot | None, size_bytes: int) -> None:
    """Trace one message from the app beside a request's own reply (a notification, a
    server request, or a response on another stream)."""
    if not isinstance(message, dict):
        return
    if "method" in message:
        kind = "request" if "id" in message else "notification"
        text = message_line(
            "app→client", kind, method=message["method"], request_id=message.get("id"), has_id="id" in message, size_bytes=size_bytes
        )
    else:
        method = answered.handle.method if answered is not None and isinstance(answered.handle, _Exchange) else None
        text = message_line(
            "bridge→client", "reply", method=method, request_id=message.get("id"), has_id=True, size_bytes=size_bytes, answered_by="app"
        )
    trace.debug("%s", text)


def _cancellation(request_id: Any, reason: str = "The bridge timed out waiting for the response.") -> Notification:
    params = {"requestId": request_id, "reason": reason}
    body = encode_message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    return Notification("notifications/cancelled", params, body[:-1])


def _internal_error(exc: Exception) -> BridgeError:
    if isinstance(exc, BridgeError):  # already says what failed (a BridgeInternalError, say)
        return exc
    return BridgeInternalError(f"The bridge failed while handling this request ({type(exc).__name__}).")
