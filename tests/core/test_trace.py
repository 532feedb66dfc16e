"""The trace lines (bridge/core/trace.py): what they say, and what they never say."""

from __future__ import annotations

import pytest

from bridge.core.trace import MAX_METHOD_CHARS, message_line


def test_a_reply_line_names_direction_method_id_size_time_and_who_answered() -> None:
    line = message_line(
        "bridge→client", "reply", method="tools/call", request_id="3", has_id=True, size_bytes=120, elapsed_seconds=0.0123, answered_by="app"
    )
    assert line == 'bridge→client reply to tools/call id "3" (120 bytes) after 12.3 ms, answered by the app'
    assert message_line("app→client", "notification", method="notifications/progress", size_bytes=85) == (
        "app→client notification notifications/progress (85 bytes)"
    )


def test_a_long_method_or_id_is_cut_and_unknown_words_are_refused() -> None:
    line = message_line("client→app", "request", method="m" * 500, request_id="i" * 500, has_id=True, size_bytes=1)
    assert len(line) < 2 * MAX_METHOD_CHARS + 60
    with pytest.raises(ValueError):
        message_line("up→down", "request", size_bytes=1)
    with pytest.raises(ValueError):
        message_line("client→app", "reply", size_bytes=1, answered_by="someone")
