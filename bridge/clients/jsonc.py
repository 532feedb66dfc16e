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
from dataclasses import dataclass
from typing import Any

__all__ = ["JsoncError", "Node", "Member", "Edit", "parse", "set_member", "remove_member", "apply", "has_extensions"]


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class JsoncError(ValueError):
    """The text is not JSONC; ``line`` and ``column`` (1-based) say where."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        before = text[:offset]
        self.line = len(_LINE_BREAK.findall(before)) + 1  # LF, CRLF or a lone CR, as VS Code counts
        self.column = offset - (max(before.rfind("\n"), before.rfind("\r")) + 1) + 1
        super().__init__(f"{message} at line {self.line}, column {self.column}")


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None = None  # offset of the comma after the value, if any


class Node:
    """One value of the document: ``kind`` is "object", "array", "string", "number" or
    "literal"; ``start``/``end`` its offsets (``str`` indices, end exclusive); ``value`` its
    Python value (for containers too). An object's :attr:`members` and an array's
    :attr:`items` are read from the text when first asked for, so a large document costs
    one pass of the tokenizer and of the C JSON decoder, not a Python object per value."""

    __slots__ = ("kind", "start", "end", "value", "_source", "_members", "_items", "_trailing_comma")

    def __init__(self, kind: str, start: int, end: int, value: Any = None, source: _Source | None = None) -> None:
        self.kind, self.start, self.end, self.value = kind, start, end, value
        self._source = source
        self._members: list[Member] | None = None
        self._items: list[Node] | None = None
        self._trailing_comma = False

    def __repr__(self) -> str:
        return f"Node({self.kind!r}, {self.start}, {self.end})"

    @property
    def members(self) -> list[Member]:
        """An object's members in text order (duplicates included); [] for other kinds."""
        if self._members is None:
            self._expand()
        assert self._members is not None
        return self._members

    @property
    def items(self) -> list[Node]:
        """An array's items in order; [] for other kinds."""
        if self._items is None:
            self._expand()
        assert self._items is not None
        return self._items

    @property
    def trailing_comma(self) -> bool:
        """Whether a comma follows the container's last member or item."""
        if self._members is None:
            self._expand()
        return self._trailing_comma

    def to_python(self) -> Any:
        return self.value

    def member(self, key: str) -> Member | None:
        found = None
        for member in self.members:
            if member.key == key:
                found = member  # the last one wins, as in JSON.parse
        return found

    def _expand(self) -> None:
        """Read this container's own members or items (one level) from the text."""
        self._members, self._items = [], []
        source = self._source
        if self.kind not in ("object", "array") or source is None:
            return
        text, pos = source.text, self.start + 1
        found: list[tuple[str | None, int, Node]] = []
        while True:
            pos = _GAP.match(text, pos).end()  # type: ignore[union-attr]
            if text[pos] in "}]":
                break
            key, key_start = None, pos
            if self.kind == "object":
                match = _STRING.match(text, pos)
                assert match is not None  # the document was checked whole
                key = json.loads(match.group())
                pos = _GAP.match(text, match.end()).end()  # type: ignore[union-attr]
                pos = _GAP.match(text, pos + 1).end()  # type: ignore[union-attr]  # past the ':'
            child = Node(*source.span(pos), source=source)
            found.append((key, key_start, child))
            pos = _GAP.match(text, child.end).end()  # type: ignore[union-attr]
            self._trailing_comma = text[pos] == ","
            comma = None
            if self._trailing_comma:
                comma = pos
                pos += 1
            if key is not None:
                self._members.append(Member(key, key_start, child, comma))
        if self.kind == "array":
            self._items = [child for _key, _start, child in found]
            for index, child in enumerate(self._items):
                child.value = self.value[index]
            return
        last = {member.key: index for index, member in enumerate(self._members)}
        for index, member in enumerate(self._members):
            if last[member.key] == index:
                member.value.value = self.value[member.key]
            else:  # an earlier duplicate, which the parent's value does not hold
                member.value.value = source.decode(member.value.start)[0]


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
    """The step-by-step reader that says what was expected where: it runs only on a text
    the fast path refused, to word the error."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 1 if text.startswith("\ufeff") else 0

    def fail(self, message: str, offset: int | None = None) -> JsoncError:
        return JsoncError(message, self.text, self.pos if offset is None else offset)

    def skip(self) -> None:
        self.pos = _GAP.match(self.text, self.pos).end()  # type: ignore[union-attr]
        if self.text.startswith("/*", self.pos):
            raise self.fail("a /* comment is not closed")

    def value(self) -> None:
        self.skip()
        text, start = self.text, self.pos
        if start >= len(text):
            raise self.fail("the document ends where a value was expected")
        char = text[start]
        if char == "{" or char == "[":
            return self.container(start, "object" if char == "{" else "array")
        if char == '"':
            match = _STRING.match(text, start)
            if match is None:
                raise self.fail("a string is not closed or has a bad escape")
            self.pos = match.end()
            return None
        match = _NUMBER.match(text, start)
        if match is not None and match.end() > start:
            self.pos = match.end()
            return None
        for word in _LITERALS:
            if text.startswith(word, start):
                self.pos = start + len(word)
                return None
        raise self.fail(f"unexpected {char!r}")

    def container(self, start: int, kind: str) -> None:
        close = "}" if kind == "object" else "]"
        self.pos += 1
        count, trailing_comma = 0, False
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise self.fail(f"the document ends before this {kind} is closed (a missing {close!r})", start)
            if self.text[self.pos] == close:
                self.pos += 1
                return
            if count and not trailing_comma:
                raise self.fail(f"expected ',' or {close!r}")
            if kind == "object":
                if self.text[self.pos] != '"':
                    raise self.fail("an object's key must be a string in double quotes")
                self.value()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':' after the key")
                self.pos += 1
            self.value()
            count += 1
            self.skip()
            trailing_comma = self.text.startswith(",", self.pos)
            if trailing_comma:
                self.pos += 1


# The tokens that matter for blanking: strings (skipped whole, so that nothing inside one
# is taken for a comment), comments, and commas followed by a closing bracket or a
# comment (perhaps trailing); whatever else stands between them is skipped by the regex
# engine. A // comment ends at CR or LF, as in VS Code's scanner.
_TOKEN = re.compile(
    r'"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*"'
    r"|(//[^\r\n]*|/\*[\s\S]*?\*/)"
    r"|(,)(?=[ \t\r\n]*[}\]/])"
)
_GAP = re.compile(r"(?:[ \t\r\n]|//[^\r\n]*|/\*[\s\S]*?\*/)*")
_WHITESPACE = re.compile(r"[ \t\r\n]*")


class _Constant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Constant(name)  # NaN and Infinity are not JSON


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


class _Source:
    """The document's text, and the same text with comments and trailing commas blanked
    (spaces, so that every offset stays) for the C JSON decoder."""

    def __init__(self, text: str, blanked: str, extensions: bool) -> None:
        self.text, self.blanked, self.extensions = text, blanked, extensions

    def decode(self, start: int) -> tuple[Any, int]:
        value, end = _DECODER.raw_decode(self.blanked, start)
        return value, end

    def span(self, start: int) -> tuple[str, int, int]:
        text = self.text
        char = text[start]
        if char == "{" or char == "[":
            return ("object" if char == "{" else "array"), start, self.decode(start)[1]
        if char == '"':
            match = _STRING.match(text, start)
            assert match is not None
            return "string", start, match.end()
        match = _NUMBER.match(text, start)
        if match is not None and match.end() > start:
            return "number", start, match.end()
        word = next(word for word in _LITERALS if text.startswith(word, start))
        return "literal", start, start + len(word)


def _scan(text: str) -> tuple[str, bool]:
    """Blank comments and trailing commas with spaces (every offset stays). Returns (the
    blanked text, whether there were comments or trailing commas)."""
    blanks: list[tuple[int, int]] = []
    if text.startswith("\ufeff"):
        blanks.append((0, 1))
    for match in _TOKEN.finditer(text, len(blanks)):
        if match.lastindex is None:  # a string
            continue
        if match.group(1) is not None:  # a comment
            blanks.append(match.span())
        elif match.group(2) is not None:  # a comma before a closing bracket (or a comment)
            comma = match.start()
            after = _GAP.match(text, comma + 1).end()  # type: ignore[union-attr]
            if after == len(text) or text[after] not in "}]":
                continue
            before = comma - 1  # a trailing comma follows a value, not '[', '{' or ','
            while before >= 0:
                if text[before] in " \t\r\n":
                    before -= 1
                elif blanks and blanks[-1][1] == before + 1:
                    before = blanks[-1][0] - 1
                else:
                    break
            if before >= 0 and text[before] not in "[{,:":
                blanks.append((comma, comma + 1))
    extensions = len(blanks) > (1 if text.startswith("\ufeff") else 0)
    if not blanks:
        return text, extensions
    pieces: list[str] = []
    pos = 0
    for start, end in blanks:
        pieces.append(text[pos:start])
        pieces.append(" " * (end - start))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces), extensions


def _check(text: str) -> tuple[Node, bool]:
    start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    decoded: tuple[Any, int] | None = None
    try:
        decoded = _DECODER.raw_decode(text, start)  # strict JSON: one pass of the C decoder
        if _WHITESPACE.match(text, decoded[1]).end() != len(text):  # type: ignore[union-attr]
            decoded = None
    except (ValueError, RecursionError):
        pass
    blanked, extensions = (text, False) if decoded is not None else _scan(text)
    source = _Source(text, blanked, extensions)
    start = _WHITESPACE.match(blanked).end()  # type: ignore[union-attr]
    try:
        value, end = decoded if decoded is not None else source.decode(start)
        if _WHITESPACE.match(blanked, end).end() != len(blanked):  # type: ignore[union-attr]
            raise json.JSONDecodeError("Extra data", blanked, end)
    except RecursionError:
        raise _too_deep(text, start) from None
    except (json.JSONDecodeError, _Constant) as exc:
        raise _explain(text, exc) from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise _too_deep(text, start)
    char = text[start]
    kind = "object" if char == "{" else "array" if char == "[" else source.span(start)[0]
    return Node(kind, start, end, value, source), extensions


#: Deeper nesting is refused, with the same limit on every Python (where the C decoder's
#: own limit lies differs between versions); no client's settings come near it.
MAX_DEPTH = 800


def _too_deep(text: str, start: int) -> JsoncError:
    return JsoncError(
        f"the document is nested more than {MAX_DEPTH} levels deep, more than this editor supports", text, start
    )


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels in ``value`` (without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def _explain(text: str, exc: Exception) -> JsoncError:
    """The error for a text the fast path refused: the step-by-step parser's words, which
    say what was expected (it runs only on invalid documents)."""
    parser = _Parser(text)
    try:
        parser.value()
        parser.skip()
        if parser.pos != len(text):
            raise parser.fail("unexpected text after the document's value")
    except JsoncError as error:
        return error
    except RecursionError:
        pass
    offset = exc.pos if isinstance(exc, json.JSONDecodeError) else 0
    return JsoncError(f"not JSONC ({exc})", text, offset)


def parse(text: str) -> Node:
    """Parse a whole JSONC document (a leading BOM is allowed), in time linear in its size.

    Raises:
        JsoncError: not JSONC, or anything but whitespace and comments after the value,
            or nested more than :data:`MAX_DEPTH` levels deep.
    """
    return _check(text)[0]


def has_extensions(document: str | Node) -> bool:
    """Whether a valid JSONC document (its text, or the root :func:`parse` gave) uses
    comments or trailing commas (so is not JSON)."""
    if isinstance(document, Node):
        return document._source is not None and document._source.extensions
    return _check(text=document)[1]


# -- editing ------------------------------------------------------------------------------------


def _line_start(text: str, offset: int) -> int:
    """Where the line holding ``offset`` starts (after LF, CRLF or a lone CR)."""
    return max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1


def _newline(text: str) -> str:
    """The document's line ending: CRLF, a lone CR (as VS Code reads it), or LF."""
    if "\r\n" in text:
        return "\r\n"
    return "\r" if "\r" in text and "\n" not in text else "\n"


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
    """The offset of the line break (LF, CRLF or a lone CR) ending this line when only
    spaces, tabs and comments that end on this line follow ``offset`` (the end of the text
    counts as one); else None."""
    pos = offset
    while pos < len(text):
        char = text[pos]
        if char in " \t":
            pos += 1
        elif char == "\n" or char == "\r":
            return pos
        elif text.startswith("//", pos):
            return _line_comment_end(text, pos)
        elif text.startswith("/*", pos):
            close = text.find("*/", pos + 2)
            if close < 0 or "\n" in text[pos:close] or "\r" in text[pos:close]:
                return None
            pos = close + 2
        else:
            return None
    return pos


def _line_comment_end(text: str, offset: int) -> int:
    """Where the // comment at ``offset`` ends: at CR or LF, as in VS Code's scanner."""
    return _LINE_COMMENT.match(text, offset).end()  # type: ignore[union-attr]


_LINE_COMMENT = re.compile(r"//[^\r\n]*")


def _unit(text: str) -> str:
    """The document's indentation step: that of its first indented line (default 2 spaces)."""
    match = re.search(r"[\r\n]([ \t]+)\S", text)
    if match is None:
        return "  "
    indent = match.group(1)
    return "\t" if indent.startswith("\t") else " " * min(len(indent), 8)


def _render(value: Any, indent: str, unit: str, *, inline: bool, newline: str = "\n") -> str:
    if inline:
        return json.dumps(value, ensure_ascii=False)
    text = json.dumps(value, ensure_ascii=False, indent=unit if unit != "\t" else "\t")
    return text.replace("\n", newline + indent)  # (json.dumps escapes the newlines in strings)


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


def set_member(text: str, path: Sequence[str], key: str, value: Any, *, root: Node | None = None) -> list[Edit]:
    """The edits that make ``document[path...][key] == value``, creating the objects on
    ``path`` that are missing.

    Raises:
        JsoncError: the text is not JSONC.
        ValueError: the root, or an object on ``path``, is not an object.

    ``root`` is ``parse(text)`` when the caller has it already (a large file is then read once).
    """
    if root is None:
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
            rendered = _render(value, indent, _unit(text), inline=inline, newline=_newline(text))
            return [Edit(old.start, old.end, rendered)]
    for name in reversed([*missing[1:], key] if missing else []):
        value = {name: value}
    name = missing[0] if missing else key
    return _insert(text, node, name, value)


def _insert(text: str, node: Node, key: str, value: Any) -> list[Edit]:
    unit, newline = _unit(text), _newline(text)
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
        member = f"{rendered_key}: {_render(value, indent, unit, inline=False, newline=newline)}"
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
    member = f"{rendered_key}: {_render(value, indent, unit, inline=False, newline=newline)}"
    inside = text[node.start : node.end]
    if "\n" not in inside and "\r" not in inside:  # "{}" or "{ }": the brace goes on a line of its own
        return [Edit(node.start + 1, node.start + 1, f"{newline}{indent}{member}{newline}{outer}")]
    line_end = _rest_of_line(text, node.start + 1)
    at = node.start + 1 if line_end is None else line_end
    return [Edit(at, at, f"{newline}{indent}{member}")]


def remove_member(text: str, path: Sequence[str], key: str, *, root: Node | None = None) -> list[Edit]:
    """The edits that delete ``document[path...][key]`` (every member of that name).

    Raises:
        JsoncError: the text is not JSONC.
        KeyError: there is no such member.
    """
    node = parse(text) if root is None else root
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
        # Its lines go with the line break before them: the one an insert put there (an
        # insert adds a line break and the member before the line break after it).
        start = _line_start(text, member.key_start)
        end = line_end
        if start > 0:
            start -= 2 if text.startswith("\r\n", start - 2) else 1
        else:
            end += 2 if text.startswith("\r\n", line_end) else 1 if line_end < len(text) else 0
        edits.append(Edit(start, end, ""))
        return edits
    if member.comma is not None:
        previous = members[index - 1].comma if index > 0 else None
        closes = text[_GAP.match(text, after).end() :][:1] in ("}", "")  # type: ignore[union-attr]
        between = text[previous + 1 : member.key_start] if previous is not None else "x"
        if previous is not None and (between.strip(" \t") == "" or (closes and between.strip(" \t\r\n") == "")):
            edits.append(Edit(previous + 1, after, ""))  # ', "b": 2,' -> ',': the layout before it goes too
            return edits
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
