"""Newline-delimited framing of the stdio side: bytes in, complete lines out.

Pure: imports only the standard library. Modelled on h11's ``receive_data`` /
``next_event``: the framer never reads anything itself; the caller feeds it whatever one
read returned and then pulls events until it gets ``NEED_DATA``.

Rules (MCP basic/transports "stdio", every revision; docs/behaviour.md, "stdin framing"):

- messages are separated by ``\\n``; a trailing ``\\r`` is stripped (Windows clients send
  CRLF), and lines holding only white space are skipped;
- a UTF-8 byte order mark at the very start of the stream is dropped;
- a chunk may end anywhere, even inside a UTF-8 character: the framer works on bytes and
  never decodes;
- a line longer than ``max_line_bytes`` is reported as :class:`OverlongLine` and discarded
  up to its newline. Only its first ``head_bytes`` are kept (to read its id); the rest is
  dropped as it arrives, so memory stays bounded by ``max_line_bytes`` plus one chunk.
- at EOF a last line without a newline is still a message.

Theory of operation: ``_buffer`` holds bytes not yet returned; ``_scanned`` is how far it
is known to hold no ``\\n`` (so a long line arriving in many chunks is searched once,
linear time). Deleting from the front of a ``bytearray`` is cheap in CPython (it moves a
start pointer), so returning many short lines from one big chunk stays linear too.
"""

from __future__ import annotations

from codecs import BOM_UTF8
from typing import NamedTuple

__all__ = ["NEED_DATA", "EOF", "OverlongLine", "LineFramer", "DEFAULT_HEAD_BYTES"]

_BLANK = b" \t\r"

#: How many leading bytes of an over-long line are kept so its ``id`` can still be read.
DEFAULT_HEAD_BYTES = 4096


class NEED_DATA:  # noqa: N801 - a sentinel, spelled as h11 spells its own
    """Sentinel: no complete line is buffered; feed more bytes."""


class EOF:  # noqa: N801
    """Sentinel: input has ended and every line was returned (returned again on every call)."""


class OverlongLine(NamedTuple):
    """A line longer than the cap, now discarded.

    Attributes:
        head: the line's first bytes (at most ``head_bytes``), to read its id from.
        size_bytes: the line's full length in bytes, without its line ending.
    """

    head: bytes
    size_bytes: int


class LineFramer:
    """Split a byte stream into lines.

    Args:
        max_line_bytes: the longest line (in bytes, without its line ending) returned as a
            message. Longer lines become :class:`OverlongLine`. Must be at least 1.
        head_bytes: how many leading bytes of an over-long line to keep.
    """

    def __init__(self, max_line_bytes: int, head_bytes: int = DEFAULT_HEAD_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        self._head_bytes = head_bytes
        self._buffer = bytearray()
        self._scanned = 0
        self._at_stream_start = True
        self._eof = False
        # Set while an over-long line is being dropped: its head and the bytes seen so far.
        self._discard_head: bytes | None = None
        self._discard_size = 0
        self._discard_ends_with_cr = False

    def receive_data(self, data: bytes) -> None:
        """Add bytes read from stdin. Does not parse; call :meth:`next_event` afterwards.

        Args:
            data: any chunk, split anywhere. ``b""`` means EOF; repeating it is harmless.

        Raises:
            RuntimeError: non-empty data after EOF (a bug in the caller).
        """
        if not data:
            self._eof = True
            return
        if self._eof:
            raise RuntimeError("received data after EOF")
        if self._discard_head is not None and not self._buffer:
            # Dropping an over-long line: count the bytes up to its newline, keep the rest.
            newline = data.find(b"\n")
            if newline < 0:
                self._discard(data)
                return
            self._discard(data[:newline])
            self._buffer += b"\n"
            data = data[newline + 1 :]
        self._buffer += data

    def next_event(self) -> bytes | OverlongLine | type[NEED_DATA] | type[EOF]:
        """Return the next event.

        Returns:
            ``bytes``: one complete line without its ``\\n`` or trailing ``\\r``;
            :class:`OverlongLine`: a line over the cap was discarded (the framer stays usable);
            ``NEED_DATA``: no complete line is buffered;
            ``EOF``: input ended and nothing is left (and on every later call).
        """
        while True:
            if self._at_stream_start:
                if len(self._buffer) < len(BOM_UTF8) and BOM_UTF8.startswith(self._buffer) and not self._eof:
                    return NEED_DATA
                if self._buffer.startswith(BOM_UTF8):
                    del self._buffer[: len(BOM_UTF8)]
                self._at_stream_start = False
            event: bytes | OverlongLine | type[NEED_DATA] | type[EOF] | None
            if self._discard_head is not None:
                event = self._continue_discard()
            else:
                event = self._next_line()
            if event is None:
                continue  # a blank line was skipped
            return event

    def _next_line(self) -> bytes | OverlongLine | type[NEED_DATA] | type[EOF] | None:
        buffer = self._buffer
        newline = buffer.find(b"\n", self._scanned)
        if newline < 0:
            # + 1: the line's content may be complete with only its "\r\n" still to come.
            if len(buffer) > self.max_line_bytes + 1:
                self._discard_head = bytes(buffer[: self._head_bytes])
                self._discard_size = 0
                self._discard(buffer)
                buffer.clear()
                self._scanned = 0
                return self._continue_discard()
            self._scanned = len(buffer)
            if not self._eof:
                return NEED_DATA
            if not buffer:
                return EOF
            newline = len(buffer)  # the last line of the stream has no newline
        end = newline
        if end and buffer[end - 1] == 0x0D:
            end -= 1
        if end > self.max_line_bytes:
            event: bytes | OverlongLine | None = OverlongLine(bytes(buffer[: self._head_bytes]), end)
        else:
            with memoryview(buffer) as view:
                line = bytes(view[:end])
            event = None if not line.strip(_BLANK) else line
        del buffer[: newline + 1]
        self._scanned = 0
        return event

    def _continue_discard(self) -> OverlongLine | type[NEED_DATA]:
        buffer = self._buffer
        newline = buffer.find(b"\n")
        if newline < 0 and not self._eof:
            self._discard(buffer)
            buffer.clear()
            return NEED_DATA
        if newline < 0:
            newline = len(buffer)
        self._discard(buffer[:newline])
        del buffer[: newline + 1]
        size = self._discard_size - self._discard_ends_with_cr
        head = self._discard_head or b""
        self._discard_head = None
        self._discard_size = 0
        self._discard_ends_with_cr = False
        return OverlongLine(head, size)

    def _discard(self, data: bytes | bytearray) -> None:
        if data:
            self._discard_size += len(data)
            self._discard_ends_with_cr = data[-1] == 0x0D
