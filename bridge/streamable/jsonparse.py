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

from collections.abc import Callable
from typing import Any

from ..core.jsonrpc import loads_strict

__all__ = ["FAST_PARSE_BYTES", "expect", "loads_strict_bytes"]

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
