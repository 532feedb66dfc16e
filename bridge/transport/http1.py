"""Sans-I/O HTTP/1.1 for the bridge's client: encode a request head, parse a response.

Feed bytes, pull events, as h11 does: :func:`encode_request_head` makes the bytes of a
request's head; :class:`ResponseParser` takes the bytes that arrive
(:meth:`~ResponseParser.receive_data`, ``b""`` for a clean EOF) and hands back one event at
a time (:meth:`~ResponseParser.next_event`): a :class:`Head`, then :class:`Data` pieces,
then :data:`END`, or :data:`NEED_DATA` when it cannot go on without more bytes. It never
waits and never raises anything but :class:`~bridge.transport.base.ProtocolViolation`
(and :class:`~bridge.transport.base.LocalProtocolError` while encoding). Pure: standard
library only. The pool (``pool.py``) does the I/O and the timeouts around it.

What it implements (RFC 9112):

- request: ``METHOD target HTTP/1.1``, ``Host``, the caller's fields and
  ``Content-Length`` (§3, §6.2); field names must be tokens, values with CR, LF, NUL or
  other controls are refused (§5, RFC 9110 §5.5), and the error never quotes them;
- response head: status line, fields, interim 1xx responses skipped (RFC 9110 §15.2), at
  most :data:`MAX_HEAD_BYTES`; 101 and codes below 100 refused (never asked for);
- body length (§6.3): none for 1xx/204/304 and ``HEAD``; ``Transfer-Encoding`` ending in
  ``chunked`` (§7.1; extensions and trailers skipped); ``Content-Length`` (differing
  repeated values refused); otherwise until the server closes;
- persistence (§9.3): :attr:`ResponseParser.keep_alive` is false after ``Connection:
  close``, an HTTP/1.0 response without ``keep-alive``, or a close-delimited body.

Differences from h11, each pinned by a test in ``tests/transport/test_http1.py`` (which also holds
the parser against h11 on generated and damaged responses). Accepted here, refused by
h11: a bare LF in the chunked framing (RFC 9112 §2.2; both accept it in the head), white
space before a chunk extension's ``;`` (§7.1.1), an unknown ``Transfer-Encoding`` (read
until close). Persisting here: an HTTP/1.0 response saying ``keep-alive`` (§9.3).
Refused here, accepted by h11: obs-fold (§5.2 lets a client do either), versions other
than 1.0 and 1.1, status 101. Bytes after a complete response are left unread (the pool
then never reuses the connection). A truncated body is no error here: after a clean EOF
mid-body the parser answers :data:`NEED_DATA`, and the caller says the connection ended.

httptools (llhttp) behind this interface was measured and not adopted (bench/README.md,
"The HTTP/1.1 parser"): 12-16 µs per call saved, 2-3 % of a call, for a compiled
dependency in the frozen build.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from operator import itemgetter
from typing import Final

from ..core.config import HTTP_TOKEN, HTTP_TOKEN_CHAR
from ..core.pipeurl import PIPE_HOST, is_pipe_url, split_pipe_url
from ..core.unixurl import UNIX_HOST, is_unix_url, split_unix_url
from .base import Headers, LocalProtocolError, ProtocolViolation

__all__ = [
    "MAX_HEAD_BYTES",
    "NEED_DATA",
    "END",
    "Head",
    "Data",
    "Headers",
    "ResponseParser",
    "encode_request_head",
    "parse_url",
]

#: Largest response head (status line and fields) accepted: 64 KiB, as h11's default.
MAX_HEAD_BYTES = 64 * 1024

# RFC 9110 §5.5: a field value is visible characters, SP and HTAB. Obsolete text
# (0x80-0xFF) passes, as in h11; everything else below 0x20, and DEL, is refused.
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_TOKEN = HTTP_TOKEN
# The status line up to its LF (CRs before the LF dropped, a bare LF accepted: RFC 9112 §2.2, §4).
_STATUS_LINE = re.compile(r"HTTP/1\.([01]) ([0-9]{3})(?: [^\r\n]*)?\r*\n")
_VALUE_CHAR = "[^" + _BAD_VALUE.pattern.removeprefix("[")  # visible, SP, HTAB or obsolete text
# One whole field line after an LF (RFC 9112 §5, §2.2: any CRs before its LF): the name,
# and the value without the white space around it (§5.1). A line that is not a field is
# not matched: the parser counts the matches against the lines.
_FIELD_LINE = re.compile(  # the value ends in a value character that is not SP or HTAB
    rf"\n({HTTP_TOKEN_CHAR}++):[ \t]*+((?:{_VALUE_CHAR}*[^\x00-\x20\x7f])?)[ \t]*+\r*+(?=\n)"
)
# The field lines, each ``token ":" value`` or empty (only CRs), each ending in LF.
_FIELD_BLOCK = re.compile(rf"(?:(?:{HTTP_TOKEN_CHAR}+:{_VALUE_CHAR}*)?\r*\n)*")
# Fields this client writes itself (RFC 9112 §3.2, §6.2): a second copy would be ambiguous.
_OWN_FIELDS = frozenset({"host", "content-length", "transfer-encoding"})
# Names already found sendable (a token, not one of the own fields): the bridge sends the
# same few on every request, so each is checked once. Bounded: past it, names are checked
# every time.
_SENDABLE_NAMES: set[str] = set()
_SENDABLE_NAMES_MOST = 64
_COMMON_METHODS = frozenset({"GET", "POST", "DELETE", "HEAD", "PUT", "PATCH", "OPTIONS"})  # tokens all
_NAME, _VALUE = itemgetter(0), itemgetter(1)
_CHUNK_SIZE = re.compile(rb"^([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?$")  # extensions skipped unread, as h11
_FIELD_NAME = re.compile(_TOKEN.pattern.encode("ascii"))
_BAD_RECEIVED_VALUE = re.compile(_BAD_VALUE.pattern.encode("ascii"))


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: :meth:`ResponseParser.next_event`: more bytes are needed to go on.
NEED_DATA: Final = _Sentinel("NEED_DATA")
#: :meth:`ResponseParser.next_event`: the response is complete.
END: Final = _Sentinel("END")


def encode_request_head(
    method: str, target: str, authority: str, headers: Iterable[tuple[str, str]], body_length: int | None
) -> bytes:
    """The head of one request: request line, ``Host``, ``headers``, ``Content-Length``.

    Args:
        method: an HTTP token (``POST``).
        target: the origin-form target, ASCII without spaces (``/mcp?x=1``).
        authority: ``host[:port]`` for ``Host`` (IPv6 in brackets).
        headers: ``(name, value)`` fields, sent in order; ``Host``, ``Content-Length`` and
            ``Transfer-Encoding`` are the encoder's own and refused here.
        body_length: the body's length in bytes; ``None``: no body, no ``Content-Length``.

    Raises:
        LocalProtocolError: a name or value cannot be sent; the message names the field,
            never its value.
    """
    if method not in _COMMON_METHODS and not _TOKEN.match(method):
        raise LocalProtocolError("the request method is not an HTTP token")
    fields = headers if isinstance(headers, list) else list(headers)
    # Names seen before, and values of printable characters only (no control, so none of
    # CR, LF, NUL), pass at once; anything else goes through the rules field by field.
    if not (_SENDABLE_NAMES.issuperset(map(_NAME, fields)) and "".join(map(_VALUE, fields)).isprintable()):
        _check_fields(fields)
    block = "".join([f"{name}: {value}\r\n" for name, value in fields])
    length = "\r\n" if body_length is None else f"Content-Length: {body_length}\r\n\r\n"
    try:
        return f"{method} {target} HTTP/1.1\r\nHost: {authority}\r\n{block}{length}".encode("latin-1")
    except UnicodeEncodeError:
        raise LocalProtocolError("a request field value holds characters HTTP/1.1 cannot carry") from None


def _check_fields(fields: list[tuple[str, str]]) -> None:
    """Each field in turn: a token name, a value without controls but HTAB, not an own field.

    Raises:
        LocalProtocolError: for the first field that fails, named, its value never quoted.
    """
    for name, value in fields:
        if not _TOKEN.match(name) or _BAD_VALUE.search(value):
            raise LocalProtocolError(f"the request field {name!r} has a name or value that cannot be sent")
        if name.lower() in _OWN_FIELDS:
            raise LocalProtocolError(f"the request field {name!r} is set by the HTTP client itself")
        if len(_SENDABLE_NAMES) < _SENDABLE_NAMES_MOST:
            _SENDABLE_NAMES.add(name)


def parse_url(url: str) -> tuple[tuple[str, int], str, str]:
    """Where a request to ``url`` goes and what its head names: ``(key, target, authority)``.

    ``http://host:port/path?query`` → ((host, port), "/path?query", "host:port");
    ``http+unix://%2Fpath%2Fapp.sock/mcp`` → (("/path/app.sock", 0), "/mcp", "localhost");
    ``npipe://./pipe/app/mcp`` → (("\\\\.\\pipe\\app", 0), "/mcp", "localhost") (RFC 9112 §3.2: origin-form
    target and ``Host``).

    Raises:
        LocalProtocolError: not such a URL, or one that cannot be sent.
    """
    from urllib.parse import urlsplit

    for is_kind, split, kind_host in ((is_unix_url, split_unix_url, UNIX_HOST), (is_pipe_url, split_pipe_url, PIPE_HOST)):
        if is_kind(url):
            try:
                path, target = split(url)
            except ValueError as exc:
                raise LocalProtocolError(str(exc)) from None
            return (path, 0), target, kind_host
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise LocalProtocolError("only http:// URLs with a host are served by this client")
    try:
        port = 80 if parts.port is None else parts.port
    except ValueError:
        raise LocalProtocolError("the URL's port is not a number from 0 to 65535") from None
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    host = parts.hostname
    authority = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        authority += f":{parts.port}"
    if not (target + authority).isascii() or any(ch <= " " or ch == "\x7f" for ch in target + authority):
        raise LocalProtocolError("the URL holds spaces, controls or characters that are not ASCII")
    return (host, port), target, authority


def asks_to_close(head: bytes) -> bool:
    """Whether an encoded request head says ``Connection: close`` (RFC 9112 §9.6)."""
    if b"lose" not in head and b"LOSE" not in head:
        return False  # the common case, without splitting the head
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"connection" and b"close" in value.lower():
            return True
    return False


class Head:
    """The final response's head: ``status_code``, ``http_version`` (``"HTTP/1.1"``), ``headers``."""

    __slots__ = ("status_code", "http_version", "headers")

    def __init__(self, status_code: int, http_version: str, headers: Headers) -> None:
        self.status_code = status_code
        self.http_version = http_version
        self.headers = headers


class Data:
    """A piece of the body (de-chunked), in order."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


Event = Head | Data | _Sentinel

# Parser states
_HEAD, _LENGTH, _CHUNK_SIZE_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _CLOSE, _DONE = range(8)


class ResponseParser:
    """One response, parsed from bytes as they arrive.

    Args:
        method: the request's method (a ``HEAD`` response has no body).
        last: the request said ``Connection: close``: the connection ends after this.

    Attributes:
        keep_alive: whether the connection may carry another request once :data:`END`
            was returned (final then; before the head: ``True``).
        eof: a clean EOF was fed.
    """

    __slots__ = ("_method", "_buffer", "_state", "_remaining", "_searched", "keep_alive", "eof")

    def __init__(self, method: str = "GET", *, last: bool = False) -> None:
        self._method = method
        self._buffer = bytearray()
        self._state = _HEAD
        self._remaining = 0
        self._searched = 0
        self.keep_alive = not last
        self.eof = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet handed out (for flow control)."""
        return len(self._buffer)

    @property
    def complete(self) -> bool:
        """:data:`END` was returned."""
        return self._state == _DONE

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes that arrived; ``b""`` is a clean EOF (the server closed)."""
        if data:
            self._buffer += data
        else:
            self.eof = True

    def next_event(self) -> Event:
        """The next event: :class:`Head`, :class:`Data`, :data:`END` or :data:`NEED_DATA`.

        Raises:
            ProtocolViolation: the bytes are not a response this parser accepts; the
                connection must not be used again.
        """
        state = self._state
        if state == _LENGTH:
            return self._length_data()
        if state == _HEAD:
            return self._head()
        if state == _CLOSE:
            if self._buffer:
                return self._take(len(self._buffer))
            if self.eof:
                self._state = _DONE
                return END
            return NEED_DATA
        if state == _DONE:
            return END
        return self._chunked()

    # -- the whole-body fast path ------------------------------------------------------

    def length_body_remaining(self) -> int | None:
        """Bytes of a ``Content-Length`` body still to come, if that is what is next; else
        ``None`` (another framing, or not at the body)."""
        return self._remaining if self._state == _LENGTH else None

    def take_length_body(self, suffix: bytes = b"") -> bytes | None:
        """The rest of a ``Content-Length`` body plus ``suffix`` as one ``bytes``, made in
        one copy, once it is all buffered (the response is then complete); else ``None``."""
        remaining = self._remaining
        buffer = self._buffer
        if self._state != _LENGTH or len(buffer) < remaining:
            return None
        if len(buffer) == remaining:
            buffer += suffix
            body = bytes(buffer)
            buffer.clear()
        else:
            body = bytes(buffer[:remaining]) + suffix
            del buffer[:remaining]
        self._remaining = 0
        self._state = _DONE
        return body

    # -- states ------------------------------------------------------------------------

    def _take(self, most: int) -> Data:
        buffer = self._buffer
        if most >= len(buffer):
            chunk = bytes(buffer)
            buffer.clear()
        else:
            chunk = bytes(buffer[:most])
            del buffer[:most]
        return Data(chunk)

    def _length_data(self) -> Event:
        if not self._remaining:
            self._state = _DONE
            return END
        if not self._buffer:
            return NEED_DATA
        data = self._take(self._remaining)
        self._remaining -= len(data.data)
        return data

    def _head(self) -> Event:
        while True:
            buffer = self._buffer
            searched = self._searched
            end = buffer.find(b"\n\r\n", searched)
            bare_end = buffer.find(b"\n\n", searched, len(buffer) if end < 0 else end + 2)
            if end < 0 and bare_end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise ProtocolViolation(f"the app sent a response head over {MAX_HEAD_BYTES} bytes")
                self._searched = max(0, len(buffer) - 2)
                return NEED_DATA
            cut = bare_end + 2 if bare_end >= 0 else end + 3  # the earlier end of the two
            if cut > MAX_HEAD_BYTES:
                raise ProtocolViolation(f"the app sent a response head over {MAX_HEAD_BYTES} bytes")
            head = buffer[:cut].decode("latin-1")  # one character per byte: what arrived, unchanged
            del buffer[:cut]
            self._searched = 0
            parsed = self._parse_head(head)
            if parsed is not None:
                return parsed
            # an interim 1xx response: the final one follows

    def _parse_head(self, text: str) -> Head | None:
        """The head ``text`` (ISO-8859-1, up to and with its blank line): a final response's
        :class:`Head`, or ``None`` for an interim one."""
        status = _STATUS_LINE.match(text)
        if status is None:
            raise ProtocolViolation("the app's reply does not start with an HTTP/1.x status line")
        minor, code = status.group(1), int(status.group(2))
        fields_start = status.end()
        fields = _FIELD_LINE.findall(text, fields_start - 1)
        if len(fields) + 1 != text.count("\n", fields_start):  # each line a field, but the blank last one
            # Else a line that is no field; or lines of CRs only, skipped (only ever 2 or more CRs:
            # an LF, CR, LF ends the head).
            if "\r\r" not in text or _FIELD_BLOCK.fullmatch(text, fields_start) is None:
                raise ProtocolViolation("the app sent a malformed response field")
        if code < 100 or code == 101:
            raise ProtocolViolation("the app sent a status this client cannot accept")  # 101: never asked for
        if code < 200:
            return None  # RFC 9110 §15.2: interim
        headers = Headers(fields)
        connection = headers.get("connection")
        if connection:  # RFC 9112 §9.3
            tokens = {token.strip() for token in connection.lower().split(",")}
            persistent = "close" not in tokens if minor == "1" else "keep-alive" in tokens
        else:
            persistent = minor == "1"
        self._state, self._remaining = self._framing(headers, code)
        if self._state == _LENGTH and not self._remaining:
            self._state = _DONE  # no body: complete with the head
        elif self._state == _CLOSE:
            persistent = False
        self.keep_alive = self.keep_alive and persistent
        return Head(code, "HTTP/1.1" if minor == "1" else "HTTP/1.0", headers)

    def _framing(self, headers: Headers, code: int) -> tuple[int, int]:
        """RFC 9112 §6.3: how the body's end is known. A ``Content-Length`` is checked
        even where it does not count (as h11 does)."""
        length = headers.get("content-length")
        if length is not None and length.isdigit() and length.isascii():
            value = length  # one plain value, as nearly always
        elif length is not None:
            values = {value.strip() for value in length.split(",")}
            if len(values) != 1:
                raise ProtocolViolation("the app sent differing Content-Length values")
            value = values.pop()
            if not value.isdigit() or not value.isascii():
                raise ProtocolViolation("the app sent an invalid Content-Length")
        if self._method == "HEAD" or code in (204, 304):
            return _LENGTH, 0
        encoding = headers.get("transfer-encoding")
        if encoding is not None:
            if encoding.lower().rsplit(",", 1)[-1].strip() == "chunked":
                return _CHUNK_SIZE_LINE, 0
            return _CLOSE, 0
        if length is not None:
            return _LENGTH, int(value)
        return _CLOSE, 0

    def _line(self, what: str) -> bytes | None:
        """One LF-terminated line without its end (CR stripped), or ``None``: not yet."""
        buffer = self._buffer
        end = buffer.find(b"\n", self._searched)
        if end < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise ProtocolViolation(f"the app sent an overlong line for {what}")
            self._searched = len(buffer)
            return None
        line = bytes(buffer[:end]).rstrip(b"\r")
        del buffer[: end + 1]
        self._searched = 0
        return line

    def _chunked(self) -> Event:
        while True:
            state = self._state
            if state == _CHUNK_DATA:
                if not self._buffer:
                    return NEED_DATA
                data = self._take(self._remaining)
                self._remaining -= len(data.data)
                if not self._remaining:
                    self._state = _CHUNK_END
                return data
            if state == _CHUNK_SIZE_LINE:
                line = self._line("a chunk size")
                if line is None:
                    return NEED_DATA
                match = _CHUNK_SIZE.match(line)
                if match is None:
                    raise ProtocolViolation("the app sent a malformed chunk size line")
                size = int(match.group(1), 16)
                self._remaining = size
                self._state = _CHUNK_DATA if size else _TRAILER
            elif state == _CHUNK_END:
                line = self._line("a chunk's end")
                if line is None:
                    return NEED_DATA
                if line:
                    raise ProtocolViolation("the app sent chunk data longer than its size")
                self._state = _CHUNK_SIZE_LINE
            else:  # _TRAILER: fields are checked, not used; a blank line ends the message
                line = self._line("the trailer")
                if line is None:
                    return NEED_DATA
                if not line:
                    self._state = _DONE
                    return END
                name, colon, value = line.partition(b":")
                if not colon or not _FIELD_NAME.match(name) or _BAD_RECEIVED_VALUE.search(value):
                    raise ProtocolViolation("the app sent a malformed trailer field")
