"""The stdin line framer: whole, byte by byte, any chunking; BOM, CRLF, blanks, the cap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.framing import EOF, NEED_DATA, LineFramer, OverlongLine


def frame(chunks: list[bytes], max_line_bytes: int = 1 << 20, head_bytes: int = 64) -> list[object]:
    """Feed ``chunks`` then EOF; return every event except NEED_DATA, ending with EOF."""
    framer = LineFramer(max_line_bytes, head_bytes=head_bytes)
    events: list[object] = []
    for chunk in [*chunks, b""]:
        framer.receive_data(chunk)
        while (event := framer.next_event()) is not NEED_DATA:
            events.append(event)
            if event is EOF:
                return events
    raise AssertionError("framer never reported EOF")


def byte_by_byte(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def three_ways(data: bytes, **kwargs: int) -> list[object]:
    """h11's habit: the same input whole and one byte at a time must give the same events."""
    whole = frame([data], **kwargs)
    assert frame(byte_by_byte(data), **kwargs) == whole
    return whole


def test_lines_split_on_newline_and_eof_reported_once_input_ends() -> None:
    assert three_ways(b'{"a":1}\n{"b":2}\n') == [b'{"a":1}', b'{"b":2}', EOF]


def test_crlf_line_endings_lose_the_cr() -> None:
    assert three_ways(b"one\r\ntwo\r\n") == [b"one", b"two", EOF]


def test_blank_and_whitespace_only_lines_are_skipped() -> None:
    assert three_ways(b"\n\r\n  \t\r\nx\n\n") == [b"x", EOF]


def test_bom_at_stream_start_is_dropped_even_when_split() -> None:
    data = b"\xef\xbb\xbf{}\n\xef\xbb\xbf{}\n"
    # Only the stream's first BOM is special; a later one is part of its line.
    assert three_ways(data) == [b"{}", b"\xef\xbb\xbf{}", EOF]


def test_a_short_first_line_that_looks_like_a_bom_prefix_is_kept() -> None:
    assert three_ways(b"\xef\xbb") == [b"\xef\xbb", EOF]


def test_last_line_without_newline_is_still_a_message() -> None:
    assert three_ways(b"a\nb") == [b"a", b"b", EOF]


def test_utf8_split_inside_a_character_is_reassembled() -> None:
    line = '{"t":"Grüße 🌍"}'.encode()
    emoji = line.index(b"\xf0")
    chunks = [line[: emoji + 2], line[emoji + 2 :] + b"\n"]
    assert frame(chunks) == [line, EOF]


def test_nothing_is_returned_before_the_newline_arrives() -> None:
    framer = LineFramer(1024)
    framer.receive_data(b'{"id":1')
    assert framer.next_event() is NEED_DATA
    framer.receive_data(b"}")
    assert framer.next_event() is NEED_DATA
    framer.receive_data(b"\n")
    assert framer.next_event() == b'{"id":1}'


def test_eof_keeps_being_reported() -> None:
    framer = LineFramer(16)
    framer.receive_data(b"")
    framer.receive_data(b"")
    assert framer.next_event() is EOF
    assert framer.next_event() is EOF


def test_data_after_eof_is_a_caller_bug() -> None:
    framer = LineFramer(16)
    framer.receive_data(b"")
    with pytest.raises(RuntimeError):
        framer.receive_data(b"x")


def test_line_at_the_cap_passes_and_one_byte_more_is_overlong() -> None:
    assert three_ways(b"x" * 10 + b"\n", max_line_bytes=10) == [b"x" * 10, EOF]
    events = three_ways(b"y" * 11 + b"\r\nok\n", max_line_bytes=10, head_bytes=4)
    assert events == [OverlongLine(b"yyyy", 11), b"ok", EOF]


def test_overlong_line_is_dropped_as_it_arrives_without_buffering_it_whole() -> None:
    framer = LineFramer(1000, head_bytes=16)
    framer.receive_data(b'{"id":7,"x":"')
    for _ in range(1000):
        framer.receive_data(b"a" * 1000)
        assert framer.next_event() is NEED_DATA
        assert len(framer._buffer) <= 1000 + 1000  # never more than the cap plus one chunk
    framer.receive_data(b'"}\n{"id":8}\n')
    event = framer.next_event()
    assert isinstance(event, OverlongLine)
    assert event.head == b'{"id":7,"x":"aaa'
    assert event.size_bytes == 13 + 1000 * 1000 + 2
    assert framer.next_event() == b'{"id":8}'


def test_overlong_line_ended_by_eof_is_reported() -> None:
    assert frame([b"z" * 50], max_line_bytes=10, head_bytes=3) == [OverlongLine(b"zzz", 50), EOF]


def test_cap_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError):
        LineFramer(0)


lines = st.lists(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")).filter(
        lambda b: b.strip(b" \t") != b""
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(lines=lines, data=st.data())
def test_any_chunking_yields_the_same_messages(lines: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True) if b > a]
    expected = [line.removeprefix(b"\xef\xbb\xbf") if i == 0 else line for i, line in enumerate(lines)]
    expected = [line for line in expected if line.strip(b" \t\r")]
    assert frame(chunks) == [*expected, EOF]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(max_size=64), max_size=10), cap=st.integers(1, 48))
def test_arbitrary_bytes_only_ever_give_lines_overlong_events_and_eof(chunks: list[bytes], cap: int) -> None:
    events = frame(chunks, max_line_bytes=cap, head_bytes=8)
    assert events[-1] is EOF
    for event in events[:-1]:
        assert isinstance(event, (bytes, OverlongLine))
        if isinstance(event, bytes):
            assert 0 < len(event) <= cap and b"\n" not in event
