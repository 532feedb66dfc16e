"""The one stdout writer (bridge/stdio/outbox.py): order across its fast path and its queue, a
closed stdout, and a client that reads slowly."""

from __future__ import annotations

import anyio
import pytest

from bridge.stdio.outbox import Outbox

pytestmark = pytest.mark.anyio




class Sink:
    """Takes small lines at once (``write_now``) while ``room``; ``send`` waits for ``go``."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.room = True
        self.go = anyio.Event()
        self.broken = False
        self.sends = 0

    def write_now(self, data: bytes) -> int:
        if self.broken:
            raise BrokenPipeError(32, "Broken pipe")
        if self.room and len(data) <= 16:
            self.written.append(data)
            return len(data)
        return 0

    async def send(self, data: bytes) -> None:
        self.sends += 1
        await self.go.wait()
        if self.broken:
            raise BrokenPipeError(32, "Broken pipe")
        self.written.append(data)


async def test_a_small_line_never_overtakes_a_large_one_still_being_written() -> None:
    sink = Sink()
    outbox = Outbox(sink, on_gone=lambda: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await outbox.put(b"first\n")  # the fast path
        await outbox.put(b"a line too large to go at once\n")  # queued: send waits
        await outbox.put(b"small\n")  # must queue behind it, not take the fast path
        await anyio.sleep(0.01)
        assert sink.written == [b"first\n"]
        sink.go.set()
        outbox.close()
    assert sink.written == [b"first\n", b"a line too large to go at once\n", b"small\n"]


async def test_put_waits_while_the_queue_is_full_and_the_order_holds() -> None:
    sink = Sink()
    sink.room = False
    outbox = Outbox(sink, on_gone=lambda: None, queue_lines=2)
    done: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)

        async def writer() -> None:
            for i in range(6):
                await outbox.put(b"%d\n" % i)
                done.append(i)

        tg.start_soon(writer)
        await anyio.sleep(0.05)
        assert len(done) < 6  # a client that does not read holds the writer back
        sink.go.set()
        with anyio.fail_after(5):
            while len(done) < 6:
                await anyio.sleep(0.01)
        outbox.close()
    assert sink.written == [b"%d\n" % i for i in range(6)]


async def test_a_closed_stdout_calls_on_gone_once_and_later_lines_are_dropped() -> None:
    sink = Sink()
    gone: list[bool] = []
    outbox = Outbox(sink, on_gone=lambda: gone.append(True))
    sink.broken = True
    sink.go.set()
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await outbox.put(b"x\n")  # the fast path finds the pipe broken
        await outbox.put(b"a line too large to go at once\n")
        await outbox.put(b"y\n")
        outbox.close()
    assert gone == [True] and outbox.gone and sink.written == []
    assert sink.sends == 0  # nothing more is tried once it is gone
