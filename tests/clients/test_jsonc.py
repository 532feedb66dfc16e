"""bridge.clients.jsonc: JSONC (VS Code's and Zed's dialect) read like JSON.parse would, and one
member edited with every other byte of the file kept (issue 14, item 2)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bridge.clients import jsonc

# -- generated JSONC documents ----------------------------------------------------------------

KEYS = st.text(alphabet='abxyz_é "\\/', max_size=4)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(alphabet='ab é"\\\n\t', max_size=4))
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3)),
    max_leaves=6,
)
# What may stand between two tokens: whitespace and comments of every kind (a line
# comment always ends its line).
GAPS = st.sampled_from(
    ["", " ", "\n", "\n  ", "\r\n    ", "\t", " // note\n", "/* c */", "\n  // own line\n  ", " /* a\nb */ "]
)


def render(draw: Any, value: Any) -> str:
    """``value`` as JSONC text with drawn layout, comments and trailing commas."""
    def gap() -> str:
        return str(draw(GAPS))

    if isinstance(value, dict):
        parts = [
            f"{gap()}{json.dumps(key, ensure_ascii=draw(st.booleans()))}{gap()}:{gap()}{render(draw, item)}{gap()}"
            for key, item in value.items()
        ]
        trailing = "," if parts and draw(st.booleans()) else ""
        return "{" + ",".join(parts) + trailing + gap() + "}"
    if isinstance(value, list):
        parts = [f"{gap()}{render(draw, item)}{gap()}" for item in value]
        trailing = "," if parts and draw(st.booleans()) else ""
        return "[" + ",".join(parts) + trailing + gap() + "]"
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def documents(draw: Any) -> tuple[str, dict[str, Any]]:
    """A JSONC document whose root holds a "servers" object, and its value."""
    servers = draw(st.dictionaries(KEYS, VALUES, max_size=4))
    others = draw(st.dictionaries(KEYS.filter(lambda key: key != "servers"), VALUES, max_size=2))
    items = list(others.items())
    items.insert(draw(st.integers(0, len(items))), ("servers", servers))
    value = dict(items)
    lead, tail = draw(GAPS), draw(GAPS)
    return lead + render(draw, value) + tail, value


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(documents())
def test_parse_reads_generated_jsonc_as_its_value(doc: tuple[str, dict[str, Any]]) -> None:
    text, value = doc
    assert jsonc.parse(text).to_python() == value


@pytest.mark.slow
@SETTINGS
@given(st.data(), documents(), VALUES)
def test_insert_only_adds_the_new_member_and_a_comma(data: Any, doc: tuple[str, dict[str, Any]], new: Any) -> None:
    text, value = doc
    key = data.draw(KEYS.filter(lambda key: key not in value["servers"]))
    edits = jsonc.set_member(text, ["servers"], key, new)
    result = jsonc.apply(text, edits)
    assert all(edit.start == edit.end for edit in edits)  # pure insertions: every old byte stays, in order
    inserted = "".join(edit.replacement for edit in edits).strip(" \t\r\n,")
    assert json.loads("{" + inserted + "}") == {key: new}
    assert jsonc.parse(result).to_python() == {**value, "servers": {**value["servers"], key: new}}


@pytest.mark.slow
@SETTINGS
@given(st.data(), documents(), VALUES)
def test_replace_changes_exactly_the_old_values_text(data: Any, doc: tuple[str, dict[str, Any]], new: Any) -> None:
    text, value = doc
    if not value["servers"]:
        return
    key = data.draw(st.sampled_from(sorted(value["servers"])))
    old = jsonc.parse(text).member("servers").value.member(key).value  # type: ignore[union-attr]
    [edit] = jsonc.set_member(text, ["servers"], key, new)
    assert (edit.start, edit.end) == (old.start, old.end)
    result = jsonc.apply(text, [edit])
    assert result[: old.start] == text[: old.start] and result[len(result) - (len(text) - old.end) :] == text[old.end :]
    assert jsonc.parse(result).to_python() == {**value, "servers": {**value["servers"], key: new}}


@pytest.mark.slow
@SETTINGS
@given(st.data(), documents())
def test_remove_deletes_the_member_and_keeps_every_comment_outside_it(
    data: Any, doc: tuple[str, dict[str, Any]]
) -> None:
    text, value = doc
    if not value["servers"]:
        return
    key = data.draw(st.sampled_from(sorted(value["servers"])))
    member = jsonc.parse(text).member("servers").value.member(key)  # type: ignore[union-attr]
    assert member is not None
    after = member.comma + 1 if member.comma is not None else member.value.end
    line_end = text.find("\n", after)
    region = (member.key_start, len(text) if line_end < 0 else line_end)  # the member and the rest of its line
    edits = jsonc.remove_member(text, ["servers"], key)
    result = jsonc.apply(text, edits)
    assert jsonc.parse(result).to_python() == {
        **value,
        "servers": {k: v for k, v in value["servers"].items() if k != key},
    }
    for edit in edits:
        assert edit.replacement == ""
        outside = text[edit.start : min(edit.end, region[0])] + text[max(edit.start, region[1]) : edit.end]
        assert re.fullmatch(r"[\s,]*", outside), (text, edit, outside)  # only layout and the comma before it


@SETTINGS
@given(VALUES.filter(lambda v: isinstance(v, (dict, list))), st.sampled_from([None, 0, 2, 4, "\t"]))
def test_strict_json_reads_as_json_loads_reads_it(value: Any, indent: Any) -> None:
    text = json.dumps(value, indent=indent)
    assert jsonc.parse(text).to_python() == json.loads(text)
    assert not jsonc.has_extensions(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "ends where a value was expected"),
        ("{", "before this object is closed"),
        ('{"a" 1}', "expected ':'"),
        ('{"a": 1 "b": 2}', "expected ',' or '}'"),
        ("{a: 1}", "key must be a string"),
        ("{'a': 1}", "key must be a string"),
        ('{"a": 01}', "expected ',' or '}'"),
        ('{"a": "\\x"}', "bad escape"),
        ('{"a": 1} x', "after the document's value"),
        ('{"a": 1 /* open', "not closed"),
        ("[1,,2]", "unexpected ','"),
        ("{,}", "key must be a string"),
    ],
)
def test_what_is_not_jsonc_is_refused_with_the_place(text: str, says: str) -> None:
    with pytest.raises(jsonc.JsoncError, match=says) as info:
        jsonc.parse(text)
    assert info.value.line >= 1 and info.value.column >= 1


def test_a_vscode_file_with_comments_gets_the_entry_in_its_own_style() -> None:
    text = '// my servers\n{\n\t"servers": {\n\t\t"old": {"command": "/x"}, // keep\n\t},\n\t"inputs": [],\n}\n'
    result = jsonc.apply(text, jsonc.set_member(text, ["servers"], "new", {"command": "/y", "args": []}))
    assert result == (
        '// my servers\n{\n\t"servers": {\n\t\t"old": {"command": "/x"}, // keep\n'
        '\t\t"new": {\n\t\t\t"command": "/y",\n\t\t\t"args": []\n\t\t},\n\t},\n\t"inputs": [],\n}\n'
    )


def test_removing_the_last_member_drops_the_comma_before_it_so_strict_json_stays_json() -> None:
    text = '{\n  "mcpServers": {\n    "a": 1,\n    "b": 2\n  }\n}\n'
    assert (
        jsonc.apply(text, jsonc.remove_member(text, ["mcpServers"], "b"))
        == '{\n  "mcpServers": {\n    "a": 1\n  }\n}\n'
    )
    inline = '{"mcpServers": {"a": 1, "b": 2}}'
    assert jsonc.apply(inline, jsonc.remove_member(inline, ["mcpServers"], "b")) == '{"mcpServers": {"a": 1}}'


def test_a_missing_servers_object_is_created_and_a_bom_kept() -> None:
    text = '\ufeff{"theme": "dark"}'
    result = jsonc.apply(text, jsonc.set_member(text, ["context_servers"], "x", {"command": "/c"}))
    assert result.startswith('\ufeff{"theme": "dark", "context_servers"')
    assert jsonc.parse(result).to_python() == {"theme": "dark", "context_servers": {"x": {"command": "/c"}}}


def _line_ends(text: str, style: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", style)


@pytest.mark.slow
@SETTINGS
@given(st.data(), documents(), VALUES, st.sampled_from(["\n", "\r\n", "\r"]))
def test_install_then_remove_gives_back_the_bytes_in_every_line_end_style(
    data: Any, doc: tuple[str, dict[str, Any]], new: Any, style: str
) -> None:
    """LF, CRLF and lone-CR files (a // comment ends at a lone CR, as in VS Code): the
    inserted member uses the file's line end, and removing it restores every byte (before,
    a CRLF file got LF lines inside the entry, and a lone-CR file lost its neighbour)."""
    text, value = doc
    assume(value["servers"])  # ("{}" gets its brace on a line of its own, which stays after a remove)
    text = _line_ends(text, style)
    key = data.draw(KEYS.filter(lambda key: key not in value["servers"]))
    added = jsonc.apply(text, jsonc.set_member(text, ["servers"], key, new))
    assert jsonc.parse(added).to_python() == {**value, "servers": {**value["servers"], key: new}}
    others = {"\n": "\r", "\r\n": None, "\r": "\n"}[style]
    if others is not None:
        assert others not in added
    else:
        assert added.count("\n") == added.count("\r\n") and added.count("\r") == added.count("\r\n")
    assert jsonc.apply(added, jsonc.remove_member(added, ["servers"], key)) == text


def test_a_comment_between_a_value_and_its_comma_survives_install_and_remove() -> None:
    text = '{\r\n  "servers": {\r\n    "a": 1 /* one */ ,\r\n    "b": 2 // two\r\n  }\r\n}\r\n'
    added = jsonc.apply(text, jsonc.set_member(text, ["servers"], "c", {"command": "/c"}))
    assert "/* one */ ," in added and "// two" in added and "\n" not in added.replace("\r\n", "")
    assert jsonc.apply(added, jsonc.remove_member(added, ["servers"], "c")) == text
    removed = jsonc.apply(text, jsonc.remove_member(text, ["servers"], "b"))
    assert jsonc.parse(removed).to_python() == {"servers": {"a": 1}} and "/* one */" in removed


def test_an_insert_then_remove_gives_back_a_file_of_mixed_line_ends() -> None:
    """The member's lines go with the line break before them, the one the insert added (before:
    with the one after, so a CRLF line before an LF one came back as CRLF twice)."""
    text = '{\r\n  "a": 1\n}'
    added = jsonc.apply(text, jsonc.set_member(text, [], "b", 2))
    assert added == '{\r\n  "a": 1,\r\n  "b": 2\n}'
    assert jsonc.apply(added, jsonc.remove_member(added, [], "b")) == text
