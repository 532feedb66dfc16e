"""The stdio ends (``bridge/stdio/fds.py``) on real descriptors: pipes, socket pairs, regular files,
``/dev/null`` and terminals (pseudo-terminals), no mocks.

What a client notices: every byte it writes reaches the bridge, whole and in order, however it
is chunked, followed by EOF; every line the bridge writes reaches the client whole and in order,
including lines larger than ``PIPE_BUF`` and lines written while the client is not reading; a
client that goes away is seen as ``OSError``, never as a hang. Waits are bounded (``WAIT``);
nothing here asserts speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import select
import socket
import struct
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from support.helpers import URL, event, request_line, sse

from bridge.core.config import BridgeConfig
from bridge.serve.loop import Bridge
from bridge.stdio.fds import DEFAULT_READ_BYTES, MAX_READ_BYTES, WIRE_PIPE_BYTES, FdReader, FdWriter, _grow_pipe

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.posix_only("POSIX descriptors (pipes, socket pairs, ptys)"),
]
# mypy --platform reads this too: the rest of the module is POSIX code.
if sys.platform == "win32":
    pytest.skip('POSIX descriptors (pipes, socket pairs, ptys)', allow_module_level=True)

WAIT = 10.0
"""Upper bound, in seconds, on any wait (never a speed assertion)."""

PIPE_BUF = getattr(select, "PIPE_BUF", 512)




# -- descriptors ---------------------------------------------------------------------------------


class Fds:
    """Descriptors opened by one test; whatever the test did not close is closed at teardown."""

    def __init__(self) -> None:
        self._open: set[int] = set()
        self._lock = threading.Lock()

    def adopt(self, *fds: int) -> None:
        with self._lock:
            self._open.update(fds)

    def pipe(self, grow: bool = False) -> tuple[int, int]:
        read_fd, write_fd = os.pipe()
        self.adopt(read_fd, write_fd)
        if grow:
            _grow_pipe(write_fd)
        return read_fd, write_fd

    def socketpair(self) -> tuple[int, int]:
        a, b = socket.socketpair()
        read_fd, write_fd = a.detach(), b.detach()
        self.adopt(read_fd, write_fd)
        return read_fd, write_fd

    def pty(self, raw: bool = True) -> tuple[int, int]:
        """``(master, slave)`` of a pseudo-terminal; raw: no echo, no line editing, no output processing."""
        import tty

        master, slave = os.openpty()
        self.adopt(master, slave)
        if raw:
            tty.setraw(slave)
        return master, slave

    def close(self, fd: int) -> None:
        """Close ``fd`` once (safe to call twice, and from a thread)."""
        with self._lock:
            if fd not in self._open:
                return
            self._open.discard(fd)
        os.close(fd)

    def close_all(self) -> None:
        for fd in list(self._open):
            self.close(fd)


@pytest.fixture
def fds() -> Iterator[Fds]:
    opened = Fds()
    try:
        yield opened
    finally:
        opened.close_all()


KINDS = ["pipe", "socketpair"]


def make(fds: Fds, kind: str) -> tuple[int, int]:
    return fds.pipe() if kind == "pipe" else fds.socketpair()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def writer_thread(fds: Fds, fd: int, pieces: list[bytes], *, close: bool = True) -> threading.Thread:
    """Write ``pieces`` to ``fd`` one write each (then close it: EOF) in a daemon thread."""

    def run() -> None:
        try:
            for piece in pieces:
                write_all(fd, piece)
        except OSError:
            pass  # the test failed and closed the other end; its assertions say why
        finally:
            if close:
                fds.close(fd)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@dataclass
class Collector:
    """Everything read from a descriptor, once :meth:`go` was called, by a daemon thread until EOF."""

    fd: int
    read_bytes: int = 65536
    data: bytearray = field(default_factory=bytearray)
    thread: threading.Thread | None = None

    def go(self) -> Collector:
        """Start reading (until then the descriptor is left unread: a client that is busy)."""
        if self.thread is None:

            def run() -> None:
                try:
                    while chunk := os.read(self.fd, self.read_bytes):
                        self.data.extend(chunk)
                except OSError:
                    pass

            self.thread = threading.Thread(target=run, daemon=True)
            self.thread.start()
        return self

    def finish(self) -> bytes:
        """Wait (bounded) for EOF; every write end must be closed by now."""
        self.go()
        assert self.thread is not None
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the reading end never saw EOF"
        return bytes(self.data)

    async def wait_for_lines(self, count: int) -> None:
        """Wait (bounded) until ``count`` newlines have arrived."""
        for _ in range(int(WAIT / 0.01)):
            if self.data.count(b"\n") >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{count} lines expected, got {bytes(self.data)[:300]!r}")


async def receive_all(reader: FdReader) -> list[bytes]:
    """Every chunk until ``b""`` (each receive bounded by ``WAIT``)."""
    chunks: list[bytes] = []
    while chunk := await asyncio.wait_for(reader.receive(), WAIT):
        chunks.append(chunk)
    return chunks


def unread_bytes(fd: int) -> int:
    """Bytes waiting in a pipe or socket (``FIONREAD``)."""
    import fcntl
    import termios

    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


def fill(fd: int, sizes: tuple[int, ...] = (65536, 4096, 1)) -> int:
    """Write into ``fd`` until it takes no more (nobody reads); return how many bytes went."""
    os.set_blocking(fd, False)
    total = 0
    try:
        for size in sizes:
            with contextlib.suppress(BlockingIOError):
                while True:
                    total += os.write(fd, b"f" * size)
    finally:
        os.set_blocking(fd, True)
    return total


def in_thread(func: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run a call that might block in a daemon thread; the list gets its result or exception."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(func())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# -- FdReader: input arrives whole, in order, then EOF -------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_input_written_in_many_small_pieces_arrives_complete_and_in_order(fds: Fds, kind: str) -> None:
    """A client writing a line in dribs and drabs: the bridge sees every byte once, in order, then EOF."""
    read_fd, write_fd = make(fds, kind)
    rng = random.Random(7)
    pieces = [bytes([65 + i % 26]) * rng.randint(1, 300) + (b"\n" if i % 5 == 0 else b"") for i in range(3000)]
    reader = FdReader(read_fd)
    thread = writer_thread(fds, write_fd, pieces)
    chunks = await receive_all(reader)
    thread.join(WAIT)
    assert b"".join(chunks) == b"".join(pieces)
    assert all(chunks)  # never an empty chunk before EOF
    assert await reader.receive() == b""


async def test_pieces_written_between_receives_each_arrive_as_soon_as_written(fds: Fds) -> None:
    """A message is seen as soon as its bytes arrive: no read waits for a full buffer."""
    read_fd, write_fd = fds.pipe()
    reader = FdReader(read_fd)
    for piece in (b"{", b'"id":1', b"}\n", b"x" * 5000 + b"\n"):
        os.write(write_fd, piece)
        received = b""
        while len(received) < len(piece):
            received += await asyncio.wait_for(reader.receive(), WAIT)
        assert received == piece
    fds.close(write_fd)
    assert await asyncio.wait_for(reader.receive(), WAIT) == b""


@pytest.mark.parametrize("kind", ["pipe", "grown pipe", "socketpair"])
async def test_eight_mib_of_input_arrives_intact_and_eof_follows(fds: Fds, kind: str) -> None:
    """A huge message (8 MiB, written by another thread) arrives byte for byte; chunks stay ≤ 1 MiB."""
    read_fd, write_fd = fds.socketpair() if kind == "socketpair" else fds.pipe(grow=kind == "grown pipe")
    data = os.urandom(8 * 1024 * 1024 - 3) + b"\n"
    reader = FdReader(read_fd)
    thread = writer_thread(fds, write_fd, [data[i : i + 1_000_000] for i in range(0, len(data), 1_000_000)])
    chunks = await receive_all(reader)
    thread.join(WAIT)
    assert hashlib.sha256(b"".join(chunks)).hexdigest() == hashlib.sha256(data).hexdigest()
    assert max(len(chunk) for chunk in chunks) <= MAX_READ_BYTES
    assert [await reader.receive() for _ in range(3)] == [b"", b"", b""]


@pytest.mark.linux_only("F_GETPIPE_SZ")
async def test_reads_grow_while_they_come_back_full_and_drop_back_when_short(fds: Fds) -> None:
    """A large message is taken in growing reads (never over 1 MiB); the next small one starts small again."""
    if sys.platform != "linux":  # its marker skips it first; this tells mypy --platform
        pytest.skip("F_GETPIPE_SZ: Linux only")
    import fcntl

    read_fd, write_fd = fds.pipe(grow=True)
    capacity = fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ)
    if capacity < 6 * DEFAULT_READ_BYTES:
        pytest.skip(f"this system keeps pipes at {capacity} bytes")
    first = os.urandom(min(capacity, MAX_READ_BYTES) - 1000)
    write_all(write_fd, first)  # fits in the pipe: nothing blocks
    reader = FdReader(read_fd)
    sizes = []
    received = b""
    while len(received) < len(first):
        chunk = await asyncio.wait_for(reader.receive(), WAIT)
        sizes.append(len(chunk))
        received += chunk
    assert received == first
    assert sizes[:2] == [DEFAULT_READ_BYTES, 4 * DEFAULT_READ_BYTES]  # full reads: ×4
    assert sizes[-1] < MAX_READ_BYTES and max(sizes) <= MAX_READ_BYTES
    second = b"y" * (DEFAULT_READ_BYTES + 10)
    write_all(write_fd, second)
    assert len(await asyncio.wait_for(reader.receive(), WAIT)) == DEFAULT_READ_BYTES  # small reads again
    fds.close(write_fd)
    assert b"".join(await receive_all(reader)) == second[DEFAULT_READ_BYTES:]


async def test_input_nobody_takes_is_left_in_the_pipe(fds: Fds) -> None:
    """The bridge reads at most a little ahead of what it handles: a flood waits in the pipe (backpressure)."""
    read_fd, write_fd = fds.pipe()
    reader = FdReader(read_fd, read_bytes=1024)
    os.write(write_fd, b"a")
    assert await asyncio.wait_for(reader.receive(), WAIT) == b"a"
    flood = bytes(range(256)) * 128  # 32 KiB: fits in the pipe
    write_all(write_fd, flood)
    for _ in range(20):
        await asyncio.sleep(0.005)  # the loop runs; nobody calls receive()
    assert unread_bytes(read_fd) > 0
    fds.close(write_fd)
    assert b"".join(await receive_all(reader)) == flood


async def test_regular_file_input_is_read_fully(fds: Fds) -> None:
    """stdin redirected from a file (``bridge < requests.jsonl``): all of it, then EOF."""
    data = b"".join(request_line(i) for i in range(20_000)) + b"tail without newline"
    with tempfile.TemporaryFile() as file:
        file.write(data)
        file.flush()
        file.seek(0)
        reader = FdReader(file.fileno())
        chunks = await receive_all(reader)
    assert b"".join(chunks) == data
    assert len(chunks) > 1
    assert await reader.receive() == b""


async def test_dev_null_input_is_eof_at_once() -> None:
    """``bridge < /dev/null``: EOF on the first receive, and on every later one."""
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        reader = FdReader(fd)
        assert [await asyncio.wait_for(reader.receive(), WAIT) for _ in range(3)] == [b"", b"", b""]
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", KINDS)
async def test_receive_after_eof_keeps_returning_empty(fds: Fds, kind: str) -> None:
    """EOF is final: every later receive is ``b""`` at once."""
    read_fd, write_fd = make(fds, kind)
    os.write(write_fd, b'{"jsonrpc":"2.0","method":"x"}')
    fds.close(write_fd)
    reader = FdReader(read_fd)
    assert await receive_all(reader) == [b'{"jsonrpc":"2.0","method":"x"}']
    assert [await asyncio.wait_for(reader.receive(), WAIT) for _ in range(5)] == [b""] * 5


async def test_terminal_input_arrives_and_a_closed_terminal_is_eof(fds: Fds) -> None:
    """stdin on a terminal: typed bytes arrive; a terminal that goes away (hang-up) is EOF."""
    master, slave = fds.pty()
    reader = FdReader(slave)
    os.write(master, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    received = b""
    while not received.endswith(b"\n"):
        received += await asyncio.wait_for(reader.receive(), WAIT)
    assert received == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    fds.close(master)
    assert await asyncio.wait_for(reader.receive(), WAIT) == b""
    assert await reader.receive() == b""


async def test_ctrl_d_on_a_terminal_ends_input_for_good(fds: Fds) -> None:
    """A user types a request, then Ctrl-D: EOF, and text typed after it is never read as input."""
    master, slave = fds.pty(raw=False)
    reader = FdReader(slave)
    os.write(master, b"{}\n")
    assert await asyncio.wait_for(reader.receive(), WAIT) == b"{}\n"
    os.write(master, b"\x04")  # VEOF at the start of a line: read() returns 0
    assert await asyncio.wait_for(reader.receive(), WAIT) == b""
    os.write(master, b"typed later\n")
    await asyncio.sleep(0.05)
    assert [await asyncio.wait_for(reader.receive(), WAIT) for _ in range(3)] == [b"", b"", b""]


async def test_a_connection_reset_on_stdin_is_eof(fds: Fds) -> None:
    """stdin is a TCP connection (inetd, socat) that the peer resets: a read error counts as EOF."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    read_fd = accepted.detach()
    fds.adopt(read_fd)
    reader = FdReader(read_fd)
    client.sendall(b"partial")
    assert await asyncio.wait_for(reader.receive(), WAIT) == b"partial"
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # RST: the next read fails with ECONNRESET
    assert await asyncio.wait_for(reader.receive(), WAIT) == b""
    assert await reader.receive() == b""


async def test_an_unreadable_stdin_is_eof(tmp_path: Path) -> None:
    """A descriptor that cannot be read at all (a directory here): EOF, not an exception."""
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        reader = FdReader(fd)
        assert await asyncio.wait_for(reader.receive(), WAIT) == b""
        assert await reader.receive() == b""
    finally:
        os.close(fd)


# -- FdReader: a cancelled receive loses nothing ---------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelled_receive_leaves_the_reader_usable(fds: Fds, kind: str) -> None:
    """A receive cancelled while waiting (e.g. a timeout around it): later input still arrives, then EOF."""
    read_fd, write_fd = make(fds, kind)
    reader = FdReader(read_fd)
    waiting = asyncio.ensure_future(reader.receive())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    os.write(write_fd, b"after the cancel\n")
    assert await asyncio.wait_for(reader.receive(), WAIT) == b"after the cancel\n"
    # And again: a timeout around receive() is harmless, repeatedly.
    for _ in range(3):
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(reader.receive(), 0.01)
    os.write(write_fd, b"second\n")
    fds.close(write_fd)
    assert b"".join(await receive_all(reader)) == b"second\n"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("turns", [0, 1, 2, 3, 5])
async def test_input_that_arrives_around_a_cancelled_receive_is_not_lost(fds: Fds, kind: str, turns: int) -> None:
    """Whenever the cancel lands (before, during or after the read), the bytes go to the next receive."""
    read_fd, write_fd = make(fds, kind)
    reader = FdReader(read_fd, read_bytes=8)
    waiting = asyncio.ensure_future(reader.receive())
    await asyncio.sleep(0)
    os.write(write_fd, b"0123456789abcdef-and-more")
    for _ in range(turns):
        await asyncio.sleep(0)
    waiting.cancel()
    first = b""
    with contextlib.suppress(asyncio.CancelledError):
        first = await waiting
    fds.close(write_fd)
    assert first + b"".join(await receive_all(reader)) == b"0123456789abcdef-and-more"


async def test_a_cancelled_receive_on_the_thread_path_loses_no_input() -> None:
    """stdin from a file (the daemon-thread path): a receive cancelled mid-read must not lose its bytes."""
    with tempfile.TemporaryFile() as file:
        file.write(b"abcdefgh")
        file.flush()
        file.seek(0)
        reader = FdReader(file.fileno(), read_bytes=4)
        waiting = asyncio.ensure_future(reader.receive())
        await asyncio.sleep(0)  # the read is handed to the thread
        waiting.cancel()
        first = b""
        with contextlib.suppress(asyncio.CancelledError):
            first = await waiting
        assert first + b"".join(await receive_all(reader)) == b"abcdefgh"


# -- FdWriter: lines arrive whole and in order ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_small_lines_arrive_in_order(fds: Fds, kind: str) -> None:
    """Many small replies: each arrives once, whole, in the order written."""
    read_fd, write_fd = make(fds, kind)
    collector = Collector(read_fd).go()
    writer = FdWriter(write_fd)
    lines = [request_line(i, "tools/call", {"n": "x" * (i % 700)}) for i in range(2000)]
    for line in lines:
        await asyncio.wait_for(writer.send(line), WAIT)
    fds.close(write_fd)
    assert collector.finish() == b"".join(lines)


async def test_write_now_writes_a_small_line_at_once(fds: Fds) -> None:
    """A line of at most ``PIPE_BUF`` bytes to a pipe with room goes out whole, at once."""
    read_fd, write_fd = fds.pipe()
    writer = FdWriter(write_fd)
    line = b"x" * (PIPE_BUF - 1) + b"\n"
    assert writer.write_now(line) == len(line)
    assert os.read(read_fd, 2 * PIPE_BUF) == line


async def test_a_line_larger_than_pipe_buf_goes_through_intact(fds: Fds) -> None:
    """A large reply (several times the pipe's buffer) arrives whole; write_now never writes part of it."""
    read_fd, write_fd = fds.pipe()
    writer = FdWriter(write_fd)
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": "é" * 150_000}}).encode() + b"\n"
    assert writer.write_now(line) == 0
    assert writer.write_now(b"x" * (PIPE_BUF + 1)) == 0
    assert unread_bytes(read_fd) == 0  # nothing half-written
    collector = Collector(read_fd).go()
    await asyncio.wait_for(writer.send(line), WAIT)
    await asyncio.wait_for(writer.send(b"next\n"), WAIT)
    fds.close(write_fd)
    assert collector.finish() == line + b"next\n"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_full_pipe_defers_writes_until_the_client_reads(fds: Fds, kind: str) -> None:
    """A client that stopped reading: write_now returns 0 at once, send waits, and all of it arrives later."""
    read_fd, write_fd = make(fds, kind)
    filled = fill(write_fd)
    writer = FdWriter(write_fd)
    thread, outcome = in_thread(lambda: writer.write_now(b'{"jsonrpc":"2.0","id":1,"result":{}}\n'))
    thread.join(WAIT)
    assert not thread.is_alive(), "write_now blocked on a full pipe"
    assert outcome == [0]
    sending = asyncio.ensure_future(writer.send(b"tail\n"))
    for _ in range(10):
        await asyncio.sleep(0.005)
    assert not sending.done()  # nobody reads: it waits (in its thread, not on the loop)
    collector = Collector(read_fd).go()
    await asyncio.wait_for(sending, WAIT)
    fds.close(write_fd)
    assert collector.finish() == b"f" * filled + b"tail\n"


async def test_a_big_line_then_small_lines_arrive_in_order_to_a_slow_reader(fds: Fds) -> None:
    """1 MiB (the thread path) followed at once by small lines (the fast path): the order is kept."""
    read_fd, write_fd = fds.pipe()
    collector = Collector(read_fd, read_bytes=4096)
    writer = FdWriter(write_fd)
    big = b"[" + b"1," * (512 * 1024) + b"0]\n"
    small = [request_line(i) for i in range(50)]
    sending = asyncio.ensure_future(writer.send(big))
    await asyncio.sleep(0.01)
    collector.go()  # the reader starts late and reads 4 KiB at a time
    await asyncio.wait_for(sending, WAIT)
    for line in small:
        await asyncio.wait_for(writer.send(line), WAIT)
    fds.close(write_fd)
    assert collector.finish() == big + b"".join(small)


@pytest.mark.parametrize("kind", KINDS)
async def test_writing_to_a_closed_reader_raises_oserror(fds: Fds, kind: str) -> None:
    """The client went away: send and write_now raise OSError (BrokenPipeError for a pipe), never hang."""
    read_fd, write_fd = make(fds, kind)
    writer = FdWriter(write_fd)
    fds.close(read_fd)
    with pytest.raises(OSError) as small:
        await asyncio.wait_for(writer.send(b"small\n"), WAIT)
    with pytest.raises(OSError):
        writer.write_now(b"small\n")
    with pytest.raises(OSError):
        await asyncio.wait_for(writer.send(b"x" * 1_000_000 + b"\n"), WAIT)
    if kind == "pipe":
        assert isinstance(small.value, BrokenPipeError)


async def test_a_full_pipe_whose_reader_leaves_raises_instead_of_hanging(fds: Fds) -> None:
    """A client that stopped reading and then exited: the waiting send ends with BrokenPipeError."""
    read_fd, write_fd = fds.pipe()
    fill(write_fd)
    writer = FdWriter(write_fd)
    sending = asyncio.ensure_future(writer.send(b"x" * 100_000 + b"\n"))
    await asyncio.sleep(0.01)
    fds.close(read_fd)
    with pytest.raises(BrokenPipeError):
        await asyncio.wait_for(sending, WAIT)
    with pytest.raises(BrokenPipeError):
        writer.write_now(b"x\n")


async def test_write_now_to_a_terminal_that_is_nearly_full_does_not_block(fds: Fds) -> None:
    """stdout on a terminal whose output backs up: write_now must not block (it runs on the event loop)."""
    master, slave = fds.pty()
    for _ in range(3):  # the terminal moves bytes along asynchronously: top it up until it stays full
        fill(slave, (4096, 256, 1))
        await asyncio.sleep(0.005)
    writer = FdWriter(slave)
    poll = select.poll()
    poll.register(slave, select.POLLOUT)
    for _ in range(1000):  # the terminal reads a little: some room, less than PIPE_BUF
        if poll.poll(0):
            break
        os.read(master, 64)
        await asyncio.sleep(0.002)
    assert poll.poll(0)
    thread, outcome = in_thread(lambda: writer.write_now(b"y" * (PIPE_BUF - 1) + b"\n"))
    thread.join(2)
    blocked = thread.is_alive()
    os.set_blocking(master, False)
    for _ in range(10_000):  # let a blocked write finish before the descriptors close
        if not thread.is_alive():
            break
        with contextlib.suppress(BlockingIOError):
            os.read(master, 65536)
        thread.join(0.001)
    assert not blocked, "write_now blocked the event loop"


# -- the bridge's stdout: whole lines, in order --------------------------------------------------


def app_handler(on_request: Callable[[dict[str, Any]], httpx.Response]) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return httpx.Response(405)
        message = json.loads(request.content)
        if "id" in message and "method" in message:
            return on_request(message)
        return httpx.Response(202)

    return handle


@dataclass
class PipedBridge:
    bridge: Bridge
    stdin_fd: int
    stdout: Collector
    stdout_write_fd: int
    run: asyncio.Future[int]

    def stdout_is_full(self) -> bool:
        """Whether the bridge's stdout pipe takes no more (the client is not reading)."""
        poll = select.poll()
        poll.register(self.stdout_write_fd, select.POLLOUT)
        return not poll.poll(0)


@contextlib.asynccontextmanager
async def piped_bridge(
    fds: Fds, handler: Callable[[httpx.Request], httpx.Response], *, read_stdout: bool = True
) -> AsyncIterator[PipedBridge]:
    """A Bridge on real pipes (FdReader stdin, FdWriter stdout), its app a respx side effect.

    stdout is read by ``piped.stdout`` (from the start, unless ``read_stdout`` is false). On
    exit stdin is closed (EOF), the bridge must finish within ``WAIT``, and stdout is closed."""
    in_read, in_write = fds.pipe()
    out_read, out_write = fds.pipe()
    router = respx.MockRouter(assert_all_called=False)
    router.route(host="127.0.0.1").mock(side_effect=handler)

    async def app_down(url: str) -> bool:
        return False

    async with httpx.MockTransport(router.async_handler) as transport:
        bridge = Bridge(
            BridgeConfig(url=URL),
            stdin=FdReader(in_read),
            stdout=FdWriter(out_write),
            http_transport=transport,
            app_probe=app_down,
        )
        piped = PipedBridge(bridge, in_write, Collector(out_read), out_write, asyncio.ensure_future(bridge.run()))
        if read_stdout:
            piped.stdout.go()
        try:
            yield piped
        finally:
            fds.close(in_write)
            await asyncio.wait_for(piped.run, WAIT)
            fds.close(out_write)


def lines_of(data: bytes) -> list[Any]:
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def progress(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": n, **extra},
    }


def order(messages: list[dict[str, Any]]) -> list[Any]:
    """Each line's progress number, or its method, or ``("reply", id)``."""
    return [m["params"].get("progress", m["method"]) if "method" in m else ("reply", m["id"]) for m in messages]


async def test_bridge_replies_to_pipelined_requests_each_on_one_intact_line(fds: Fds) -> None:
    """Many requests at once, big and small replies mixed: one whole JSON line per request."""

    def reply(message: dict[str, Any]) -> httpx.Response:
        size = 300_000 if message["id"] % 10 == 0 else message["id"]
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": {"t": "z" * size}})

    async with piped_bridge(fds, app_handler(reply)) as piped:
        write_all(piped.stdin_fd, b"".join(request_line(i, "tools/call", {"name": "t"}) for i in range(200)))
        await piped.stdout.wait_for_lines(200)
    assert piped.run.result() == 0
    replies = lines_of(piped.stdout.finish())
    assert sorted(m["id"] for m in replies) == list(range(200))
    assert all(len(m["result"]["t"]) == (300_000 if m["id"] % 10 == 0 else m["id"]) for m in replies)


async def test_bridge_keeps_a_streams_small_messages_in_order(fds: Fds) -> None:
    """Progress notifications then the result, from one SSE stream: the client sees them in that order."""

    def reply(message: dict[str, Any]) -> httpx.Response:
        result = {"jsonrpc": "2.0", "id": message["id"], "result": {"done": True}}
        return sse("".join(event(m) for m in [*(progress(n) for n in range(30)), result]))

    async with piped_bridge(fds, app_handler(reply)) as piped:
        write_all(piped.stdin_fd, request_line(1, "tools/call", {"name": "t", "_meta": {"progressToken": 1}}))
        await piped.stdout.wait_for_lines(31)
    assert order(lines_of(piped.stdout.finish())) == [*range(30), ("reply", 1)]


async def test_bridge_keeps_a_large_notification_before_the_result_that_follows_it(fds: Fds) -> None:
    """A large log notification (> PIPE_BUF) then the small result, one SSE stream: the result must come last."""
    big = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "l" * 10_000}}

    def reply(message: dict[str, Any]) -> httpx.Response:
        return sse(event(big) + event({"jsonrpc": "2.0", "id": message["id"], "result": {}}))

    async with piped_bridge(fds, app_handler(reply)) as piped:
        write_all(piped.stdin_fd, request_line(1, "tools/call", {"name": "t"}))
        await piped.stdout.wait_for_lines(2)
    assert order(lines_of(piped.stdout.finish())) == ["notifications/message", ("reply", 1)]


async def test_bridge_writes_to_a_client_that_reads_late_in_order_and_whole(fds: Fds) -> None:
    """stdout backs up (the client is busy), then the client reads: every line arrives whole, stream order kept."""

    def reply(message: dict[str, Any]) -> httpx.Response:
        result = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        return sse("".join(event(m) for m in [*(progress(n, m="p" * 3000) for n in range(60)), result]))

    async with piped_bridge(fds, app_handler(reply), read_stdout=False) as piped:
        write_all(piped.stdin_fd, request_line(1, "tools/call", {"name": "t", "_meta": {"progressToken": 1}}))
        for _ in range(int(WAIT / 0.01)):  # 60 lines of 3 KB > the 64 KiB pipe: the bridge waits on the client
            if piped.stdout_is_full():
                break
            await asyncio.sleep(0.01)
        assert piped.stdout_is_full()
        await asyncio.sleep(0.05)
        piped.stdout.go()
        await piped.stdout.wait_for_lines(61)
    assert order(lines_of(piped.stdout.finish())) == [*range(60), ("reply", 1)]


async def test_bridge_ends_on_its_own_when_the_client_closes_stdout(fds: Fds) -> None:
    """The client closed its end of stdout: the bridge's run ends (exit status 0) while stdin is still open."""

    def reply(message: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": message["id"], "result": {}})

    async with piped_bridge(fds, app_handler(reply), read_stdout=False) as piped:
        fds.close(piped.stdout.fd)
        write_all(piped.stdin_fd, request_line(1))
        assert await asyncio.wait_for(asyncio.shield(piped.run), WAIT) == 0


# -- _grow_pipe ---------------------------------------------------------------------------------


@pytest.mark.linux_only("F_SETPIPE_SZ")
def test_grow_pipe_grows_a_pipe_to_one_mib(fds: Fds) -> None:
    """The stdin/stdout pipes are grown to 1 MiB (where the system allows it)."""
    if sys.platform != "linux":  # its marker skips it first; this tells mypy --platform
        pytest.skip("F_GETPIPE_SZ: Linux only")
    import fcntl

    max_size = int(Path("/proc/sys/fs/pipe-max-size").read_text())
    if max_size < WIRE_PIPE_BYTES:
        pytest.skip(f"pipe-max-size is {max_size}: growing is not allowed here")
    read_fd, write_fd = fds.pipe()
    assert fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ) < WIRE_PIPE_BYTES
    _grow_pipe(read_fd)
    assert fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ) >= WIRE_PIPE_BYTES


@pytest.mark.linux_only("F_SETPIPE_SZ")
def test_grow_pipe_leaves_anything_else_alone(fds: Fds) -> None:
    """A regular file, a socket or a closed descriptor: nothing happens and nothing is raised."""
    if sys.platform != "linux":  # its marker skips it first; this tells mypy --platform
        pytest.skip("F_GETPIPE_SZ: Linux only")
    import fcntl

    with tempfile.TemporaryFile() as file:
        file.write(b"content")
        file.flush()
        _grow_pipe(file.fileno())
        assert os.fstat(file.fileno()).st_size == 7
        with pytest.raises(OSError):
            fcntl.fcntl(file.fileno(), fcntl.F_GETPIPE_SZ)  # still not a pipe
    read_fd, write_fd = fds.socketpair()
    _grow_pipe(write_fd)
    closed_read, closed_write = os.pipe()
    os.close(closed_read)
    os.close(closed_write)
    _grow_pipe(closed_read)
    os.write(write_fd, b"ok")
    assert os.read(read_fd, 10) == b"ok"
