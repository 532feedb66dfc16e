"""bridge.system.cancelscope: what the serving path's waits rely on, on plain asyncio.

Each test plays one situation the bridge meets: a request's exchange cancelled by the
client (before or while it runs), a deadline moved while a stream is read, a bound inside a
bound, a shutdown's cancellation from outside, and the cancellation that must never leak
past the block (a task that goes on after its exchange was stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
from collections.abc import Callable
from typing import Any

import pytest

from bridge.system.cancelscope import CancelScope, current_time, fail_after, move_on_after


def run(coro):
    return asyncio.run(coro)


def test_a_deadline_leaves_the_block_and_the_task_goes_on() -> None:
    async def main() -> tuple[bool, str]:
        with move_on_after(0.01) as scope:
            await asyncio.sleep(10)
        await asyncio.sleep(0)  # no stray cancellation after the block
        return scope.cancelled_caught, "after"

    assert run(main()) == (True, "after")


def test_a_block_that_ends_in_time_is_not_cancelled() -> None:
    async def main() -> bool:
        with move_on_after(10) as scope:
            await asyncio.sleep(0)
        await asyncio.sleep(0.02)
        return scope.cancelled_caught

    assert run(main()) is False


def test_cancel_from_another_task_stops_the_await_at_once() -> None:
    async def main() -> tuple[bool, float]:
        scope = CancelScope()
        started = asyncio.Event()

        async def exchange() -> None:
            with scope:
                started.set()
                await asyncio.sleep(10)

        task = asyncio.get_running_loop().create_task(exchange())
        await started.wait()
        t0 = current_time()
        scope.cancel()
        await task
        return scope.cancelled_caught, current_time() - t0

    caught, took = run(main())
    assert caught and took < 1


def test_cancel_before_the_block_is_entered_is_kept() -> None:
    """A request cancelled in the same stdin chunk as it arrived: its task has not run yet."""

    async def main() -> tuple[bool, bool, list[str]]:
        scope = CancelScope()
        scope.cancel()
        reached: list[str] = []
        with scope:
            reached.append("entered")
            await asyncio.sleep(10)
            reached.append("never")
        return scope.cancel_called, scope.cancelled_caught, reached

    assert run(main()) == (True, True, ["entered"])


def test_a_deadline_moved_later_and_then_earlier() -> None:
    """The SSE reader's idle timer: restarted at every event, cleared while stdout is slow."""

    async def main() -> tuple[bool, float]:
        t0 = current_time()
        with CancelScope() as scope:
            scope.deadline = current_time() + 0.01
            scope.deadline = current_time() + 10  # an event arrived: restart
            await asyncio.sleep(0.05)  # the first deadline is gone
            scope.deadline = math.inf
            await asyncio.sleep(0.02)
            scope.deadline = current_time() - 1  # already past: cancels at once
            await asyncio.sleep(10)
        return scope.cancelled_caught, current_time() - t0

    caught, took = run(main())
    assert caught and took < 5


def test_fail_after_raises_timeout_error() -> None:
    async def main() -> None:
        with fail_after(0.01):
            await asyncio.sleep(10)

    with pytest.raises(TimeoutError):
        run(main())


def test_fail_after_none_never_fires() -> None:
    async def main() -> str:
        with fail_after(None), move_on_after(None):
            await asyncio.sleep(0.01)
        return "done"

    assert run(main()) == "done"


def test_the_inner_scope_absorbs_only_its_own_cancellation() -> None:
    async def main() -> tuple[bool, bool]:
        with move_on_after(0.01) as outer:
            with move_on_after(10) as inner:
                await asyncio.sleep(10)
        return outer.cancelled_caught, inner.cancelled_caught

    assert run(main()) == (True, False)


def test_inner_and_outer_firing_together_leave_both_blocks() -> None:
    """Both deadlines pass in one loop turn: the outer block must still end (the outer
    cancellation is not swallowed by the inner scope)."""

    async def main() -> list[str]:
        steps: list[str] = []
        with CancelScope() as outer:
            with CancelScope() as inner:
                inner.cancel()
                outer.cancel()
                await asyncio.sleep(10)
            steps.append("after inner")
            await asyncio.sleep(10)
            steps.append("never")
        steps.append(f"outer caught {outer.cancelled_caught}")
        return steps

    steps = run(main())
    assert steps[-1] == "outer caught True" and "never" not in steps


def test_a_cancellation_from_outside_passes_through() -> None:
    """The shutdown cancels the task: a scope inside must not swallow it."""

    async def main() -> bool:
        async def work() -> None:
            with move_on_after(10):
                await asyncio.sleep(10)

        task = asyncio.get_running_loop().create_task(work())
        await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert run(main()) is True


def test_outside_cancellation_in_the_same_turn_as_the_scope_is_not_lost() -> None:
    async def main() -> bool:
        scope = CancelScope()

        async def work() -> None:
            with scope:
                await asyncio.sleep(10)
            await asyncio.sleep(10)

        task = asyncio.get_running_loop().create_task(work())
        await asyncio.sleep(0.01)
        scope.cancel()
        task.cancel()
        try:
            await asyncio.wait_for(task, 2)
        except asyncio.CancelledError:
            return True
        return False

    assert run(main()) is True


def test_a_cancel_after_the_block_is_over_does_nothing() -> None:
    async def main() -> str:
        with CancelScope() as scope:
            await asyncio.sleep(0)
        scope.cancel()
        scope.deadline = 0
        await asyncio.sleep(0.01)
        return "went on"

    assert run(main()) == "went on"


def test_a_block_finishing_while_its_cancellation_is_due_leaks_nothing() -> None:
    """The cancellation is a loop callback that the exit removes: a body that returns in
    the same turn as cancel() is called never sees a CancelledError later."""

    async def main() -> str:
        with CancelScope() as scope:
            scope.cancel()  # the task itself, with no await left in the block
        await asyncio.sleep(0.01)
        return "went on"

    assert run(main()) == "went on"


def test_a_body_that_handles_the_cancellation_goes_on_after_the_block() -> None:
    async def main() -> tuple[bool, str]:
        with move_on_after(0.01) as scope:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass  # cleaned up, and goes on
            await asyncio.sleep(0.01)  # edge-triggered: not cancelled again
        await asyncio.sleep(0)
        return scope.cancelled_caught, "after"

    assert run(main()) == (False, "after")


def test_entered_once_and_only_inside_a_task() -> None:
    scope = CancelScope()
    with pytest.raises(RuntimeError):
        scope.__enter__()

    async def main() -> None:
        with scope:
            pass
        with scope:
            pass

    with pytest.raises(RuntimeError):
        run(main())


#: CPython's own asyncio.timeout, the model, has the bug before 3.11.3 (python/cpython#102780).
_FIXED_TIMEOUT = pytest.mark.skipif(sys.version_info < (3, 11, 3), reason="asyncio.Timeout compares with 0 before 3.11.3")


@pytest.mark.parametrize(
    "make_scope",
    [move_on_after, fail_after, pytest.param(asyncio.timeout, marks=_FIXED_TIMEOUT)],
    ids=["move_on_after", "fail_after", "asyncio.timeout"],
)
def test_a_task_already_carrying_a_cancel_request_still_gets_its_own_deadline(make_scope: Callable[[float], Any]) -> None:
    """A shielded clean-up (``check`` ends its session in a ``finally`` after the user's ^C)
    runs in a task that already carries one cancel request. A bound inside it ends in
    time like any other: the scope takes back its own cancellation, the way
    ``asyncio.timeout`` does (compared with the count at entry), and the request that
    was there before is still there afterwards."""

    async def main() -> tuple[str, int]:
        async def clean_up() -> tuple[str, int]:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass  # carried on: the task's request stays counted
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 1
            try:
                async with contextlib.AsyncExitStack() as stack:
                    scope = make_scope(0.01)
                    if isinstance(scope, asyncio.Timeout):
                        await stack.enter_async_context(scope)
                    else:
                        stack.enter_context(scope)
                    await asyncio.sleep(10)
                outcome = "moved on"
            except TimeoutError:
                outcome = "timed out"
            except asyncio.CancelledError:
                outcome = "its own cancellation escaped"
            return outcome, task.cancelling()

        task = asyncio.get_running_loop().create_task(clean_up())
        await asyncio.sleep(0)
        task.cancel()
        return await asyncio.wait_for(task, 5)

    expected = "moved on" if make_scope is move_on_after else "timed out"
    assert run(main()) == (expected, 1)


def test_a_scope_that_fired_ignores_a_later_deadline_or_cancel() -> None:
    """The dispatcher may shorten an exchange's deadline, or cancel it, after the scope has
    already fired (a client's cancellation racing the request's own bound)."""

    async def main() -> tuple[bool, bool]:
        with move_on_after(0) as scope:
            try:
                await asyncio.sleep(10)
            finally:
                scope.deadline = min(scope.deadline, current_time() + 5)
                scope.cancel()
        return scope.cancel_called, scope.cancelled_caught

    assert run(main()) == (True, True)


def test_the_package_bounds_its_waits_with_this_adapter_only() -> None:
    """Every bound in bridge/ is a :class:`CancelScope` (``move_on_after``, ``fail_after``):
    a bare ``asyncio.timeout``, ``timeout_at`` or ``wait_for`` lets its own cancellation
    escape on Python 3.11.0-3.11.2 in a task that already carries a cancel request
    (python/cpython#102780; the test above), which this adapter takes back."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "bridge"
    bare = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "system" / "cancelscope.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("timeout", "timeout_at", "wait_for") and ast.unparse(node.value) == "asyncio":
                bare.append(f"{path.relative_to(package)}:{node.lineno} asyncio.{node.attr}")
    assert not bare, bare
