"""bridge.clients.jsonc reads JSONC exactly as VS Code does: a differential property test against
Microsoft's ``jsonc-parser`` (VS Code's own reader, pinned by tests/clients/jsonc_oracle/package-lock.json).

Hypothesis generates JSONC documents (CRLF, lone CR, comments between any two tokens,
trailing commas, text that looks like a comment inside strings) and broken variants of
them; a small node script (tests/clients/jsonc_oracle/oracle.cjs), one process per batch of
documents, reports what jsonc-parser makes of each. Ours must accept exactly the documents
it accepts, read the same value, and find the root's "servers" member and each of its
entries at the same offsets (UTF-16 code units, as JavaScript counts).

The package is installed by ``npm ci --prefix tests/clients/jsonc_oracle`` (.ci/run does it);
without it the test is skipped, or fails under ``CI=true``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.jsoncoracle import oracle, oracle_command

from bridge.clients import jsonc

BATCH = 25  # documents per node process
#: The cost bound: examples (= node processes) per run, each a batch of documents.
PROFILE = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


# -- generated documents -------------------------------------------------------------------------

# Strings hold text that looks like comments, line breaks (escaped by json.dumps) and a
# character outside the BMP (two UTF-16 units in JavaScript's offsets).
TEXT = st.text(alphabet='ab/*\r\n"\\é😀,', max_size=5)
KEYS = st.one_of(st.sampled_from(["servers", "a", "b"]), TEXT)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=3)),
    max_leaves=6,
)
# Whitespace and comments between tokens: LF, CRLF and lone CR line ends (VS Code ends a //
# comment at any of them), block comments holding line ends, comments back to back.
GAPS = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "\r\n  ",
        "\r",
        "\r  ",
        "\t",
        " // note\n",
        " // note\r\n",
        " // note\r",
        "// a\r// b\n",
        "/* c */",
        "/* a\r\nb */",
        "/**/",
        "/* // */",
        "\r// own line\r",
        " /* , */ ",
    ]
)
# What breaks a document: the characters that matter to comments, strings and commas.
BREAKERS = st.sampled_from(
    [",", "/", "*", "\r", "\n", "}", "]", ":", '"', "//", "/*", "*/", "\\", "\x00", "\u00a0", "\x0b"]
)


@st.composite
def rendered(draw: Any, value: Any) -> str:
    def gap() -> str:
        return str(draw(GAPS))

    if isinstance(value, dict):
        parts = [
            f"{gap()}{json.dumps(key, ensure_ascii=draw(st.booleans()))}{gap()}:{gap()}{draw(rendered(item))}{gap()}"
            for key, item in value.items()
        ]
        trailing = "," if parts and draw(st.booleans()) else ""
        return "{" + ",".join(parts) + trailing + gap() + "}"
    if isinstance(value, list):
        parts = [f"{gap()}{draw(rendered(item))}{gap()}" for item in value]
        trailing = "," if parts and draw(st.booleans()) else ""
        return "[" + ",".join(parts) + trailing + gap() + "]"
    return json.dumps(value, ensure_ascii=draw(st.booleans()))


@st.composite
def documents(draw: Any) -> str:
    """A JSONC document, usually an object with a "servers" object, sometimes broken."""
    servers = draw(st.dictionaries(KEYS, VALUES, max_size=4))
    others = draw(st.dictionaries(KEYS, VALUES, max_size=3))
    root: Any = {**others, "servers": servers} if draw(st.integers(0, 9)) else draw(VALUES)
    text: str = draw(GAPS) + draw(rendered(root)) + draw(GAPS)
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 2)) == 0 else 0):  # a third broken
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()) and at < len(text):
            text = text[:at] + text[at + 1 :]
        else:
            text = text[:at] + draw(BREAKERS) + text[at:]
    return text


def utf16(text: str, offset: int) -> int:
    """A ``str`` index as JavaScript's UTF-16 offset."""
    return offset + sum(1 for char in text[:offset] if ord(char) > 0xFFFF)


def ours(text: str) -> dict[str, Any]:
    try:
        root = jsonc.parse(text)
    except jsonc.JsoncError as exc:
        return {"error": str(exc)}
    report: dict[str, Any] = {"value": root.to_python(), "servers": None}
    servers = root.member("servers") if root.kind == "object" else None
    if servers is not None:
        value = servers.value
        report["servers"] = {
            "key": utf16(text, servers.key_start),
            "start": utf16(text, value.start),
            "end": utf16(text, value.end),
            "members": [
                [m.key, utf16(text, m.key_start), utf16(text, m.value.start), utf16(text, m.value.end)]
                for m in value.members
            ]
            if value.kind == "object"
            else None,
        }
    return report


@pytest.fixture(scope="module")
def command() -> list[str]:
    return oracle_command()


@pytest.mark.process
@PROFILE
@given(batch=st.lists(documents(), min_size=BATCH, max_size=BATCH))
def test_we_read_every_document_as_vscodes_jsonc_parser_does(command: list[str], batch: list[str]) -> None:
    for text, theirs in zip(batch, oracle(command, batch), strict=True):
        mine = ours(text)
        if theirs["errors"]:
            assert "error" in mine, (text, theirs["errors"], mine)
            continue
        assert "error" not in mine, (text, mine)
        assert mine["value"] == theirs["value"], text
        assert mine["servers"] == theirs["servers"], text


@pytest.mark.process
def test_a_line_comment_ends_at_a_lone_cr_as_in_vscode(command: list[str]) -> None:
    """A classic Mac line end: the // comment stops there, the next entry is real."""
    text = '{"servers": {\r  "a": {"command": "/a"}, // the first\r  "b": {"command": "/b"}\r}}'
    [theirs] = oracle(command, [text])
    assert theirs["value"] == {"servers": {"a": {"command": "/a"}, "b": {"command": "/b"}}}
    assert ours(text)["value"] == theirs["value"]
    assert ours(text)["servers"] == theirs["servers"]
