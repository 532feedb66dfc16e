"""Cancel scopes and deadlines for plain asyncio tasks: a thin adapter over ``asyncio.Timeout``.

The serving path runs on asyncio alone: importing anyio (its asyncio backend, and the
``ssl`` module it loads even for ``http://``) was about a quarter of a client's start and
5-7 MiB of idle memory (bench/README.md, "Start-up"). What the bridge needs of a cancel
scope is CPython's own :class:`asyncio.Timeout` (``asyncio.timeout_at``), which already
tells its own cancellation from any other by the task's count of cancel requests as of
entry. This module only adds what the serving path asks of it beyond that:

- a plain ``with`` (the bridge enters scopes in synchronous code paths and in
  ``try``/``finally`` blocks where an ``async with`` would not read better);
- :meth:`CancelScope.cancel` from another task, also before the block is entered (a
  request cancelled in the same stdin chunk as it arrived): ``Timeout.reschedule`` to a
  time already past;
- a :attr:`~CancelScope.deadline` that may be moved while the block runs (the SSE reader's
  idle timer): ``Timeout.reschedule`` again;
- :attr:`~CancelScope.cancelled_caught`: the block ended because this scope cancelled it
  (``Timeout`` turned its own ``CancelledError`` into ``TimeoutError``, absorbed here);
- :func:`move_on_after`, :func:`fail_after` (raises :class:`TimeoutError`) and
  :func:`current_time` (``loop.time()``, seconds, what deadlines use).

One thing is the adapter's own: whether a cancellation is the scope's is decided, as
CPython 3.11.3 and later decide it, by the task's count of cancel requests compared with
the count at entry (``Task.cancelling()``). ``asyncio.Timeout`` of 3.11.0-3.11.2 compares
with zero instead, so in a task that already carried a request (a clean-up after the
user's ^C) its own cancellation escaped as ``CancelledError`` (python/cpython#102780,
fixed by PR #102815): the adapter takes that case back itself, so a bound holds on every
Python the project accepts.

Semantics are ``asyncio.Timeout``'s: edge-triggered (one ``CancelledError`` at the await
where the task is suspended inside the block; code that catches it and awaits again is not
cancelled again), no shielding, and a cancellation from outside (``Task.cancel``) passes
through unchanged, also one that arrives in the same loop turn as the scope's own.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Literal, TypeVar

__all__ = ["CancelScope", "move_on_after", "fail_after", "current_time"]

_T = TypeVar("_T")

#: ``asyncio.Timeout`` of 3.11.0-3.11.2 tells its own cancellation by a count of 0, not by
#: the count at entry (python/cpython#102780): the scope then keeps the count itself.
_TIMEOUT_COUNTS_FROM_ZERO = sys.version_info < (3, 11, 3)


def current_time() -> float:
    """The running event loop's clock, in seconds (``loop.time()``): what deadlines use."""
    return asyncio.get_running_loop().time()


def _at_once(step: Coroutine[Any, Any, _T]) -> _T:
    """Run ``Timeout.__aenter__``/``__aexit__`` to their end here: they never suspend (they
    only arm a loop callback, or compare the task's cancel count), so a plain ``with`` can
    use them. Raises ``RuntimeError`` on a Python where one of them would wait."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    step.close()
    raise RuntimeError("asyncio.Timeout suspended on entry or exit; CancelScope needs a newer adapter")


class CancelScope:
    """Cancel the awaits of one task inside a ``with`` block, on demand or at a deadline.

    Args:
        deadline: the loop time (:func:`current_time`, seconds) at which the scope cancels
            itself; ``math.inf`` (default) for none.

    Use from a running task only (``with`` inside a coroutine). A scope is entered once.
    After the block, :attr:`cancelled_caught` is true when this scope's cancellation ended
    it (the ``CancelledError`` was absorbed and the task goes on after the block). Any
    other exception, and a cancellation from outside, propagate unchanged.
    """

    __slots__ = ("_deadline", "_cancel_called", "_timeout", "_active", "_task", "_cancelling_at_entry", "cancelled_caught")

    def __init__(self, *, deadline: float = math.inf) -> None:
        self._deadline = deadline
        self._cancel_called = False  # cancel() was called before or during the block
        self._timeout: asyncio.Timeout | None = None
        self._active = False
        self._task: asyncio.Task[Any] | None = None  # (3.11.0-3.11.2: the task, and its
        self._cancelling_at_entry = 0  # Task.cancelling() when the block began)
        #: The block ended because this scope cancelled it (set at exit).
        self.cancelled_caught = False

    @property
    def deadline(self) -> float:
        """When the scope cancels itself (loop time, seconds; ``math.inf``: never). May be
        set before or while the scope runs; a time already past cancels at once."""
        return self._deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        self._deadline = value
        if self._can_reschedule():
            self._reschedule()

    @property
    def cancel_called(self) -> bool:
        """Whether :meth:`cancel` was called or the deadline passed."""
        return self._cancel_called or (self._timeout is not None and self._timeout.expired())

    def cancel(self) -> None:
        """Cancel the block: at once if the task is suspended inside it, at its first await
        if it has not reached the block yet, never if the block is over."""
        if self._cancel_called:
            return
        self._cancel_called = True
        if self._can_reschedule():
            self._reschedule()

    def __enter__(self) -> CancelScope:
        if self._timeout is not None:
            raise RuntimeError("a CancelScope is entered once, from inside a task")
        timeout = self._timeout = asyncio.Timeout(self._when())
        _at_once(timeout.__aenter__())  # (outside a task: asyncio's own RuntimeError)
        if _TIMEOUT_COUNTS_FROM_ZERO:
            task = asyncio.current_task()
            assert task is not None
            self._task, self._cancelling_at_entry = task, task.cancelling()
        self._active = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        assert self._timeout is not None
        self._active = False
        if self._timeout.when() is None and not self._timeout.expired():
            return False  # never armed, never fired: Timeout.__aexit__ would only mark it left
        try:
            _at_once(self._timeout.__aexit__(exc_type, exc, tb))
        except TimeoutError:  # raised only for its own CancelledError, with no other request since entry
            self.cancelled_caught = True
            return True
        if (
            self._task is not None  # (3.11.0-3.11.2 only: later, Timeout decided it above)
            and exc_type is asyncio.CancelledError
            and self._timeout.expired()
            and self._task.cancelling() <= self._cancelling_at_entry
        ):  # its own all the same: Timeout of 3.11.0-3.11.2 compared with 0 (see the module)
            self.cancelled_caught = True
            return True
        return False

    # -- internals -----------------------------------------------------------------------

    def _can_reschedule(self) -> bool:
        """Entered, not left, and not fired yet (``Timeout`` refuses a move after that)."""
        return self._active and self._timeout is not None and not self._timeout.expired()

    def _reschedule(self) -> None:
        assert self._timeout is not None
        self._timeout.reschedule(self._when())

    def _when(self) -> float | None:
        """The deadline in ``Timeout``'s terms: ``None`` for none; once cancelled, a time
        long past, which ``Timeout`` delivers in the next loop turn."""
        if self._cancel_called:
            return -math.inf
        return None if self._deadline == math.inf else self._deadline


def move_on_after(seconds: float | None) -> CancelScope:
    """A :class:`CancelScope` whose deadline is ``seconds`` from now (``None``: none): the
    block is left when it passes, and :attr:`~CancelScope.cancelled_caught` tells."""
    return CancelScope(deadline=math.inf if seconds is None else current_time() + seconds)


class _FailAfter(CancelScope):
    __slots__ = ()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if super().__exit__(exc_type, exc, tb):
            raise TimeoutError
        return False


def fail_after(seconds: float | None) -> _FailAfter:
    """A :class:`CancelScope` whose deadline is ``seconds`` from now (``None``: none),
    raising the builtin :class:`TimeoutError` from the ``with`` statement when the deadline
    ended the block."""
    return _FailAfter(deadline=math.inf if seconds is None else current_time() + seconds)
