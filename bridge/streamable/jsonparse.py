"""Strict JSON from the app's bytes, with msgspec (a dependency) for large messages.

The standard library (``bridge.core.jsonrpc.loads_strict``) is the rule; msgspec is only a
faster way to the same answer for bodies of :data:`FAST_PARSE_BYTES` or more (a 16 MiB
reply: decode and ``json`` about 15 ms on a quiet machine, msgspec about 6 ms; in the
bridge, where the memory is fresh, about twice each: bench/README.md, "Large replies").
Everything msgspec accepts, the standard library accepts with an equal value;
``tests/streamable/test_jsonparse.py`` holds the two equal on generated and mutated documents.
What msgspec refuses, the standard library parses again and decides: lone surrogates from
``\\ud800`` escapes (accepted there), numbers beyond a float's range (``1e400`` is ``inf``
there; the ledger and the wire line deal with it as before), anything invalid.

msgspec is imported on the first large body only (its import costs ~10 ms and ~4 MiB, which a
bridge that never sees one should not pay), as soon as the body's length is known:
:func:`expect` is called with the ``Content-Length`` before the body is read, so the
import overlaps the body's arrival.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..core.jsonrpc import loads_members, loads_strict

__all__ = ["FAST_PARSE_BYTES", "expect", "loads_message_bytes", "loads_strict_bytes"]

#: Bodies of at least this many bytes go to msgspec first. Below it the standard library
#: costs under a millisecond and the import would not pay for itself.
FAST_PARSE_BYTES = 2 * 1024 * 1024

#: msgspec's decoder, once imported (``None`` until the first large body).
_fast_decode: Callable[[bytes], Any] | None = None


def expect(content_length: str | None) -> None:
    """A body of this ``Content-Length`` (the field's value, if any) is about to be read:
    import msgspec now if it will be used for it."""
    if _fast_decode is not None or content_length is None:
        return
    length = content_length.strip()
    if length.isascii() and length.isdigit() and len(length) <= 18 and int(length) >= FAST_PARSE_BYTES:
        _decoder()


def _decoder() -> Callable[[bytes], Any]:
    """msgspec's strict decoder, imported on the first call."""
    global _fast_decode
    if _fast_decode is None:
        import msgspec.json

        _fast_decode = msgspec.json.Decoder().decode
    return _fast_decode


def loads_strict_bytes(data: bytes) -> Any:
    """``loads_strict(data.decode("utf-8"))``: the same value, and the same exceptions
    (``UnicodeDecodeError``, ``ValueError``, ``RecursionError``) for the same ``data``."""
    if len(data) >= FAST_PARSE_BYTES:
        decode = _decoder()
        try:
            return decode(data)
        except Exception:  # noqa: BLE001 (any refusal by msgspec: the standard library decides)
            pass
    return loads_strict(data.decode("utf-8"))


_members_decode: Callable[[bytes], Any] | None = None


def loads_message_bytes(data: bytes) -> tuple[Any, bool]:
    """:func:`loads_strict_bytes`, and whether the value is an object that names a top-level
    member twice (``bridge.core.jsonrpc.loads_members``: such bytes are never forwarded as
    they are). Large objects go to msgspec member by member (``dict[str, msgspec.Raw]``),
    and the top level is then walked over the members' own bytes (compared, not parsed),
    so that a member named twice is seen without a second parse of the values."""
    if len(data) >= FAST_PARSE_BYTES:
        _decoder()
        try:
            return _loads_members_fast(data)
        except Exception:  # noqa: BLE001 (any refusal by msgspec: the standard library decides)
            pass
    return loads_members(data.decode("utf-8"))


def _loads_members_fast(data: bytes) -> tuple[Any, bool]:
    global _members_decode
    assert _fast_decode is not None
    if _members_decode is None:
        import msgspec

        _members_decode = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
    first = data[:1]
    if first != b"{" and data.lstrip(b" \t\r\n")[:1] != b"{":
        return _fast_decode(data), False  # not an object: a batch, or what the caller refuses
    members = _members_decode(data)
    if not _walks_once(data, members):
        # A member named twice: its earlier values were never decoded here (the dict kept
        # the last), so the standard library reads the whole, checking every value.
        raise ValueError("a top-level member named twice")
    return {key: _fast_decode(raw) for key, raw in members.items()}, False


def _walks_once(data: bytes, members: dict[str, Any]) -> bool:
    """Whether ``data`` (valid JSON, an object whose members' last values are ``members``,
    as msgspec ``Raw``) names each member exactly once. The top level is walked with each
    value skipped by its length in ``members``: a member named twice is either met again
    by name, or the bytes where its value should be are not that value's, which fails:
    the walk succeeds only on ``{`` key ``:`` value ``,`` … ``}`` with every value the very
    bytes msgspec took for it."""
    seen: set[str] = set()
    position = _skip(data, data.index(b"{") + 1)
    if data.startswith(b"}", position):
        return not members
    while True:
        if not data.startswith(b'"', position):
            return False
        end = data.index(b'"', position + 1)
        while _escaped(data, end):
            end = data.index(b'"', end + 1)
        token = data[position : end + 1]
        key = json.loads(token) if b"\\" in token else token[1:-1].decode("utf-8")
        if key in seen or key not in members:
            return False
        seen.add(key)
        position = _skip(data, end + 1)
        if not data.startswith(b":", position):
            return False
        raw = members[key]
        position = _skip(data, position + 1)
        if not data.startswith(raw, position):  # a memcmp, no copy
            return False
        position = _skip(data, position + len(memoryview(raw)))
        if data.startswith(b"}", position):
            return len(seen) == len(members) and _skip(data, position + 1) == len(data)
        if not data.startswith(b",", position):
            return False
        position = _skip(data, position + 1)


def _escaped(data: bytes, quote: int) -> bool:
    backslashes = 0
    while data[quote - 1 - backslashes] == 0x5C:
        backslashes += 1
    return backslashes % 2 == 1


def _skip(data: bytes, position: int) -> int:
    while position < len(data) and data[position] in b" \t\r\n":
        position += 1
    return position
