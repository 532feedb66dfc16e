"""The reply ledger: which requests still owe the client a reply, and the gate every line
from the app passes before it may reach stdout.

Pure: imports only the standard library and the core; no I/O, no ``await``.

Every request read from stdin is opened here, alone or as part of a batch, and closed
exactly once: **answered** (its line is returned for stdout once; a batch's replies as one
array once all are in, JSON-RPC 2.0 §6) or **cancelled** by the client (nothing is
written for it: MCP basic/utilities/cancellation, "receivers SHOULD NOT send a response
for the cancelled request"). The ledger never writes: it returns the line to write, or
says why nothing is written (the caller logs it).

Lines from the app reach the client two ways, and both end here:

- a request's own reply (the response its exchange returned, or the bridge's error for
  it): :meth:`Ledger.answer`;
- everything else the app sent (SSE events before the response, the other items of a JSON
  batch, the GET stream): :meth:`Ledger.relay`. It applies the one validation of
  :func:`bridge.core.jsonrpc.message_problem`: anything that is not a JSON-RPC 2.0 request,
  notification or response is dropped. A response for an open request is that request's
  answer; a response for an id that is not open (never was, or already answered or
  cancelled) is dropped.

**The first valid answer wins.** When the app sends B's response on A's stream (or on the
GET stream) while B is open, that response answers B; B's own exchange is then told to
stop (:attr:`Outcome.answered`) and whatever it returns later is dropped.

Two requests open with the same id cannot be told apart by a response, so an id already
open is refused: the new request gets -32600 at once and the open one is untouched.

A **lasting** request (``subscriptions/listen``, MCP 2026-07-28: open for as long as the
client listens) owes a reply like any other, but it is no work in flight: the shutdown
does not wait for it (:attr:`Ledger.working`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from .errors import BridgeError, InvalidRequestError
from .jsonrpc import error_line, message_problem

__all__ = ["Ledger", "Pending", "Slot", "Outcome", "Opened", "id_key", "OPEN", "ANSWERED", "CANCELLED"]

OPEN = "open"
ANSWERED = "answered"
CANCELLED = "cancelled"


def id_key(request_id: Any) -> tuple[type, Any]:
    """The dictionary key of a request id: 1 and "1" are different ids."""
    return (type(request_id), request_id)


# Plain classes with slots, not dataclasses: each request makes one of each, and a
# dataclass costs 0.3-0.5 ms to create at every start (bench/README.md, "Start-up").


class Slot:
    """One request that owes a reply. Compared by identity.

    Attributes:
        id: the request's id, as sent (``str`` or ``int``).
        pending: the reply this request's line goes into.
        index: its place in ``pending`` (a batch's order).
        state: :data:`OPEN`, then :data:`ANSWERED` or :data:`CANCELLED`, once.
        handle: the caller's, untouched here: whatever stops this request's exchange.
        lasting: it stays open for as long as the client wants (a subscription), so it
            is not counted in :attr:`Ledger.working`.
    """

    __slots__ = ("id", "pending", "index", "state", "handle", "lasting")

    def __init__(self, id: Any, pending: Pending, index: int, lasting: bool = False) -> None:  # noqa: A002
        self.id = id
        self.pending = pending
        self.index = index
        self.state = OPEN
        self.handle: Any = None
        self.lasting = lasting

    def __repr__(self) -> str:
        return f"Slot(id={self.id!r}, state={self.state!r})"


class Pending:
    """The reply owed for one stdin line: one request's, or one batch's array. Compared by
    identity.

    ``held_bytes`` (the line's size) counts against :attr:`Ledger.held_bytes` until the
    reply is complete; ``extra`` holds a batch's error lines for its invalid items.
    """

    __slots__ = ("batch", "held_bytes", "slots", "replies", "extra", "remaining")

    def __init__(self, batch: bool, held_bytes: int, extra: list[bytes] | None = None) -> None:
        self.batch = batch
        self.held_bytes = held_bytes
        self.slots: list[Slot] = []
        self.replies: list[bytes | None] = []
        self.extra: list[bytes] = [] if extra is None else extra
        self.remaining = 0

    def __repr__(self) -> str:
        return f"Pending(batch={self.batch}, remaining={self.remaining})"

    def line(self) -> bytes | None:
        """The whole reply line, once every slot is closed (``None``: nothing to write)."""
        if not self.batch:
            return self.replies[0]
        parts = [reply.rstrip(b"\n") for reply in self.replies if reply is not None]
        parts += [item.rstrip(b"\n") for item in self.extra]
        return b"[" + b",".join(parts) + b"]\n" if parts else None


class Opened(NamedTuple):
    """What :meth:`Ledger.open` did: ``pending`` (``None`` when nothing is left open) and
    ``line``, a reply to write at once (refusals; a batch with nothing left to answer)."""

    pending: Pending | None
    line: bytes | None = None


class Outcome(NamedTuple):
    """What to do with one line from the app.

    Attributes:
        line: write this to stdout (``None``: nothing, for now or for good).
        dropped: why the line is dropped, for the log (``None``: it was not).
        answered: the open request this line answered (or the client cancelled): its own
            exchange is no longer needed and should be stopped.
    """

    line: bytes | None = None
    dropped: str | None = None
    answered: Slot | None = None


class Ledger:
    """The open requests, by id. Not thread-safe (one event loop owns it)."""

    def __init__(self) -> None:
        self._by_id: dict[tuple[type, Any], Slot] = {}
        self._lasting = 0
        #: Bytes of the stdin lines whose reply is not complete yet.
        self.held_bytes = 0

    @property
    def open_requests(self) -> int:
        """Requests opened and neither answered nor cancelled."""
        return len(self._by_id)

    @property
    def working(self) -> int:
        """Open requests that are work in flight: all but the lasting ones (subscriptions),
        which wait for the client, not for the app. The shutdown waits for these only."""
        return len(self._by_id) - self._lasting

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def open_slots(self) -> list[Slot]:
        """The open requests' slots, in the order they were opened (a new list)."""
        return list(self._by_id.values())

    def slot(self, request_id: Any) -> Slot | None:
        """The open request with this id, if any."""
        return self._by_id.get(id_key(request_id))

    def open(
        self,
        ids: Sequence[Any],
        *,
        batch: bool,
        held_bytes: int = 0,
        extra: Iterable[bytes] = (),
        lasting: Sequence[bool] = (),
    ) -> Opened:
        """Open the requests of one stdin line (``ids``: valid request ids, in order;
        ``lasting``: for each, whether it is a lasting request, default none is).

        An id already open (or repeated inside the batch) is refused with -32600: a single
        request's refusal is returned as ``line``; a batch's goes into its array.
        """
        pending = Pending(batch, held_bytes, extra=list(extra))
        refusals: list[bytes] = []
        for number, request_id in enumerate(ids):
            key = id_key(request_id)
            if key in self._by_id:
                refusals.append(error_line(request_id, _id_in_use(request_id)))
                continue
            slot = Slot(request_id, pending, len(pending.slots), lasting=number < len(lasting) and lasting[number])
            pending.slots.append(slot)
            self._by_id[key] = slot
            self._lasting += slot.lasting
        pending.replies = [None] * len(pending.slots)
        pending.remaining = len(pending.slots)
        if pending.slots:
            self.held_bytes += held_bytes
        if not batch:
            return Opened(pending if pending.slots else None, refusals[0] if refusals else None)
        pending.extra += refusals
        if not pending.slots:
            return Opened(None, pending.line())
        return Opened(pending)

    def answer(self, slot: Slot, line: bytes) -> Outcome:
        """Record ``line`` (a whole JSON-RPC response line for ``slot.id``) as the request's
        reply. Returns the line to write once its reply is complete; a slot already closed
        gets ``dropped``."""
        if slot.state is not OPEN:
            return Outcome(dropped=f"request {slot.id!r} was already {slot.state}")
        slot.pending.replies[slot.index] = line
        return Outcome(self._close(slot, ANSWERED))

    def cancel(self, request_id: Any) -> Outcome:
        """The client cancelled ``request_id``: close it without a reply. ``answered`` is
        the request's slot (stop its exchange); ``line`` a batch's array if this completed it."""
        slot = self._by_id.get(id_key(request_id))
        if slot is None:
            return Outcome(dropped=f"no open request has id {request_id!r}")
        return Outcome(self._close(slot, CANCELLED), answered=slot)

    def relay(self, line: bytes, message: Any) -> Outcome:
        """Judge one message the app sent beside a request's own reply (``message`` is
        ``line`` parsed). See the module docstring for the rules."""
        problem = message_problem(message)
        if problem is not None:
            return Outcome(dropped=f"not a JSON-RPC 2.0 message ({problem})")
        if "method" in message:
            return Outcome(line)  # a request or notification from the app
        slot = self._by_id.get(id_key(message["id"])) if message["id"] is not None else None
        if slot is None:
            return Outcome(dropped=f"a response for id {message['id']!r}, which no open request has")
        slot.pending.replies[slot.index] = line
        return Outcome(self._close(slot, ANSWERED), answered=slot)

    def close_all(self, exc: BridgeError) -> list[bytes]:
        """Answer every open request with ``exc`` (shutdown); return the lines to write."""
        lines = []
        for slot in list(self._by_id.values()):
            line = self.answer(slot, error_line(slot.id, exc)).line
            if line is not None:
                lines.append(line)
        return lines

    def _close(self, slot: Slot, state: str) -> bytes | None:
        slot.state = state
        del self._by_id[id_key(slot.id)]
        self._lasting -= slot.lasting
        pending = slot.pending
        pending.remaining -= 1
        if pending.remaining:
            return None
        self.held_bytes -= pending.held_bytes
        line = pending.line()
        # Pending and its slots refer to each other (a cycle, freed only by a cyclic
        # collection, which an idle bridge never runs): let go of the reply's bytes now,
        # so that they go as soon as the line is written (200 replies of 512 KiB kept
        # about 100 MiB alive).
        pending.replies = [None] * len(pending.replies)
        pending.extra = []
        return line


def _id_in_use(request_id: Any) -> InvalidRequestError:
    return InvalidRequestError(
        f"Invalid Request: id {request_id!r} is already used by a request that has not been answered", request_id
    )
