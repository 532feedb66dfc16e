"""Cancel scopes and deadlines for plain asyncio tasks.

The serving path runs on asyncio alone: importing anyio (its asyncio backend, and the
``ssl`` module it loads even for ``http://``) was about a quarter of a client's start and
5-7 MiB of idle memory (bench/README.md, "Start-up"). What the bridge needs of anyio's
cancel scopes is small, and here it is, on the standard library's own machinery (the same
that ``asyncio.timeout`` uses: ``Task.cancel`` and, from Python 3.11, ``Task.uncancel``):

- :class:`CancelScope`: ``with scope:`` around awaits; :meth:`CancelScope.cancel` from
  anywhere (also before the scope is entered); a :attr:`~CancelScope.deadline` that can be
  moved while the scope runs; at exit the cancellation it caused is absorbed and
  :attr:`~CancelScope.cancelled_caught` says so;
- :func:`move_on_after`: a scope with a deadline ``seconds`` from now;
- :func:`fail_after`: the same, raising :class:`TimeoutError` when the deadline ended it;
- :func:`current_time`: the event loop's clock (``loop.time()``, seconds), which deadlines use.

Semantics, where they differ from anyio's: a scope is *edge-triggered* like
``asyncio.timeout``: its cancellation is delivered once, as one ``CancelledError`` at the
await where the task is suspended inside the scope (never after the scope is left: the
delivery is a loop callback, removed at exit). Code that catches that error and awaits
again is not cancelled again. There is no shielding: a scope only ever cancels its own
task. Nested scopes and a cancellation from outside (``Task.cancel``) are told apart by
the task's count of cancellation requests on Python 3.11 and later; on 3.10, which has no
count, an outside ``Task.cancel`` that arrives in the same loop turn as a scope's own
cancellation is absorbed with it (the task then runs on; the bridge's only outside
cancellation is its shutdown, which is bounded again by the caller's own wait).
"""

from __future__ import annotations

import asyncio
import math
import sys
from types import TracebackType
from typing import Literal

__all__ = ["CancelScope", "move_on_after", "fail_after", "current_time"]

#: The innermost entered scope of each task (3.10: whether an enclosing scope cancelled too).
_INNERMOST: dict[asyncio.Task[object], CancelScope] = {}


def current_time() -> float:
    """The running event loop's clock, in seconds (``loop.time()``): what deadlines use."""
    return asyncio.get_running_loop().time()


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

    __slots__ = ("_deadline", "_task", "_handle", "_cancel_called", "_delivered", "_active", "_outer", "cancelled_caught")

    def __init__(self, *, deadline: float = math.inf) -> None:
        self._deadline = deadline
        self._task: asyncio.Task[object] | None = None
        self._handle: asyncio.Handle | None = None
        self._cancel_called = False
        self._delivered = False  # this scope called Task.cancel
        self._active = False
        self._outer: CancelScope | None = None
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
        if self._active and not self._cancel_called:
            self._schedule()

    @property
    def cancel_called(self) -> bool:
        """Whether :meth:`cancel` was called or the deadline passed."""
        return self._cancel_called

    def cancel(self) -> None:
        """Cancel the block: at once if the task is suspended inside it, at its first await
        if it has not reached the block yet, never if the block is over."""
        if self._cancel_called:
            return
        self._cancel_called = True
        if self._active:
            self._schedule()

    def __enter__(self) -> CancelScope:
        task = asyncio.current_task()
        if task is None or self._task is not None:
            raise RuntimeError("a CancelScope is entered once, from inside a task")
        self._task = task
        self._active = True
        self._outer = _INNERMOST.get(task)
        _INNERMOST[task] = self
        if self._cancel_called or self._deadline != math.inf:
            self._schedule()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        task = self._task
        assert task is not None
        self._active = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._outer is None:
            del _INNERMOST[task]
        else:
            _INNERMOST[task] = self._outer
        if not self._delivered:
            return False
        if sys.version_info >= (3, 11):  # Task.cancelling() / Task.uncancel()
            absorb = task.uncancel() == 0  # this scope's own request taken back: none left
        else:
            absorb = not self._outer_delivered()
        if absorb and isinstance(exc, asyncio.CancelledError):
            self.cancelled_caught = True
            return True
        return False

    # -- internals -----------------------------------------------------------------------

    def _schedule(self) -> None:
        """(Re)arm the delivery: at the deadline, or in the next loop turn once cancelled.
        A loop callback, so the task is always suspended (inside the block) when it runs."""
        if self._delivered:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        loop = asyncio.get_running_loop()
        if self._cancel_called or self._deadline <= loop.time():
            self._handle = loop.call_soon(self._deliver)
        elif self._deadline != math.inf:
            self._handle = loop.call_at(self._deadline, self._deliver)

    def _deliver(self) -> None:
        self._handle = None
        if not self._active or self._delivered:
            return
        assert self._task is not None
        self._cancel_called = True
        self._delivered = True
        self._task.cancel()

    def _outer_delivered(self) -> bool:
        scope = self._outer
        while scope is not None:
            if scope._delivered:
                return True
            scope = scope._outer
        return False


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
