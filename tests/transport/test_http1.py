"""Sans-I/O HTTP/1.1 (``bridge/transport/http1.py``): bytes in, events out, no socket.

Responses are fed whole, one byte at a time, and cut at any points (Hypothesis), and the
parser is held against h11 (installed with httpx) as a differential oracle: for generated
responses both agree on status, fields, body and keep-alive, or both refuse. Where the
bridge is deliberately more lenient or stricter than h11, a test of its own pins it.
"""

from __future__ import annotations

from dataclasses import dataclass

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.transport.base import LocalProtocolError, ProtocolViolation
from bridge.transport.http1 import (
    END,
    MAX_HEAD_BYTES,
    NEED_DATA,
    Data,
    Head,
    ResponseParser,
    asks_to_close,
    encode_request_head,
)

SECRET = "sk-live-9f8e7d6c5b4a3928"


@dataclass
class Parsed:
    """What a parser made of a response: the final head, the body and keep-alive; or a refusal."""

    status: int | None = None
    fields: list[tuple[bytes, bytes]] | None = None
    body: bytes = b""
    keep_alive: bool | None = None
    refused: bool = False


def parse(pieces: list[bytes], method: str = "GET", eof: bool = True) -> Parsed:
    """Feed ``pieces`` (then EOF) to the bridge's parser, pulling events after each."""
    parser = ResponseParser(method)
    result = Parsed()
    body = bytearray()
    feeds = [piece for piece in pieces if piece]  # b"" would be EOF
    if eof:
        feeds.append(b"")
    try:
        for piece in feeds:
            parser.receive_data(piece)
            while True:
                event = parser.next_event()
                if event is NEED_DATA:
                    break
                if event is END:
                    result.body = bytes(body)
                    result.keep_alive = parser.keep_alive
                    return result
                if isinstance(event, Head):
                    result.status = event.status_code
                    result.fields = [(n.lower(), v) for n, v in event.headers.raw]
                else:
                    assert isinstance(event, Data) and event.data
                    body += event.data
    except ProtocolViolation:
        return Parsed(refused=True)
    return Parsed(refused=True)  # ran out of bytes: truncated (the pool reports the connection broken)


def parse_h11(data: bytes, method: str = "GET") -> Parsed:
    """The same through h11. Keep-alive: h11's state after the response, and never for a
    body that only EOF could end (h11 reports those DONE; the connection is gone)."""
    connection = h11.Connection(h11.CLIENT)
    connection.send(h11.Request(method=method, target="/", headers=[("Host", "app")]))
    connection.send(h11.EndOfMessage())
    result = Parsed()
    body = bytearray()
    eof = False
    try:
        connection.receive_data(data)
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA and not eof:
                connection.receive_data(b"")
                eof = True
                continue
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return Parsed(refused=True)
            if isinstance(event, h11.Response):
                result.status = event.status_code
                result.fields = [(bytes(n).lower(), bytes(v)) for n, v in event.headers.raw_items()]
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                result.body = bytes(body)
                result.keep_alive = connection.their_state is h11.DONE and not eof
                return result
    except h11.RemoteProtocolError:
        return Parsed(refused=True)


# -- generated responses -------------------------------------------------------------------------

TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
names = st.text(TOKEN_CHARS, min_size=1, max_size=12).filter(
    lambda n: n.lower() not in {"content-length", "transfer-encoding", "connection"}
)
values = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20).map(
    lambda v: v.strip()
) | st.builds(lambda a, b: f"{a} {b}", st.text("abc", min_size=1, max_size=3), st.text("xyz", min_size=1, max_size=3))


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, str]:
    """A well-formed response (any framing, version, interim 1xx, fields) and its method."""
    method = draw(st.sampled_from(["GET", "POST", "HEAD", "DELETE"]))
    minor = draw(st.sampled_from(["0", "1"]))
    status = draw(st.sampled_from([200, 201, 202, 204, 304, 400, 401, 404, 500, 503]))
    end = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))
    head = []
    if minor == "1" and draw(st.booleans()):
        head.append(b"HTTP/1.1 100 Continue" + end + end)
    reason = draw(st.sampled_from(["", " OK", " Whatever it is", " "]))
    lines = [f"HTTP/1.{minor} {status}{reason}".encode()]
    for name, value in draw(st.lists(st.tuples(names, values), max_size=5)):
        spacing = draw(st.sampled_from([" ", "", "\t", "  "]))
        lines.append(f"{name}:{spacing}{value}".encode())
    connection = draw(st.sampled_from([None, "close", "keep-alive", "Keep-Alive, Upgrade"]))
    if connection is not None:
        lines.append(f"Connection: {connection}".encode())
    body = draw(st.binary(max_size=200))
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    no_body = method == "HEAD" or status in (204, 304)
    if framing == "length":
        lines.append(b"Content-Length: %d" % len(body))
        wire_body = body
    elif framing == "chunked":
        lines.append(b"Transfer-Encoding: chunked")
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True) if b > a]
        extension = draw(st.sampled_from([b"", b";name=value", b";x"]))
        wire_body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces) + b"0\r\n"
        wire_body += draw(st.sampled_from([b"", b"Trailer-Field: 1\r\n"])) + b"\r\n"
    else:
        wire_body = body
    head.append(end.join(lines) + end + end)
    return b"".join(head) + (b"" if no_body else wire_body), method


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses())
def test_the_parser_and_h11_agree_on_status_fields_body_and_keep_alive(case: tuple[bytes, str]) -> None:
    data, method = case
    ours, theirs = parse([data], method), parse_h11(data, method)
    assert not theirs.refused, theirs  # the generator makes only valid responses
    if _http10_keep_alive(data):
        theirs.keep_alive = ours.keep_alive  # the one deliberate difference here (pinned below)
    assert ours == theirs


def _http10_keep_alive(data: bytes) -> bool:
    final = data[max(0, data.rfind(b"HTTP/1.")) :]
    return final.startswith(b"HTTP/1.0") and b"keep-alive" in final.split(b"\n\n")[0].split(b"\r\n\r\n")[0].lower()


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses(), st.integers(0, 400), st.binary(min_size=1, max_size=3))
def test_a_damaged_response_is_refused_by_both_or_read_alike(
    case: tuple[bytes, str], at: int, junk: bytes
) -> None:
    """Bytes replaced anywhere: both parsers refuse, or both read the same response."""
    data, method = case
    at = at % len(data)
    damaged = data[:at] + junk + data[at + len(junk) :]
    ours, theirs = parse([damaged], method), parse_h11(damaged, method)
    if ours.refused or theirs.refused:
        assert ours.refused == theirs.refused or _known_difference(damaged), (damaged, ours, theirs)
    else:
        assert ours == theirs or _known_difference(damaged), (damaged, ours, theirs)


def _bare_lf(data: bytes) -> bool:
    return any(data[i - 1 : i] != b"\r" for i in range(1, len(data)) if data[i] == 0x0A)


def _known_difference(data: bytes) -> bool:
    """The deliberate differences from h11 (see the module docstring of http1.py, and the
    tests below, which pin each one)."""
    head = data.split(b"\n\n")[0].split(b"\r\n\r\n")[0].lower()
    lines = head.replace(b"\r\n", b"\n").split(b"\n")
    return (
        any(line.startswith(b"transfer-encoding:") and line[18:].strip() != b"chunked" for line in lines)  # read until close here
        or (b"transfer-encoding" in head and b" ;" in data)  # BWS before a chunk extension
        or (b"transfer-encoding" in head and _bare_lf(data[len(head) :]))  # bare LF in the chunked framing
        or any(line[:1] in (b" ", b"\t") for line in lines[1:])  # obs-fold: refused here, joined by h11
        or b"\r" in head.replace(b"\r\n", b"")  # a lone CR: h11 and this parser part ways on where lines end
        or any(not 0x20 <= byte < 0x7F and byte not in (9, 10, 13) for byte in head)  # controls/obs-text in the head
        or _http10_keep_alive(data)
        or any(  # HTTP/1.2 or HTTP/0.1, say, in the interim or the final status line: refused here
            line.startswith(b"http/") and not line.startswith((b"http/1.0 ", b"http/1.1 "))
            for line in data.lower().replace(b"\r\n", b"\n").split(b"\n")
        )
        or not lines[0].startswith((b"http/1.0 ", b"http/1.1 "))
        or data.count(b"HTTP/1.") > 1  # interim response damaged into a final one
    )


# -- feeding in any pieces -----------------------------------------------------------------------

CHUNKED_SSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n"
)


def test_fed_one_byte_at_a_time_every_framing_reads_the_same() -> None:
    for data in [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        CHUNKED_SSE,
        b"HTTP/1.0 200 OK\r\n\r\nuntil the end",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    ]:
        assert parse([data[i : i + 1] for i in range(len(data))]) == parse([data]) == parse_h11(data)


@settings(max_examples=300, deadline=None)
@given(responses(), st.lists(st.integers(0, 600), max_size=12))
def test_any_split_reads_as_the_whole(case: tuple[bytes, str], cuts: list[int]) -> None:
    data, method = case
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert parse(pieces, method) == parse([data], method)


def test_the_whole_body_fast_path_is_a_query_on_the_same_parser() -> None:
    parser = ResponseParser("POST")
    parser.receive_data(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234")
    assert isinstance(parser.next_event(), Head)
    assert parser.length_body_remaining() == 10
    assert parser.take_length_body(b"\n") is None  # not all here yet: nothing taken
    parser.receive_data(b"56789")
    assert parser.take_length_body(b"\n") == b"0123456789\n"
    assert parser.complete and parser.keep_alive and parser.next_event() is END


def test_truncated_bodies_and_heads_need_data_after_eof_and_never_end() -> None:
    for data in [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", b"HTTP/1.1 200 OK\r\nContent-", CHUNKED_SSE[:-9]]:
        parser = ResponseParser()
        parser.receive_data(data)
        parser.receive_data(b"")
        events = [parser.next_event() for _ in range(8)]
        assert END not in events and events[-1] is NEED_DATA and parser.eof


# -- deliberate differences from h11, pinned ------------------------------------------------------


def test_lenient_an_unknown_transfer_encoding_is_read_until_close_where_h11_refuses() -> None:
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw bytes"
    assert parse_h11(data).refused
    ours = parse([data])
    assert ours.body == b"raw bytes" and ours.keep_alive is False


def test_lenient_an_http_1_0_response_saying_keep_alive_may_persist_where_h11_closes() -> None:
    """RFC 9112 §9.3 allows it; h11 never keeps an HTTP/1.0 connection."""
    data = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
    assert parse([data]).keep_alive is True and parse_h11(data).keep_alive is False


def test_lenient_white_space_before_a_chunk_extension_is_accepted_where_h11_refuses() -> None:
    """RFC 9112 §7.1.1 allows BWS before the ``;``."""
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 ;x=1\r\nok\r\n0\r\n\r\n"
    assert parse([data]).body == b"ok" and parse_h11(data).refused


def test_lenient_a_bare_lf_in_the_chunked_framing_is_accepted_where_h11_refuses() -> None:
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\n0\n\n"
    assert parse([data]).body == b"ok" and parse_h11(data).refused


def test_stricter_obs_fold_is_refused_where_h11_joins_the_lines() -> None:
    data = b"HTTP/1.1 200 OK\r\nX-Long: one\r\n two\r\nContent-Length: 0\r\n\r\n"
    assert parse([data]).refused
    assert not parse_h11(data).refused


def test_stricter_101_and_codes_below_100_are_refused() -> None:
    for line in [b"HTTP/1.1 101 Switching Protocols", b"HTTP/1.1 099 Low"]:
        assert parse([line + b"\r\n\r\n"]).refused


def test_a_head_over_the_cap_is_refused_even_while_it_is_still_arriving() -> None:
    parser = ResponseParser()
    parser.receive_data(b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD_BYTES)
    with pytest.raises(ProtocolViolation):
        parser.next_event()


def test_differing_content_lengths_are_refused_like_h11() -> None:
    data = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    assert parse([data]).refused and parse_h11(data).refused


# -- request heads ---------------------------------------------------------------------------------


def test_a_request_head_is_the_request_line_host_fields_and_length() -> None:
    head = encode_request_head("POST", "/mcp?x=1", "127.0.0.1:8765", [("Accept", "application/json")], 2)
    assert head == b"POST /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nAccept: application/json\r\nContent-Length: 2\r\n\r\n"
    assert encode_request_head("GET", "/", "app", [], None) == b"GET / HTTP/1.1\r\nHost: app\r\n\r\n"


def test_h11_reads_the_request_head_the_bridge_writes() -> None:
    head = encode_request_head("POST", "/mcp", "app", [("Authorization", f"Bearer {SECRET}"), ("X-A", "é")], 2)
    server = h11.Connection(h11.SERVER)
    server.receive_data(head + b"{}")
    request = server.next_event()
    assert isinstance(request, h11.Request) and request.method == b"POST" and request.target == b"/mcp"
    assert dict(request.headers)[b"authorization"] == f"Bearer {SECRET}".encode()


@pytest.mark.parametrize(
    "fields",
    [
        [("Authorization", f"Bearer {SECRET}\r\nX-Injected: 1")],
        [("Bad Name", "v")],
        [("X-Nul", f"{SECRET}\x00")],
        [("Host", "evil")],
        [("Content-Length", "5")],
        [("X-Wide", f"{SECRET}\u20ac")],
    ],
)
def test_a_field_that_cannot_be_sent_is_refused_without_quoting_its_value(fields: list[tuple[str, str]]) -> None:
    with pytest.raises(LocalProtocolError) as caught:
        encode_request_head("POST", "/", "app", fields, 0)
    assert SECRET not in str(caught.value)


def test_connection_close_in_a_request_head_is_seen() -> None:
    assert asks_to_close(encode_request_head("GET", "/", "app", [("Connection", "Close")], None))
    assert not asks_to_close(encode_request_head("GET", "/", "app", [("X-Note", "close")], None))
    assert not asks_to_close(encode_request_head("GET", "/", "app", [], None))


# -- field lines, pinned (the head is checked as one block: each rule still holds line by line) ---


def head_of(data: bytes) -> Head:
    parser = ResponseParser()
    parser.receive_data(data)
    event = parser.next_event()
    assert isinstance(event, Head)
    return event


@pytest.mark.parametrize(
    "line",
    [
        b"X-Ctl: a\x01b",  # a control in the middle of a value
        b"X-Cr: a\rb",  # a lone CR inside a value
        b"X-Del: a\x7f",
        b"X(Bad): 1",  # a name with a character that is no token character
        b"X-Space : 1",  # white space before the colon (RFC 9112 §5.1)
        b": no name",
        b"no colon at all",
        b"X-Ok: 1\r\r\nno colon",  # a malformed line beside a line ending in two CRs
        b"\r\r\nno colon",  # … and beside a line of CRs only
    ],
)
def test_a_malformed_field_line_anywhere_in_the_head_is_refused(line: bytes) -> None:
    data = b"HTTP/1.1 200 OK\r\nA: 1\r\n" + line + b"\r\nB: 2\r\nContent-Length: 0\r\n\r\n"
    assert parse([data]).refused


def test_field_names_match_in_any_case_and_repeated_fields_are_joined_in_order() -> None:
    head = head_of(b"HTTP/1.1 200 OK\r\nX-Multi: a\r\nContent-Type: text/plain\r\nx-multi: b\r\nX-MULTI: c\r\n\r\n")
    assert head.headers.get("x-multi") == head.headers.get("X-Multi") == "a, b, c"
    assert head.headers.get("CONTENT-TYPE") == head.headers.get("content-type") == "text/plain"
    assert "Content-Type" in head.headers and "X-Other" not in head.headers and head.headers.get("X-Other", "-") == "-"
    assert head.headers.raw == [(b"X-Multi", b"a"), (b"Content-Type", b"text/plain"), (b"x-multi", b"b"), (b"X-MULTI", b"c")]


def test_values_lose_the_white_space_around_them_and_keep_obsolete_text_as_received() -> None:
    head = head_of(b"HTTP/1.1 200 OK\nA: \t x  y \t\r\r\nB:\r\nC: caf\xe9\n\n")
    assert head.headers.raw == [(b"A", b"x  y"), (b"B", b""), (b"C", b"caf\xe9")]
    assert head.headers.get("c") == "caf\xe9"


def test_a_line_of_crs_only_inside_the_head_is_skipped() -> None:
    head = head_of(b"HTTP/1.1 200 OK\r\r\nA: 1\r\n\r\r\nB: 2\r\n\r\n")
    assert head.headers.raw == [(b"A", b"1"), (b"B", b"2")]


def test_content_length_repeated_alike_counts_once_and_digits_must_be_ascii() -> None:
    assert parse([b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok"]).body == b"ok"
    assert parse([b"HTTP/1.1 200 OK\r\nContent-Length:  2 \r\n\r\nok"]).body == b"ok"
    assert parse([b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\nok"]).refused  # superscript two


def test_a_request_field_is_checked_every_time_and_the_first_failing_field_is_named() -> None:
    assert encode_request_head("GET", "/", "app", [("X-A", "a\tb \xe9")], None) == b"GET / HTTP/1.1\r\nHost: app\r\nX-A: a\tb \xe9\r\n\r\n"
    encode_request_head("GET", "/", "app", [("X-A", "fine")], None)  # a name already sent once …
    with pytest.raises(LocalProtocolError, match="'X-A'"):
        encode_request_head("GET", "/", "app", [("X-A", f"{SECRET}\r\nX-Injected: 1")], None)  # … is still checked
    with pytest.raises(LocalProtocolError, match="'X-First'") as caught:
        encode_request_head("GET", "/", "app", [("X-First", f"{SECRET}\x00"), ("Bad Name", "v"), ("Host", "h")], None)
    assert SECRET not in str(caught.value)
    with pytest.raises(LocalProtocolError, match="'HOST'.*itself"):
        encode_request_head("GET", "/", "app", [("X-A", "\u20ac"), ("HOST", "h")], None)  # own field before the encoding
    with pytest.raises(LocalProtocolError, match="cannot carry"):
        encode_request_head("GET", "/", "app", [("X-A", "\u20ac")], None)
    with pytest.raises(LocalProtocolError, match="method"):
        encode_request_head("GE T", "/", "app", [], None)
