"""The recovery policy, driven by hand: each recovery at most once, failures final."""

from __future__ import annotations

import pytest

from bridge.errors import (
    AppLaunchFailedError,
    AppUnreachableError,
    AuthRejectedError,
    SessionLostError,
    StreamClosedError,
    UpstreamError,
    UpstreamTimeoutError,
)
from bridge.policy import ENSURE_RUNNING, REBUILD_SESSION, REFRESH_TOKEN, SEND, Action, forward_flow


def drive(outcomes: list[UpstreamError | None], **kwargs: bool) -> tuple[list[Action], UpstreamError | None]:
    """Feed ``outcomes`` to the flow in order; return the actions it asked for and the
    error it ended with (None for success)."""
    flow = forward_flow(**kwargs)
    actions = [next(flow)]
    for outcome in outcomes:
        try:
            actions.append(flow.send(outcome))
        except StopIteration:
            return actions, None
        except UpstreamError as exc:
            return actions, exc
    raise AssertionError(f"the flow wants more than {outcomes}: {actions}")


def test_success_is_one_send() -> None:
    assert drive([None]) == ([SEND], None)


def test_401_refreshes_once_then_succeeds() -> None:
    assert drive([AuthRejectedError("401"), None, None]) == ([SEND, REFRESH_TOKEN, SEND], None)


def test_second_401_fails_without_another_refresh() -> None:
    second = AuthRejectedError("401 again")
    actions, error = drive([AuthRejectedError("401"), None, second])
    assert actions == [SEND, REFRESH_TOKEN, SEND] and error is second


def test_failed_refresh_ends_with_the_refresh_error() -> None:
    failure = AuthRejectedError("token command failed", recoverable=False)
    actions, error = drive([AuthRejectedError("401"), failure])
    assert actions == [SEND, REFRESH_TOKEN] and error is failure


def test_connection_refused_launches_once_and_sends_again() -> None:
    assert drive([AppUnreachableError("refused"), None, None]) == ([SEND, ENSURE_RUNNING, SEND], None)
    still = AppUnreachableError("still refused")
    assert drive([AppUnreachableError("refused"), None, still]) == ([SEND, ENSURE_RUNNING, SEND], still)


def test_launch_failure_is_final() -> None:
    failure = AppLaunchFailedError("never listened", recoverable=False)
    assert drive([AppUnreachableError("refused"), failure]) == ([SEND, ENSURE_RUNNING], failure)


def test_lost_session_is_rebuilt_once() -> None:
    assert drive([SessionLostError("404"), None, None]) == ([SEND, REBUILD_SESSION, SEND], None)
    again = SessionLostError("404 again")
    assert drive([SessionLostError("404"), None, again]) == ([SEND, REBUILD_SESSION, SEND], again)


def test_rebuild_can_be_switched_off_for_the_replayed_initialize() -> None:
    lost = SessionLostError("404")
    assert drive([lost], can_rebuild=False) == ([SEND], lost)


def test_recoveries_combine_each_at_most_once() -> None:
    outcomes: list[UpstreamError | None] = [
        AppUnreachableError("down"), None,  # relaunch
        SessionLostError("new instance"), None,  # rebuild
        AuthRejectedError("rotated token"), None,  # refresh
        None,
    ]
    actions, error = drive(outcomes)
    assert actions == [SEND, ENSURE_RUNNING, SEND, REBUILD_SESSION, SEND, REFRESH_TOKEN, SEND] and error is None


@pytest.mark.parametrize(
    "final", [UpstreamTimeoutError("read timeout"), StreamClosedError("reset"), AppUnreachableError("x", recoverable=False)]
)
def test_errors_after_the_request_may_have_reached_the_app_are_never_retried(final: UpstreamError) -> None:
    assert drive([final]) == ([SEND], final)
