"""A seeded stdin fuzz through a real Bridge (its own HTTP/1.1 client, a scripted app on
127.0.0.1): random bytes, near-valid JSON-RPC mutations, huge and deep values, byte order
marks mid-stream, CRLF, blank and over-long lines, mixed batches.

The invariants, whatever the input: every stdout line is valid JSON-RPC 2.0; every request
the fuzzer meant to be valid gets exactly one reply carrying its id (same type, same
value), alone or inside its batch's array; notifications get none; and the bridge never
exits (it answers a ping at the end). Reproducible: each seed gives the same input.
"""

from __future__ import annotations

import json
import random
from typing import Any

import anyio
import pytest
from support.helpers import request_line, running_bridge
from support.mcp_app import McpApp
from support.scripted import WAIT, serve

from bridge.core.jsonrpc import message_problem

pytestmark = pytest.mark.anyio

MAX_MESSAGE_BYTES = 256 * 1024




class Fuzzer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.expected: list[Any] = []  # ids that must be answered exactly once
        self.serial = 0

    def new_id(self) -> Any:
        """A fresh id for a valid request: an int or a string (non-ASCII and escapes too)."""
        self.serial += 1
        choice = self.rng.randrange(4)
        if choice == 0:
            return 10**6 + self.serial
        if choice == 1:
            return -(10**18) - self.serial  # beyond 32 bits, negative
        if choice == 2:
            return f"r-{self.serial}-é✓\u2028"
        return f"r-{self.serial}"

    def junk_id(self) -> str:
        self.serial += 1
        return f"m-{self.serial}"

    def request(self, request_id: Any, *, big: bool = False, deep: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"name": "echo", "arguments": {"n": self.rng.randrange(1000)}}
        if big:
            params["arguments"]["text"] = "x" * self.rng.randrange(50_000, 200_000)
        if deep:
            value: Any = "bottom"
            for _ in range(self.rng.randrange(20, 200)):
                value = [value]
            params["arguments"]["deep"] = value
        return {"jsonrpc": "2.0", "id": request_id, "method": self.rng.choice(["tools/call", "ping", "tools/list"]), "params": params}

    def notification(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": "notifications/fuzz", "params": {"n": self.rng.randrange(1000)}}

    def dumps(self, value: Any) -> bytes:
        ascii_only = self.rng.random() < 0.3
        spaced = self.rng.random() < 0.2
        return json.dumps(value, ensure_ascii=ascii_only, separators=(", ", ": ") if spaced else (",", ":")).encode()

    def valid_request_line(self) -> bytes:
        request_id = self.new_id()
        self.expected.append(request_id)
        r = self.rng.random()
        return self.dumps(self.request(request_id, big=r < 0.05, deep=0.05 <= r < 0.1))

    def mutated_line(self) -> bytes:
        text = bytearray(self.dumps(self.request(self.junk_id())))
        for _ in range(self.rng.randrange(1, 4)):
            kind = self.rng.randrange(6)
            at = self.rng.randrange(len(text))
            if kind == 0:
                del text[at]
            elif kind == 1:
                text.insert(at, self.rng.choice(b'{}[],:"\\0123456789 ntfe\x00\xff'))
            elif kind == 2:
                text[at] = self.rng.randrange(256)
            elif kind == 3:
                text[at:at] = text[at : at + self.rng.randrange(1, 20)]
            elif kind == 4:
                text = bytearray(text.replace(b'"2.0"', self.rng.choice([b'"1.0"', b"2.0", b"null", b'"2.0 "'])))
            else:
                field = self.rng.choice([b'"id":', b'"method":', b'"params":'])
                start = text.find(field)
                if start >= 0:
                    end = start + len(field)
                    text[end:end] = self.rng.choice([b"1.5,", b"true,", b"null,", b"{},", b"[],", b'"x",', b"1e400,"])
                    # (the old value follows: a duplicate key or a syntax error, either way)
        return bytes(text).replace(b"\n", b" ").replace(b"\r", b" ")

    def batch_line(self) -> bytes:
        items: list[Any] = []
        for _ in range(self.rng.randrange(0, 6)):
            r = self.rng.random()
            if r < 0.4:
                request_id = self.new_id()
                self.expected.append(request_id)
                items.append(self.request(request_id))
            elif r < 0.6:
                items.append(self.notification())
            elif r < 0.7:
                items.append({"jsonrpc": "2.0", "id": self.junk_id(), "result": {}})  # a client response
            else:
                items.append(self.rng.choice([1, "x", None, [], {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": self.junk_id()}]))
        return self.dumps(items)

    def line(self) -> bytes:
        r = self.rng.random()
        if r < 0.3:
            line = self.valid_request_line()
        elif r < 0.4:
            line = self.dumps(self.notification())
        elif r < 0.6:
            line = self.mutated_line()
        elif r < 0.7:
            line = self.batch_line()
        elif r < 0.75:
            line = bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 200))).replace(b"\n", b"")
        elif r < 0.8:
            line = b"\xef\xbb\xbf" + self.dumps(self.request(self.junk_id()))  # a BOM mid-stream
        elif r < 0.83:
            line = b"[" * self.rng.randrange(1000, 100_000)  # deep, and not even closed
        elif r < 0.85:
            request_id = self.new_id()  # over-long: refused with its id read from the head
            self.expected.append(request_id)
            line = self.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"t": "y" * MAX_MESSAGE_BYTES}})
        elif r < 0.9:
            line = self.rng.choice([b"", b" ", b"\t", b"null", b"[]", b"{}", b"1", b'"text"', b"[[]]", b"[1,2]"])
        else:
            line = self.valid_request_line()
        return line + (b"\r\n" if self.rng.random() < 0.1 else b"\n")


def items_of(line: bytes) -> list[Any]:
    value = json.loads(line)
    if isinstance(value, list):
        assert value, "an empty array on stdout"
        return value
    return [value]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_stdin_fuzz_keeps_the_contract(seed: int) -> None:
    fuzzer = Fuzzer(seed)
    data = b"".join(fuzzer.line() for _ in range(300))
    rng = random.Random(seed)
    async with serve(McpApp(stateless=True).wire) as server, running_bridge(
        url=server.url(), max_message_bytes=MAX_MESSAGE_BYTES, max_concurrent_requests=4
    ) as run:
        position = 0
        while position < len(data):  # in chunks cut anywhere
            size = rng.choice([1, 7, 100, 4096, 65536])
            run.stdin.feed(data[position : position + size])
            position += size
            if rng.random() < 0.05:
                await anyio.sleep(0)
        run.stdin.feed(request_line("final-ping", "ping"))
        key = lambda value: (type(value), value)  # noqa: E731  (1 and "1" differ)
        wanted = {key(i) for i in fuzzer.expected} | {key("final-ping")}
        with anyio.fail_after(WAIT * 3):
            while not wanted <= {key(item.get("id")) for line in run.stdout.lines for item in items_of(line)}:
                await anyio.sleep(0.02)
        await anyio.sleep(0.1)
        assert run.exit_status is None, "the bridge exited"
        counts: dict[Any, int] = {}
        for line in run.stdout.lines:
            for item in items_of(line):
                assert message_problem(item) is None, item
                counts[key(item.get("id"))] = counts.get(key(item.get("id")), 0) + 1
        assert {k: n for k, n in counts.items() if k in wanted and n != 1} == {}
    assert len(fuzzer.expected) > 50


@pytest.mark.parametrize("seed", [4, 5])
async def test_notifications_in_any_form_get_no_reply(seed: int) -> None:
    """Notifications alone, in batches of notifications, with BOM-free odd spacing, CRLF and
    cut anywhere: nothing reaches stdout but the final ping's reply."""
    fuzzer = Fuzzer(seed)
    rng = random.Random(seed)
    lines = []
    total = 0
    for _ in range(200):
        items = [fuzzer.notification() for _ in range(rng.randrange(1, 5))]
        if rng.random() < 0.3:
            line = fuzzer.dumps(items)
        else:
            line, items = fuzzer.dumps(items[0]), items[:1]
        total += len(items)
        lines.append(line + rng.choice([b"\n", b"\r\n", b"\n\n"]))
    data = b"".join(lines)
    async with serve(McpApp(stateless=True).wire) as server, running_bridge(url=server.url()) as run:
        for position in range(0, len(data), 997):
            run.stdin.feed(data[position : position + 997])
        run.stdin.feed(request_line("final-ping", "ping"))
        (reply,) = await run.replies(1)
        await server.wait_for(lambda: len(server.posts("notifications/fuzz")) == total)  # all delivered
        await anyio.sleep(0.1)
        assert reply["id"] == "final-ping" and len(run.stdout.lines) == 1
