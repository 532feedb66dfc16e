"""The one stdout writer (bridge/stdio/outbox.py): order across its fast path and its queue, a
closed stdout, and a client that reads slowly."""

from __future__ import annotations

import anyio
import pytest

from bridge.stdio.outbox import LINE_COST_BYTES, Outbox

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
    outbox = Outbox(sink, on_gone=lambda: None, budget_bytes=2 * (2 + LINE_COST_BYTES))
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


class StalledStdout:
    """A stdout whose reader stops: ``send`` waits until ``reading`` is set, then takes
    every line; counts the lines it was handed."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = anyio.Event()

    async def send(self, data: bytes) -> None:
        await self.reading.wait()
        self.written.append(data)


async def test_a_client_that_stops_reading_holds_the_outbox_to_its_byte_budget_and_loses_nothing() -> None:
    """100 writers of 10 KiB lines against a 64 KiB budget: the queue stops at the budget
    plus one line, the writers wait (holding their lines, as a reply's task does), the
    reader's gate is shut; once the client reads, every line arrives exactly once, each
    writer's lines in its order."""
    budget = 64 * 1024
    line_bytes = 10 * 1024
    stdout = StalledStdout()
    outbox = Outbox(stdout, on_gone=lambda: None, budget_bytes=budget)
    queued_peak = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)

        async def writer(number: int) -> None:
            for index in range(3):
                await outbox.put(b"%03d-%d-" % (number, index) + b"x" * (line_bytes - 8) + b"\n")

        for number in range(100):
            tg.start_soon(writer, number)
        for _ in range(50):
            await anyio.sleep(0.01)
            queued_peak = max(queued_peak, outbox.held_bytes)
        assert budget <= queued_peak <= budget + line_bytes + LINE_COST_BYTES
        assert not outbox.has_room
        with anyio.move_on_after(0.1) as gate:
            await outbox.wait_for_room()  # the stdin reader and new requests wait here
        assert gate.cancelled_caught
        stdout.reading.set()
        with anyio.fail_after(10):
            await outbox.wait_for_room()
            while len(stdout.written) < 300:
                await anyio.sleep(0.01)
        outbox.close()
    assert len(stdout.written) == len(set(stdout.written)) == 300
    for number in range(100):
        mine = [line[:6] for line in stdout.written if line.startswith(b"%03d-" % number)]
        assert mine == [b"%03d-%d-" % (number, index) for index in range(3)]


async def test_a_put_that_waits_is_never_overtaken_and_a_cancelled_one_passes_its_turn() -> None:
    stdout = StalledStdout()
    outbox = Outbox(stdout, on_gone=lambda: None, budget_bytes=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        await outbox.put(b"a\n")  # over the budget at once: the next ones wait
        tg.start_soon(outbox.put, b"b\n")
        await anyio.sleep(0.01)
        cancelled = anyio.CancelScope()

        async def cancelled_put() -> None:
            with cancelled:
                await outbox.put(b"never\n")

        tg.start_soon(cancelled_put)
        await anyio.sleep(0.01)
        tg.start_soon(outbox.put, b"c\n")
        await anyio.sleep(0.01)
        cancelled.cancel()
        stdout.reading.set()
        await anyio.sleep(0.01)
        await outbox.put(b"d\n")  # the fast path is not taken past waiting lines
        with anyio.fail_after(5):
            while len(stdout.written) < 4:
                await anyio.sleep(0.01)
        outbox.close()
    assert stdout.written == [b"a\n", b"b\n", b"c\n", b"d\n"]
