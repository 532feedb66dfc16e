"""Server-sent events: response body bytes in, events out (WHATWG HTML §9.2 "Server-sent
events": "Parsing an event stream", "Interpreting an event stream"), as MCP's Streamable
HTTP uses them.

Pure: imports only the standard library. Shaped like ``framing.py`` and h11: the decoder
never reads anything itself; the caller feeds it what one read returned
(:meth:`SSEDecoder.receive_data`) and then pulls events (:meth:`SSEDecoder.next_event`)
until it gets ``NEED_DATA``.

Rules followed:

- a line ends in CRLF, LF or CR; a CR that ends one chunk and an LF that starts the next
  are one line end; one UTF-8 byte order mark at the very start of the stream is dropped;
- a line starting with ``:`` is a comment, reported as :data:`COMMENT` so that the caller
  can count it as a sign of life (MCP 2026-07-28 calls comments keep-alives);
- ``name: value`` is a field (one space after the colon is dropped; a line without a colon
  is a field with an empty value): ``data`` appends its value and an LF to the event's
  data; ``event`` sets its type; ``id`` sets the last event id unless the value contains
  NUL; ``retry`` sets the reconnection time when the value is ASCII digits only; other
  names are ignored;
- a blank line ends the event; at the end of the stream an unfinished event is dropped.

Choices where the bridge needs something WHATWG leaves open:

- Bytes, not text: ``data`` is handed on undecoded (the bridge parses it as UTF-8 JSON,
  which refuses invalid UTF-8; WHATWG would replace it with U+FFFD). ``event`` and ``id``
  values are decoded with replacement.
- A block that set only ``id``, ``retry`` or ``event`` is reported too, with empty data
  (WHATWG dispatches nothing for it): it is a complete event as far as the caller's idle
  timer goes, and MCP 2025-11-25's priming event is one.
- The cap: an event whose data would pass ``max_event_bytes``, or whose data plus the line
  still arriving (less a ``data: `` field name) would, is refused with
  :class:`EventTooLarge` as soon as that is known, never after buffering it whole. The
  decoder then discards the rest of that event, up to its blank line, holding no more than
  one chunk meanwhile, and decodes the events after it normally. Fed one read at a time
  (and drained to ``NEED_DATA`` after each), it holds at most ``max_event_bytes`` plus two
  chunks (the one being read and its lines) plus a few bytes.

Theory of operation: received chunks wait in ``_chunks``; the one being read is split into
its lines once, by ``bytes.splitlines`` (which breaks at exactly CRLF, LF and CR), and the
lines are taken in turn (no per-byte work in Python, no buffer grown byte by byte). A line
that spans chunks is kept as its pieces in ``_partial`` and joined once, when its end
arrives; a ``data`` line's value is cut from the pieces in that same join. Data lines are
kept with their LF, so a one-line event's data is the very ``bytes`` object cut from the
chunk, and several lines are joined once, when the event ends.
"""

from __future__ import annotations

from codecs import BOM_UTF8
from collections import deque
from typing import Any, NamedTuple

__all__ = ["NEED_DATA", "EOF", "COMMENT", "Event", "EventTooLarge", "SSEDecoder"]

_LF = 0x0A
_CR = 0x0D
_COLON = 0x3A
_SPACE = 0x20
#: A line may pass the cap by the field name in front of its value (``data: ``).
_FIELD_NAME_BYTES = len(b"data: ")
#: ``retry`` values of more digits saturate (10**15 ms is 31,000 years): no slow int().
_MAX_RETRY_DIGITS = 15


class NEED_DATA:  # noqa: N801 - sentinels, spelled as h11 spells its own
    """Sentinel: no complete event is buffered; feed more bytes."""


class EOF:  # noqa: N801
    """Sentinel: the stream ended and every event was returned (returned on every later call)."""


class COMMENT:  # noqa: N801
    """Sentinel: a comment line (``:`` first) arrived: a keep-alive, in MCP's words."""


class Event(NamedTuple):
    """One event, complete (its blank line arrived).

    Attributes:
        data_with_newline: the event's ``data`` lines, each followed by LF (WHATWG's data
            buffer before its last LF is removed): ``b""`` when the event had no ``data``
            line, ``b"\\n"`` for one empty ``data`` line. Kept so, a one-line JSON message
            is already a stdout line, with no copy.
        event_type: the ``event`` field, ``"message"`` when absent or empty.
        id: the stream's last event id once this event is in (WHATWG "last event ID
            string"): it persists from event to event until an ``id`` field changes it;
            ``""`` when none was set, or an empty ``id`` field reset it.
        retry_ms: the stream's reconnection time in milliseconds, once set by a ``retry``
            field (this event's or an earlier one's), else ``None``.
    """

    data_with_newline: bytes
    event_type: str = "message"
    id: str = ""
    retry_ms: int | None = None

    @property
    def data(self) -> bytes:
        """The data as WHATWG defines it: the ``data`` lines joined with LF."""
        return self.data_with_newline[:-1]


class EventTooLarge(Exception):
    """An event's data passes the cap. The decoder discards the rest of the event and stays
    usable.

    Attributes:
        size_bytes: how large the event was known to be when it was refused (at least).
        limit_bytes: the cap, ``max_event_bytes``.
    """

    def __init__(self, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"an SSE event of at least {size_bytes} bytes passes the {limit_bytes}-byte limit")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class SSEDecoder:
    """Split an event stream (a ``text/event-stream`` body) into events.

    Args:
        max_event_bytes: the largest event data accepted, in bytes (see the module's cap
            rule). Must be at least 1.
        last_event_id: the last event id from before (a resumed stream starts from it).

    Attributes:
        last_event_id: the stream's last event id, as in :attr:`Event.id`.
        retry_ms: the reconnection time in milliseconds; set the moment a valid ``retry``
            field arrives, even in an event that never completes. ``None`` until then.
    """

    def __init__(self, max_event_bytes: int, last_event_id: str = "") -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be at least 1")
        self.max_event_bytes = max_event_bytes
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self._chunks: deque[bytes] = deque()
        self._lines: list[bytes] = []  # the lines of the chunk being read, ends kept
        self._index = 0  # the next of them
        self._partial: list[bytes] = []  # pieces of a line that spans chunks
        self._partial_bytes = 0
        self._skip_lf = False  # the last chunk ended in CR: an LF first in the next is its pair
        self._head: bytes | None = b""  # the stream's first bytes, until a BOM is ruled out
        self._eof = False
        self._discarding = False  # an event was refused: drop its lines up to its blank line
        self._dropped_line = False  # the current line's first pieces were dropped
        # The event being read.
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event_type = ""
        self._id_buffer = last_event_id
        self._fields = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes held: received and not yet decoded, plus the event being read."""
        waiting = sum(map(len, self._chunks)) + sum(map(len, self._lines[self._index :]))
        return waiting + len(self._head or b"") + self._partial_bytes + self._data_bytes

    def receive_data(self, data: bytes) -> None:
        """Add the next bytes of the body; ``b""`` means the body ended (repeating it is
        harmless). Decodes nothing: call :meth:`next_event` afterwards. The decoder keeps a
        reference to ``data``, which must be ``bytes``.

        Raises:
            RuntimeError: non-empty data after the end (a bug in the caller).
        """
        if not data:
            if self._head:
                self._chunks.append(self._head)  # a short stream that only looked like a BOM
            self._head = None
            self._eof = True
            return
        if self._eof:
            raise RuntimeError("received data after the end of the stream")
        if self._head is not None:
            head = self._head + data
            if len(head) < len(BOM_UTF8) and BOM_UTF8.startswith(head):
                self._head = head
                return
            self._head = None
            data = head[len(BOM_UTF8) :] if head.startswith(BOM_UTF8) else head
            if not data:
                return
        self._chunks.append(data)

    def next_event(self) -> Event | type[NEED_DATA] | type[EOF] | type[COMMENT]:
        """Return the next event.

        Returns:
            :class:`Event`: an event ended with its blank line;
            ``COMMENT``: a comment line arrived;
            ``NEED_DATA``: nothing complete is buffered;
            ``EOF``: the stream ended and nothing is left (an unfinished event is dropped).

        Raises:
            EventTooLarge: the event being read passes the cap. Call again to go on: the
                rest of that event is discarded.
        """
        while True:
            lines, index = self._lines, self._index
            if index < len(lines) - 1 and not self._partial and not self._dropped_line:
                # The common case, inline: a line that is not its chunk's last is complete.
                line = lines[index]
                self._index = index + 1
                end = len(line) - (2 if line[-1] == _LF and line[-2:-1] == b"\r" else 1)
            else:
                line, end = self._next_line()
            if line is None:
                if not self._eof:
                    return NEED_DATA
                self._clear_event()
                self._partial, self._partial_bytes, self._dropped_line = [], 0, False
                return EOF
            if end == 0:
                event = self._dispatch()
                if event is not None:
                    return event
            elif self._discarding:
                continue
            elif end < 0:  # a data value already cut out of its pieces, with its LF
                self._add_data(line)
            elif self._data_bytes + end - _FIELD_NAME_BYTES > self.max_event_bytes:
                self._refuse(self._data_bytes + end - _FIELD_NAME_BYTES)
            elif line[0] == _COLON:
                return COMMENT
            elif line.startswith(b"data:"):
                start = 6 if end > 5 and line[5] == _SPACE else 5
                self._add_data(line[start:] if len(line) - end == 1 and line[-1] == _LF else line[start:end] + b"\n")
            else:
                self._field(line, end)

    def _next_line(self) -> tuple[Any, int]:
        """The next complete line and its length without its line end; ``(value, -1)`` for
        a ``data`` line that spanned chunks (its value and an LF); ``(None, -1)`` when no
        line is complete."""
        lines, index = self._lines, self._index
        while True:
            if index == len(lines):
                if not self._chunks:
                    return None, -1
                chunk = self._chunks.popleft()
                # Two memchr scans first: a chunk inside a long line is kept as it is.
                if chunk.find(b"\n") < 0 and chunk.find(b"\r") < 0:
                    lines, index = [chunk], 0
                else:
                    lines, index = chunk.splitlines(True), 0
                if self._skip_lf:
                    self._skip_lf = False
                    index = int(lines[0] == b"\n")
                self._lines, self._index = lines, index
                continue
            line = lines[index]
            index += 1
            self._index = index
            last = line[-1]
            if last == _LF:
                end = len(line) - 2 if len(line) > 1 and line[-2] == _CR else len(line) - 1
            elif last == _CR:
                end = len(line) - 1
                self._skip_lf = index == len(lines)
            else:  # the chunk ended inside this line
                self._keep_piece(line)  # may raise EventTooLarge
                continue
            if self._partial or self._dropped_line:
                return self._join(line, end)
            return line, end

    def _keep_piece(self, piece: bytes) -> None:
        if self._discarding:
            self._dropped_line = True
            return
        self._partial.append(piece)
        self._partial_bytes += len(piece)
        known = self._data_bytes + self._partial_bytes - _FIELD_NAME_BYTES
        if known > self.max_event_bytes:
            self._partial, self._partial_bytes, self._dropped_line = [], 0, True
            self._refuse(known)

    def _join(self, line: bytes, end: int) -> tuple[bytes, int]:
        """The line whose last piece is ``line``, joined with its earlier pieces once."""
        if self._dropped_line:
            self._dropped_line = False
            return b"-", 1  # the rest of a discarded line: not a blank line
        pieces, size = self._partial, self._partial_bytes + end
        self._partial, self._partial_bytes = [], 0
        first = pieces[0]
        if len(first) > 5 and first.startswith(b"data:"):
            # The value alone, with its LF: one copy of a large value, not two. (The cap
            # needs only the data check here: it implies the line-length one.)
            pieces[0] = first[6:] if first[5] == _SPACE else first[5:]
            pieces += (line,) if len(line) - end == 1 and line[-1] == _LF else (line[:end], b"\n")
            return b"".join(pieces), -1
        pieces.append(line)
        return b"".join(pieces), size

    def _add_data(self, value: bytes) -> None:
        size = self._data_bytes + len(value) - 1  # the data with this line, joined
        if size > self.max_event_bytes:
            self._refuse(size)
        self._data.append(value)
        self._data_bytes = size + 1
        self._fields = True

    def _field(self, line: bytes, end: int) -> None:
        colon = line.find(b":", 0, end)
        if colon < 0:
            name, value = line[:end], b""
        else:
            name, start = line[:colon], colon + 1
            if start < end and line[start] == _SPACE:
                start += 1
            value = line[start:end]
        if name == b"data":  # only "data" without a colon comes here
            self._add_data(value + b"\n")
            return
        if name == b"event":
            self._event_type = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" in value:
                return
            self._id_buffer = value.decode("utf-8", "replace")
        elif name == b"retry":
            if not value.isdigit():  # ASCII digits only; b"" is not
                return
            self.retry_ms = int(value) if len(value) <= _MAX_RETRY_DIGITS else 10**_MAX_RETRY_DIGITS
        else:
            return
        self._fields = True

    def _dispatch(self) -> Event | None:
        if self._discarding:
            self._discarding = False
            return None
        if not self._fields:
            return None
        data = self._data
        self.last_event_id = self._id_buffer
        event = Event(
            data[0] if len(data) == 1 else b"".join(data),
            self._event_type or "message",
            self.last_event_id,
            self.retry_ms,
        )
        self._clear_event()
        return event

    def _refuse(self, size: int) -> None:
        self._clear_event()
        self._discarding = True
        raise EventTooLarge(size, self.max_event_bytes)

    def _clear_event(self) -> None:
        self._data, self._data_bytes, self._event_type, self._fields = [], 0, "", False
        self._id_buffer = self.last_event_id
