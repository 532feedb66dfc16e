"""A small set of plain asyncio tasks: the per-message tasks of one run.

The serving path is plain asyncio (``bridge/system/cancelscope.py`` says why), so there is
no task group here; and a group's bookkeeping per task would cost more than the task
(anyio's ``start_soon`` took 28 µs against 4 µs for ``loop.create_task``, measured on the
benchmark machine, 2026-11). What a task group would give is kept: every task is known, a
failure that escapes a task is logged (never lost), and the owner cancels what is left and
waits for it, with a bound (``bridge/serve/loop.py`` at shutdown).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskSet"]

log = logging.getLogger("bridge")


class TaskSet:
    """Tasks started by :meth:`spawn`, until each ends."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in a task of its own (from inside the running loop)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a task failed inside the bridge", exc_info=exc)

    async def cancel_and_wait(self, timeout_seconds: float) -> None:
        """Cancel every task still running and wait until they end, at most
        ``timeout_seconds`` (a task that ignores cancellation is left behind)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_seconds)

    def cancel(self) -> None:
        """Cancel every task still running, without waiting (the run itself was cancelled)."""
        for task in list(self._tasks):
            task.cancel()
