"""JSON-RPC 2.0 classification of what the AI client writes, and encoding of what goes out.

Pure: imports only the standard library.

A stdin line is exactly one of (JSON-RPC 2.0 §4–§6; MCP basic/index):

- :class:`Request` — has ``method`` and an ``id`` key. ``id: 0`` and ``id: ""`` are requests;
  ``id: null`` is not valid (MCP: "a request id is a string or an integer").
- :class:`Notification` — has ``method`` and **no** ``id`` key. Never gets a reply.
- :class:`Response` — no ``method``, an ``id`` and exactly one of ``result``/``error``: the
  client answering a server→client request. Forwarded, never answered.
- :class:`Batch` — a non-empty JSON array (allowed by MCP 2025-03-26 only). Each element is
  classified on its own and forwarded as its own POST; the replies go back as one array (JSON-RPC 2.0 §6).
- otherwise :func:`classify` raises :class:`~bridge.core.errors.ParseError` (not UTF-8 or not
  JSON: reply -32700, id null) or :class:`~bridge.core.errors.InvalidRequestError` (reply -32600
  with the id if it can be read).

Only what routing needs is read; the line's bytes are kept untouched as ``body`` so the
request is forwarded exactly as received.
"""

from __future__ import annotations

import itertools
import json
from codecs import BOM_UTF8
from collections.abc import Callable
from typing import Any

from .era import LEGACY, Era, era_of
from .errors import BridgeError, InboundError, InvalidRequestError, ParseError, error_response
from .quirks import smoothed_request

__all__ = [
    "loads_strict",
    "loads_members",
    "refusal_line",
    "Request",
    "Notification",
    "Response",
    "Batch",
    "Message",
    "classify",
    "message_problem",
    "read_id_from_head",
    "is_valid_id",
    "encode_message",
    "error_line",
    "bridge_error_line",
    "result_line",
    "PrivateIds",
    "INITIALIZED_BODY",
    "to_wire_line",
]


# The message classes are plain classes with slots, not dataclasses: one is made for every
# line read, and a dataclass costs 0.3-0.5 ms to create at every start (bench/README.md,
# "Start-up") and a frozen one about 1 µs more per object. They are compared by identity.


class Request:
    """A JSON-RPC request. ``id`` is kept as sent (``str`` or ``int``); ``body`` is the
    line as received, without its line end.

    ``era``: its protocol era (legacy or 2026-07-28), decided once, here, from ``params``
    (``bridge/core/era.py``); every layer asks this object its era's rules.
    """

    __slots__ = ("id", "method", "params", "body", "era")

    def __init__(self, id: Any, method: str, params: Any, body: bytes) -> None:  # noqa: A002 (JSON-RPC's name)
        self.id = id
        self.method = method
        self.params = params
        self.body = body
        # (the common case, no _meta, costs a dict lookup: ~0.5 µs in all)
        self.era: Era = era_of(params) if type(params) is dict and "_meta" in params else LEGACY

    def __repr__(self) -> str:
        return f"Request(id={self.id!r}, method={self.method!r})"


class Notification:
    """A JSON-RPC notification (``method``, no ``id`` key); ``body`` as :class:`Request`'s."""

    __slots__ = ("method", "params", "body")

    def __init__(self, method: str, params: Any, body: bytes) -> None:
        self.method = method
        self.params = params
        self.body = body

    def __repr__(self) -> str:
        return f"Notification(method={self.method!r})"


class Response:
    """The client's response to a server→client request; ``body`` as :class:`Request`'s."""

    __slots__ = ("id", "body")

    def __init__(self, id: Any, body: bytes) -> None:  # noqa: A002
        self.id = id
        self.body = body

    def __repr__(self) -> str:
        return f"Response(id={self.id!r})"


Message = Request | Notification | Response


class Batch:
    """A JSON array of messages. Each item is a message or the error it earned."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Message | InboundError, ...]) -> None:
        self.items = items

    def __repr__(self) -> str:
        return f"Batch({list(self.items)!r})"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every message: json.loads with an argument builds a new one per call.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and ``-Infinity`` (RFC 8259 has
    no such numbers; Python's parser accepts them). Raises ``ValueError`` (also for them)
    and ``RecursionError``."""
    return _STRICT_DECODER.decode(text)


# json's own C scanner for one value at a position (``JSONDecoder.scan_once``, which
# raw_decode uses) and for one string (``json.decoder.scanstring``); typeshed lists neither.
_scan_value: Callable[[str, int], tuple[Any, int]] = getattr(_STRICT_DECODER, "scan_once")  # noqa: B009
_scan_key: Callable[[str, int, bool], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009
_JSON_WHITESPACE = " \t\n\r"


def loads_members(text: str) -> tuple[Any, bool]:
    """:func:`loads_strict`, and whether the value is an object that names a top-level
    member twice (``{"id":1,"id":2}``, also spelt ``"\\u0069d"``).

    JSON parsers disagree on duplicates (RFC 8259 §4: names "SHOULD be unique"): Python's
    keeps the last member, others the first, serde refuses the document. So a message
    that names a member twice must not be forwarded as it came: the reader's parser may
    read another ``id`` than the one the bridge judged by. One pass, as cheap as
    :func:`loads_strict`: the top level is read here, each member's value by the
    standard library's C scanner. Raises as :func:`loads_strict` does."""
    if text[:2] == '{"':  # the usual case: compact JSON, read with no white space to skip
        compact = _compact_members(text)
        if compact is not None:
            return compact
    position = _skip(text, 0)
    if not text.startswith("{", position):
        return loads_strict(text), False
    members: dict[str, Any] = {}
    twice = False
    try:
        position = _skip(text, position + 1)
        if text.startswith("}", position):
            position += 1
        else:
            while True:
                if not text.startswith('"', position):
                    raise ValueError
                key, position = _scan_key(text, position + 1, True)
                position = _skip(text, position)
                if not text.startswith(":", position):
                    raise ValueError
                value, position = _scan_value(text, _skip(text, position + 1))
                if key in members:
                    twice = True
                members[key] = value
                position = _skip(text, position)
                if text.startswith("}", position):
                    position += 1
                    break
                if not text.startswith(",", position):
                    raise ValueError
                position = _skip(text, position + 1)
        if _skip(text, position) != len(text):
            raise ValueError
    except (ValueError, StopIteration, IndexError):
        return loads_strict(text), True  # raises json's own error (or, should it parse: not trusted)
    return members, twice


def _compact_members(text: str) -> tuple[dict[str, Any], bool] | None:
    """:func:`loads_members` for an object written with no white space between its
    top-level tokens (what clients and apps send; a line end after it is allowed), read
    with the C scanners alone and no call per token; ``None`` when it is not one (white space, or not valid JSON): then the
    general walk decides."""
    members: dict[str, Any] = {}
    twice = False
    position = 1
    end = len(text)
    try:
        while True:
            key, position = _scan_key(text, position + 1, True)
            if text[position] != ":":
                return None
            value, position = _scan_value(text, position + 1)
            if key in members:
                twice = True
            members[key] = value
            following = text[position]
            if following == ",":
                position += 1
                if text[position] != '"':
                    return None
                continue
            if following == "}" and (position + 1 == end or not text[position + 1 :].strip(_JSON_WHITESPACE)):
                return members, twice
            return None
    except (ValueError, StopIteration, IndexError):
        return None


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _JSON_WHITESPACE:
        position += 1
    return position


def is_valid_id(value: Any) -> bool:
    """Return whether ``value`` may be a request id: a string or an integer (not a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(line: bytes) -> Message | Batch:
    """Classify one stdin line.

    Args:
        line: the line's bytes without its line ending.

    Returns:
        a :class:`Request`, :class:`Notification`, :class:`Response` or :class:`Batch`.

    Raises:
        ParseError: the line is not UTF-8 or not JSON.
        InvalidRequestError: JSON, but not a JSON-RPC 2.0 message, or an empty batch.
    """
    try:
        value = loads_strict(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ParseError("Parse error") from None
    if isinstance(value, list):
        if not value:
            raise InvalidRequestError("Invalid Request: a batch must not be empty")
        items: list[Message | InboundError] = []
        for element in value:
            try:
                items.append(_classify_object(element, encode_message(element)[:-1]))
            except InboundError as exc:
                items.append(exc)
            except ValueError:  # a number too large for JSON's own range (1e400)
                items.append(InvalidRequestError("Invalid Request: a number is out of range"))
        return Batch(tuple(items))
    return _classify_object(value, line)


def message_problem(value: Any) -> str | None:
    """Say why ``value`` is not one JSON-RPC 2.0 message; ``None`` when it is one.

    The one check for messages in either direction: :func:`classify` applies it to every
    stdin line, and the reply ledger (``bridge/core/ledger.py``) to everything the app sends
    before it may reach stdout. Rules (JSON-RPC 2.0 §4, §5; MCP basic/index):

    - an object with ``"jsonrpc": "2.0"``;
    - a request or notification: ``method`` a string, ``params`` (if present) an object or
      an array, ``id`` (if present: a request) a string or an integer, and neither
      ``result`` nor ``error``;
    - a response: no ``method``, an ``id``, exactly one of ``result`` and ``error``; an
      ``error`` is an object with an integer ``code`` and a string ``message``; the ``id``
      is a string or an integer, or ``null`` on an error (the id could not be read).

    Returns:
        a sentence for ``error.message`` (after "Invalid Request: "), or ``None``.
    """
    if not isinstance(value, dict):
        return "a JSON-RPC message must be a JSON object"
    if value.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    has_result = "result" in value
    has_error = "error" in value
    if "method" in value:
        if not isinstance(value["method"], str):
            return '"method" must be a string'
        if "params" in value and not isinstance(value["params"], (dict, list)):
            return '"params" must be an object or an array'
        if "id" in value and not is_valid_id(value["id"]):
            return '"id" must be a string or an integer'
        if has_result or has_error:
            return 'a request or notification must not carry "result" or "error"'
        return None
    if "id" not in value or has_result == has_error:
        return (
            'a message needs "method" (request or notification) '
            'or "id" with exactly one of "result" and "error" (response)'
        )
    message_id = value["id"]
    if has_error:
        error = value["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if not (is_valid_id(code) and not isinstance(code, str) and isinstance(error.get("message"), str)):
            return '"error" must be an object with an integer "code" and a string "message"'
        if message_id is None:
            return None
    if not is_valid_id(message_id):
        return '"id" must be a string or an integer'
    return None


def _classify_object(value: Any, body: bytes) -> Message:
    problem = message_problem(value)
    if problem is not None:
        message_id = value.get("id") if isinstance(value, dict) else None
        raise InvalidRequestError(f"Invalid Request: {problem}", message_id if is_valid_id(message_id) else None)
    if "method" in value:
        if "id" not in value:
            return Notification(value["method"], value.get("params"), body)
        if value["method"] == "tools/call":  # (the only method with a quirk to smooth)
            smoothed = smoothed_request(value)
            if smoothed is not None:
                value, body = smoothed, encode_message(smoothed)[:-1]
        return Request(value["id"], value["method"], value.get("params"), body)
    return Response(value["id"], body)


def read_id_from_head(head: bytes) -> Any:
    """Read a top-level ``id`` from the start of a JSON object whose end is missing.

    Used for over-long lines: only their first bytes are kept, and the reply should still
    carry the id when the client wrote it before the long part (as every SDK does).

    Returns:
        the id (``str`` or ``int``) or ``None`` when it cannot be read.
    """
    text = head.decode("utf-8", "ignore")
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    if not text.startswith("{", position):
        return None
    position += 1
    try:
        while True:
            position = _skip_space(text, position)
            key, position = decoder.raw_decode(text, position)
            position = _skip_space(text, position)
            if not isinstance(key, str) or not text.startswith(":", position):
                return None
            value, position = decoder.raw_decode(text, _skip_space(text, position + 1))
            position = _skip_space(text, position)
            # A value is only whole when something follows it: "12" may be "123" cut short.
            if key == "id" and position < len(text):
                return value if is_valid_id(value) else None
            if not text.startswith(",", position):
                return None
            position += 1
    except (ValueError, RecursionError):
        return None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def encode_message(message: Any) -> bytes:
    """Serialize a JSON value as one compact UTF-8 line ending in ``\\n``.

    U+2028 and U+2029 are escaped: JSON allows them raw, but JavaScript readers of older
    editions treat them as line ends.
    """
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        data = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape) has no UTF-8 form: write it escaped.
        data = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    return data + b"\n"


def refusal_line(message: Message | Batch, exc: BridgeError) -> bytes | None:
    """The one stdout line refusing everything ``message`` asks: ``exc`` for each request,
    each unusable batch item's own error, a batch's replies as one array (JSON-RPC 2.0 §6);
    ``None`` when nothing in it wants a reply (notifications, client responses)."""
    items = message.items if isinstance(message, Batch) else (message,)
    replies = [
        error_line(item.request_id, item) if isinstance(item, InboundError) else error_line(item.id, exc)
        for item in items
        if isinstance(item, (Request, InboundError))
    ]
    if not replies:
        return None
    if not isinstance(message, Batch):
        return replies[0]
    return b"[" + b",".join(reply.rstrip(b"\n") for reply in replies) + b"]\n"


def error_line(request_id: Any, exc: BridgeError | dict[str, Any]) -> bytes:
    """The stdout line answering ``request_id`` (kept as sent; ``None`` for an unreadable
    id) with ``exc``: the one builder of the bridge's error replies (docs/behaviour.md,
    "Errors"). ``exc`` is a failure of the bridge, or an ``error`` object passed on as it is
    (the app's refusal kept in the catalog, the client's answer to a question)."""
    if isinstance(exc, dict):
        return encode_message({"jsonrpc": "2.0", "id": request_id, "error": exc})
    return encode_message(error_response(request_id, exc))


def bridge_error_line(request_id: Any, code: int, message: str, **data: Any) -> bytes:
    """The stdout line answering ``request_id`` with an error the bridge's own rules give
    (a -32601 or -32602 of a translation, a ``requestState`` it never gave out), not a
    failure with the app: ``{"code", "message", "data": {"source": "bridge", **data}}``."""
    return error_line(request_id, {"code": code, "message": message, "data": {"source": "bridge", **data}})


def result_line(request_id: Any, result: Any) -> bytes:
    """The stdout line answering ``request_id`` with ``result`` (a reply the bridge makes)."""
    return encode_message({"jsonrpc": "2.0", "id": request_id, "result": result})


#: The body of ``notifications/initialized`` (no newline): what the bridge POSTs after an
#: ``initialize`` of its own (MCP basic/lifecycle, "Initialization").
INITIALIZED_BODY = encode_message({"jsonrpc": "2.0", "method": "notifications/initialized"})[:-1]


class PrivateIds:
    """The ids of the bridge's own requests, whose replies never reach stdout (a replayed
    ``initialize``, a page, a probe, a question to the client): ``mcp-app-bridge-<kind>-<n>``,
    one counter for one bridge, so no two of its requests share an id."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = itertools.count(1)

    def next_id(self, kind: str) -> str:
        """A new id, ``mcp-app-bridge-<kind>-<n>``."""
        return f"mcp-app-bridge-{kind}-{next(self._count)}"

    def request(self, kind: str, method: str, params: Any = None) -> Request:
        """A request of the bridge's own under a new id (``params``: ``None`` leaves it out)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id(kind), "method": method}
        if params is not None:
            message["params"] = params
        return Request(message["id"], method, params, encode_message(message)[:-1])


_LINE_SEPARATOR = "\u2028".encode()
_PARAGRAPH_SEPARATOR = "\u2029".encode()


_WHITESPACE_BYTES = (b" ", b"\t", b"\r", b"\n")
# White space, or the first byte of a UTF-8 byte order mark.
_LINE_START_TO_CHECK = (b"", *_WHITESPACE_BYTES, b"\xef")


def to_wire_line(raw: bytes, message: Any, *, twice: bool = False) -> bytes:
    """Return the stdout line for a message the app sent, reusing its bytes when possible.

    Args:
        raw: the message exactly as the app sent it (UTF-8, already known to parse as
            ``message``); leading and trailing white space allowed.
        message: the parsed value of ``raw``.
        twice: ``raw`` names a top-level member twice (:func:`loads_members`): it is never
            forwarded as it is, since a reader that keeps the first member would read
            another message than ``message`` (json keeps the last).

    Returns:
        ``raw`` stripped plus ``\\n`` when it is already one line; otherwise (raw line
        breaks from pretty-printing, U+2028/U+2029, a member named twice) the compact
        re-serialization. A ``raw`` that is already exactly one such line, ``\n``
        included, is returned as it is.
    """
    if twice:
        return encode_message(message)
    if (
        raw[-1:] == b"\n"
        and raw[:1] not in _LINE_START_TO_CHECK
        and raw[-2:-1] not in _WHITESPACE_BYTES
        and raw.find(b"\n", 0, len(raw) - 1) < 0
        and b"\r" not in raw
        # b"\xe2" first: a one-byte search is fast, the three-byte ones are not (16 MiB: 9 ms)
        and (b"\xe2" not in raw or (_LINE_SEPARATOR not in raw and _PARAGRAPH_SEPARATOR not in raw))
    ):
        return raw  # no copy: large replies are the reason
    raw = raw.strip(b" \t\r\n").removeprefix(BOM_UTF8)
    if b"\n" in raw or b"\r" in raw:
        return encode_message(message)
    # b"\xe2" first: a one-byte search is fast, the three-byte ones are not (16 MiB: 9 ms).
    if b"\xe2" in raw and (_LINE_SEPARATOR in raw or _PARAGRAPH_SEPARATOR in raw):
        raw = raw.replace(_LINE_SEPARATOR, b"\\u2028").replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
    return raw + b"\n"
