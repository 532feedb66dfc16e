"""The fast parser for large messages gives the standard library's verdict and value, always."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.jsonrpc import loads_strict
from bridge.streamable import jsonparse
from bridge.streamable.jsonparse import FAST_PARSE_BYTES, expect, loads_message_bytes, loads_strict_bytes


def typed(value: Any) -> Any:
    """``value`` with every type spelled out: True is not 1, 1.0 is not 1, -0.0 is not 0.0,
    and object keys keep their order."""
    if isinstance(value, dict):
        return ("object", [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("array", [typed(item) for item in value])
    return (type(value).__name__, repr(value))


def outcome(parse: Any, data: bytes) -> Any:
    try:
        return ("value", typed(parse(data)))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return ("refused", type(exc).__name__)


def the_rule(data: bytes) -> Any:
    return loads_strict(data.decode("utf-8"))


@pytest.fixture(scope="module")
def every_size_fast() -> Iterator[None]:
    """Every input goes to msgspec first (not only those of 2 MiB and more)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonparse, "FAST_PARSE_BYTES", 0)
        jsonparse.expect(str(FAST_PARSE_BYTES))
        assert jsonparse._fast_decode is not None
        yield


class Number(str):
    """A JSON number's text as drawn (long mantissas, exponents beyond a float's range)."""


_TEXT = st.text(st.characters(exclude_categories=()), max_size=8)  # lone surrogates included
_NUMBERS = (
    st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.from_regex(r"\A-?(0|[1-9][0-9]{0,400})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?\Z").map(lambda text: Number(text))
)
_VALUES = st.recursive(
    st.none() | st.booleans() | _NUMBERS | _TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=12,
)
_INTERESTING = [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b"0", b"-", b"+", b"e", b".", b"u", b"n", b"N",
                b"\x00", b"\x1f", b"\x7f", b"\xff", b"\xed", b"\xc0", b"\xef\xbb\xbf", b" ", b"\t", b"\x0c", b"1e400",
                b"\\ud800", b"\\udc00", b"\\u", b"Infinity", b"NaN", b"\xe2\x80\xa8"]


def serialize(value: Any, ascii_only: bool, indent: int | None) -> bytes:
    def as_json(item: Any) -> str:
        return str(item) if isinstance(item, Number) else json.dumps(item, ensure_ascii=ascii_only)

    def write(item: Any, depth: int) -> str:
        pad = "" if indent is None else "\n" + " " * (indent * (depth + 1))
        if isinstance(item, dict):
            return "{" + ",".join(f"{pad}{json.dumps(k, ensure_ascii=ascii_only)}:{write(v, depth + 1)}" for k, v in item.items()) + "}"
        if isinstance(item, list):
            return "[" + ",".join(pad + write(v, depth + 1) for v in item) + "]"
        return as_json(item)

    return write(value, 0).encode("utf-8", "surrogatepass")  # a raw lone surrogate: invalid UTF-8 on purpose


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_VALUES, st.booleans(), st.sampled_from([None, 0, 2]), st.data())
def test_fast_parse_gives_the_standard_librarys_verdict_and_value(
    every_size_fast: None, value: Any, ascii_only: bool, indent: int | None, data: st.DataObject
) -> None:
    raw = serialize(value, ascii_only, indent)
    for _ in range(data.draw(st.integers(0, 3))):  # mutations: replace, insert or cut
        at = data.draw(st.integers(0, len(raw)))
        piece = data.draw(st.sampled_from(_INTERESTING))
        cut = data.draw(st.integers(0, 2))
        raw = raw[:at] + piece + raw[at + cut:]
    assert outcome(loads_strict_bytes, raw) == outcome(the_rule, raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_fast_parse_of_any_bytes_gives_the_standard_librarys_verdict(every_size_fast: None, raw: bytes) -> None:
    assert outcome(loads_strict_bytes, raw) == outcome(the_rule, raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'"\\ud800"', b'{"\\udc00":1}', b"1e400", b"[-1e400]", b"1" + b"0" * 400 + b".0", b"NaN", b"[Infinity]",
        b"1" + b"0" * 4400, b"[" * 2000 + b"]" * 2000, b'"\xed\xa0\x80"', b'"\xc0\x80"', b"\xef\xbb\xbf{}",
        b'{"a":1,"a":2}', b"123456789012345678901234567890", b"-0", b"-0.0", b"1E2", b"\x0c[]", b"[]\x00",
    ],
)
def test_what_json_and_msgspec_disagree_on_ends_as_json_says(every_size_fast: None, raw: bytes) -> None:
    assert outcome(loads_strict_bytes, raw) == outcome(the_rule, raw)


def test_a_large_reply_is_parsed_by_msgspec_and_its_refusals_by_json() -> None:
    big = "x" * FAST_PARSE_BYTES
    reply = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": big, "n": 2.5, "big": 10**30}}, separators=(",", ":")).encode()
    expect(str(len(reply)))
    assert jsonparse._fast_decode is not None
    assert typed(loads_strict_bytes(reply)) == typed(json.loads(reply))
    # msgspec refuses a lone surrogate escape and 1e400; JSON's rules (loads_strict) take them
    odd = reply.replace(b'"n":2.5', b'"n":1e400,"s":"\\ud800"')
    assert odd != reply
    value = loads_strict_bytes(odd)
    assert value["result"]["n"] == float("inf") and value["result"]["s"] == "\ud800"
    with pytest.raises(ValueError):
        loads_strict_bytes(reply.replace(b'"n":2.5', b'"n":NaN'))
    with pytest.raises(UnicodeDecodeError):
        loads_strict_bytes(reply.replace(b"xxxx", b"x\xffxx", 1))


@pytest.mark.parametrize("field", [None, "", "abc", "-5", "²" * 8, "9" * 5000, " 12 ", str(FAST_PARSE_BYTES - 1)])
def test_a_content_length_that_is_not_a_large_number_imports_nothing(field: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonparse, "FAST_PARSE_BYTES", FAST_PARSE_BYTES)
    monkeypatch.setattr(jsonparse, "_fast_decode", None)
    expect(field)


# -- a top-level member named twice (never forwarded as it came) --------------------------------


def names_twice(data: bytes) -> bool:
    """The reference: whether the top-level object names a member twice (the outermost
    object's hook runs last)."""
    calls: list[list[tuple[str, Any]]] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        calls.append(pairs)
        return dict(pairs)

    value = json.loads(data.decode("utf-8"), object_pairs_hook=hook)
    return isinstance(value, dict) and len({key for key, _ in calls[-1]}) != len(calls[-1])


def message_outcome(data: bytes) -> Any:
    try:
        value, twice = loads_message_bytes(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return ("refused", type(exc).__name__)
    return ("value", typed(value), twice)


def rule_outcome(data: bytes) -> Any:
    first = outcome(the_rule, data)
    return first if first[0] == "refused" else (*first, names_twice(data))


_KEYS = st.sampled_from(["id", "jsonrpc", "result", "a", "\u00e9"])
_MEMBERS = st.lists(st.tuples(_KEYS, _VALUES), max_size=5)


def object_bytes(members: list[tuple[str, Any]], spelling: list[bool], indent: int | None) -> bytes:
    """An object with these members in this order, duplicates kept; a key spelt with
    ``\\u`` escapes where ``spelling`` says."""
    pad = "" if indent is None else "\n "
    parts = []
    for (key, value), escaped in zip(members, spelling + [False] * len(members), strict=False):
        name = '"' + "".join(f"\\u{ord(c):04x}" for c in key) + '"' if escaped else json.dumps(key)
        parts.append(f"{pad}{name}:{pad}" + serialize(value, False, indent).decode("utf-8", "surrogatepass"))
    return ("{" + ",".join(parts) + pad + "}").encode("utf-8", "surrogatepass")


@pytest.mark.slow
@pytest.mark.parametrize("fast", [False, True], ids=["json", "msgspec"])
@settings(max_examples=300, deadline=None)
@given(members=_MEMBERS, spelling=st.lists(st.booleans(), max_size=5), indent=st.sampled_from([None, 1]))
def test_a_member_named_twice_is_told_exactly_on_both_paths(
    fast: bool, members: list[tuple[str, Any]], spelling: list[bool], indent: int | None
) -> None:
    raw = object_bytes(members, spelling, indent)
    with pytest.MonkeyPatch.context() as patch:
        if fast:
            patch.setattr(jsonparse, "FAST_PARSE_BYTES", 0)
            jsonparse.expect(str(FAST_PARSE_BYTES))
        assert message_outcome(raw) == rule_outcome(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id":987654,"jsonrpc":"2.0","result":{},"id":5}',
        b'{"\\u0069d":987654,"jsonrpc":"2.0","result":{},"id":5}',
        b'{"jsonrpc":"1.0","id":5,"result":{},"jsonrpc":"2.0"}',
        b' {"id":5 , "id" : 5 } ',  # the same value twice is still twice
        b'{"id":5,"result":{"id":1,"id":2}}',  # nested: not the top level
        b'{"id":5,"result":"\\"id\\":6"}',
        b'[{"id":1,"id":2}]',  # a batch: every item is re-encoded anyway
        b'{"id":1,"id":2',
        b'{"a":1}{"a":1}',
    ],
)
@pytest.mark.parametrize("fast", [False, True], ids=["json", "msgspec"])
def test_the_wire_examples(raw: bytes, fast: bool) -> None:
    with pytest.MonkeyPatch.context() as patch:
        if fast:
            patch.setattr(jsonparse, "FAST_PARSE_BYTES", 0)
            jsonparse.expect(str(FAST_PARSE_BYTES))
        assert message_outcome(raw) == rule_outcome(raw)


def test_a_large_reply_naming_a_member_twice_is_told_and_a_clean_one_reused() -> None:
    """Over FAST_PARSE_BYTES (msgspec), as under it."""
    text = json.dumps("x\n" * FAST_PARSE_BYTES)
    clean = b'{"jsonrpc":"2.0","id":5,"result":{"t":' + text.encode() + b"}}"
    assert loads_message_bytes(clean)[1] is False
    for twice in (b'{"id":987654,' + clean[1:], clean[:-1] + b',"id":6}', clean.replace(b'"id":5', b'"\\u0069d":5,"id":5')):
        value, told = loads_message_bytes(twice)
        assert told is True and value == json.loads(twice)
