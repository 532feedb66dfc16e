"""JSON with comments (JSONC) read and edited in place: one member of one object changes,
every other byte of the document stays as it was.

The dialect is VS Code's (and Zed's): JSON (RFC 8259) plus ``//`` and ``/* */`` comments
and a trailing comma in objects and arrays. Strict JSON is a subset, so the same editor
serves every JSON client file and keeps its layout.

- :func:`parse` gives a :class:`Node` tree: every value with its ``start``/``end`` offsets
  (``str`` indices into the text, end exclusive) and, for objects, their members in order.
- :func:`set_member` and :func:`remove_member` return :class:`Edit` lists; :func:`apply`
  turns them into the new text. An insert only adds text (the new member, and a comma
  after the member before it when there was none); a replace swaps exactly the old value's
  text; a remove deletes the member, its comma, and its line when it had one of its own.

Errors: :class:`JsoncError` with a 1-based line and column; the text is never changed. Pure.

Why our own: of PyPI's candidates, ``jsonc-edit`` 0.2 is young native bindings, ``json5kit``
0.4 unmaintained since 2023, ``json-five`` JSON5, ``commentjson`` read-only; one member of one
object is a small job, held to its promise by property tests (``tests/clients/test_jsonc.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JsoncError", "Node", "Member", "Edit", "parse", "set_member", "remove_member", "apply", "has_extensions"]


class JsoncError(ValueError):
    """The text is not JSONC; ``line`` and ``column`` (1-based) say where."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        self.line = text.count("\n", 0, offset) + 1
        self.column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        super().__init__(f"{message} at line {self.line}, column {self.column}")


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None = None  # offset of the comma after the value, if any


@dataclass
class Node:
    kind: str  # "object", "array", "string", "number", "literal"
    start: int
    end: int
    value: Any = None  # the Python value for scalars
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Node] = field(default_factory=list)  # arrays
    trailing_comma: bool = False

    def to_python(self) -> Any:
        if self.kind == "object":
            return {member.key: member.value.to_python() for member in self.members}
        if self.kind == "array":
            return [item.to_python() for item in self.items]
        return self.value

    def member(self, key: str) -> Member | None:
        found = None
        for member in self.members:
            if member.key == key:
                found = member  # the last one wins, as in JSON.parse
        return found


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` with ``replacement`` (an insert when start == end)."""

    start: int
    end: int
    replacement: str


_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 1 if text.startswith("\ufeff") else 0
        self.extensions = False  # saw a comment or a trailing comma

    def fail(self, message: str, offset: int | None = None) -> JsoncError:
        return JsoncError(message, self.text, self.pos if offset is None else offset)

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline
                self.extensions = True
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("a /* comment is not closed")
                self.pos = close + 2
                self.extensions = True
            else:
                return

    def value(self) -> Node:
        self.skip()
        text, start = self.text, self.pos
        if start >= len(text):
            raise self.fail("the document ends where a value was expected")
        char = text[start]
        if char == "{":
            return self.container(start, "object")
        if char == "[":
            return self.container(start, "array")
        if char == '"':
            match = _STRING.match(text, start)
            if match is None:
                raise self.fail("a string is not closed or has a bad escape")
            self.pos = match.end()
            return Node("string", start, self.pos, json.loads(match.group()))
        match = _NUMBER.match(text, start)
        if match is not None and match.end() > start:
            self.pos = match.end()
            return Node("number", start, self.pos, json.loads(match.group()))
        for word, literal in _LITERALS.items():
            if text.startswith(word, start):
                self.pos = start + len(word)
                return Node("literal", start, self.pos, literal)
        raise self.fail(f"unexpected {char!r}")

    def container(self, start: int, kind: str) -> Node:
        close = "}" if kind == "object" else "]"
        node = Node(kind, start, start)
        self.pos += 1
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise self.fail(f"the document ends before this {kind} is closed (a missing {close!r})", start)
            if self.text[self.pos] == close:
                if node.trailing_comma:
                    self.extensions = True
                self.pos += 1
                node.end = self.pos
                return node
            if (node.members or node.items) and not node.trailing_comma:
                raise self.fail(f"expected ',' or {close!r}")
            if kind == "object":
                key_start = self.pos
                if self.text[key_start] != '"':
                    raise self.fail("an object's key must be a string in double quotes")
                key = self.value()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':' after the key")
                self.pos += 1
                member = Member(key.value, key_start, self.value())
                node.members.append(member)
            else:
                node.items.append(self.value())
            self.skip()
            node.trailing_comma = self.text.startswith(",", self.pos)
            if node.trailing_comma:
                if kind == "object":
                    node.members[-1].comma = self.pos
                self.pos += 1


def parse(text: str) -> Node:
    """Parse a whole JSONC document (a leading BOM is allowed).

    Raises:
        JsoncError: not JSONC, or anything but whitespace and comments after the value.
    """
    parser = _Parser(text)
    node = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the document's value")
    return node


def has_extensions(text: str) -> bool:
    """Whether a valid JSONC document uses comments or trailing commas (so is not JSON)."""
    parser = _Parser(text)
    parser.value()
    parser.skip()
    return parser.extensions


# -- editing ------------------------------------------------------------------------------------


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent_of(text: str, offset: int) -> str:
    start = _line_start(text, offset)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _alone_before(text: str, offset: int) -> bool:
    """Only spaces or tabs between the line's start and ``offset``."""
    return text[_line_start(text, offset) : offset].strip(" \t\ufeff") == ""


def _rest_of_line(text: str, offset: int) -> int | None:
    """The offset of the newline ending this line when only spaces, tabs and comments
    that end on this line follow ``offset`` (the end of the text counts as a newline);
    else None."""
    pos = offset
    while pos < len(text):
        char = text[pos]
        if char in " \t\r":
            pos += 1
        elif char == "\n":
            return pos
        elif text.startswith("//", pos):
            newline = text.find("\n", pos)
            return len(text) if newline < 0 else newline
        elif text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            if close < 0 or "\n" in text[pos:close]:
                return None
            pos = close + 2
        else:
            return None
    return pos


def _unit(text: str) -> str:
    """The document's indentation step: that of its first indented line (default 2 spaces)."""
    match = re.search(r"\n([ \t]+)\S", text)
    if match is None:
        return "  "
    indent = match.group(1)
    return "\t" if indent.startswith("\t") else " " * min(len(indent), 8)


def _render(value: Any, indent: str, unit: str, *, inline: bool) -> str:
    if inline:
        return json.dumps(value, ensure_ascii=False)
    text = json.dumps(value, ensure_ascii=False, indent=unit if unit != "\t" else "\t")
    return text.replace("\n", "\n" + indent)


def _find_object(root: Node, path: Sequence[str]) -> tuple[Node, list[str]]:
    """The deepest existing object along ``path`` and the keys still missing below it."""
    node = root
    for index, key in enumerate(path):
        member = node.member(key)
        if member is None:
            return node, list(path[index:])
        if member.value.kind != "object":
            raise ValueError(f'"{key}" is not an object')
        node = member.value
    return node, []


def set_member(text: str, path: Sequence[str], key: str, value: Any) -> list[Edit]:
    """The edits that make ``document[path...][key] == value``, creating the objects on
    ``path`` that are missing.

    Raises:
        JsoncError: the text is not JSONC.
        ValueError: the root, or an object on ``path``, is not an object.
    """
    root = parse(text)
    if root.kind != "object":
        raise ValueError("the document is not an object")
    node, missing = _find_object(root, path)
    if not missing:
        existing = node.member(key)
        if existing is not None:
            old = existing.value
            inline = not _alone_before(text, existing.key_start)
            indent = _indent_of(text, existing.key_start)
            return [Edit(old.start, old.end, _render(value, indent, _unit(text), inline=inline))]
    for name in reversed([*missing[1:], key] if missing else []):
        value = {name: value}
    name = missing[0] if missing else key
    return _insert(text, node, name, value)


def _insert(text: str, node: Node, key: str, value: Any) -> list[Edit]:
    unit, newline = _unit(text), ("\r\n" if "\r\n" in text else "\n")
    rendered_key = json.dumps(key, ensure_ascii=False)
    if node.members:
        last = node.members[-1]
        inline = not _alone_before(text, last.key_start)
        if inline:
            member = f"{rendered_key}: {_render(value, '', unit, inline=True)}"
            if last.comma is not None:
                return [Edit(last.comma + 1, last.comma + 1, f" {member},")]
            return [Edit(last.value.end, last.value.end, f", {member}")]
        indent = _indent_of(text, last.key_start)
        member = f"{rendered_key}: {_render(value, indent, unit, inline=False)}"
        after = last.comma + 1 if last.comma is not None else last.value.end
        line_end = _rest_of_line(text, after)
        edits = [] if last.comma is not None else [Edit(last.value.end, last.value.end, ",")]
        trailing = "," if last.comma is not None else ""
        if line_end is None:
            edits.append(Edit(after, after, f"{newline}{indent}{member}{trailing}"))
        else:
            edits.append(Edit(line_end, line_end, f"{newline}{indent}{member}{trailing}"))
        return edits
    # an empty object
    outer = _indent_of(text, node.start)
    indent = outer + unit
    member = f"{rendered_key}: {_render(value, indent, unit, inline=False)}"
    if "\n" not in text[node.start : node.end]:  # "{}" or "{ }": the brace goes on a line of its own
        return [Edit(node.start + 1, node.start + 1, f"{newline}{indent}{member}{newline}{outer}")]
    line_end = _rest_of_line(text, node.start + 1)
    at = node.start + 1 if line_end is None else line_end
    return [Edit(at, at, f"{newline}{indent}{member}")]


def remove_member(text: str, path: Sequence[str], key: str) -> list[Edit]:
    """The edits that delete ``document[path...][key]`` (every member of that name).

    Raises:
        JsoncError: the text is not JSONC.
        KeyError: there is no such member.
    """
    root = parse(text)
    node = root
    for name in path:
        member = node.member(name) if node.kind == "object" else None
        if member is None or member.value.kind != "object":
            raise KeyError(key)
        node = member.value
    indexes = [index for index, member in enumerate(node.members) if member.key == key]
    if not indexes:
        raise KeyError(key)
    edits: list[Edit] = []
    for index in reversed(indexes):
        edits.extend(_remove_at(text, node, index))
    return sorted(edits, key=lambda edit: edit.start)


def _remove_at(text: str, node: Node, index: int) -> list[Edit]:
    members = node.members
    member = members[index]
    after = member.comma + 1 if member.comma is not None else member.value.end
    edits: list[Edit] = []
    is_last = index == len(members) - 1
    if is_last and member.comma is None and index > 0 and members[index - 1].comma is not None:
        comma = members[index - 1].comma
        assert comma is not None
        edits.append(Edit(comma, comma + 1, ""))  # the member before becomes the last
    line_end = _rest_of_line(text, after)
    if _alone_before(text, member.key_start) and line_end is not None:
        start = _line_start(text, member.key_start)
        end = min(line_end + 1, len(text))
        if end == len(text) and start > 0:  # no newline after it: take the one before
            start -= 1
        edits.append(Edit(start, end, ""))
        return edits
    if member.comma is not None:
        end = after
        while end < len(text) and text[end] in " \t":
            end += 1
        edits.append(Edit(member.key_start, end, ""))
    elif index > 0 and members[index - 1].comma is not None:
        comma = members[index - 1].comma
        assert comma is not None
        if text[comma + 1 : member.key_start].strip(" \t\r\n") == "":
            edits = [Edit(comma, member.value.end, "")]  # ', "b": 2' as one span
        else:  # a comment sits between: it stays
            edits = [Edit(comma, comma + 1, ""), Edit(member.key_start, member.value.end, "")]
    else:
        edits.append(Edit(member.key_start, member.value.end, ""))
    return edits


def apply(text: str, edits: Sequence[Edit]) -> str:
    """The text with non-overlapping ``edits`` applied."""
    pieces: list[str] = []
    pos = 0
    for edit in sorted(edits, key=lambda item: (item.start, item.end)):
        if edit.start < pos:
            raise ValueError("edits overlap")
        pieces.append(text[pos : edit.start])
        pieces.append(edit.replacement)
        pos = edit.end
    pieces.append(text[pos:])
    return "".join(pieces)
