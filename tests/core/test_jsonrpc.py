"""Classification of stdin lines, id reading from a line's head, and output encoding."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.errors import INVALID_REQUEST, PARSE_ERROR, InboundError, InvalidRequestError, ParseError
from bridge.core.jsonrpc import (
    Batch,
    Notification,
    Request,
    Response,
    classify,
    encode_message,
    loads_strict,
    read_id_from_head,
    to_wire_line,
)


@pytest.mark.parametrize("request_id", [0, "", 1, "1", 9007199254740993, -5, "ü"])
def test_any_string_or_integer_id_makes_a_request_kept_exactly(request_id: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode()
    message = classify(line)
    assert isinstance(message, Request)
    assert message.id == request_id and type(message.id) is type(request_id)
    assert message.body is line  # forwarded as received, never re-serialized


def test_no_id_key_makes_a_notification() -> None:
    message = classify(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(message, Notification)
    assert message.method == "notifications/initialized"


@pytest.mark.parametrize("body", [b'{"jsonrpc":"2.0","id":3,"result":{}}', b'{"jsonrpc":"2.0","id":"s1","error":{"code":1,"message":"x"}}'])
def test_result_or_error_without_method_is_a_client_response(body: bytes) -> None:
    assert isinstance(classify(body), Response)


@pytest.mark.parametrize(
    ("line", "error", "request_id"),
    [
        (b"not json", ParseError, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"', ParseError, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"p\xff"}', ParseError, None),
        (b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', ParseError, None),
        (b"[]", InvalidRequestError, None),
        (b"42", InvalidRequestError, None),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', InvalidRequestError, 1),
        (b'{"id":"a","method":"ping"}', InvalidRequestError, "a"),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', InvalidRequestError, None),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', InvalidRequestError, None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', InvalidRequestError, None),
        (b'{"jsonrpc":"2.0","id":2,"method":7}', InvalidRequestError, 2),
        (b'{"jsonrpc":"2.0","id":2,"method":"x","params":"s"}', InvalidRequestError, 2),
        (b'{"jsonrpc":"2.0","id":4,"result":{},"error":{}}', InvalidRequestError, 4),
        (b'{"jsonrpc":"2.0"}', InvalidRequestError, None),
    ],
)
def test_unusable_lines_raise_the_error_their_reply_needs(
    line: bytes, error: type[InboundError], request_id: object
) -> None:
    with pytest.raises(error) as caught:
        classify(line)
    assert caught.value.request_id == request_id
    assert caught.value.code == (PARSE_ERROR if error is ParseError else INVALID_REQUEST)


def test_batch_items_are_classified_one_by_one() -> None:
    line = b'[{"jsonrpc":"2.0","id":16,"method":"ping"},{"jsonrpc":"2.0","method":"n"},5]'
    batch = classify(line)
    assert isinstance(batch, Batch)
    first, second, third = batch.items
    assert isinstance(first, Request) and json.loads(first.body) == {"jsonrpc": "2.0", "id": 16, "method": "ping"}
    assert isinstance(second, Notification)
    assert isinstance(third, InvalidRequestError)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"aaaa', 7),
        (b'{ "id" : "abc" , "params": {"id": 9, "t": "', "abc"),
        (b'{"jsonrpc":"2.0","method":"tools/call","params":{"id":3,"t":"aaaa', None),
        (b'{"jsonrpc":"2.0","method":"x","id":12', None),  # the id itself may be cut short
        (b'{"jsonrpc":"2.0","method":"x","id":12,', 12),
        (b'{"jsonrpc":"2.0","id":null,"method"', None),
        (b"[1,2", None),
        (b"garbage", None),
    ],
)
def test_id_is_read_from_the_start_of_a_cut_off_line_only_at_top_level(head: bytes, expected: object) -> None:
    assert read_id_from_head(head) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_arbitrary_bytes_classify_or_raise_only_inbound_errors(line: bytes) -> None:
    try:
        classify(line)
    except InboundError:
        pass
    read_id_from_head(line)


def test_encode_message_is_one_compact_utf8_line_with_line_separators_escaped() -> None:
    line = encode_message({"t": "é\u2028x\u2029\nz"})
    assert line == '{"t":"é\\u2028x\\u2029\\nz"}\n'.encode()
    assert line.count(b"\n") == 1


def test_wire_line_reuses_one_line_bytes_and_reserializes_pretty_printed_ones() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"t":"\xc3\xa9"}}'
    assert to_wire_line(raw + b"\n", json.loads(raw)) == raw + b"\n"
    pretty = b'{\n  "jsonrpc": "2.0",\r\n  "id": 1,\n  "result": {}\n}'
    assert to_wire_line(pretty, json.loads(pretty)) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
    separator = '{"t":"a\u2028b"}'.encode()
    assert to_wire_line(separator, json.loads(separator)) == b'{"t":"a\\u2028b"}\n'


@pytest.mark.parametrize("text", ["x" * 100_000, "caf\u00e9 \u2713 \u2027\u202a \U0001f600" * 1000])
def test_a_one_line_reply_with_its_newline_is_written_as_the_same_object(text: str) -> None:
    """No copy for what is already a wire line (a 16 MiB reply would cost milliseconds),
    non-ASCII text included (U+2713 starts with the byte U+2028 starts with)."""
    raw = b'{"jsonrpc":"2.0","id":1,"result":{"t":"' + text.encode() + b'"}}\n'
    assert to_wire_line(raw, json.loads(raw)) is raw


@pytest.mark.parametrize(
    "raw",
    [
        b' {"id":1}\n',  # leading white space
        b'{"id":1} \n',  # trailing white space before the newline
        b'{"id":1}\r\n',
        b'{"id":1}\n\n',
        b'\xef\xbb\xbf{"id":1}\n',  # byte order mark
        b'{\n"id":1}\n',
        '{"t":"a\u2028b"}\n'.encode(),
        '{"t":"a\u2029b"}\n'.encode(),
    ],
)
def test_a_line_needing_any_change_is_never_passed_through(raw: bytes) -> None:
    """Only a line that is exactly one compact message plus \\n skips the rewrite."""
    line = to_wire_line(raw, json.loads(raw.decode("utf-8-sig")))
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    assert not line.startswith((b" ", b"\xef")) and not line[:-1].endswith(b" ")
    assert "\u2028".encode() not in line and "\u2029".encode() not in line
    assert json.loads(line) == json.loads(raw.decode("utf-8-sig"))


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(
    _JSON_VALUES,
    st.sampled_from([b"", b" ", b"\n", b"\r\n", b"\xef\xbb\xbf"]),
    st.sampled_from([b"", b" ", b"\n", b"\r\n", b"\n\n"]),
    st.booleans(),
)
def test_every_wire_line_is_one_line_with_the_same_value(value: object, head: bytes, tail: bytes, indent: bool) -> None:
    """Whatever white space, BOM or pretty-printing the app used, stdout gets one line with the same JSON value."""
    raw = head + json.dumps(value, indent=2 if indent else None, ensure_ascii=False).encode() + tail
    line = to_wire_line(raw, value)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    assert "\u2028".encode() not in line and "\u2029".encode() not in line
    assert json.loads(line) == value


def test_strict_loads_refuses_numbers_json_does_not_have() -> None:
    for text in ("NaN", "[Infinity]", '{"a":-Infinity}'):
        with pytest.raises(ValueError):
            loads_strict(text)
    assert loads_strict(' {"a": [1, 2.5, "x"]} \n') == {"a": [1, 2.5, "x"]}


def test_a_lone_surrogate_is_written_escaped_never_as_invalid_utf8() -> None:
    assert encode_message({"id": "\ud800"}) == b'{"id":"\\ud800"}\n'
    with pytest.raises(InvalidRequestError) as caught:
        classify(b'{"jsonrpc":"1.0","id":"\\ud800","method":"ping"}')
    assert encode_message({"id": caught.value.request_id}).decode("ascii")


def test_a_batch_item_with_a_number_out_of_json_range_is_refused_not_sent_as_infinity() -> None:
    batch = classify(b'[{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":1e400}}]')
    assert isinstance(batch, Batch) and isinstance(batch.items[0], InvalidRequestError)


def test_a_refusal_answers_a_batch_with_one_array_and_its_bad_items_with_their_own_errors() -> None:
    """What a line read during shutdown (or by a bridge that is not configured) gets: one
    reply per request, a batch's replies as one array (JSON-RPC 2.0 §6), an unusable batch
    item its own error, a notification nothing. (A batch read during shutdown used to get
    one line per request and nothing for its bad items.)"""
    from bridge.core.errors import ShuttingDownError
    from bridge.core.jsonrpc import classify, refusal_line

    exc = ShuttingDownError("stopping")
    batch = classify(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"id":2},'
                     b'{"jsonrpc":"2.0","id":"x","method":"b"}]')
    line = refusal_line(batch, exc)
    assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
    replies = json.loads(line)
    assert [reply["id"] for reply in replies] == [1, 2, "x"]
    assert replies[0]["error"]["data"]["reason"] == "shutting_down" and replies[2]["error"]["data"]["reason"] == "shutting_down"
    assert replies[1]["error"]["code"] == -32600
    single = refusal_line(classify(b'{"jsonrpc":"2.0","id":7,"method":"a"}'), exc)
    assert single is not None and json.loads(single)["id"] == 7
    assert refusal_line(classify(b'{"jsonrpc":"2.0","method":"n"}'), exc) is None
    assert refusal_line(classify(b'[{"jsonrpc":"2.0","method":"n"}]'), exc) is None


def test_a_bad_header_or_url_option_never_repeats_its_value() -> None:
    """A configuration error can reach a log file and every reply of a client-started bridge,
    so a mistyped ``--header "Authorization Bearer …"`` (no colon) or a URL carrying a key is
    refused without quoting it."""
    import pytest

    from bridge.core.config import ConfigError, check_endpoint_url, parse_header

    secret = "sk-PLACEHOLDER-0123456789abcdef"
    for text in (f"Authorization Bearer {secret}", f"Authorization Bearer {secret}: x"):
        with pytest.raises(ConfigError) as caught:
            parse_header(text)
        assert secret not in str(caught.value)
    for url in (f"ftp://127.0.0.1/mcp?key={secret}", f"http:///mcp?key={secret}"):
        with pytest.raises(ConfigError) as caught:
            check_endpoint_url(url, allow_remote=False)
        assert secret not in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "first_reader_id"),
    [
        (b'{"id":987654,"jsonrpc":"2.0","result":{},"id":5}\n', 987654),
        (b'{"\\u0069d":987654,"jsonrpc":"2.0","result":{},"id":5}\n', 987654),
        (b'{"jsonrpc":"1.0","id":5,"result":{},"jsonrpc":"2.0"}\n', 5),
    ],
)
def test_a_line_naming_a_member_twice_is_re_encoded_never_reused(raw: bytes, first_reader_id: int) -> None:
    from bridge.core.jsonrpc import loads_members

    value, twice = loads_members(raw.decode())
    assert twice and value == json.loads(raw)
    line = to_wire_line(raw, value, twice=twice)
    assert line == b'{"id":5,"jsonrpc":"2.0","result":{}}\n' or line == b'{"jsonrpc":"2.0","id":5,"result":{}}\n'
    first = json.loads(raw, object_pairs_hook=lambda pairs: dict(reversed(pairs)))
    assert first.get("id") == first_reader_id or first["jsonrpc"] == "1.0"  # what reusing the bytes would have given
    assert json.loads(line, object_pairs_hook=lambda pairs: dict(reversed(pairs))) == value
    assert loads_members('{"jsonrpc":"2.0","id":5,"result":{"id":1,"id":2}}') == (
        {"jsonrpc": "2.0", "id": 5, "result": {"id": 2}}, False)


def test_compact_and_spaced_objects_read_alike_and_a_member_named_twice_is_seen_in_both() -> None:
    from bridge.core.jsonrpc import loads_members

    for text in ('{"id":1,"id":2}', '{ "id" : 1 , "id" : 2 }', '{"\\u0069d":1,"id":2}\n', '{"id":1,"x":{},"id":2}'):
        assert loads_members(text) == ({"id": 2, **({"x": {}} if '"x"' in text else {})}, True), text
    for text in ('{"a":{"b":1,"b":2}}', '{"a":[1,{"a":2}]}\r\n', "{}", '{"a":1}'):
        value, twice = loads_members(text)
        assert not twice and value == json.loads(text), text
    for text in ('{"a":1,}', '{"a":NaN}', '{"a":1}x', '{"a":1', '{"a"1}'):
        with pytest.raises(ValueError):
            loads_members(text)
