"""Backpressure on stdin: when a request may start, and when reading must pause.

Pure: imports only the standard library and the core; no I/O, no ``await``.

Two budgets, both fixed (docs/behaviour.md, "Concurrency" and "Backpressure"):

- :data:`MAX_STARTED_REQUESTS` requests have a task of their own (about 6 KiB each, measured
  with tracemalloc on 2026-12-01). Later requests wait here as their raw stdin line, already
  opened in the reply ledger, so a cancellation, a repeated id or the shutdown finds them
  like any other; they start in the order they were read as started ones end.
- Reading stdin pauses while the lines of open requests, each counted with
  :data:`REQUEST_BOOKKEEPING_BYTES` beside its own size, reach :data:`MAX_HELD_BYTES`, or
  while :data:`MAX_RUNNING_NOTIFICATIONS` notifications and client responses are being
  POSTed. It resumes as replies go out, once the held bytes are down to
  :data:`RESUME_FRACTION` of the budget (so the reader does not wake for every reply).

Notifications never wait here: below the byte budget they are read and delivered at once,
however many requests wait, so a ``notifications/cancelled`` reaches the app while
requests queue (about 14,000 small ones fit in the budget). Past the budget nothing more
is read, a notification included, until replies go out: the bound holds whatever the
client writes. One line is always taken when the budget has room, so a single line up to
``--max-message-bytes`` passes; the memory held is bounded by the budget plus one line.

A third budget is stdout's (``bridge/stdio/outbox.py``, :data:`~bridge.stdio.outbox.OUTPUT_BUDGET_BYTES`):
while the replies waiting for a client that does not read fill it, the reader takes no
line and no request is sent to the app (``Dispatcher.wait_for_room``).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

from .ledger import Ledger, Pending

__all__ = [
    "Admission",
    "MAX_STARTED_REQUESTS",
    "MAX_HELD_BYTES",
    "REQUEST_BOOKKEEPING_BYTES",
    "MAX_RUNNING_NOTIFICATIONS",
    "RESUME_FRACTION",
]

#: Requests with a task of their own at once; later ones wait as lines.
MAX_STARTED_REQUESTS = 512
#: Reading stdin pauses while the open requests' lines hold this much (bytes).
MAX_HELD_BYTES = 16 * 1024 * 1024
#: What one open request costs beside its line, for :data:`MAX_HELD_BYTES` (bytes).
REQUEST_BOOKKEEPING_BYTES = 1024
#: Reading stdin pauses while this many notifications (or client responses) are being POSTed.
MAX_RUNNING_NOTIFICATIONS = 1024
#: Once paused, reading resumes when both measures are down to this share of their budget.
RESUME_FRACTION = 0.75


class Admission:
    """The counts behind both budgets, and the requests waiting to start.

    Args:
        ledger: the open requests (its ``held_bytes`` is the byte budget's measure).
        max_started_requests, max_held_bytes, max_running_notifications: the budgets
            (tests pass small ones).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        max_started_requests: int = MAX_STARTED_REQUESTS,
        max_held_bytes: int = MAX_HELD_BYTES,
        max_running_notifications: int = MAX_RUNNING_NOTIFICATIONS,
    ) -> None:
        self._ledger = ledger
        self._max_started = max_started_requests
        self._max_held_bytes = max_held_bytes
        self._max_notifying = max_running_notifications
        self._waiting: collections.deque[tuple[Pending, bytes, Any]] = collections.deque()
        #: Requests with a task (the caller counts them in and out).
        self.started = 0
        #: Notifications and client responses being delivered (the caller counts them).
        self.notifying = 0
        self._paused = False

    @staticmethod
    def cost(line: bytes) -> int:
        """What a request line counts against the byte budget (bytes)."""
        return len(line) + REQUEST_BOOKKEEPING_BYTES

    def reading_paused(self) -> bool:
        """Whether the reader must wait before it takes the next line."""
        share = RESUME_FRACTION if self._paused else 1.0
        self._paused = (
            self._ledger.held_bytes >= self._max_held_bytes * share or self.notifying >= self._max_notifying * share
        )
        return self._paused

    def may_start(self) -> bool:
        """Whether a request read now may start at once (nothing waits before it)."""
        return not self._waiting and self.started < self._max_started

    def wait(self, pending: Pending, line: bytes, context: Any) -> None:
        """Keep a request (or batch) line until :meth:`ready` hands it back."""
        self._waiting.append((pending, line, context))

    def ready(self) -> Iterator[tuple[Pending, bytes, Any]]:
        """Waiting lines that may start now, oldest first (each is handed back once;
        ones whose requests were all cancelled meanwhile too, for their ``context``)."""
        while self._waiting and self.started < self._max_started:
            yield self._waiting.popleft()

    @property
    def waiting(self) -> int:
        """Lines waiting to start."""
        return len(self._waiting)
