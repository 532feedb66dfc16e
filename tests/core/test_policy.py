"""The recovery policy, driven by hand: each recovery at most once, failures final."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.core.errors import (
    AppLaunchFailedError,
    AppUnreachableError,
    AuthRejectedError,
    HTTPStatusError,
    SessionLostError,
    StreamClosedError,
    UpstreamError,
    UpstreamTimeoutError,
)
from bridge.core.policy import (
    ENSURE_RUNNING,
    HEADER_MISMATCH_REPLY,
    MAX_RETRY_AFTER_SECONDS,
    RELIST_TOOLS,
    SEND,
    Action,
    AttemptOutcome,
    RebuildSession,
    RefreshToken,
    WaitThenSend,
    forward_flow,
    is_idempotent,
    retry_after_seconds,
)

#: A refresh or rebuild asked for by an error that did not say which generation failed.
REFRESH_TOKEN, REBUILD_SESSION = RefreshToken(None), RebuildSession(None)


def drive(outcomes: list[AttemptOutcome], **kwargs: Any) -> tuple[list[Action], UpstreamError | None]:
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
    outcomes: list[AttemptOutcome] = [
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


def test_a_refresh_carries_the_token_generation_the_rejected_request_used() -> None:
    actions, _ = drive([AuthRejectedError("401", token_generation=3), None, None])
    assert actions == [SEND, RefreshToken(used_generation=3), SEND]


def test_a_rebuild_carries_the_session_generation_that_was_lost() -> None:
    actions, _ = drive([SessionLostError("404", session_generation=7), None, None])
    assert actions == [SEND, RebuildSession(lost_generation=7), SEND]


def test_a_second_401_with_another_generation_is_still_final() -> None:
    second = AuthRejectedError("401 again", token_generation=2)
    actions, error = drive([AuthRejectedError("401", token_generation=1), None, second])
    assert actions == [SEND, RefreshToken(1), SEND] and error is second


def test_header_mismatch_lists_the_tools_again_and_sends_once_more() -> None:
    assert drive([HEADER_MISMATCH_REPLY, None, None], can_relist=True) == ([SEND, RELIST_TOOLS, SEND], None)


def test_header_mismatch_twice_gives_the_client_the_apps_reply() -> None:
    outcomes: list[AttemptOutcome] = [HEADER_MISMATCH_REPLY, None, HEADER_MISMATCH_REPLY]
    assert drive(outcomes, can_relist=True) == ([SEND, RELIST_TOOLS, SEND], None)


def test_failed_listing_gives_the_client_the_apps_reply_not_the_listing_error() -> None:
    outcomes: list[AttemptOutcome] = [HEADER_MISMATCH_REPLY, StreamClosedError("listing broke")]
    assert drive(outcomes, can_relist=True) == ([SEND, RELIST_TOOLS], None)


def test_header_mismatch_is_the_answer_where_no_relist_is_allowed() -> None:
    assert drive([HEADER_MISMATCH_REPLY]) == ([SEND], None)


def test_relist_combines_with_the_other_recoveries() -> None:
    outcomes: list[AttemptOutcome] = [
        AppUnreachableError("down"), None,  # relaunch
        HEADER_MISMATCH_REPLY, None,  # the restarted app has new tool schemas
        AuthRejectedError("rotated token", token_generation=4), None,  # refresh
        None,
    ]
    actions, error = drive(outcomes, can_relist=True)
    assert actions == [SEND, ENSURE_RUNNING, SEND, RELIST_TOOLS, SEND, RefreshToken(4), SEND] and error is None


# -- Retry-After (RFC 9110 §10.2.3) and what is sent twice --------------------------------------


def too_many(delay_seconds: float | None, status: int = 429) -> HTTPStatusError:
    return HTTPStatusError(f"HTTP {status} and Retry-After", status, retry_after_seconds=delay_seconds)


def plenty() -> float:
    return 1000.0


def test_retry_after_is_waited_once_then_sent_again() -> None:
    actions, error = drive([too_many(2.0), None, None], remaining_seconds=plenty)
    assert actions == [SEND, WaitThenSend(2.0), SEND] and error is None
    second = too_many(2.0, 503)
    actions, error = drive([too_many(2.0), None, second], remaining_seconds=plenty)
    assert actions == [SEND, WaitThenSend(2.0), SEND] and error is second


@pytest.mark.parametrize(
    ("delay", "left", "why"),
    [(MAX_RETRY_AFTER_SECONDS + 1, 1000.0, "60 s the bridge waits at most"), (30.0, 29.0, "29 s left of the request timeout")],
)
def test_a_retry_after_that_does_not_fit_is_answered_at_once_naming_it(delay: float, left: float, why: str) -> None:
    actions, error = drive([too_many(delay)], remaining_seconds=lambda: left)
    assert actions == [SEND] and isinstance(error, HTTPStatusError)
    assert error.http_status == 429 and "Retry-After" in error.message and why in error.message


def test_retry_after_is_not_waited_for_a_message_owed_no_reply() -> None:
    actions, error = drive([too_many(0.0)])
    assert actions == [SEND] and isinstance(error, HTTPStatusError)


def test_a_status_without_retry_after_is_final() -> None:
    refused = HTTPStatusError("HTTP 429", 429)
    assert drive([refused], remaining_seconds=plenty) == ([SEND], refused)


def test_a_broken_connection_resends_a_read_once() -> None:
    broken, again = StreamClosedError("broke"), StreamClosedError("broke again")
    assert drive([broken, None], idempotent=True) == ([SEND, SEND], None)
    assert drive([broken, again], idempotent=True) == ([SEND, SEND], again)


def test_a_broken_connection_never_resends_what_is_not_idempotent() -> None:
    broken = StreamClosedError("broke")
    assert drive([broken]) == ([SEND], broken)


def test_a_timeout_is_never_retried_even_for_a_read() -> None:
    timeout = UpstreamTimeoutError("no answer")
    assert drive([timeout], idempotent=True, remaining_seconds=plenty) == ([SEND], timeout)


@pytest.mark.parametrize(
    ("method", "idempotent"),
    [
        ("tools/list", True), ("prompts/list", True), ("resources/list", True), ("resources/templates/list", True),
        ("prompts/get", True), ("tasks/get", True), ("resources/read", True), ("ping", True),
        ("server/discover", True), ("completion/complete", True),
        ("tools/call", False), ("initialize", False), ("logging/setLevel", False), ("resources/subscribe", False),
        ("subscriptions/listen", False), ("sampling/createMessage", False),
    ],
)
def test_which_methods_are_idempotent(method: str, idempotent: bool) -> None:
    assert is_idempotent(method) is idempotent


NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 0 ", 0.0),
        ("Tue, 14 Nov 2023 22:14:20 GMT", 60.0),  # IMF-fixdate
        ("Tuesday, 14-Nov-23 22:14:20 GMT", 60.0),  # RFC 850
        ("Tue Nov 14 22:14:20 2023", 60.0),  # asctime
        ("Tue, 14 Nov 2023 22:00:00 GMT", 0.0),  # already past
        ("9" * 400, 2.0**31),  # float() of 309 digits or more overflows (RFC 9111 §1.2.2: read as 2**31)
        ("9" * 5000, 2.0**31),  # int() of 4,301 digits or more raises
        ("0" * 5000 + "7", 7.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
    ],
)
def test_retry_after_is_read_in_both_forms(value: str, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW) == seconds


def test_every_growing_wait_is_one_backoff_with_the_schedules_the_modules_had() -> None:
    from bridge.core.policy import (
        GET_STREAM_BACKOFF,
        INPUT_POLL_BACKOFF,
        LAUNCH_RETRY_BACKOFF,
        PIPE_ACCEPT_BACKOFF,
        PIPE_BUSY_BACKOFF,
        SUBSCRIPTIONS_LISTEN_BACKOFF,
    )

    assert [GET_STREAM_BACKOFF.seconds(step) for step in range(4)] == [1.0, 1.5, 2.25, 3.375]
    assert GET_STREAM_BACKOFF.seconds(20) == 30.0 == SUBSCRIPTIONS_LISTEN_BACKOFF.seconds(20)
    assert [SUBSCRIPTIONS_LISTEN_BACKOFF.seconds(step) for step in range(3)] == [1.0, 2.0, 4.0]
    assert [INPUT_POLL_BACKOFF.seconds(rounds) for rounds in range(4)] == [0.05, 0.1, 0.2, 0.25]
    assert [LAUNCH_RETRY_BACKOFF.seconds(step) for step in range(6)] == [5, 10, 20, 40, 60, 60]
    assert PIPE_BUSY_BACKOFF.seconds(0) == 0.001 and PIPE_BUSY_BACKOFF.seconds(10) == 0.1
    assert PIPE_ACCEPT_BACKOFF.seconds(-1) == 0.05 and PIPE_ACCEPT_BACKOFF.seconds(10) == 5.0


def test_idempotence_is_read_from_the_method_table() -> None:
    from bridge.core.policy import is_idempotent

    assert all(is_idempotent(method) for method in ("ping", "server/discover", "resources/read", "completion/complete", "tasks/get"))
    assert not any(is_idempotent(method) for method in ("initialize", "tools/call", "subscriptions/listen", "logging/setLevel"))
