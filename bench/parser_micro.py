"""Micro-benchmark: parse one typical MCP reply (a 100-byte JSON body, 6 fields, Content-Length).

Compares the bridge's sans-I/O parser (bridge/transport/http1.py) with httptools (llhttp)
and h11 on the same bytes; prints the best of 5 runs in microseconds per response.
Run: python bench/parser_micro.py   (httptools is optional: pip install httptools)
"""

from __future__ import annotations

import timeit

from bridge.transport.http1 import ResponseParser, encode_request_head

BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello world, this is fine."}]}}'
REPLY = (
    b"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 12:00:00 GMT\r\nserver: uvicorn\r\n"
    b"content-type: application/json\r\nmcp-session-id: 0f3c2b1a\r\ncache-control: no-cache\r\n"
    b"content-length: %d\r\n\r\n" % len(BODY)
) + BODY
FIELDS = [
    ("User-Agent", "mcp-app-bridge/1"),
    ("Accept", "application/json, text/event-stream"),
    ("Content-Type", "application/json"),
    ("Mcp-Session-Id", "0f3c2b1a"),
    ("MCP-Protocol-Version", "2025-06-18"),
]


def ours() -> bytes | None:
    parser = ResponseParser("POST")
    parser.receive_data(REPLY)
    head = parser.next_event()
    assert head.headers.get("content-type")  # type: ignore[union-attr]
    return parser.take_length_body(b"\n")


_PARSER = ResponseParser("POST")
_PARSER.receive_data(REPLY)
HEADERS = _PARSER.next_event().headers  # type: ignore[union-attr]


def header_get() -> object:
    """What the bridge asks of a reply's fields: two lowercase names, one spelt as sent."""
    return HEADERS.get("content-type"), HEADERS.get("mcp-session-id"), HEADERS.get("Content-Type")


def encode() -> bytes:
    return encode_request_head("POST", "/mcp", "127.0.0.1:8765", FIELDS, 97)


def best(function: object, number: int = 20_000) -> float:
    return min(timeit.repeat(function, number=number, repeat=5)) / number * 1e6  # type: ignore[arg-type]


def main() -> None:
    print(f"encode_request_head                    {best(encode):6.2f} us")
    print(f"ResponseParser (head + whole body)      {best(ours):6.2f} us")
    print(f"Headers.get x3 (2 lowercase, 1 mixed)   {best(header_get):6.2f} us")
    try:
        import httptools
    except ImportError:
        print("httptools not installed")
    else:

        class Sink:
            def __init__(self) -> None:
                self.fields: list[tuple[bytes, bytes]] = []
                self.body: list[bytes] = []

            def on_header(self, name: bytes, value: bytes) -> None:
                self.fields.append((name, value))

            def on_body(self, body: bytes) -> None:
                self.body.append(body)

        def llhttp() -> bytes:
            sink = Sink()
            parser = httptools.HttpResponseParser(sink)
            parser.feed_data(REPLY)
            return b"".join(sink.body) + b"\n"

        print(f"httptools (llhttp), fields collected    {best(llhttp):6.2f} us")
    import h11

    def with_h11() -> None:
        connection = h11.Connection(h11.CLIENT)
        connection.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "app"), *FIELDS, ("Content-Length", "97")]))
        connection.send(h11.Data(data=b"x" * 97))
        connection.send(h11.EndOfMessage())
        connection.receive_data(REPLY)
        while not isinstance(connection.next_event(), h11.EndOfMessage):
            pass

    print(f"h11 (request + response)               {best(with_h11, 5_000):6.2f} us")


if __name__ == "__main__":
    main()
