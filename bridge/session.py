"""The loop that wires stdin, the app and stdout together (DESIGN.md §2).

One anyio task group holds everything:

- the **reader** pulls chunks from stdin into a :class:`~bridge.framing.LineFramer`,
  classifies each line and starts one task per message. It never waits for a reply, with
  one exception: after an ``initialize`` request it waits for that exchange to finish, so
  every later message carries the session id and protocol version (SPEC-CHECKLIST item 23);
- **one task per message** forwards it. Requests wait for a slot of the capacity limit
  (``max_concurrent_requests``); notifications and client responses never wait, so a
  ``notifications/cancelled`` is never stuck behind the slow call it cancels;
- the **writer** is the only code that writes stdout, one whole line per message;
- the **GET stream** task relays server-initiated messages once ``notifications/initialized``
  was accepted.

Every request gets exactly one reply: the app's, or an error with its id. The gate is
:meth:`Bridge._answer`; whatever path writes a reply goes through it, and the shutdown path
answers what is still open with reason ``shutting_down``.

Shutdown (stdin EOF, SIGTERM/SIGINT): stop reading, let in-flight requests finish for
``shutdown_grace_seconds``, answer the rest, ``DELETE`` the MCP session (bounded), flush
stdout (bounded) and return 0. A closed stdout ends the run at once and quietly.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from .config import BridgeConfig
from .driver import Driver
from .errors import (
    BadUpstreamResponseError,
    BridgeError,
    InboundError,
    LineTooLongError,
    ShuttingDownError,
    UpstreamError,
    UpstreamTimeoutError,
    error_response,
)
from .framing import EOF, NEED_DATA, LineFramer, OverlongLine
from .jsonrpc import Batch, Message, Notification, Request, classify, encode_message, is_valid_id, read_id_from_head
from .modern import modern_version
from .stdio import ByteSink, ByteSource, FdReader, FdWriter, claim_stdio, is_onefile_child, watch_parent

if TYPE_CHECKING:
    import anyio.abc
    import httpx

__all__ = ["Bridge", "run_stdio"]

log = logging.getLogger("bridge")

#: How long buffered stdout lines may take to reach the client once the run is over.
FLUSH_TIMEOUT_SECONDS = 0.3
#: Requests that never wait for a slot: a ping must not queue behind slow calls (DESIGN.md
#: §2.7), and a subscription stays open for as long as the client listens.
_OUTSIDE_THE_LIMIT = frozenset({"ping", "subscriptions/listen"})
#: Lines queued for the writer before senders wait (backpressure from a slow client).
OUTPUT_QUEUE_LINES = 64


@dataclass(eq=False)
class _Pending:
    """Requests that owe the client a reply: one request, or the requests of one batch.

    ``replies`` holds one slot per request; a batch is answered by one array line once
    every slot is filled (SPEC-CHECKLIST item 13).
    """

    requests: list[Request]
    batch: bool
    replies: list[bytes | None] = field(default_factory=list)
    extra: list[bytes] = field(default_factory=list)  # batch: errors for its invalid items
    answered: bool = False
    #: The client sent notifications/cancelled for it: a late result is still relayed, but
    #: no error is made up for it (HAZARDS B33; the client has already forgotten the id).
    cancelled: bool = False
    #: Cancels the HTTP exchange of a single request (2026-07-28 cancellation).
    scope: anyio.CancelScope | None = None

    def __post_init__(self) -> None:
        self.replies = [None] * len(self.requests)

    def line(self) -> bytes:
        if not self.batch:
            reply = self.replies[0]
            assert reply is not None
            return reply
        parts = [reply.rstrip(b"\n") for reply in self.replies if reply is not None]
        parts += [item.rstrip(b"\n") for item in self.extra]
        return b"[" + b",".join(parts) + b"]\n"


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
        handle_signals: stop gracefully on SIGTERM/SIGINT (only where the platform allows).
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
        self._stdout = stdout
        self._driver = Driver(
            config, http_transport=http_transport, app_probe=app_probe, on_session_rebuilt=self._session_rebuilt
        )
        self._handle_signals = handle_signals
        self._limiter = anyio.CapacityLimiter(config.max_concurrent_requests)
        self._out_send, self._out_receive = anyio.create_memory_object_stream[bytes](OUTPUT_QUEUE_LINES)
        self._open: set[_Pending] = set()
        self._by_id: dict[tuple[type, Any], _Pending] = {}  # open single requests, by id
        self._idle: anyio.Event | None = None
        self._stopping = anyio.Event()
        self._handshake = anyio.Event()  # set while no initialize is in flight
        self._handshake.set()
        self._signal_scope: anyio.CancelScope | None = None
        self._stdout_closed = False
        self._unwritten = 0  # lines handed to the writer task and not written yet
        self._output_closed = False  # the run is over: nothing more is written
        self._listening = False
        self._work: anyio.abc.TaskGroup | None = None
        self._tasks: set[asyncio.Task[None]] = set()

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
                outer.start_soon(self._write_loop)
                if self._handle_signals:
                    # In the outer group: a second SIGINT during the bounded shutdown must
                    # still find a handler (else: KeyboardInterrupt and a traceback).
                    self._signal_scope = anyio.CancelScope()
                    outer.start_soon(self._signal_loop)
                async with anyio.create_task_group() as work:
                    self._work = work
                    work.start_soon(self._read_loop)
                    await self._stopping.wait()
                    if not self._stdout_closed:
                        await self._drain()
                    work.cancel_scope.cancel()
                await self._cancel_tasks()
                with anyio.CancelScope(shield=True):
                    await self._driver.upstream.terminate_session()
                self._out_send.close()
                self._output_closed = True
                if self._signal_scope is not None:
                    self._signal_scope.cancel()
                outer.cancel_scope.deadline = anyio.current_time() + FLUSH_TIMEOUT_SECONDS
        finally:
            for task in self._tasks:  # only left when the run itself was cancelled
                task.cancel()
            with anyio.CancelScope(shield=True):
                await self._driver.upstream.aclose()
        return 0

    # -- stdin ---------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in a task of its own; the run cancels what is left when it ends.

        Plain asyncio tasks, not anyio's ``start_soon``: one per message, and anyio's
        bookkeeping cost 28 µs per task against 4 µs (measured on the benchmark machine).
        Every handler catches its own failures; one that escapes is logged, never lost.
        """
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a task failed inside the bridge", exc_info=exc)

    async def _cancel_tasks(self) -> None:
        """Cancel the per-message tasks still running and wait (bounded) until they end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=FLUSH_TIMEOUT_SECONDS)

    async def _read_loop(self) -> None:
        framer = LineFramer(self._config.max_message_bytes)
        while True:
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
                await self._emit_error(
                    request_id,
                    LineTooLongError(
                        f"Invalid Request: the message is {event.size_bytes} bytes, more than the "
                        f"{framer.max_line_bytes}-byte limit (--max-message-bytes)",
                        request_id,
                    ),
                )
            else:
                assert isinstance(event, bytes)
                try:
                    await self._dispatch_line(event)
                except Exception:  # a bug must cost one line, never the whole connection
                    log.exception("a stdin line could not be handled")

    async def _dispatch_line(self, line: bytes) -> None:
        assert self._work is not None
        try:
            message = classify(line)
        except InboundError as exc:
            log.warning("stdin: %s", exc.message)
            await self._emit_error(exc.request_id, exc)
            return
        if self._stopping.is_set():
            await self._refuse_while_stopping(message)
            return
        gate = self._handshake
        if isinstance(message, Batch):
            self._start_batch(message, gate)
        elif isinstance(message, Request):
            pending = self._open_pending([message], batch=False)
            self._by_id[_id_key(message.id)] = pending
            if message.method == "initialize":
                # The barrier: messages read after it wait (in their own tasks, so reading
                # goes on and EOF is seen at once) until its reply set the session id.
                self._handshake = anyio.Event()
                self._spawn(self._handle_request(pending, 0, gate, self._handshake))
            else:
                self._spawn(self._handle_request(pending, 0, gate))
        else:
            if isinstance(message, Notification) and message.method == "notifications/cancelled":
                if self._cancel(message):
                    return
            self._spawn(self._handle_message(message, gate))

    async def _refuse_while_stopping(self, message: Message | Batch) -> None:
        """A line read after shutdown began: its requests are answered at once."""
        requests = [m for m in message.items if isinstance(m, Request)] if isinstance(message, Batch) else [message]
        exc = ShuttingDownError("The bridge is shutting down and no longer forwards requests.")
        for request in requests:
            if isinstance(request, Request):
                await self._emit_error(request.id, exc)

    def _cancel(self, message: Notification) -> bool:
        """Note a client's cancellation; return whether it was handled here, not forwarded.

        2026-07-28 cancels a request by closing its HTTP exchange (SPEC-CHECKLIST item 67):
        the exchange is aborted and the notification never POSTed. Earlier revisions POST it,
        and keep relaying a late reply (item 63).
        """
        request_id = message.params.get("requestId") if isinstance(message.params, dict) else None
        pending = self._by_id.get(_id_key(request_id)) if is_valid_id(request_id) else None
        if pending is not None:
            pending.cancelled = True
            if pending.scope is not None and modern_version(pending.requests[0].params) is not None:
                pending.scope.cancel()  # also before its task started: it then never sends
                return True
            return False
        return self._driver.modern  # nothing in flight to close: nothing to send either

    def _open_pending(self, requests: list[Request], *, batch: bool) -> _Pending:
        pending = _Pending(requests, batch)
        if not batch:
            pending.scope = anyio.CancelScope()
        self._open.add(pending)
        return pending

    def _start_batch(self, batch: Batch, gate: anyio.Event) -> None:
        assert self._work is not None
        requests = [item for item in batch.items if isinstance(item, Request)]
        pending = self._open_pending(requests, batch=True)
        for item in batch.items:
            if isinstance(item, InboundError):
                pending.extra.append(encode_message(error_response(item.request_id, item)))
            elif not isinstance(item, Request):
                self._spawn(self._handle_message(item, gate))
        if not requests:
            # Only notifications/responses (and invalid items): no request owes a reply.
            self._open.discard(pending)
            if pending.extra:
                self._spawn(self._emit(pending.line()))
            return
        for index in range(len(requests)):
            self._spawn(self._handle_request(pending, index, gate))

    # -- forwarding ----------------------------------------------------------------------

    async def _handle_request(
        self, pending: _Pending, index: int, gate: anyio.Event, opens: anyio.Event | None = None
    ) -> None:
        """Forward one request and answer it. Waits at ``gate`` (an ``initialize`` before it)
        first; sets ``opens`` when done (this is an ``initialize``: later messages may go)."""
        request = pending.requests[index]
        scope = pending.scope if pending.scope is not None else anyio.CancelScope()
        try:
            with scope:
                if not gate.is_set():  # (anyio's wait yields to the loop even when set)
                    await gate.wait()
                if request.method in _OUTSIDE_THE_LIMIT:
                    line = await self._driver.request(request, self._emit)
                else:
                    await self._take_slot()
                    try:
                        line = await self._driver.request(request, self._emit)
                    finally:
                        self._limiter.release()
            if scope.cancelled_caught:
                await self._answer(pending, silently=True)  # the client cancelled it
                return
        except UpstreamError as exc:
            log.warning("request %r (%s): %s", request.id, request.method, exc.message)
            if pending.cancelled:
                await self._answer(pending, silently=True)
                return
            if (
                isinstance(exc, UpstreamTimeoutError)
                and request.method != "initialize"
                and modern_version(request.params) is None  # 2026-07-28: the closed stream says it
            ):
                # The bridge gave up: tell the app to stop working on it (SPEC-CHECKLIST item 64).
                self._spawn(self._send_cancellation(request.id))
            line = encode_message(error_response(request.id, exc))
        except Exception as exc:  # a bug must cost one request, never the whole connection
            log.exception("request %r (%s) failed inside the bridge", request.id, request.method)
            line = encode_message(error_response(request.id, _internal_error(exc)))
        finally:
            if opens is not None:
                opens.set()
        pending.replies[index] = line
        if all(reply is not None for reply in pending.replies):
            await self._answer(pending)

    async def _take_slot(self) -> None:
        """One of the ``max_concurrent_requests`` slots; a free one is taken without a
        trip through the event loop (measured: a loop iteration is a tenth of a call)."""
        try:
            self._limiter.acquire_nowait()
        except anyio.WouldBlock:
            await self._limiter.acquire()

    async def _send_cancellation(self, request_id: Any) -> None:
        params = {"requestId": request_id, "reason": "The bridge timed out waiting for the response."}
        body = encode_message({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        await self._handle_message(Notification("notifications/cancelled", params, body[:-1]))

    async def _handle_message(self, message: Message, gate: anyio.Event | None = None) -> None:
        """Forward a notification or a client response (after ``gate``). Never writes to stdout."""
        what = f"notification {message.method}" if isinstance(message, Notification) else "response"
        if gate is not None and not gate.is_set():
            await gate.wait()
        try:
            await self._driver.deliver(message.body, what)
        except UpstreamError as exc:
            log.warning("%s not delivered: %s", what, exc.message)
            return
        except Exception:
            log.exception("%s not delivered: failure inside the bridge", what)
            return
        if isinstance(message, Notification) and message.method == "notifications/initialized":
            self._start_listening()

    def _start_listening(self) -> None:
        if self._listening or self._work is None:
            return
        self._listening = True
        self._spawn(self._listen())

    async def _listen(self) -> None:
        try:
            await self._driver.upstream.listen(self._emit)
        finally:
            self._listening = False

    async def _session_rebuilt(self) -> None:
        """After a rebuild: reopen the GET stream, tell the client its lists may differ."""
        self._start_listening()
        for line in self._driver.list_changed_notifications():
            await self._emit(line)

    # -- stdout --------------------------------------------------------------------------

    async def _answer(self, pending: _Pending, *, silently: bool = False) -> None:
        """Write the reply owed by ``pending``, unless it was written already (or, with
        ``silently``, close it without writing anything)."""
        if pending.answered:
            return
        pending.answered = True
        try:
            if not silently:
                await self._emit(pending.line())
        finally:
            self._open.discard(pending)
            if not pending.batch and self._by_id.get(key := _id_key(pending.requests[0].id)) is pending:
                del self._by_id[key]
            if not self._open and self._idle is not None:
                self._idle.set()

    async def _emit(self, line: bytes) -> None:
        """Queue ``line`` for stdout, in order; waits while the queue is full (a client that
        reads slowly). When nothing is queued or being written, a small line that the
        descriptor takes at once is written here (``FdWriter.write_now``)."""
        try:
            if not self._unwritten:
                write_now = getattr(self._stdout, "write_now", None)
                if write_now is not None and not self._stdout_closed and not self._output_closed:
                    try:
                        written = write_now(line)
                    except OSError as exc:
                        self._stdout_gone(exc)
                        return
                    if written == len(line):
                        return
                    line = line[written:]
            self._out_send.send_nowait(line)
            self._unwritten += 1
        except anyio.WouldBlock:
            self._unwritten += 1  # counted before waiting: a later line must queue behind this one
            try:
                await self._out_send.send(line)
            except BaseException as exc:
                self._unwritten -= 1
                if not isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError)):
                    raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the run is over; nothing more reaches the client

    def _stdout_gone(self, exc: OSError) -> None:
        log.info("stdout closed (%s); shutting down", type(exc).__name__)
        self._stdout_closed = True
        self._stopping.set()

    async def _emit_error(self, request_id: Any, exc: BridgeError) -> None:
        await self._emit(encode_message(error_response(request_id, exc)))

    async def _write_loop(self) -> None:
        async with self._out_receive:
            while True:
                try:
                    line = self._out_receive.receive_nowait()
                except anyio.WouldBlock:
                    try:
                        line = await self._out_receive.receive()
                    except anyio.EndOfStream:
                        return
                except anyio.EndOfStream:
                    return
                try:
                    if not self._stdout_closed:
                        await self._stdout.send(line)
                except OSError as exc:
                    self._stdout_gone(exc)
                finally:
                    self._unwritten -= 1

    # -- shutdown ------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Give in-flight requests the grace period, then answer the rest (bounded too: a
        client that stopped reading stdout cannot hold the exit up)."""
        if self._open:
            self._idle = anyio.Event()
            with anyio.move_on_after(self._config.shutdown_grace_seconds):
                await self._idle.wait()
        exc = ShuttingDownError("The bridge is shutting down (its input closed or it was told to stop) before the app answered.")
        with anyio.move_on_after(FLUSH_TIMEOUT_SECONDS):
            for pending in list(self._open):
                for index, request in enumerate(pending.requests):
                    if pending.replies[index] is None:
                        pending.replies[index] = encode_message(error_response(request.id, exc))
                await self._answer(pending, silently=pending.cancelled)

    async def _signal_loop(self) -> None:
        try:
            receiver = anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT)
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



def _id_key(request_id: Any) -> tuple[type, Any]:
    # 1 and "1" are different ids (and True is no id at all).
    return (type(request_id), request_id)


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
