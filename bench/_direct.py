"""The floor: a raw keep-alive HTTP/1.1 MCP client on plain sockets, in the benchmark's process.

No HTTP library: one hand-written request line and header block per POST, an incremental
response parser (Content-Length and chunked bodies), and SSE ``data:`` extraction for
servers that answer with ``text/event-stream``. It does what a bridge must do on the HTTP
side (initialize, carry ``mcp-session-id`` and ``mcp-protocol-version``, one POST per
message) and nothing else, so its times are the cost of the server plus loopback.
"""

from __future__ import annotations

import json
import selectors
import socket
import time
from urllib.parse import urlsplit

RECV_BYTES = 1 << 20


class ProtocolError(Exception):
    """The server's answer was not the HTTP this client expects."""


class ResponseParser:
    """Incremental HTTP/1.1 response parser: ``feed`` bytes, collect complete responses."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self._reset()

    def _reset(self) -> None:
        self.state = "head"
        self.status = 0
        self.headers: dict[str, str] = {}
        self.remaining = 0
        self.chunks: list[bytes] = []

    def feed(self, data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
        """Add received bytes; return the responses completed by them (usually zero or one)."""
        self.buf += data
        done: list[tuple[int, dict[str, str], bytes]] = []
        buf = self.buf
        while True:
            if self.state == "head":
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    return done
                lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
                del buf[: end + 4]
                parts = lines[0].split(" ", 2)
                if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
                    raise ProtocolError(f"bad status line {lines[0]!r}")
                self.status = int(parts[1])
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                self.headers = headers
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    self.state = "size"
                else:
                    self.remaining = int(headers.get("content-length", "0"))
                    self.state = "body"
            elif self.state == "body":
                if len(buf) < self.remaining:
                    return done
                body = bytes(buf[: self.remaining])
                del buf[: self.remaining]
                done.append((self.status, self.headers, body))
                self._reset()
            elif self.state == "size":
                end = buf.find(b"\r\n")
                if end < 0:
                    return done
                size = int(bytes(buf[:end]).split(b";", 1)[0], 16)
                del buf[: end + 2]
                if size == 0:
                    self.state = "trailer"
                else:
                    self.remaining = size
                    self.state = "data"
            elif self.state == "data":
                if len(buf) < self.remaining + 2:
                    return done
                self.chunks.append(bytes(buf[: self.remaining]))
                del buf[: self.remaining + 2]
                self.state = "size"
            else:  # trailer: header lines until an empty one
                end = buf.find(b"\r\n")
                if end < 0:
                    return done
                del buf[: end + 2]
                if end == 0:
                    done.append((self.status, self.headers, b"".join(self.chunks)))
                    self._reset()


def sse_message(body: bytes) -> bytes:
    """The last non-empty ``data:`` payload of an SSE body (the JSON-RPC reply)."""
    last = b""
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") if line.startswith(b"data:") else None for line in event.split(b"\n")]
        payload = b"\n".join(d for d in data if d is not None)
        if payload:
            last = payload
    return last


class DirectClient:
    """One MCP session over up to ``connections`` keep-alive sockets (the first serves the
    sequential calls; all of them serve the pipelined phase, one request each at a time)."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError("loopback only")
        self.addr = (parts.hostname, parts.port or 80)
        self.path = parts.path or "/"
        self.host = parts.netloc
        self.timeout = timeout
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.socks: list[socket.socket] = []
        self.parsers: list[ResponseParser] = []

    def _connect(self) -> None:
        sock = socket.create_connection(self.addr, timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socks.append(sock)
        self.parsers.append(ResponseParser())

    def _head(self, length: int) -> bytes:
        extra = ""
        if self.session_id is not None:
            extra += f"mcp-session-id: {self.session_id}\r\n"
        if self.protocol_version is not None:
            extra += f"mcp-protocol-version: {self.protocol_version}\r\n"
        return (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {length}\r\n{extra}\r\n"
        ).encode("latin-1")

    @staticmethod
    def _message(status: int, headers: dict[str, str], body: bytes) -> bytes:
        if status == 202:
            return b""
        if status != 200:
            raise ProtocolError(f"HTTP {status}: {body[:200]!r}")
        if headers.get("content-type", "").startswith("text/event-stream"):
            return sse_message(body)
        return body

    def _roundtrip(self, index: int, line: bytes) -> tuple[int, dict[str, str], bytes]:
        sock, parser = self.socks[index], self.parsers[index]
        body = line.rstrip(b"\n")
        sock.sendall(self._head(len(body)) + body)
        while True:
            data = sock.recv(RECV_BYTES)
            if not data:
                raise ProtocolError("connection closed by the server")
            done = parser.feed(data)
            if done:
                return done[0]

    def initialize(self, line: bytes, initialized: bytes) -> bytes:
        """Connect, POST ``initialize``, keep the session, POST ``notifications/initialized``;
        returns the ``initialize`` reply (timed by the caller up to here: cold start)."""
        self._connect()
        status, headers, body = self._roundtrip(0, line)
        reply = self._message(status, headers, body)
        self.session_id = headers.get("mcp-session-id")
        self.protocol_version = json.loads(reply)["result"]["protocolVersion"]
        self._message(*self._roundtrip(0, initialized))
        return reply

    def call(self, line: bytes) -> bytes:
        """One request on the first connection; returns the JSON-RPC reply bytes."""
        return self._message(*self._roundtrip(0, line))

    def pipelined(self, lines: list[bytes], in_flight: int, deadline: float) -> list[bytes]:
        """Send ``lines`` with ``in_flight`` requests outstanding (one per connection)."""
        while len(self.socks) < in_flight:
            self._connect()
        replies: list[bytes] = []
        selector = selectors.DefaultSelector()
        following = iter(lines)
        pending = len(lines)

        def send(index: int) -> bool:
            line = next(following, None)
            if line is None:
                return False
            body = line.rstrip(b"\n")
            self.socks[index].sendall(self._head(len(body)) + body)
            return True

        try:
            for index in range(in_flight):
                self.socks[index].setblocking(False)
                selector.register(self.socks[index], selectors.EVENT_READ, index)
                send(index)
            while pending:
                events = selector.select(timeout=max(0.0, deadline - time.perf_counter()))
                if not events:
                    raise TimeoutError("pipelined phase timed out")
                for key, _ in events:
                    index = key.data
                    data = key.fileobj.recv(RECV_BYTES)  # type: ignore[union-attr]
                    if not data:
                        raise ProtocolError("connection closed by the server")
                    for response in self.parsers[index].feed(data):
                        replies.append(self._message(*response))
                        pending -= 1
                        send(index)
        finally:
            selector.close()
            for sock in self.socks:
                sock.setblocking(True)
                sock.settimeout(self.timeout)
        return replies

    def close(self) -> None:
        """DELETE the session (as a bridge does at EOF), then close the sockets."""
        if self.session_id is not None and self.socks:
            try:
                head = self._head(0).replace(b"POST ", b"DELETE ", 1)
                self.socks[0].sendall(head)
                self.parsers[0].feed(self.socks[0].recv(RECV_BYTES))
            except OSError:
                pass
        for sock in self.socks:
            sock.close()
        self.socks.clear()
