"""The response to a request, read from what the app sent: pure, so that the running-app
start (``bridge/serve/appstart.py``) reads an ``initialize`` reply exactly as the serving
loop's :class:`~bridge.streamable.replies.ReplyReader` does, before asyncio is loaded.

Rules followed (MCP 2025-03-26 … 2025-11-25, basic/transports "Streamable HTTP"; JSON-RPC 2.0
§5): only JSON-RPC 2.0 objects may go on to stdout; an ``application/json`` reply is one
message, or a 2025-03-26 batch array; a response answers the request whose id it carries,
and an error with id ``null`` (or, in a JSON body, any id) answers the request of its POST,
its id put back.
"""

from __future__ import annotations

from codecs import BOM_UTF8
from typing import Any

from ..core.errors import BadUpstreamResponseError
from ..core.jsonrpc import Request, encode_message, is_valid_id, message_problem, to_wire_line
from .jsonparse import loads_message_bytes

__all__ = ["parse_reply", "answer_from_json", "answer_from_event", "is_response", "id_matches"]


def parse_reply(app: str, raw: bytes) -> tuple[Any, bool]:
    """Parse what the app (named ``app`` in messages) sent; only JSON-RPC 2.0 objects may go
    on to stdout. Returns the value, and whether ``raw`` names a top-level member twice
    (then it is re-encoded, never forwarded as it is: ``to_wire_line``).

    Raises:
        BadUpstreamResponseError: not UTF-8 JSON, or not JSON-RPC 2.0 messages.
    """
    try:
        if raw.lstrip(b" \t\r\n").startswith(BOM_UTF8):
            raw = raw.lstrip(b" \t\r\n")[3:]  # a byte order mark (RFC 8259 §8.1 lets parsers ignore it)
        value, twice = loads_message_bytes(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadUpstreamResponseError(f"{app} sent a reply that is not valid UTF-8 JSON.") from None
    for message in value if isinstance(value, list) else [value]:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise BadUpstreamResponseError(f"{app} sent JSON that is not a JSON-RPC 2.0 message.")
    return value, twice


def answer_from_json(app: str, request: Request, raw: bytes, extras: list[tuple[bytes, Any]]) -> tuple[bytes, dict[str, Any]]:
    """The stdout line answering ``request`` and its value, from an ``application/json``
    body ``raw`` (ending in a newline); a batch's other messages are appended to ``extras``
    as ``(line, value)``.

    Raises:
        BadUpstreamResponseError: no response to ``request`` in it.
    """
    value, twice = parse_reply(app, raw)
    if isinstance(value, list):  # 2025-03-26 allowed a batch of responses
        answer: tuple[bytes, dict[str, Any]] | None = None
        for item in value:
            if answer is None and is_response(item) and id_matches(item, request.id):
                answer = (encode_message(item), item)
            elif isinstance(item, dict):
                extras.append((encode_message(item), item))
        if answer is None:
            raise BadUpstreamResponseError(f"{app} sent a batch without the response to this request.")
        return answer
    if not is_response(value):
        raise BadUpstreamResponseError(f"{app} sent JSON that is not a JSON-RPC response.")
    if not id_matches(value, request.id):
        # One POST, one JSON reply: it answers this request whatever id it carries
        # (servers answer errors with id null). Put the request's id back.
        value = {**value, "id": request.id}
        return encode_message(value), value
    return to_wire_line(raw, value, twice=twice), value


def answer_from_event(request: Request, line: bytes, message: dict[str, Any]) -> tuple[bytes, dict[str, Any]] | None:
    """Whether an SSE event's message (``line``, its stdout line) answers ``request``: the
    line and value to write (an error with id ``null`` gets the request's id), else ``None``
    (a message of its own: progress, logging, a request to the client)."""
    if is_response(message) and (id_matches(message, request.id) or message.get("id") is None):
        if not id_matches(message, request.id):  # an error with id null
            message = {**message, "id": request.id}
            line = encode_message(message)
        return line, message
    return None


def is_response(value: Any) -> bool:
    """Whether ``value`` is a valid JSON-RPC response object."""
    return isinstance(value, dict) and "method" not in value and message_problem(value) is None


def id_matches(message: dict[str, Any], request_id: Any) -> bool:
    """Whether ``message`` carries ``request_id`` (same JSON type and value)."""
    value = message.get("id")
    return is_valid_id(value) and type(value) is type(request_id) and value == request_id
