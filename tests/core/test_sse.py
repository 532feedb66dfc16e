"""The SSE decoder (WHATWG HTML "Parsing an event stream"): whole, byte by byte, any
chunking; line ends, BOM, fields, comments, the end of the stream, and the cap."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.sse import COMMENT, EOF, NEED_DATA, Event, EventTooLarge, SSEDecoder

TOO_LARGE = "too large"


def decode(chunks: list[bytes], max_event_bytes: int = 1 << 20, last_event_id: str = "") -> list[object]:
    """Feed ``chunks`` then the end; return every event except NEED_DATA, ending with EOF
    (an :class:`EventTooLarge` shows as ``TOO_LARGE``)."""
    decoder = SSEDecoder(max_event_bytes, last_event_id)
    events: list[object] = []
    for chunk in [*chunks, b""]:
        decoder.receive_data(chunk)
        while True:
            try:
                event = decoder.next_event()
            except EventTooLarge:
                events.append(TOO_LARGE)
                continue
            if event is NEED_DATA:
                break
            events.append(event)
            if event is EOF:
                return events
    raise AssertionError("the decoder never reported EOF")


def byte_by_byte(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def three_ways(data: bytes, **kwargs: int) -> list[object]:
    """Whole, one byte at a time, and split before every CR: the same events."""
    whole = decode([data], **kwargs)  # type: ignore[arg-type]
    assert decode(byte_by_byte(data), **kwargs) == whole  # type: ignore[arg-type]
    at_cr = [piece for piece in re.split(rb"(?=\r)", data) if piece]
    assert decode(at_cr, **kwargs) == whole  # type: ignore[arg-type]
    return whole


def message(data: bytes, event_id: str = "", retry_ms: int | None = None, event_type: str = "message") -> Event:
    return Event(data + b"\n", event_type, event_id, retry_ms)


# -- line ends and the stream's start ------------------------------------------------------------


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_each_line_end_ends_lines_and_a_blank_line_ends_the_event(end: bytes) -> None:
    data = b"data: one" + end + b"data: two" + end + end + b"data: three" + end + end
    assert three_ways(data) == [message(b"one\ntwo"), message(b"three"), EOF]


def test_mixed_line_ends_in_one_stream() -> None:
    data = b"data: a\rdata: b\r\ndata: c\n\r\ndata: d\n\r"
    assert three_ways(data) == [message(b"a\nb\nc"), message(b"d"), EOF]


def test_a_cr_ending_one_chunk_and_an_lf_starting_the_next_are_one_line_end() -> None:
    # Read as two line ends, the LF would be a blank line and "a" an event of its own.
    assert decode([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [message(b"a\nb"), EOF]


def test_an_lf_after_a_cr_is_skipped_only_right_after_it() -> None:
    assert decode([b"data: a\r", b"data: b\r", b"\r"]) == [message(b"a\nb"), EOF]


def test_a_bom_at_the_stream_start_is_dropped_even_when_split() -> None:
    data = b"\xef\xbb\xbfdata: x\n\n"
    assert three_ways(data) == [message(b"x"), EOF]
    assert decode([b"\xef", b"\xbb", b"\xbf", b"data: x\n\n"]) == [message(b"x"), EOF]


def test_a_second_bom_is_part_of_its_line_so_the_field_is_unknown() -> None:
    data = b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n"
    assert three_ways(data) == [message(b"y"), EOF]


def test_a_stream_shorter_than_a_bom_that_looks_like_one_is_still_decoded() -> None:
    assert decode([b"\xef\xbb"]) == [EOF]
    assert decode([b"\xef", b"data: x\n\n"]) == [EOF]  # a field named b"\xefdata": ignored


# -- fields ------------------------------------------------------------------------------------


def test_one_space_after_the_colon_is_dropped_and_no_more() -> None:
    data = b"data:x\n\ndata:  x\n\ndata: \n\n"
    assert three_ways(data) == [message(b"x"), message(b" x"), message(b""), EOF]


def test_a_line_without_a_colon_is_a_field_with_an_empty_value() -> None:
    assert three_ways(b"data\ndata\n\n") == [message(b"\n"), EOF]


def test_data_values_keep_colons_and_bytes_that_are_not_utf8() -> None:
    data = b"data: {\"a\":\"b:c\"} \xff\xe2\x80\xa8\n\n"
    assert three_ways(data) == [message(b"{\"a\":\"b:c\"} \xff\xe2\x80\xa8"), EOF]


def test_event_type_defaults_to_message_and_an_empty_one_too() -> None:
    data = b"event: ping\ndata: 1\n\nevent:\ndata: 2\n\ndata: 3\n\n"
    assert three_ways(data) == [message(b"1", event_type="ping"), message(b"2"), message(b"3"), EOF]


def test_the_event_type_is_decoded_with_replacement() -> None:
    assert three_ways(b"event: \xc3\xa9\xff\ndata: 1\n\n") == [message(b"1", event_type="é\ufffd"), EOF]


def test_the_last_event_id_persists_until_an_id_field_changes_or_resets_it() -> None:
    data = b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 8\ndata: d\n\n"
    assert three_ways(data) == [message(b"a", "7"), message(b"b", "7"), message(b"c", ""), message(b"d", "8"), EOF]


def test_an_id_containing_nul_is_ignored() -> None:
    data = b"id: 1\n\nid: 2\x003\ndata: a\n\n"
    assert three_ways(data) == [Event(b"", "message", "1"), message(b"a", "1"), EOF]


def test_a_resumed_stream_starts_from_the_id_it_was_given() -> None:
    assert decode([b"data: a\n\n"], last_event_id="41") == [message(b"a", "41"), EOF]


def test_an_id_of_an_event_that_never_completes_is_dropped() -> None:
    decoder = SSEDecoder(100, "1")
    decoder.receive_data(b"id: 2\ndata: a\n")
    decoder.receive_data(b"")
    assert decoder.next_event() is EOF
    assert decoder.last_event_id == "1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(b"1000", 1000), (b"0", 0), (b"", None), (b"12a", None), (b"-5", None), (b" 5", None), (b"1.5", None),
     (b"\xd9\xa3", None), (b"9" * 40, 10**15)],
    ids=["digits", "zero", "empty", "letter", "minus", "space", "point", "arabic-indic", "huge"],
)
def test_retry_is_taken_only_as_ascii_digits(value: bytes, expected: int | None) -> None:
    assert three_ways(b"retry: " + value + b"\ndata: x\n\n") == [message(b"x", retry_ms=expected), EOF]


def test_retry_takes_effect_at_once_and_persists() -> None:
    decoder = SSEDecoder(100)
    decoder.receive_data(b"retry: 500\ndata: x")
    assert decoder.next_event() is NEED_DATA
    assert decoder.retry_ms == 500  # WHATWG: set when the field is read, not at dispatch
    decoder.receive_data(b"\n\ndata: y\n\nretry: x\n\n")
    assert decoder.next_event() == message(b"x", retry_ms=500)
    assert decoder.next_event() == message(b"y", retry_ms=500)
    assert decoder.next_event() is NEED_DATA  # an invalid retry is no field: no event, no change
    assert decoder.retry_ms == 500


def test_unknown_fields_are_ignored_and_a_block_of_only_them_is_no_event() -> None:
    assert three_ways(b"foo: bar\n\nDATA: x\n\ndata: y\nfoo\n\n") == [message(b"y"), EOF]


def test_a_block_with_only_an_id_is_an_event_with_empty_data() -> None:
    # MCP 2025-11-25's priming event; the caller skips it, its id counts.
    assert three_ways(b"id: p-1\n\n") == [Event(b"", "message", "p-1"), EOF]


# -- comments, blank lines, the end ----------------------------------------------------------


def test_comments_are_reported_and_do_not_break_the_event() -> None:
    data = b": hello\ndata: a\n:\ndata: b\n\n: keep-alive\n\n"
    assert three_ways(data) == [COMMENT, COMMENT, message(b"a\nb"), COMMENT, EOF]


def test_blank_lines_without_fields_are_no_event() -> None:
    assert three_ways(b"\n\r\n\r\n\ndata: x\n\n\n\n") == [message(b"x"), EOF]


def test_an_event_cut_off_by_the_end_is_dropped() -> None:
    assert three_ways(b"data: a\n\ndata: b\n") == [message(b"a"), EOF]
    assert three_ways(b"data: a\n\ndata: b") == [message(b"a"), EOF]


def test_eof_is_reported_again_and_data_after_it_is_a_bug() -> None:
    decoder = SSEDecoder(10)
    decoder.receive_data(b"")
    assert decoder.next_event() is EOF
    assert decoder.next_event() is EOF
    with pytest.raises(RuntimeError):
        decoder.receive_data(b"x")


def test_a_one_line_event_hands_on_the_slice_with_its_lf() -> None:
    decoder = SSEDecoder(100)
    decoder.receive_data(b'event: message\ndata: {"id":1}\n\n')
    event = decoder.next_event()
    assert isinstance(event, Event) and event.data_with_newline == b'{"id":1}\n'
    assert event.data == b'{"id":1}'


def test_a_cap_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError):
        SSEDecoder(0)


@pytest.mark.slow
def test_many_cr_only_lines_in_one_chunk_are_decoded_in_linear_time() -> None:
    # 1,000,000 lines in 4 MiB chunks (the most the transport buffers): with a rescan of the
    # chunk for an LF per line this takes minutes and the test's timeout ends it.
    data = b"data: x\r" * 1_000_000 + b"\r"
    chunks = [data[i : i + (4 << 20)] for i in range(0, len(data), 4 << 20)]
    (event, eof) = decode(chunks, max_event_bytes=1 << 22)
    assert isinstance(event, Event) and event.data == b"\n".join([b"x"] * 1_000_000) and eof is EOF


def test_the_checklist_case_split_everywhere_gives_exactly_the_expected_messages() -> None:
    """WHATWG HTML §9.2 (server-sent events): CRLF pairs and a multi-byte character split by the chunking,
    comments, a three-line data and an ``event: foo``."""
    data = (b": open\r\nid: 1\r\ndata: {\"t\":\"caf\xc3\xa9\"}\r\n\r\nevent: foo\r\ndata: x\r\n\r\n"
            b"data: [1,\r\ndata: 2,\r\ndata: 3]\r\n: ping\r\n\r\n")
    expected = [COMMENT, message(b'{"t":"caf\xc3\xa9"}', "1"), message(b"x", "1", event_type="foo"),
                COMMENT, message(b"[1,\n2,\n3]", "1"), EOF]
    assert three_ways(data) == expected
    for cut in range(1, len(data)):
        assert decode([data[:cut], data[cut:]]) == expected


# -- the cap -----------------------------------------------------------------------------------


def test_data_up_to_the_cap_passes_and_one_byte_more_is_refused() -> None:
    assert three_ways(b"data: 12345\n\n", max_event_bytes=5) == [message(b"12345"), EOF]
    assert three_ways(b"data: 12\ndata: 3\n\n", max_event_bytes=4) == [message(b"12\n3"), EOF]
    assert three_ways(b"data: 123456\n\ndata: ok\n\n", max_event_bytes=5) == [TOO_LARGE, message(b"ok"), EOF]
    assert three_ways(b"data: 12\ndata: 34\n\ndata: ok\n\n", max_event_bytes=4) == [TOO_LARGE, message(b"ok"), EOF]


def test_an_event_is_refused_while_its_data_arrives_before_its_line_ends() -> None:
    decoder = SSEDecoder(1000)
    decoder.receive_data(b"id: 1\ndata: ")
    assert decoder.next_event() is NEED_DATA
    refused_at = None
    for sent in range(1, 20):
        decoder.receive_data(b"x" * 100)
        try:
            assert decoder.next_event() is NEED_DATA
        except EventTooLarge as exc:
            assert exc.limit_bytes == 1000 and exc.size_bytes > 1000
            refused_at = sent
            break
    assert refused_at == 11  # 1,100 bytes of data: the first chunk past the cap
    assert decoder.buffered_bytes == 0


def test_a_refused_event_sets_no_id() -> None:
    data = b"id: 1\ndata: a\n\nid: lost\ndata: " + b"x" * 50 + b"\n\ndata: b\n\n"
    assert three_ways(data, max_event_bytes=10) == [message(b"a", "1"), TOO_LARGE, message(b"b", "1"), EOF]


def test_after_a_refusal_the_rest_of_the_event_is_dropped_as_it_arrives() -> None:
    decoder = SSEDecoder(1000)
    decoder.receive_data(b"data: " + b"x" * 2000)
    with pytest.raises(EventTooLarge):
        decoder.next_event()
    for _ in range(200):  # 20 MB more of the same line, then more lines of the same event
        decoder.receive_data(b"y" * 100_000)
        assert decoder.next_event() is NEED_DATA
        assert decoder.buffered_bytes == 0
    decoder.receive_data(b"\r")
    decoder.receive_data(b"\ndata: " + b"z" * 999 + b"\nid: lost\n: comment\r")
    assert decoder.next_event() is NEED_DATA
    decoder.receive_data(b"\n\r\nid: 2\ndata: next\n\n")
    assert decoder.next_event() == message(b"next", "2")


def test_many_short_data_lines_are_refused_once_their_sum_passes_the_cap() -> None:
    data = b"data: 123456789\n" * 200 + b"\ndata: ok\n\n"
    assert three_ways(data, max_event_bytes=1000) == [TOO_LARGE, message(b"ok"), EOF]


def test_an_overlong_comment_or_id_line_is_refused_too() -> None:
    for line in (b": " + b"c" * 2000, b"id: " + b"i" * 2000, b"x" * 2000):
        assert decode(byte_by_byte(line + b"\ndata: a\n\ndata: b\n\n"), max_event_bytes=1000) == [TOO_LARGE, message(b"b"), EOF]


# -- any chunking, against a reference decoder written from the standard's text ------------------


def reference(stream: bytes, cap: int = 1 << 20) -> list[object]:
    """WHATWG's algorithm, done the slow and obvious way on the whole stream at once, with
    the cap as the module states it."""
    stream = stream.removeprefix(b"\xef\xbb\xbf")
    *lines, unfinished = re.split(rb"\r\n|\r|\n", stream)
    out: list[object] = []
    data: list[bytes] = []
    event_type, id_buffer, last_id, retry, fields, discarding = "", "", "", None, False, False

    def data_bytes() -> int:
        return sum(len(d) + 1 for d in data)

    for line in lines:
        if discarding:
            discarding = bool(line)
            continue
        if not line:
            if fields:
                last_id = id_buffer
                out.append(Event(b"".join(d + b"\n" for d in data), event_type or "message", last_id, retry))
            data, event_type, fields = [], "", False
            continue
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if data_bytes() + len(line) - 6 > cap or (name == b"data" and data_bytes() + len(value) > cap):
            out.append(TOO_LARGE)
            data, event_type, fields, discarding, id_buffer = [], "", False, True, last_id
            continue
        if line.startswith(b":"):
            out.append(COMMENT)
            continue
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event_type = value.decode("utf-8", "replace")
        elif name == b"id" and b"\0" not in value:
            id_buffer = value.decode("utf-8", "replace")
        elif name == b"retry" and value and all(48 <= b <= 57 for b in value):
            retry = int(value)
        else:
            continue
        fields = True
    if not discarding and data_bytes() + len(unfinished) - 6 > cap:
        out.append(TOO_LARGE)
    return [*out, EOF]


TOKENS = [b"data", b"data:", b"data: ", b"id: ", b"event: ", b"retry: ", b":", b" ", b"x", b"{}", b"7",
          b"\0", b"\r", b"\n", b"\r\n", b"\n\n", b"\xef\xbb\xbf", b"\xc3\xa9", b"foo"]


@st.composite
def streams_and_cuts(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    stream = b"".join(draw(st.lists(st.sampled_from(TOKENS), max_size=60)))
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    return stream, [p for p in pieces if p]


@settings(max_examples=400, deadline=None)
@given(streams_and_cuts())
def test_any_chunking_gives_what_the_reference_gives_for_the_whole(case: tuple[bytes, list[bytes]]) -> None:
    stream, pieces = case
    expected = reference(stream)
    assert decode(pieces) == expected
    assert decode(byte_by_byte(stream)) == expected


@settings(max_examples=300, deadline=None)
@given(streams_and_cuts(), st.integers(1, 12))
def test_under_a_cap_any_chunking_refuses_what_the_reference_refuses(case: tuple[bytes, list[bytes]], cap: int) -> None:
    stream, pieces = case
    expected = reference(stream, cap)
    assert decode(pieces, max_event_bytes=cap) == expected
    assert decode(byte_by_byte(stream), max_event_bytes=cap) == expected
